"""A stopped process's open transaction holds its row locks only so long (PostgreSQL).

A real caderno process stops itself (SIGSTOP) inside a working-memory patch
or a notebook edit, with the resource's row locked (the merge runs in the
transaction: the ``WorkingMemoryUpdate`` seam). Another store's write to that
resource then completes once the server ended the stopped session
(``idle_in_transaction_timeout``), or fails cleanly with ``StorageBusy``
past its ``lock_timeout``; nothing of the stopped write is stored.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pg import pg_schema, pgbouncer, pgbouncer_installed

import caderno
from caderno.agent.config import load_config
from caderno.core.clock import utcnow
from caderno.core.errors import StorageBusy, UsageError
from caderno.server.problems import for_error
from caderno.stores import ops
from caderno.stores.postgres import IDLE_IN_TRANSACTION_TIMEOUT, LOCK_TIMEOUT, PostgresStore
from conftest import python_env

pytestmark = pytest.mark.postgres

#: The stopped process: opens the store, then runs one write whose merge stops the process.
_HOLDER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    import caderno
    from caderno.core.clock import utcnow
    from caderno.stores import ops

    def stop_here():
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # inside the transaction, the row locked

    async def main(url, path):
        async with caderno.connect(url, embedder=None) as memory:
            if path == "working memory":
                def update(current):
                    stop_here()
                    return {**(current or {}), "city": "stopped"}
                op = ops.PatchWorkingMemory(resource_id="r", update=update, patch={"city": "stopped"},
                                            expected_version=None, source="test", now=utcnow())
            else:
                def edit(entries, version):
                    stop_here()
                    return [*entries, "stopped"]
                op = ops.EditNotebook(resource_id="r", target="memory", edit=edit, now=utcnow())
            try:
                await memory.run(op)
                print("stored", flush=True)
            except caderno.CadernoError as exc:
                print("refused", type(exc).__name__, flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema() as url:
        yield url


def _write(path: str, value: str) -> ops.Op[object]:
    if path == "working memory":
        return ops.PatchWorkingMemory(
            resource_id="r",
            update=lambda current: {**(current or {}), "city": value},
            patch={"city": value},
            expected_version=None,
            source="test",
            now=utcnow(),
        )
    return ops.EditNotebook(resource_id="r", target="memory", edit=lambda e, v: [*e, value], now=utcnow())


async def _stored(memory: caderno.Memory, path: str) -> object:
    if path == "working memory":
        return (await memory.get_working_memory(resource_id="r")).get("city")
    return (await memory.run(ops.ReadNotebook(resource_id="r")))["memory"][0]


def _stopped_holder(url: str, path: str) -> subprocess.Popen[str]:
    """The holder, started and waited for until it stopped itself with the lock held."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, url, path], env=python_env(), stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding"
    for _ in range(400):  # until the kernel shows it stopped (bounded: 10 s)
        with open(f"/proc/{holder.pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return holder
        time.sleep(0.025)
    raise AssertionError("the holder never stopped")


def _resume(holder: subprocess.Popen[str]) -> str:
    os.kill(holder.pid, signal.SIGCONT)
    out, _ = holder.communicate(timeout=60)
    return out


@pytest.mark.parametrize("path", ["working memory", "notebook"])
async def test_a_stopped_holder_loses_its_lock_and_the_other_store_writes(pg_url: str, path: str) -> None:
    """Before, the second store's write waited as long as the holder stayed stopped (for ever)."""
    idle, wait = 1.0, 6.0
    url = f"{pg_url}&idle_in_transaction_timeout={idle:g}&lock_timeout={wait:g}"
    async with caderno.connect(url, embedder=None) as memory:
        await memory.run(_write(path, "before"))
        holder = _stopped_holder(url, path)
        try:
            started = time.monotonic()
            await asyncio.wait_for(memory.run(_write(path, "other")), wait + 5)
            took = time.monotonic() - started
            assert took < wait, f"took {took:.1f} s: the stalled session outlived the idle bound"
            out = _resume(holder)
        finally:
            holder.kill()
        assert out.splitlines()[-1] == "refused StorageError", out  # its session was ended: nothing of it stored
        stored = await _stored(memory, path)
    assert stored == ("other" if path == "working memory" else ("before", "other"))


@pytest.mark.parametrize("path", ["working memory", "notebook"])
async def test_a_writer_behind_a_stalled_holder_fails_cleanly_at_its_lock_timeout(pg_url: str, path: str) -> None:
    """A holder whose session the server keeps (its idle bound off): the waiting write is a 503 ``busy``."""
    async with caderno.connect(pg_url + "&lock_timeout=1", embedder=None) as memory:
        await memory.run(_write(path, "before"))
        holder = _stopped_holder(pg_url + "&idle_in_transaction_timeout=0", path)
        try:
            started = time.monotonic()
            with pytest.raises(StorageBusy) as caught:
                await asyncio.wait_for(memory.run(_write(path, "other")), 10)
            assert time.monotonic() - started < 5
            assert "for more than 1 s" in str(caught.value) and "nothing was stored" in str(caught.value)
            problem = for_error(caught.value)
            assert problem.status_code == 503 and b"problems/busy" in bytes(problem.body)
            assert await _stored(memory, path) == ("before" if path == "working memory" else ("before",))
            out = _resume(holder)
        finally:
            holder.kill()
        assert out.splitlines()[-1] == "stored", out  # its session was kept: its write lands once resumed
        stored = await _stored(memory, path)
    assert stored == ("stopped" if path == "working memory" else ("before", "stopped"))


async def test_behind_a_transaction_pooler_the_bounds_hold_without_touching_the_shared_session() -> None:
    """Through PgBouncer (transaction mode) the timeouts are ``SET LOCAL`` in each transaction: the
    stopped holder's session is still ended, and the server connection keeps the server's defaults."""
    import psycopg

    if not pgbouncer_installed():
        pytest.skip("pgbouncer is not installed on this machine")
    with pgbouncer(pool_size=4) as bouncer, pg_schema(via=bouncer) as pooled:
        url = pooled + "&idle_in_transaction_timeout=1&lock_timeout=6"
        async with caderno.connect(url, embedder=None) as memory:
            await memory.run(_write("working memory", "before"))
            holder = _stopped_holder(url, "working memory")
            try:
                started = time.monotonic()
                await asyncio.wait_for(memory.run(_write("working memory", "other")), 11)
                assert time.monotonic() - started < 6
                out = _resume(holder)
            finally:
                holder.kill()
            assert out.splitlines()[-1] == "refused StorageError", out
            assert await _stored(memory, "working memory") == "other"
        with psycopg.connect(bouncer.split("?", 1)[0], prepare_threshold=None, autocommit=True) as conn:
            row = conn.execute(
                "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')"
            ).fetchone()
    assert row == ("0", "0")


async def test_the_bounds_come_from_caderno_toml_and_reach_every_session(pg_url: str, tmp_path: Path) -> None:
    config = tmp_path / "caderno.toml"
    config.write_text(f'[database]\nurl = "{pg_url}"\nlock_timeout = 2.5\nidle_in_transaction_timeout = 0\n')
    loaded = load_config(config)
    assert loaded.database_url is not None
    async with caderno.connect(loaded.database_url, embedder=None, **loaded.connect_options()) as memory:
        store = memory.store
        assert isinstance(store, PostgresStore)
        async with store._pool.connection() as conn:
            row = await (await conn.execute("SHOW lock_timeout")).fetchone()
            idle = await (await conn.execute("SHOW idle_in_transaction_session_timeout")).fetchone()
    assert (row[0], idle[0]) == ("2500ms", "0")
    async with caderno.connect(pg_url, embedder=None) as memory:  # the defaults
        store = memory.store
        assert isinstance(store, PostgresStore)
        async with store._pool.connection() as conn:
            row = await (await conn.execute("SHOW lock_timeout")).fetchone()
            idle = await (await conn.execute("SHOW idle_in_transaction_session_timeout")).fetchone()
    assert (row[0], idle[0]) == (f"{LOCK_TIMEOUT:g}s", f"{IDLE_IN_TRANSACTION_TIMEOUT:g}s")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("lock_timeout = -1", "[database] lock_timeout must be a number of seconds (0 or more), not -1"),
        ('idle_in_transaction_timeout = "5s"', "must be a number of seconds (0 or more), not '5s'"),
        ("lock_timeot = 3", "[database] has unknown key(s) lock_timeot"),
    ],
)
def test_bad_bounds_in_caderno_toml_are_refused_by_name(tmp_path: Path, text: str, words: str) -> None:
    config = tmp_path / "caderno.toml"
    config.write_text(f"[database]\n{text}\n")
    with pytest.raises(UsageError) as caught:
        load_config(config)
    assert words in str(caught.value)


@pytest.mark.parametrize("query", ["lock_timeout=soon", "idle_in_transaction_timeout=-2", "lock_timeout=1e12"])
def test_bad_bounds_in_the_url_are_refused_by_name(query: str) -> None:
    with pytest.raises(UsageError, match=f"^{query.split('=')[0]} must be"):
        PostgresStore(f"postgresql://u@h/db?{query}")
