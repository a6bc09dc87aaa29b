"""The one C extension: the one-term LMM kernel of ``mrcstats.models.lmm_fit`` (a loop over the levels). Optional,
so a machine without a C compiler still installs (the numpy path then runs: the same numbers to rounding, several
times slower on large one-term fits). Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("mrcstats.models._lmmkernel", ["src/mrcstats/models/_lmmkernel.c"], optional=True)])
