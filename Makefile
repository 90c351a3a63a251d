# The two commands: `make demo` and `make test`. Both build .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench clean tools

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

# The terminal and browser tests drive tmux and Chromium: installed here when missing (Debian, as root);
# in CI (CI=true) a test that still cannot find them fails instead of skipping.
TOOLS := tmux chromium
tools:
	@missing=$$(for t in $(TOOLS); do command -v $$t >/dev/null || echo $$t; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $$missing (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "missing $$missing: install them (apt-get install -y $$missing) or their tests fail"; fi; \
	fi

# The hottest modules compiled by Cython (trnsim/compiled.py) are built by the install itself (setup.py);
# here those whose sources changed since are rebuilt. Without a C compiler trnsim runs them as Python.
test: $(VENV)/.dev tools
	-$(PY) -c 'import sys, trnsim.compiled as c; sys.exit(c.main())'
	TRNSIM_REQUIRE_TOOLS=$${CI:+1} $(PY) -m pytest -n 2

bench: $(VENV)/.dev
	@for b in benchmarks/bench_*.py; do $(PY) $$b; done

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache src/trnsim/_compiled
