# pvefix: the two front-door commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pvefix.demo

test: $(STAMP)
	$(BIN)/ruff check pvefix tests bench
	$(BIN)/mypy
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/startup_and_parse.py
	$(BIN)/python bench/sim_throughput.py
	$(BIN)/python bench/plan_roundtrips.py --latency-ms 20
	$(BIN)/python bench/check_all.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
