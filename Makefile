# Two commands on a fresh machine: `make demo` and `make test` (both create the environment).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.npu_sim_installed

.PHONY: demo test bench docs env clean

env: $(STAMP)

$(STAMP): pyproject.toml setup.py requirements-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-ci.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m npu_sim_bridge.native.build
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart_session.py

# Two workers, each taking whole test files (a file's module fixtures build once): about half the wall time.
test: $(STAMP)
	$(PY) -m pytest -q -rs -n 2 --dist loadfile --durations=25 tests

# The documentation site (site/): the reference pages generated from the code, then MkDocs (installed on first use).
docs: $(STAMP)
	$(PY) -c "import mkdocs" 2>/dev/null || $(PY) -m pip install --quiet mkdocs==1.6.1
	$(PY) docs/gen_reference.py
	$(PY) -m mkdocs build --quiet

bench: $(STAMP)
	$(PY) benchmarks/bench_bridge_overhead.py

clean:
	rm -rf $(VENV) build site docs/reference *.egg-info .pytest_cache
