"""Erased text is gone from the files while the store is open, and after close.

SQLite: the main file, ``-wal`` and ``-shm`` are read byte for byte right
after ``erase_resource`` / ``delete_thread`` / ``messages.delete`` return,
with the store still open (no checkpoint forced by the test), and again
after close. PostgreSQL: every table of the schema is searched as text.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from _pg import pg_schema

import caderno
from caderno import Message, ToolCall
from caderno.stores import ops
from conftest import record_figure

#: One xdist worker runs the module, in order: ``test_zz_erasure_summary`` reads what the others counted.
pytestmark = pytest.mark.xdist_group("erasure")

FOUND: dict[str, int] = {"checks": 0, "bytes_found": 0}


def marker() -> str:
    return "zq" + uuid.uuid4().hex[:12] + "xk"


async def fill(memory: caderno.Memory, secret: str, resource: str = "casa", thread: str = "t") -> list[Message]:
    """The secret everywhere a resource keeps text."""
    stored = await memory.append_messages(
        resource_id=resource,
        thread_id=thread,
        messages=[
            Message.user(f"our bank password is {secret} remember it", metadata={"note": secret}),
            Message.assistant(tool_calls=[ToolCall(id="c1", name="save", arguments={"value": secret})]),
            Message.tool(f"saved {secret}", tool_call_id="c1", name="save"),
        ],
    )
    await memory.messages.edit(resource_id=resource, message_id=stored[0].id or "", content=f"edited {secret}")
    await memory.threads.update(resource_id=resource, thread_id=thread, title=f"about {secret}", metadata={"k": secret})
    return stored


async def fill_resource(memory: caderno.Memory, secret: str) -> None:
    await fill(memory, secret)
    await memory.update_working_memory(resource_id="casa", patch={"secret": secret})
    await memory.facts.remember(resource_id="casa", category="bank", key="password", value=secret)
    await memory.facts.remember(resource_id="casa", category="bank", key="password", value=secret + "2")
    await memory.tasks.add(resource_id="casa", name=f"t-{secret}", schedule="daily", prompt=f"check {secret}")
    await memory.prefixes.allow_always(resource_id="casa", prefix=f"echo {secret}")
    await memory.macros.learn(resource_id="casa", calls=[("a", {"x": 1}, True), ("b", {"v": secret}, True)])


def files_hold(path: Path, secret: str, *, erased: bool = True) -> list[str]:
    """Which of the database's files hold ``secret`` (counted in the summary when it was erased)."""
    found = []
    for suffix in ("", "-wal", "-shm"):
        f = Path(str(path) + suffix)
        if f.exists() and secret.encode() in f.read_bytes():
            found.append(f.name)
    if erased:
        FOUND["checks"] += 1
        FOUND["bytes_found"] += len(found)
    return found


async def test_sqlite_erase_resource_leaves_no_byte(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    secret = marker()
    async with caderno.connect(db, embedder=None) as memory:
        await fill_resource(memory, secret)
        await memory.append_messages(resource_id="other", thread_id="t", messages=[Message.user("kept text")])
        assert files_hold(db, secret, erased=False)  # the test can see it before
        await memory.erase_resource(resource_id="casa")
        assert files_hold(db, secret) == []  # while the store is open
        assert [m.content for m in await memory.get_messages(resource_id="other", thread_id="t")] == ["kept text"]
    assert files_hold(db, secret) == []


@pytest.mark.parametrize("how", ["delete_thread", "messages.delete", "messages.pop"])
async def test_sqlite_deleting_messages_leaves_no_byte(tmp_path: Path, how: str) -> None:
    db = tmp_path / "d.db"
    secret = marker()
    async with caderno.connect(db, embedder=None) as memory:
        await memory.append_messages(resource_id="casa", thread_id="keep", messages=[Message.user("unrelated")])
        if how == "delete_thread":
            await fill(memory, secret)
            await memory.delete_thread(resource_id="casa", thread_id="t")
        else:
            await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("first")])
            (m,) = await memory.append_messages(
                resource_id="casa", thread_id="t", messages=[Message.user(f"the code is {secret}")]
            )
            if how == "messages.delete":
                await memory.messages.delete(resource_id="casa", message_id=m.id or "")
            else:
                await memory.messages.pop(resource_id="casa", thread_id="t")
        assert files_hold(db, secret) == []
        log = await memory.messages.log(resource_id="casa")
        assert all(secret not in str(e) for e in log)
    assert files_hold(db, secret) == []


async def test_postgres_erase_leaves_no_row_in_any_table() -> None:
    secret = marker()
    with pg_schema() as url:
        async with caderno.connect(url, embedder=None) as memory:
            await fill_resource(memory, secret)
            await memory.erase_resource(resource_id="casa")
            pool: Any = memory.store._pool  # type: ignore[attr-defined]
            async with pool.connection() as conn:
                tables = [
                    r[0]
                    for r in await (
                        await conn.execute(
                            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                        )
                    ).fetchall()
                ]
                assert {"events", "facts", "scheduled_tasks", "macros", "message_log"} <= set(tables)
                for table in tables:
                    row = await (
                        await conn.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s', (f"%{secret}%",))
                    ).fetchone()
                    assert row[0] == 0, table
            assert await memory.run(ops.ListTasks(resource_id="casa")) == []


def test_zz_erasure_summary() -> None:
    record_figure(
        "erasure",
        "erasure: {checks} file checks after erase/delete while open and after close, {bytes_found} bytes of erased text found",
        **FOUND,
    )
    assert FOUND["checks"] >= 8 and FOUND["bytes_found"] == 0
