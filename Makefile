# Two commands do all set-up on a fresh machine: `make run` and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# System packages the tests need (browser test, backend unit tests).
APT_TEST_PACKAGES := chromium libgtest-dev rapidjson-dev clang libclang-rt-14-dev prometheus prometheus-alertmanager ccache

.PHONY: install run test test-fast test-deps lint backend bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# npu_ge joins the embedded stack when this machine can build it; else one line says how.
# `geadmin up`'s flags pass through ARGS: make run ARGS="--home /srv/geadmin --http-port 18000".
ARGS ?=
run: install
	@if command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1; then \
	  bash backend_src/build.sh --lib-only || echo "npu_ge did not build (output above): the stack starts without it"; \
	else \
	  echo "npu_ge not built: install cmake and a C++17 compiler (apt-get install cmake g++), then make run again"; \
	fi
	$(VENV)/bin/geadmin up $(ARGS)

test-deps: install
	@APT_TEST_PACKAGES="$(APT_TEST_PACKAGES)" bash scripts/install-test-deps.sh
	@bash scripts/docker-engine.sh  # docker.io, docker-compose, dockerd, local base images

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

backend: install
	bash backend_src/build.sh

# The fast tier (minutes): unit tests, static deploy checks, UI tests without a server, lint
# and types; no tritonserver, stack, browser or Docker engine (tests/support/tiers.py).
FAST_TESTS := tests/unit tests/deploy tests/ui
test-fast: install
	@start=$$(date +%s); \
	HYPOTHESIS_PROFILE=fast $(PY) -m pytest -q -m "not integration and not e2e and not docker" $(FAST_TESTS) \
	  && $(VENV)/bin/ruff check . && $(VENV)/bin/mypy; rc=$$?; \
	echo "make test-fast: $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc

# Four workers on two cores: they wait on other processes much of the time (docs/development.md).
TEST_WORKERS ?= 4
test: test-deps lint
	@start=$$(date +%s); \
	bash backend_src/build.sh `# incremental: ninja does nothing when no source changed` \
	  && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet `# a broken link or page fails` \
	  && $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup `# tests/support/parallel.py`; rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc

bench: install backend
	@for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf build .pytest_cache .ruff_cache .mypy_cache
