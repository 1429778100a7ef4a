"""The stores' key caches: every request looks its key up, and a revocation still counts.

SQLite: a real file; the revoking process is another ``Memory`` on the same
file (as ``caderno keys revoke`` is, beside a running ``caderno serve``) and
the real CLI in a subprocess — the next lookup sees it. PostgreSQL: two
stores on one schema, as two servers are; the revocation reaches the other
store's cache by ``NOTIFY`` at its commit (the test measures how soon), this
store's at once; behind a transaction pooler there is no cache.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _pg import PGBOUNCER_MISSING, pg_schema

import caderno
from caderno.memory.parts.state import hash_token
from caderno.stores.postgres import PostgresStore
from caderno.stores.sqlite import SQLiteStore
from conftest import python_env


async def test_a_live_key_is_served_from_the_cache_after_its_first_lookup(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "k.db"), embedder=None)
    try:
        token, key = await memory.keys.create(resources=["casa"])
        store = memory.store
        assert isinstance(store, SQLiteStore)
        assert store.keys.get(hash_token(token)) is None
        assert (await memory.keys.verify(token)) == key
        assert store.keys.get(hash_token(token)) == key  # the next request needs no read
        assert (await memory.keys.verify(token)) == key
        assert await memory.keys.verify("cad_unknown") is None
    finally:
        await memory.close()


async def test_a_revocation_in_this_process_counts_at_once(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "k.db"), embedder=None)
    try:
        token, key = await memory.keys.create(resources=["casa"])
        assert await memory.keys.verify(token) == key
        await memory.keys.revoke(key_id=key.id)
        assert await memory.keys.verify(token) is None
    finally:
        await memory.close()


async def test_a_revocation_by_another_process_counts_at_once(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    server = await caderno.connect(str(db), embedder=None)
    try:
        token, key = await server.keys.create(resources=["casa"])
        other_token, other = await server.keys.create(resources=["casa"])
        for t in (token, other_token):
            assert await server.keys.verify(t) is not None  # both cached
        elsewhere = await caderno.connect(str(db), embedder=None)
        try:
            await elsewhere.keys.revoke(key_id=key.id)
        finally:
            await elsewhere.close()
        for _ in range(2):  # the read that sees the change, then the cache it leaves
            assert await server.keys.verify(token) is None
        assert await server.keys.verify(other_token) == other

        revoked = subprocess.run(
            [sys.executable, "-m", "caderno.cli", "--db", str(db), "keys", "revoke", other.id],
            env=python_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert revoked.returncode == 0, revoked.stderr
        for _ in range(2):
            assert await server.keys.verify(other_token) is None
    finally:
        await server.close()


# -- PostgreSQL: one LISTEN session per store; a key written on the schema clears every cache ----


async def _until(check: Any, seconds: float = 5.0) -> bool:
    """Poll ``check()`` (async) until true or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


@pytest.mark.postgres
async def test_postgres_a_revocation_by_another_server_clears_the_cache() -> None:
    with pg_schema() as url:
        a = await caderno.connect(url, embedder=None)
        b = await caderno.connect(url, embedder=None)
        try:
            token, key = await a.keys.create(resources=["casa"])
            store = a.store
            assert isinstance(store, PostgresStore)
            assert await _until(lambda: _live(store))  # the listener is up
            assert await a.keys.verify(token) == key
            assert store.keys.get(hash_token(token)) == key  # served from the cache from now on
            await b.keys.revoke(key_id=key.id)  # another server: NOTIFY at its commit
            started = time.monotonic()
            assert await _until(lambda: _refused(a, token)), "the revocation never reached the other server"
            reached = time.monotonic() - started
            assert reached < 1.0, f"the revocation took {reached:.3f} s to reach the other server's cache"
            assert await a.keys.verify(token) is None
        finally:
            await b.close()
            await a.close()


@pytest.mark.postgres
async def test_postgres_a_revocation_in_this_process_counts_at_once() -> None:
    with pg_schema() as url:
        memory = await caderno.connect(url, embedder=None)
        try:
            token, key = await memory.keys.create(resources=["casa"])
            store = memory.store
            assert isinstance(store, PostgresStore)
            assert await _until(lambda: _live(store))
            assert await memory.keys.verify(token) == key
            await memory.keys.revoke(key_id=key.id)
            assert await memory.keys.verify(token) is None  # no waiting for the notification
        finally:
            await memory.close()


async def _live(store: PostgresStore) -> bool:
    return store._keys_live


async def _refused(memory: Any, token: str) -> bool:
    return await memory.keys.verify(token) is None


@pytest.mark.postgres
async def test_postgres_behind_a_transaction_pooler_reads_every_key(pgbouncer_url: str | None) -> None:
    if pgbouncer_url is None:
        pytest.skip(PGBOUNCER_MISSING)
    with pg_schema(via=pgbouncer_url) as url:
        memory = await caderno.connect(url, embedder=None)
        try:
            token, key = await memory.keys.create(resources=["casa"])
            assert await memory.keys.verify(token) == key
            store = memory.store
            assert isinstance(store, PostgresStore)
            assert store.keys.get(hash_token(token)) is None  # LISTEN needs a session: no cache
        finally:
            await memory.close()
