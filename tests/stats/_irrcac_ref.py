"""irrCAC's Gwet AC1/AC2, Fleiss' kappa and Krippendorff's alpha on a wide CSV, as one JSON object on stdout.

irrCAC pins ``scipy==1.12`` and ``pandas<3``, so it cannot share the package's environment: ``make venv-ref``
installs it in ``.venv-ref`` and the parity test (tests/stats/test_agreement.py) runs this file with that
interpreter, in the same test run. Usage: ``python _irrcac_ref.py RATINGS.csv WEIGHTS CAT,CAT,...``.
"""
import json
import sys

import pandas as pd
from irrCAC.raw import CAC


def estimates(d: pd.DataFrame, weights: str, cats: list[float]) -> dict:
    """irrCAC's ``est`` dicts of Gwet's AC1/AC2, Fleiss' kappa and Krippendorff's alpha on the wide table ``d``."""
    return {"gwet": CAC(d, weights=weights, categories=cats, digits=12).gwet()["est"],
            "fleiss": CAC(d, categories=cats, digits=12).fleiss()["est"],
            "krippendorff": CAC(d, weights=weights, categories=cats, digits=12).krippendorff()["est"]}


def main() -> None:
    out = estimates(pd.read_csv(sys.argv[1]), sys.argv[2], [float(c) for c in sys.argv[3].split(",")])
    print(json.dumps(out, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


if __name__ == "__main__":
    main()
