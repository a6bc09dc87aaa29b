# Quick start: `make demo` then `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin

.PHONY: demo test lint venv venv-dev sysdeps clean

sysdeps:
	@bash scripts/sysdeps.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# the package (editable) with its core dependencies
venv: $(PY)
	$(PY) -m pip install -q -e .
	@bash scripts/post_install.sh $(PY)

# + test tools, and the R extra (rpy2) where R is installed
venv-dev: venv
	$(PY) -m pip install -q -e '.[dev]'
	@if command -v R >/dev/null 2>&1; then \
	  $(PY) -m pip install -q -e '.[r]' || echo "rpy2 did not install; the lme4 engine tests will skip" >&2; \
	fi

# the demo needs no R and no parser: no Debian packages are installed for it
demo: venv
	$(BIN)/mrcstats demo --outdir reports

test:
	@echo "make test: installs Debian's R/lme4/car/link-grammar/poppler (as root, once), the package and its test tools (pytest, hypothesis, ruff, rpy2), then runs about 930 tests; expect 4-15 minutes on 2 cores (see README)" >&2
	@$(MAKE) --no-print-directory sysdeps venv-dev
	$(PY) -m pytest -q

lint: venv-dev
	$(BIN)/ruff check src tests analyses benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info src/*.egg-info
