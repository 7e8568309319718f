# Two entry points (README Quickstart): `make demo` runs the main job on a shipped
# example, `make test` runs the test suite. Both set everything up on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXAMPLE ?= examples/llama3-70b-1k.yaml

.PHONY: setup deps demo test check bench differential fuzz gpu-check clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[torch,test]'
	touch $(STAMP)

setup: $(STAMP)

deps:
	bash scripts/install-deps.sh

demo: deps setup
	$(VENV)/bin/gpufabric plan $(EXAMPLE)

check: setup
	$(VENV)/bin/ruff check src
	$(VENV)/bin/ruff format --check src tests benchmarks scripts
	$(VENV)/bin/mypy

test: deps setup
	$(PY) -m pytest -q -p no:cacheprovider

# The fuzz suite (tests/fuzz) at length: thousands of hostile inputs per command, a new
# random seed each time (CI runs a few dozen per test, derandomized).
FUZZ_EXAMPLES ?= 2000
fuzz: setup
	GPUFABRIC_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/fuzz

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

# Issue 12: hundreds of generated rulesets, static proof against real packets (root).
DIFFERENTIAL_N ?= 300
differential: setup
	GPUFABRIC_DIFFERENTIAL_N=$(DIFFERENTIAL_N) $(PY) -m pytest -q -p no:cacheprovider -s tests/audit/test_differential.py

# Issue 31: every GPU path once, on a machine with one CUDA GPU (about 4 minutes); results under gpu-check-out/.
gpu-check: setup
	PYTHON=$(PY) bash scripts/gpu-check.sh

clean:
	rm -rf $(VENV) .pytest_cache build dist src/*.egg-info
