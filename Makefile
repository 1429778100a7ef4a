# One entry point: every target sets itself up (creates .venv, installs).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install demo test docs dist bench bench-history bench-recall-quality bench-recall-speed bench-context bench-turn bench-embedding bench-embedders bench-server bench-capacity bench-langgraph-store bench-round-trips bench-proxy bench-loop-lag lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,postgres,openai,server,mcp,langgraph,openai-agents,multilingual]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

## The main job: Monday and Wednesday as two processes on a SQLite file.
demo: $(STAMP)
	$(BIN)/caderno --db caderno-demo.db demo

## The whole test suite (starts PostgreSQL when it is installed but down),
## with, beside pytest (scripts/test.sh), the type checker (the store port is
## a typed contract), the docs site's strict build (a broken link or
## docstring fails it; no network) and the TypeScript client's tests (Node's
## runner, against a real caderno serve).
## pytest runs on TEST_WORKERS processes (pytest-xdist): twice the cores, as
## many tests wait on subprocesses, servers and leases rather than compute;
## at most 6: with 4 the test PostgreSQL saw up to ~60 of its 100 connections.
## TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell n=$$(($$(nproc 2>/dev/null || echo 1) * 2)); echo $$((n > 6 ? 6 : n)))
test: $(STAMP)
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-pgbouncer.sh
	bash scripts/ensure-chromium.sh
	bash scripts/test.sh $(TEST_WORKERS)

## The docs site, served with live reload at http://127.0.0.1:8000.
docs: $(STAMP)
	$(BIN)/mkdocs serve

## A wheel and an sdist in dist/: what `pip install dist/caderno-*.whl` installs.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist

## Every benchmark of the docs (about 30 minutes on 2 cores; about 45 the first time, when the eval sets' caches and the 1M-message recall database are built).
bench: bench-history bench-recall-quality bench-recall-speed bench-context bench-turn bench-embedding bench-embedders bench-server bench-langgraph-store bench-round-trips bench-proxy bench-loop-lag

BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench-history: $(BENCH_STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/history.py

bench-recall-quality: $(BENCH_STAMP)
	$(BIN)/python bench/recall_quality.py

bench-recall-speed: $(BENCH_STAMP)
	$(BIN)/python bench/recall_speed.py

bench-context: $(BENCH_STAMP)
	$(BIN)/python bench/context_growth.py

bench-embedding: $(BENCH_STAMP)
	$(BIN)/python bench/embedding_speed.py --rounds 3

## The embedders compared: quality on both sets, speed, the gates (about 6 minutes).
bench-embedders: $(BENCH_STAMP)
	$(BIN)/python bench/embedders.py --rounds 3

bench-turn: $(BENCH_STAMP)
	$(BIN)/python bench/turn_overhead.py --profile

## The memory proxy: a turn through it vs the same call straight to the model, plain and streamed (about 2 minutes).
bench-proxy: $(BENCH_STAMP)
	$(BIN)/python bench/proxy.py

## /healthz p50/p99 while the largest allowed recall and append run, against its floor (about a minute).
bench-loop-lag: $(BENCH_STAMP)
	$(BIN)/python bench/loop_lag.py

bench-server: $(BENCH_STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/server_load.py

## What a turn and a read cost one PostgreSQL core, bytes per message, and the target's needs (about a minute).
bench-capacity: $(BENCH_STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/capacity.py

## Round trips to PostgreSQL per AgentChat turn, automatic recall off and on, reads pipelined and not (under a minute).
bench-round-trips: $(BENCH_STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/round_trips.py

## CadernoStore vs LangGraph's SQLite and PostgreSQL stores at 2,000 and 5,000 items: filter and semantic search, puts (about a minute).
bench-langgraph-store: $(BENCH_STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/langgraph_store.py --items 2000
	$(BIN)/python bench/langgraph_store.py --items 5000

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

clean:
	rm -rf $(VENV) caderno-demo.db caderno-demo.db-* .pytest_cache site dist
