# Two commands on a fresh machine with only Python 3.11: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/foxhunt demo

test: $(STAMP)
	$(PY) -m pytest -n 2 --durations=10

bench: $(STAMP)
	$(PY) benchmarks/bench_data.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
