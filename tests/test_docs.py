"""The documentation site builds strictly, the tutorial notebook runs with rich outputs, and the package ships.

- ``mkdocs build --strict`` of the whole site (broken links, unknown references and failing executed
  tutorials fail it), into a temporary folder; skipped where the ``docs`` extra is not installed.
- ``notebooks/tutorial.ipynb`` executed with nbclient: results display as HTML (``text/html``), the figure
  inline (``image/png``), plain ``repr`` as text.
- ``python -m build`` makes an sdist and a wheel (offline: ``--no-isolation`` with the installed setuptools),
  ``twine check`` passes, and the wheel installed in a fresh venv (``--no-deps``, no index; the dependencies
  are taken from this environment's site-packages through a ``.pth`` line, so nothing is downloaded) runs
  ``mrcstats --version`` and ``mrcstats demo`` with its own copy of the package, not this checkout.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["NO_MKDOCS_2_WARNING"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=1200, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    pages = sorted(p for p in site.rglob("index.html"))
    assert len(pages) >= 25, [str(p) for p in pages]
    # the executed tutorials ran (their outputs are in the pages) and the generated references are there
    started = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "rows to log.parquet" in started and "report.html" in started
    assert (site / "getting-started" / "report.html").is_file()
    nb = (site / "tutorials" / "notebooks" / "index.html").read_text(encoding="utf-8")
    assert 'class="mrcstats-result"' in nb and "<svg" in nb
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "--format" in cli and "glmer" in cli
    api = (site / "api" / "stats" / "index.html").read_text(encoding="utf-8")
    assert "summarize" in api and "Wilson" in api
    # the navigation: every page in its section, the Changelog last (issue 36)
    home = (site / "index.html").read_text(encoding="utf-8")
    nav = re.findall(r'<span class="md-ellipsis">\s*([^<]+?)\s*</span>', home[home.find("md-nav--primary"):])
    top = [t for t in nav if t not in ("Install", "Where to start", "In Python")]   # the page's own toc
    assert top[-1] == "Changelog", top[-8:]
    assert top.index("Screening a benchmark for broken items, and DIF between model families") < top.index("Reports")


@pytest.mark.skipif(importlib.util.find_spec("nbclient") is None or importlib.util.find_spec("ipykernel") is None,
                    reason="nbclient/ipykernel not installed (the dev extra)")
def test_tutorial_notebook_runs_with_rich_outputs(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    nb = nbformat.read(ROOT / "notebooks" / "tutorial.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    mimes = [{k for o in c.outputs for k in o.get("data", {})} for c in code]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    html = [c for c, m in zip(code, mimes, strict=True) if "text/html" in m]
    assert len(html) >= 5  # the log, accuracy, comparison, GLMM, model table
    shown = "".join(o["data"]["text/html"] for c in html for o in c.outputs if "text/html" in o.get("data", {}))
    assert shown.count('class="mrcstats-result"') >= 4 and "AccuracySummary" in shown
    assert any("image/png" in m for m in mimes), "the figure displays inline"
    text = "".join(o.get("text", "") for o in code[-1].outputs)
    assert text.startswith("<AccuracySummary>")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("build") is None or importlib.util.find_spec("twine") is None,
                    reason="build/twine not installed (the dev extra)")
def test_wheel_and_sdist_install_and_run_in_a_clean_venv(tmp_path):
    import mrcstats

    dist = tmp_path / "dist"
    b = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                       capture_output=True, text=True, timeout=900, check=False)
    assert b.returncode == 0, b.stderr[-3000:] + b.stdout[-3000:]
    assert "SetuptoolsDeprecationWarning" not in b.stderr + b.stdout, "licence metadata must be in the SPDX form"
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    # the one-term LMM kernel is a C extension (optional: built where a compiler is): a CPython wheel for this
    # platform carrying it, and its source in the sdist
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheels[0].name.startswith(f"mrcstats-{mrcstats.__version__}-{tag}-{tag}-"), wheels[0].name
    with zipfile.ZipFile(wheels[0]) as z:
        assert any(n.startswith("mrcstats/models/_lmmkernel") and n.endswith((".so", ".pyd")) for n in z.namelist())
    with tarfile.open(sdists[0]) as tz:
        assert any(n.endswith("src/mrcstats/models/_lmmkernel.c") for n in tz.getnames())
    t = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, (*wheels, *sdists))],
                       capture_output=True, text=True, timeout=300, check=False)
    assert t.returncode == 0, t.stdout + t.stderr

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # this environment's dependencies, appended after the venv's own site-packages (its .pth files, such as an
    # editable mrcstats, are not processed: a path listed in a .pth is only added to sys.path)
    Path(purelib, "_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["MPLBACKEND"] = "Agg"
    pip = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheels[0])],
                         capture_output=True, text=True, timeout=600, env=env, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]
    exe = env_dir / "bin" / "mrcstats"
    where = subprocess.run([str(py), "-c", "import mrcstats; print(mrcstats.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert where.startswith(str(env_dir)), where  # the wheel's copy, not this checkout
    kern = subprocess.run([str(py), "-c", "from mrcstats.models import lmm_fit; print(lmm_fit.KERNEL is not None)"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert kern == "True"
    ver = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert ver.returncode == 0 and ver.stdout.strip() == f"mrcstats {mrcstats.__version__}", ver.stdout + ver.stderr
    demo = subprocess.run([str(exe), "demo", "--outdir", str(tmp_path / "reports"), "--json"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=900, check=False)
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = json.loads(demo.stdout)
    assert Path(out["pdf"]).is_file() and Path(out["html"]).is_file()
