"""What only the PostgreSQL backend has: migrations under a lock, pool recovery, redaction."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _pg import PG_URL, own_client_ports, pg_schema, require_postgres

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.core.errors import SchemaTooNew, StorageBusy, StorageError
from caderno.stores import _postgres_schema, ops
from caderno.stores.postgres import RETRY_LOCK_TIMEOUT
from conftest import python_env

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url():
    with pg_schema() as url:
        yield url


def test_ten_processes_starting_at_once_migrate_exactly_once(pg_url: str) -> None:
    code = textwrap.dedent(
        f"""
        import asyncio, caderno
        async def main():
            async with caderno.connect({pg_url!r}) as m:
                await m.append_messages(resource_id="r", thread_id="t", messages=[caderno.Message.user("x")])
        asyncio.run(main())
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=python_env(), stderr=subprocess.PIPE, text=True)
        for _ in range(10)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    import psycopg

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(f'SELECT name FROM "{schema}".schema_migrations').fetchall()
        count = conn.execute(f'SELECT count(*) FROM "{schema}".events').fetchone()[0]
    assert [r[0] for r in rows] == [n for n, _ in _postgres_schema.MIGRATIONS]
    assert count == 10


async def test_a_newer_schema_is_refused(pg_url: str) -> None:
    async with caderno.connect(pg_url):
        pass
    import psycopg

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"INSERT INTO \"{schema}\".schema_migrations VALUES ('0099_future', now())")
    with pytest.raises(SchemaTooNew, match="0099_future"):
        await caderno.connect(pg_url)


async def test_connection_refused_names_the_url_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    require_postgres()
    caplog.set_level(logging.DEBUG)
    url = "postgresql://caderno:s3cr3t-pw@127.0.0.1:5999/caderno_test"
    with pytest.raises(StorageError) as exc:
        await caderno.connect(url)
    message = str(exc.value)
    assert "postgresql://caderno:***@127.0.0.1:5999/caderno_test" in message
    assert "s3cr3t-pw" not in message and "s3cr3t-pw" not in caplog.text
    assert "s3cr3t-pw" not in repr(exc.value.__cause__) if exc.value.__cause__ else True


async def test_password_never_reaches_logs_in_normal_use(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = pg_url.replace("caderno@", "caderno:another-s3cret@")  # trust auth ignores it
    async with caderno.connect(url) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("x")])
        assert "another-s3cret" not in memory.store.url
    assert "another-s3cret" not in caplog.text


async def _terminate_our_backends(schema_url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        # With a timeout, pg_terminate_backend waits until the backend has
        # exited, so its connection is dead by the time the test goes on.
        # This process's own: other tests (another xdist worker's) have caderno connections to the server too.
        cur = await admin.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE application_name = 'caderno' AND pid <> pg_backend_pid() AND client_port = ANY(%s)",
            (own_client_ports(),),
        )
        return (await cur.fetchone())[0]


async def test_pool_recovers_after_backends_are_terminated(pg_url: str) -> None:
    async with caderno.connect(pg_url) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("before")])
        assert await _terminate_our_backends(pg_url) >= 1
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("after")])
        got = await memory.get_messages(resource_id="r", thread_id="t")
        assert [m.content for m in got] == ["before", "after"]


async def test_turn_cut_by_a_terminated_backend_is_all_or_nothing(pg_url: str) -> None:
    async with caderno.connect(pg_url) as memory:
        outcomes = []
        for attempt in range(5):
            thread = f"t{attempt}"
            big = [Message.user(f"m{i} " + "x" * 200) for i in range(3000)]
            task = asyncio.create_task(memory.append_messages(resource_id="r", thread_id=thread, messages=big))
            await asyncio.sleep(0.05 * (attempt + 1))
            await _terminate_our_backends(pg_url)
            try:
                await task
                outcomes.append("committed")
            except StorageError:
                outcomes.append("failed")
            n = len(await memory.get_messages(resource_id="r", thread_id=thread))
            assert n == (3000 if outcomes[-1] == "committed" else 0)
        # A cut append is retried when the server says it ended the session, so most land; none is partial.
        await memory.append_messages(resource_id="r", thread_id="ok", messages=[Message.user("still works")])


async def test_url_options_keep_their_text(pg_url: str) -> None:
    # A timeout no statement of opening reaches on a loaded machine (1.234 s did: the migration
    # check was cancelled): what is checked is that the option's text arrives whole.
    url = pg_url + "&options=-c%20statement_timeout%3D1234567"
    async with caderno.connect(url, embedder=None) as memory:
        async with memory.store._pool.connection() as conn:  # type: ignore[attr-defined]
            row = await (await conn.execute("SHOW statement_timeout")).fetchone()
        assert row[0] == "1234567ms"


#: Backends blocked by the test's own lock holder (pid bound): never another test's or another run's.
_BLOCKED = "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"


#: Seconds a call may take to reach the test's lock: a retry first checks the pool and opens a new
#: connection, which on a loaded machine took over 5 s. A deadline only: the wait ends when it does.
_REACH_LOCK_SECONDS = 60


async def _wait_until_blocked(admin: Any, task: asyncio.Future[Any]) -> None:
    """Until a backend waits on the lock ``admin`` holds, or ``task`` ended (``_REACH_LOCK_SECONDS`` at most)."""
    deadline = time.monotonic() + _REACH_LOCK_SECONDS
    while time.monotonic() < deadline:
        if task.done():
            return
        cur = await admin.execute(f"SELECT count(*) FROM ({_BLOCKED}) b", (admin.info.backend_pid,))
        if (await cur.fetchone())[0]:
            return
        await asyncio.sleep(0.025)
    raise AssertionError("caderno's call never reached the lock")


