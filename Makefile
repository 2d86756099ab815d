# Every target makes the virtualenv it needs; nothing is installed outside the repo.
#   make test       lint + format check + mypy --strict + pytest (what .ci/run runs)
#   make demo       the scripted demo agent, no API key needed
#   make bench      benchmarks against peer agent loops, in a separate .venv-bench
#   make lint | typecheck | clean

PYTHON     ?= python3
VENV       := .venv
BENCH_VENV := .venv-bench
# Peers for bench/: exact pins, so numbers stay comparable and the peer code in
# bench/_pydantic_ai_peer.py keeps matching their APIs.
BENCH_PEERS := pydantic-ai-slim==2.68.0 openai-agents==0.24.0 openai==3.57.0 anthropic==2.14.0

.PHONY: test demo bench lint typecheck pytest clean

test: lint typecheck pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check mibyan_jupyter tests bench

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

pytest: $(VENV)/.installed
	$(VENV)/bin/pytest

demo: $(VENV)/.installed
	$(VENV)/bin/python -m mibyan_jupyter.demo

bench: $(BENCH_VENV)/.installed
	@set -e; for f in bench/[!_]*.py; do \
		[ -e "$$f" ] || continue; \
		echo "== $$f"; \
		$(BENCH_VENV)/bin/python "$$f"; \
	done

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q -e '.[test]'
	touch $@

$(BENCH_VENV)/bin/python:
	$(PYTHON) -m venv $(BENCH_VENV)

$(BENCH_VENV)/.installed: pyproject.toml Makefile | $(BENCH_VENV)/bin/python
	$(BENCH_VENV)/bin/python -m pip install -q -e . $(BENCH_PEERS)
	touch $@

clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist
	find . -name '__pycache__' -type d -prune -exec rm -rf {} +
	find . -maxdepth 2 -name '*.egg-info' -type d -prune -exec rm -rf {} +
