# Cage. `make run` starts the main job, `make test` runs every check. Both set up what they need
# (venv, packages, a Docker engine, the offline base image) and are safe to run twice.
SHELL := /bin/bash
VENV  := .venv
BIN   := $(VENV)/bin
PYTEST_ARGS ?=
# Runner images trust the host's CA bundle by default (Settings.extra_ca_certs), the same for a
# direct `cage` call, so both build the same image tags.

.PHONY: setup venv lock engine base-image hooks-ts run test lint unit integration schemas golden bench images test-images test-tools clean

venv:
	@scripts/bootstrap-venv.sh

# Re-pin requirements.lock after a dependency change in pyproject.toml (keeps the pins it can), and
# requirements-runtime.lock (no dev tools, the same versions) that the orchestrator image installs.
LOCK_FLAGS := --python-version 3.11 --python-platform x86_64-unknown-linux-gnu --generate-hashes
lock: venv
	$(BIN)/uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml -c requirements.lock $(LOCK_FLAGS) -o requirements-runtime.lock

engine:
	@scripts/ensure-docker.sh

base-image: engine
	@images/base/build.sh

# TypeScript hooks (Yao's src/index.ts) bundle with esbuild from the npm lock; a host without node
# runs Python hooks only and says so here.
hooks-ts:
	@scripts/install-hooks-ts.sh || echo "cage: TypeScript hooks unavailable (they need node >= 20 and npm)" >&2

# What the tests need from Debian: headless Chromium for the web page's browser tests, ripgrep.
test-tools:
	@scripts/ensure-test-tools.sh

setup: venv base-image hooks-ts

run: setup
	$(BIN)/cage serve

lint: venv
	$(BIN)/ruff check orchestrator runners tests bench
	$(BIN)/ruff format --check orchestrator runners tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# Runner images are built (or found by their hash tag) before the tests, not inside a test's timeout.
# Two passes: every test not marked `serial` on TEST_WORKERS pytest-xdist workers (a file's tests stay
# together on one worker), then the `serial` ones alone. Each pass may select nothing (exit 5), but
# not both: a run that tests nothing fails. TEST_WORKERS=0 runs the first pass without xdist.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
TEST_LOGS := .cage/test-logs
test: setup lint images test-images test-tools
	@mkdir -p $(TEST_LOGS); rc=0; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial" --ignore=tests/k8s --durations=30 $(PYTEST_ARGS) 2>&1 | tee $(TEST_LOGS)/parallel.log; p=$${PIPESTATUS[0]}; \
	$(BIN)/python -m pytest -m serial --ignore=tests/k8s --durations=10 $(PYTEST_ARGS) 2>&1 | tee $(TEST_LOGS)/serial.log; s=$${PIPESTATUS[0]}; \
	for c in $$p $$s; do [ $$c -eq 0 ] || [ $$c -eq 5 ] || rc=1; done; \
	[ $$p -eq 5 ] && [ $$s -eq 5 ] && { echo "make test: no test selected" >&2; rc=5; }; \
	echo "make test: what failed, from both passes (whole logs in $(TEST_LOGS)/):" >&2; \
	grep -hE '^(FAILED|ERROR) |^=+ .*(passed|failed|error).* =+$$' $(TEST_LOGS)/parallel.log $(TEST_LOGS)/serial.log >&2 || true; \
	echo "make test: parallel pass exit $$p, serial pass exit $$s" >&2; exit $$rc

unit: venv
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

integration: setup
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

# The sandbox backend contract against a real cluster: `KUBECONFIG=... make test-k8s` (tests/k8s).
# No cluster runs on the CI machine, so `make test` leaves tests/k8s out (the Kubernetes backend's
# own code is tested there on fakes and a real exec server: tests/unit/sandbox/kubernetes).
.PHONY: test-k8s
test-k8s: venv
	@[ -n "$$KUBECONFIG" ] || { echo "make test-k8s: set KUBECONFIG to the cluster's config file" >&2; exit 2; }
	$(BIN)/python -m pytest tests/k8s $(PYTEST_ARGS)

schemas: venv
	$(BIN)/cage schemas schemas --write

golden: venv
	$(BIN)/python -m tests.golden.stream.regenerate
	$(BIN)/python -m tests.golden.cli.regenerate
	$(BIN)/python -m tests.golden.claude.replay
	$(BIN)/python -m tests.golden.codex.replay
	$(BIN)/python -m tests.golden.opencode.record --replay

images: setup
	$(BIN)/cage images build --all

# What the tests build besides the runner images, built ahead for the same reason: the orchestrator
# image (its test then builds from the layer cache).
test-images: setup
	$(BIN)/python -m tests.orchestrator_image

# Every bench runs, each printing its figures against its baseline; the exit says whether all met
# their targets (the benches that missed are named last).
bench: setup
	@missed=""; for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || missed="$$missed $$b"; done; \
	if [ -n "$$missed" ]; then echo "make bench: targets missed in:$$missed" >&2; exit 1; fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
