"""PostgreSQL behind PgBouncer in transaction mode (``?pooler=transaction``).

Such a pooler gives each transaction whichever server connection is free,
so whatever one client leaves on a session (a ``SET``, a prepared
statement) reaches another. Most of these tests run a PgBouncer with ONE
server connection, which every client shares: a setting that leaked would
show at once. (The conformance suite's "postgres" backend runs through a
larger PgBouncer for the whole session: ``tests/conftest.py``.)
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from _pg import PG_URL, pg_schema, pgbouncer

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.core.errors import UsageError
from caderno.memory.engines.importance import EMBEDDED_ROLES
from caderno.stores import _postgres_schema, ops, postgres
from conftest import python_env

pytestmark = pytest.mark.postgres


@pytest.fixture
def one_connection() -> Iterator[str]:
    """A PgBouncer of its own in transaction mode with one server connection, in front of the test PostgreSQL."""
    with pgbouncer(pool_size=1) as url:
        yield url


def _bare(url: str) -> str:
    """``url`` without the pooler declaration: what a deployment that forgot it would use."""
    return url.replace("&pooler=transaction", "")


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_postgres_backend_of_the_suite_goes_through_pgbouncer(db_url: str, pgbouncer_url: str | None) -> None:
    if pgbouncer_url is None:
        pytest.skip("pgbouncer is not installed on this machine: the postgres backend connects directly")
    assert db_url.startswith(pgbouncer_url + "?") and "pooler=transaction" in db_url


async def _talk(a: caderno.Memory, b: caderno.Memory) -> tuple[list[str], list[str]]:
    """A and B write one message each to the same resource and thread id, then each reads; their texts."""
    await a.append_messages(resource_id="r", thread_id="t", messages=[Message.user("from a")])
    await b.append_messages(resource_id="r", thread_id="t", messages=[Message.user("from b")])
    seen_a = [m.content for m in await a.get_messages(resource_id="r", thread_id="t")]
    seen_b = [m.content for m in await b.get_messages(resource_id="r", thread_id="t")]
    return seen_a, seen_b


async def test_two_schemas_through_one_server_connection_do_not_see_each_other(one_connection: str) -> None:
    with pg_schema(via=one_connection) as url_a, pg_schema(via=one_connection) as url_b:
        async with caderno.connect(url_a, embedder=None) as a, caderno.connect(url_b, embedder=None) as b:
            for _ in range(3):
                seen_a, seen_b = await _talk(a, b)
            assert seen_a == ["from a"] * 3
            assert seen_b == ["from b"] * 3
            # A batch of several operations (a transaction of its own) and a one-statement one.
            await a.update_working_memory(resource_id="r", patch={"who": "a"})
            await b.update_working_memory(resource_id="r", patch={"who": "b"})
            assert await a.get_working_memory(resource_id="r") == {"who": "a"}
            assert await b.get_working_memory(resource_id="r") == {"who": "b"}


async def test_without_the_declaration_a_transaction_pooler_mixes_the_schemas(one_connection: str) -> None:
    """What the option prevents: the search path one client set on the shared connection serves the other.

    Which schema each statement lands in depends on which pool set the path last (a pool may open
    a connection, and set it, at any time), so the test asks only that the two are not kept apart:
    A or B does not read back exactly its own message — the other's, both, or none.
    """
    with pg_schema(via=one_connection) as url_a, pg_schema(via=one_connection) as url_b:
        async with caderno.connect(_bare(url_a), embedder=None) as a, caderno.connect(_bare(url_b), embedder=None) as b:
            seen_a, seen_b = await _talk(a, b)
    assert (seen_a, seen_b) != (["from a"], ["from b"])


async def _prepared_after_many_reads(url: str) -> tuple[int, list[object]]:
    """Read one thread 20 times; how many statements the one server connection holds prepared, and the pool's thresholds."""
    import psycopg

    async with caderno.connect(url, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
        for _ in range(20):
            assert len(await memory.get_messages(resource_id="r", thread_id="t")) == 1
        store = memory.store
        assert isinstance(store, postgres.PostgresStore)
        async with store._pool.connection() as conn:
            thresholds = [conn.prepare_threshold]
    # Through the same pooler: with one server connection, this session is the store's.
    with psycopg.connect(url.split("?", 1)[0], prepare_threshold=None) as conn:
        count = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
    return count, thresholds


async def test_no_statement_is_prepared_on_the_server_when_the_pooler_is_declared(one_connection: str) -> None:
    with pg_schema(via=one_connection) as url:
        count, thresholds = await _prepared_after_many_reads(url)
    assert thresholds == [None]
    assert count == 0


async def test_without_the_declaration_repeated_statements_are_prepared_on_the_server(one_connection: str) -> None:
    """The check above can fail: psycopg prepares a statement sent five times, on whichever server connection ran it.

    The store keeps one client connection here: with several, each prepares its own ``_pg3_0`` on
    the one shared server connection and the second fails with "already exists" — the same fault,
    shown in a way that depends on which connection the pool hands out.
    """
    with pg_schema(via=one_connection) as url:
        count, thresholds = await _prepared_after_many_reads(_bare(url) + "&pool_size=1")
    assert thresholds != [None]
    assert count > 0


async def test_with_pgvector_each_transaction_sets_the_search_path_and_the_scan(pgvector_url: str) -> None:
    """The vector search's settings live in the transaction: the session the pooler would hand on keeps none."""

    async def settings(conn: Any) -> tuple[str, str | None]:
        sql = "SELECT current_setting('search_path'), current_setting('hnsw.iterative_scan', true)"
        row = await (await conn.execute(sql)).fetchone()
        return row[0], row[1]

    with pg_schema(pgvector_url) as url:
        schema = url.rsplit("schema=", 1)[1]
        async with caderno.connect(url + "&pooler=transaction", embedder=None) as memory:
            assert memory.supports(ops.SearchVectors)
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
            await memory.run(ops.Reindex(resource_id="r", embed_roles=EMBEDDED_ROLES))
            (job,) = await memory.run(ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
            vector = struct.pack("3f", 1.0, 0.0, 0.0)
            done = ((job.resource_id, job.seq, vector),)
            await memory.run(ops.FinishEmbeddings(model="m", dim=3, done=done, failed=(), now=utcnow()))
            search = ops.SearchVectors(resource_id="r", model="m", query=(1.0, 0.0, 0.0), k=1, min_similarity=-1.0)
            assert [seq for seq, _ in await memory.run(search)] == [job.seq]
            store = memory.store
            assert isinstance(store, postgres.PostgresStore)
            inside = await store._tx(settings, write=False)
            async with store._pool.connection() as conn:
                outside = await settings(conn)
    assert schema in inside[0] and inside[1] == "strict_order"
    assert schema not in outside[0] and outside[1] in (None, "off")


def test_processes_starting_at_once_through_the_pooler_migrate_exactly_once() -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys, caderno
        async def main():
            async with caderno.connect(sys.argv[1], embedder=None) as m:
                await m.append_messages(resource_id="r", thread_id="t", messages=[caderno.Message.user("x")])
        asyncio.run(main())
        """
    )
    # Two server connections for six processes: they queue in PgBouncer as well as on the migration lock.
    with pgbouncer(pool_size=2) as bouncer, pg_schema(via=bouncer) as url:
        procs = [
            subprocess.Popen([sys.executable, "-c", code, url], env=python_env(), stderr=subprocess.PIPE, text=True)
            for _ in range(6)
        ]
        for p in procs:
            assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
        import psycopg

        schema = url.split("schema=", 1)[1].split("&", 1)[0]
        with psycopg.connect(PG_URL) as conn:
            rows = conn.execute(f'SELECT name FROM "{schema}".schema_migrations ORDER BY name').fetchall()
            count = conn.execute(f'SELECT count(*) FROM "{schema}".events').fetchone()[0]
    assert [r[0] for r in rows] == sorted(n for n, _ in _postgres_schema.MIGRATIONS)
    assert count == 6


def test_every_advisory_lock_of_the_postgres_store_is_transaction_scoped() -> None:
    """A session-level advisory lock behind a transaction pooler would stay on a server connection another client gets."""
    import pathlib
    import re

    stores = pathlib.Path(postgres.__file__).parent
    calls = {m for path in stores.rglob("*.py") for m in re.findall(r"pg_(?:try_)?advisory_\w+", path.read_text())}
    assert calls and all(call.startswith(("pg_advisory_xact_", "pg_try_advisory_xact_")) for call in calls), calls


@pytest.mark.parametrize("value", ["session", "yes", ""])
def test_an_unknown_pooler_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="pooler must be one of none, transaction"):
        postgres.PostgresStore(f"postgresql://u@h/db?pooler={value}")
