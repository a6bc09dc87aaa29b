import sys

from mrcstats.cli import main

sys.exit(main())
