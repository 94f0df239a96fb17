# data-plane: set-up, build, run, test, lint and benchmarks.
# `make run` serves a demo corpus on a fresh machine; `make test` passes the tests.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

DEMO_CORPUS ?= .data/corpus/demo
DEMO_SPACE ?= demo

# Connection settings, overridable (make run DATABASE_URL=...). A key set in
# .env is left alone: the binary reads .env itself and an exported default
# would hide it. Paths are absolute because cargo runs each test binary inside
# its own crate folder.
DOTENV_KEYS := $(shell sed -n 's/^[[:space:]]*\(export[[:space:]]*\)\{0,1\}\([A-Za-z_][A-Za-z0-9_]*\)=.*/\2/p' .env 2>/dev/null)
ifeq ($(filter DATABASE_URL,$(DOTENV_KEYS)),)
export DATABASE_URL ?= postgres://data_plane_app:data_plane_app@127.0.0.1:5432/data_plane?sslmode=disable
endif
ifeq ($(filter DATABASE_OWNER_URL,$(DOTENV_KEYS)),)
export DATABASE_OWNER_URL ?= postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/data_plane?sslmode=disable
endif
ifeq ($(filter DATA_PLANE_DATA_DIR,$(DOTENV_KEYS)),)
export DATA_PLANE_DATA_DIR ?= $(CURDIR)/.data
endif
ifeq ($(filter DATA_PLANE_MODEL_DIR,$(DOTENV_KEYS)),)
export DATA_PLANE_MODEL_DIR ?= $(CURDIR)/.data/model/all-MiniLM-L6-v2
endif
export DATA_PLANE_TEST_OWNER_URL ?= postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/postgres?sslmode=disable
export DATA_PLANE_TEST_APP_PASSWORD ?= data_plane_app

.PHONY: help setup build run test lint bench model model-smoke

# `make run MODEL=local` chats with a small local model (scripts/local-model.sh).
MODEL ?=

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

setup: ## install and start what is missing: packages, pgvector, PostgreSQL, roles, model, demo corpus, Chromium for the browser test
	bash scripts/setup.sh

build: ## build the release binary
	cargo build --release -p data-plane

# The release build runs beside the set-up (scripts/run.sh says why).
run: ## set up, build, migrate, ingest the demo corpus and serve (MODEL=local: with a small local chat model)
	DEMO_CORPUS=$(DEMO_CORPUS) DEMO_SPACE=$(DEMO_SPACE) MODEL=$(MODEL) bash scripts/run.sh

model: ## install a small local chat model: llama.cpp's server (built from source) and Gemma 3 270M, into .data/llm
	bash scripts/local-model.sh install

model-smoke: ## chat turns through data-plane against the local model: time to first text, tokens/s, tools called (benches/model_smoke.sh)
	bash scripts/local-model.sh smoke

# nextest runs each test in its own process (faster here, clearer failures)
# but does not run doc tests, hence the second command.
test: setup ## set up, then run every test against the real PostgreSQL
	if command -v cargo-nextest >/dev/null; then \
		cargo nextest run --workspace --no-fail-fast; \
		cargo test --doc --workspace; \
	else \
		cargo test --workspace --no-fail-fast; \
	fi
	bash scripts/check_layers.sh

lint: ## formatting, clippy (warnings as errors), the crate layering and shellcheck on the scripts
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	bash scripts/check_layers.sh
	@command -v shellcheck >/dev/null || { echo "lint: shellcheck is missing; make setup installs it" >&2; exit 1; }
	shellcheck -x scripts/*.sh benches/*.sh benches/lib/*.sh .ci/run

bench: setup ## set up, then run every benchmark program in benches/
	bash scripts/bench.sh
