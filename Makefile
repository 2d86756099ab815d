# Every target makes the virtualenv it needs; nothing is installed outside the repo but
# Debian's Chromium for the browser tests (tests/browser/ensure_chromium.sh, when missing)
# and Debian's PostgreSQL for the team-store tests (tests/pg/ensure_postgres.sh, when missing).
#   make test       lint + format check + mypy --strict + every test, browser tests included
#                   (installs Debian's Chromium when missing; what .ci/run runs)
#   make test-fast  the fast lane: every test but the browser, real-kernel and slow ones
#                   (pytest -m "not browser and not kernel and not slow", on two workers
#                   with pytest-xdist; under a minute)
#   make demo       executes notebooks/01-quickstart.ipynb with the built-in demo model
#                   (no API key needed) and prints what each cell showed
#   make lab        opens the quickstart notebook in JupyterLab
#   make bench      benchmarks against peer agent loops, in a separate .venv-bench
#   make dist       sdist + wheels built from a fresh copy, their contents tested (build/dist)
#   make binder-check  the Binder build as repo2docker does it, then every notebook runs
#   make ipykernel6-venvs  venvs with ipykernel 6.x for the fallback-mode kernel tests (build/)
#   make lint | typecheck | clean

PYTHON     ?= python3
VENV       := .venv
BENCH_VENV := .venv-bench
# Peers for bench/: exact pins, so numbers stay comparable and the peer code in
# bench/_pydantic_ai_peer.py keeps matching their APIs.
BENCH_PEERS := pydantic-ai-slim==2.68.0 openai-agents==0.24.0 openai==3.57.0 anthropic==2.14.0 \
               jupyter-ai-magics==2.31.7

.PHONY: test test-fast demo lab bench lint typecheck pytest pytest-browser chromium labextension clean \
        ipykernel6-venvs

test: lint typecheck pytest pytest-browser

# Browser tests run in a pytest process of their own: one Chromium and one JupyterLab serve
# them all, and Playwright's sync API (which leaves its event loop marked running) never
# shares a process with the asyncio tests.
FAST := not browser and not kernel and not slow and not dist

test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -q -n 2 -m "$(FAST)"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check mibyan_jupyter tests bench

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

# MIBYAN_NO_SKIP=1: what these targets install (the built extension, tsc, Chromium, PostgreSQL) must be
# there; a test that would skip for want of it fails instead.
# Two pytest-xdist workers (each with its own throwaway PostgreSQL): the store suite runs on
# both backends, and serially the whole suite would pass the ~15-minute budget.
pytest: $(VENV)/.installed labextension ipykernel6-venvs postgres
	MIBYAN_NO_SKIP=1 $(VENV)/bin/pytest -n 2 -m "not browser and not dist"

pytest-browser: $(VENV)/.installed labextension chromium ipykernel6-venvs postgres
	MIBYAN_NO_SKIP=1 $(VENV)/bin/pytest -m browser tests/browser

chromium:
	bash tests/browser/ensure_chromium.sh

# The server binaries only (no system cluster): tests/pg/ starts a throwaway server of its own.
.PHONY: postgres
postgres:
	bash tests/pg/ensure_postgres.sh

# Kernels with an older ipykernel (the fallback mode: no clicks during a run), each in a venv
# of its own with this package installed editable: the oldest 6.x the package allows and the
# newest. tests/jupyter/test_kernel_ipykernel6.py starts kernels from them (~13 s each, once).
IPYKERNEL6 := 6.17.1 6.31.0
ipykernel6-venvs: $(foreach v,$(IPYKERNEL6),build/ipykernel-$(v)-venv/.installed)

build/ipykernel-%-venv/.installed: pyproject.toml
	rm -rf build/ipykernel-$*-venv
	$(PYTHON) -m venv build/ipykernel-$*-venv
	build/ipykernel-$*-venv/bin/python -m pip install -q 'ipykernel==$*' 'ipython>=9' -e .
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/python -m mibyan_jupyter.quickstart notebooks/01-quickstart.ipynb --workdir build/demo

lab: $(VENV)/.installed labextension
	$(VENV)/bin/jupyter lab notebooks/01-quickstart.ipynb

bench: $(BENCH_VENV)/.installed $(VENV)/.installed postgres
	@set -e; for f in bench/[!_]*.py; do \
		[ -e "$$f" ] || continue; \
		echo "== $$f"; \
		$(BENCH_VENV)/bin/python "$$f"; \
	done

# Not part of make test: both reach PyPI and the npm registry (tests reach no registry).
# dist: in a fresh copy of the repository (tracked files plus working changes), a wheel built
# from the checkout (its build hook builds the extension), an sdist, and a wheel built from
# the sdist with Node.js hidden; then tests/packaging/test_dist.py lists what they carry.
# binder-check: tests/packaging/binder_check.sh follows repo2docker's steps (binder/).
.PHONY: dist binder-check
dist: $(VENV)/.installed
	bash tests/packaging/build_dist.sh build/dist $(PYTHON)
	MIBYAN_NO_SKIP=1 MIBYAN_DIST=build/dist $(VENV)/bin/pytest -q -p no:cacheprovider -m dist tests/packaging

binder-check:
	bash tests/packaging/binder_check.sh build/binder-check

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q -e '.[test,mcp,postgres]'
	touch $@

# The front-end extension (labextension/, TypeScript) is built with the venv's jlpm and
# linked into the venv's JupyterLab; build.sh skips what is up to date (~0.3 s then).
labextension: $(VENV)/.installed
	bash labextension/build.sh $(VENV)/bin
	$(VENV)/bin/jupyter-builder develop --overwrite . >/dev/null

$(BENCH_VENV)/bin/python:
	$(PYTHON) -m venv $(BENCH_VENV)

$(BENCH_VENV)/.installed: pyproject.toml Makefile | $(BENCH_VENV)/bin/python
	$(BENCH_VENV)/bin/python -m pip install -q -e '.[postgres]' $(BENCH_PEERS)
	touch $@

clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist
	rm -rf labextension/node_modules labextension/lib labextension/.yarn mibyan_jupyter/labextension
	find . -name '__pycache__' -type d -prune -exec rm -rf {} +
	find . -maxdepth 2 -name '*.egg-info' -type d -prune -exec rm -rf {} +
