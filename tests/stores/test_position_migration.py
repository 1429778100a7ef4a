"""Migration 0012: messages stored before positions existed get theirs, 1..n per thread in order."""

from __future__ import annotations

from pathlib import Path

from _migrations import sqlite_migrated_up_to

import caderno
from caderno import Message


def _database_before_positions(path: Path) -> None:
    """A caderno database as migration 0011 left it, with three threads written interleaved."""
    conn = sqlite_migrated_up_to(path, "0011_stemmed_full_text")
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