async def _cut(memory: Any, call: Any, hold: str, times: int) -> BaseException | None:
    """Start ``call`` while ``hold`` (SQL run in an open transaction) blocks it; cut its backend ``times`` times."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        await admin.execute("BEGIN")
        await admin.execute(hold)
        task = asyncio.ensure_future(call)
        try:
            for _ in range(times):
                await _wait_until_blocked(admin, task)
                async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as killer:
                    # The blocked pids first, then the kill: in one statement the scan went on after the
                    # first kill and also cut the retry, blocked by then on another pool connection.
                    blocked = await (await killer.execute(_BLOCKED, (admin.info.backend_pid,))).fetchall()
                    await killer.execute(
                        "SELECT pg_terminate_backend(pid, 5000) FROM unnest(%s::int[]) pid", ([r[0] for r in blocked],)
                    )
        finally:
            await admin.execute("ROLLBACK")
        try:
            await task
        except BaseException as exc:  # the test asserts its type
            return exc
        return None


@pytest.mark.parametrize("kind", ["read", "write"])
async def test_a_call_cut_mid_statement_is_retried_once_then_a_storage_error(pg_url: str, kind: str) -> None:
    schema = pg_url.split("schema=")[1]
    async with caderno.connect(pg_url, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("before")])

        def call() -> Any:
            if kind == "read":
                return memory.get_messages(resource_id="r", thread_id="t")
            return memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("cut")])

        # An exclusive lock on the events table holds the call mid-statement, in the server.
        hold = f'LOCK TABLE "{schema}".events IN ACCESS EXCLUSIVE MODE'
        once = await _cut(memory, call(), hold, times=1)
        assert once is None  # cut once: the server said the session ended, the call ran again and landed
        twice = await _cut(memory, call(), hold, times=2)
        assert type(twice) is StorageError, repr(twice)  # cut on its retry too: a caderno error, nothing else
        assert "terminating connection" in str(twice)
        # The pool replaced the dead connections: the next calls work.
        got = await memory.get_messages(resource_id="r", thread_id="t")
        assert [m.content for m in got] == ["before"] + (["cut"] if kind == "write" else [])


def _edit_notebook(entry: str) -> ops.EditNotebook:
    return ops.EditNotebook(
        resource_id="r", target="memory", edit=lambda entries, version: [*entries, entry], now=utcnow()
    )


#: Each write path, the row it locks (held by the test) and the call: (locking SQL on the schema, call).
_WRITE_PATHS: dict[str, tuple[str, Callable[[caderno.Memory], Awaitable[Any]]]] = {
    "append": (
        "SELECT 1 FROM {s}.threads WHERE resource_id = 'r' AND thread_id = 't' FOR UPDATE",
        lambda m: m.append_messages(resource_id="r", thread_id="t", messages=[Message.user("cut")]),
    ),
    "working memory": (
        "SELECT 1 FROM {s}.resources WHERE resource_id = 'r' FOR UPDATE",
        lambda m: m.update_working_memory(resource_id="r", patch={"city": "cut"}),
    ),
    "notebook": (
        "SELECT 1 FROM {s}.notebooks WHERE resource_id = 'r' AND target = 'memory' FOR UPDATE",
        lambda m: m.run(_edit_notebook("cut")),
    ),
}


@pytest.mark.parametrize("path", sorted(_WRITE_PATHS))
async def test_a_write_whose_backend_is_terminated_while_it_waits_on_a_row_lock_fails_at_once(
    pg_url: str, path: str
) -> None:
    """Before, the write's one retry queued on the same row lock again and waited as long as its holder held it."""
    schema = '"' + pg_url.split("schema=")[1] + '"'
    lock, call = _WRITE_PATHS[path]
    async with caderno.connect(pg_url, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("before")])
        await memory.update_working_memory(resource_id="r", patch={"city": "before"})
        await memory.run(_edit_notebook("before"))
        import psycopg

        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
            await admin.execute("BEGIN")
            await admin.execute(lock.format(s=schema))  # held for the whole test: a live, busy holder
            task = asyncio.ensure_future(call(memory))
            await _wait_until_blocked(admin, task)
            async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as killer:
                blocked = await (await killer.execute(_BLOCKED, (admin.info.backend_pid,))).fetchall()
                await killer.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM unnest(%s::int[]) pid", ([r[0] for r in blocked],)
                )
            started = time.monotonic()
            done, _ = await asyncio.wait({task}, timeout=RETRY_LOCK_TIMEOUT + 4)
            assert done, f"the {path} call still waits with its backend gone"
            assert isinstance(task.exception(), StorageBusy), repr(task.exception())
            assert "nothing was stored" in str(task.exception())
            assert time.monotonic() - started < RETRY_LOCK_TIMEOUT + 4
            await admin.execute("ROLLBACK")
        assert [m.content for m in await memory.get_messages(resource_id="r", thread_id="t")] == ["before"]
        assert await memory.get_working_memory(resource_id="r") == {"city": "before"}
        pages = await memory.run(ops.ReadNotebook(resource_id="r"))
        assert pages["memory"][0] == ("before",)
