# Two entry points: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0

$(VENV)/.demo-installed: $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP) -e '.[all]'
	touch $@

$(VENV)/.dev-installed: $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP) -e '.[dev]'
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(VENV)/bin/attnkit demo --out runs/demo

# Two pytest workers (pytest-xdist), one thread each: the suite's tests are small, so two processes keep both
# cores busy where one process's threads would wait on each other.
test: $(VENV)/.dev-installed
	OMP_NUM_THREADS=1 $(PY) -m pytest -n 2

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check attnkit tests bench

clean:
	rm -rf $(VENV) runs .pytest_cache
