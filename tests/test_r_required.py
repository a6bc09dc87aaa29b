"""MRCSTATS_REQUIRE_R=1 (set by .ci/run) turns an R-parity skip into a failure (tests/conftest.py); without it
the same tests skip. Run in a child pytest on a few tests that skip on purpose."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TESTS = '''
import pytest

@pytest.mark.r
def test_marked_r():
    pytest.skip("no reason given that names it")

def test_uses_rscript(rscript_stub):
    pass

def test_reason_names_r():
    pytest.skip("R package jsonlite missing")

def test_rpy2_reason():
    pytest.skip("No module named 'rpy2'")

def test_not_r():
    pytest.skip("chromium not installed")

@pytest.fixture()
def rscript_stub(rscript):
    return rscript

@pytest.fixture()
def rscript():
    pytest.skip("Rscript not installed")
'''


def _run(tmp_path: Path, require: str | None) -> dict[str, str]:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_skips.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "MRCSTATS_REQUIRE_R"}
    if require is not None:
        env["MRCSTATS_REQUIRE_R"] = require
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out.xml",
                        "test_skips.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert (tmp_path / "out.xml").exists(), r.stdout + r.stderr
    out = {}
    for case in ET.parse(tmp_path / "out.xml").iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}.get(
            kinds[0] if kinds else "", "PASSED")
    assert len(out) == 5, r.stdout + r.stderr
    return out


def test_r_parity_skips_fail_when_r_is_required(tmp_path):
    got = _run(tmp_path, "1")
    for name in ("test_marked_r", "test_reason_names_r", "test_rpy2_reason"):
        assert got[name] == "FAILED", got
    assert got["test_uses_rscript"] == "ERROR", got     # a skip in setup: reported as an error
    assert got["test_not_r"] == "SKIPPED", got


def test_r_parity_skips_skip_otherwise(tmp_path):
    for require in (None, "0"):
        got = _run(tmp_path, require)
        assert set(got.values()) == {"SKIPPED"}, got
