# The two commands: `make demo` and `make test`. Both build .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench clean

$(VENV)/.base: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "trnsim needs Python 3.11 or newer; found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.base
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q -e '.[torch]'
	@touch $@

demo: $(VENV)/.base
	$(VENV)/bin/trnsim demo

test: $(VENV)/.dev
	$(PY) -m pytest -n 2

bench: $(VENV)/.dev
	@for b in benchmarks/bench_*.py; do $(PY) $$b; done

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
