# prove-assets: two commands on a fresh clone.
#   make demo   set up .venv, then build + evaluate the offline sample headless and print the leaderboard
#   make test   set up .venv if missing, then run the tests
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/dagster_home
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: venv demo test ui ledger compare-extractors bench lint

# torch first (the CPU wheel on local disk; a bare `torch` would pull a multi-GB CUDA build).
# llama.cpp must be compiled without -march=native (this VM advertises AMX and faults on it),
# and without pip's cache so a natively built wheel is never reused.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install -q --no-cache-dir -e ".[embedded,dev]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/prove-assets demo

# The browser test drives Debian's chromium (never a downloaded browser), the soak test a
# real PostgreSQL server (Debian's postgresql): installed here when missing and we are root (CI);
# elsewhere those tests are skipped with the reason.
test: venv
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else echo "chromium is missing (apt-get install chromium as root): the browser test will be skipped"; fi; \
	fi
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	  else echo "postgresql is missing (apt-get install postgresql as root): the soak test will be skipped"; fi; \
	fi
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder

ui: venv
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# Re-record the embedded model's answers for the sample (run after changing a prompt): every
# request the ledger cannot answer goes to the live model, then the recorded calls are exported.
ledger: venv
	$(VENV)/bin/prove-assets demo
	$(VENV)/bin/prove-assets export-ledger

# Tuple extraction vs the hand-written gold tuples, per embedded model and extractor setting;
# the parser alone on the sample and on held-out hand-written captions; then the planned targets'
# programs on the gold graph (no wording request is sent).
compare-extractors: venv
	$(PY) bench/compare_extractors.py
	$(PY) bench/parser_check.py
	$(PY) bench/construction_proxy.py

bench: venv
	$(PY) bench/bench_sandbox.py
	$(PY) bench/bench_scoring.py
	$(PY) bench/bench_gateway.py
	$(PY) bench/bench_orchestration.py
	nice $(PY) bench/bench_models.py

lint: venv
	$(VENV)/bin/ruff check .
