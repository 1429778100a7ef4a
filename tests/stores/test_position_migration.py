"""Migration 0012: messages stored before positions existed get theirs, 1..n per thread in order."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import caderno
from caderno import Message
from caderno.stores import _sqlite_schema


def _database_before_positions(path: Path) -> None:
    """A caderno database as migration 0011 left it, with three threads written interleaved."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for index, (name, statements) in enumerate(_sqlite_schema.MIGRATIONS[:11], start=1):
        for statement in statements:
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, '2026-01-01T00:00:00Z')", (name,))
        conn.execute(f"PRAGMA user_version = {index}")
    conn.execute("INSERT INTO resources (resource_id, created_at, updated_at) VALUES ('a', 'x', 'x'), ('b', 'x', 'x')")
    conn.execute(
        "INSERT INTO threads (resource_id, thread_id, created_at) VALUES ('a', 't', 'x'), ('a', 'u', 'x'), ('b', 't', 'x')"
    )
    for i, (rid, tid) in enumerate([("a", "t"), ("b", "t"), ("a", "u"), ("a", "t"), ("b", "t"), ("a", "t")]):
        conn.execute(
            "INSERT INTO events (resource_id, thread_id, id, kind, role, content, created_at) "
            "VALUES (?, ?, ?, 'message', 'user', ?, '2026-01-01T00:00:00Z')",
            (rid, tid, f"m{i}", f"{rid}{tid}{i}"),
        )
    conn.close()


async def test_existing_messages_get_their_positions_and_new_ones_follow(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _database_before_positions(path)
    async with caderno.connect(path, embedder=None) as memory:
        got = await memory.get_messages(resource_id="a", thread_id="t")
        assert [(m.content, m.position) for m in got] == [("at0", 1), ("at3", 2), ("at5", 3)]
        assert [m.position for m in await memory.get_messages(resource_id="b", thread_id="t")] == [1, 2]
        assert [m.position for m in await memory.get_messages(resource_id="a", thread_id="u")] == [1]
        new = await memory.append_messages(resource_id="a", thread_id="t", messages=[Message.user("next")])
        assert new[0].position == 4
