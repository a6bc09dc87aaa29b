# Quick start: `make demo` then `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin

.PHONY: demo test lint docs dist venv venv-dev venv-ref sysdeps clean

sysdeps:
	@bash scripts/sysdeps.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>=77"

# the package (editable) with its core dependencies
venv: $(PY)
	$(PY) -m pip install -q -e .
	@bash scripts/post_install.sh $(PY)

# + test tools and the docs toolchain (the strict docs build is a test), and the R extra (rpy2) where R is installed
venv-dev: venv
	$(PY) -m pip install -q -e '.[dev,docs]'
	@if command -v R >/dev/null 2>&1; then \
	  $(PY) -m pip install -q -e '.[r]' || echo "rpy2 did not install; the lme4 engine tests will skip" >&2; \
	fi

# reference Python packages the parity tests run that cannot share the package's environment (irrCAC pins
# scipy 1.12 and pandas < 3): their own venv, which tests/stats/test_agreement.py calls in the same test run
REF := .venv-ref/bin/python
$(REF):
	$(PYTHON) -m venv .venv-ref
	$(REF) -m pip install -q irrCAC==0.4.4

venv-ref: $(REF)

# the demo needs no R and no parser: no Debian packages are installed for it
demo: venv
	$(BIN)/mrcstats demo --outdir reports

test:
	@echo "make test: installs Debian's R/lme4/car/link-grammar/poppler/chromium (as root, once), the package with its test and docs tools (pytest, hypothesis, ruff, nbclient, build, MkDocs; rpy2), irrCAC in its own .venv-ref (it pins scipy 1.12), then runs the suite, the strict docs build and a clean-venv wheel install included; expect 5-15 minutes on 2 cores (see README)" >&2
	@$(MAKE) --no-print-directory sysdeps venv-dev venv-ref
	$(PY) -m pytest -q

# the documentation site, strict (broken links and failing executed examples fail it), into site/
docs: venv-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# an sdist and a wheel in dist/, checked by twine
dist: venv-dev
	$(PY) -m build --outdir dist .
	$(BIN)/twine check dist/*

lint: venv-dev
	$(BIN)/ruff check src tests analyses benchmarks

clean:
	rm -rf $(VENV) .venv-ref .pytest_cache .hypothesis build dist site *.egg-info src/*.egg-info
