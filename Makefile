# The two commands: `make up` runs the system, `make test` runs the suite.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test venv bench model clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

up: $(STAMP)
	$(BIN)/chat-agent up

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/bus.py
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/transport_peers.py
	$(BIN)/python bench/scaling.py
	$(BIN)/python bench/gateway_load.py
	$(BIN)/python bench/lookup_growth.py

clean:
	rm -rf .state .pytest_cache
