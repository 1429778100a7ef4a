"""Migration 0013: messages indexed before index-time context are indexed again with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from _migrations import postgres_migrated_up_to, sqlite_migrated_up_to
from _pg import pg_schema

import caderno
from caderno import Message
from caderno.core.text import stems

ROWS = [
    ("a", "t", "how much is the car insurance?", "2023-05-08T13:56:00.000000+00:00"),
    ("a", "u", "Risotto tonight.", "2023-05-08T14:00:00.000000+00:00"),
    ("a", "t", "R$ 310 a month", "2023-05-08T13:57:00.000000+00:00"),
    ("b", "t", "Pizza tonight.", "2023-07-01T10:00:00.000000+00:00"),
]


def _database_before_context(path: Path) -> None:
    """A caderno database as migration 0012 left it, every message in the old full-text index."""
    conn = sqlite_migrated_up_to(path, "0012_thread_positions")
    conn.execute("INSERT INTO resources (resource_id, created_at, updated_at) VALUES ('a', 'x', 'x'), ('b', 'x', 'x')")
    conn.execute(
        "INSERT INTO threads (resource_id, thread_id, created_at) VALUES ('a', 't', 'x'), ('a', 'u', 'x'), ('b', 't', 'x')"
    )
    for i, (rid, tid, content, created_at) in enumerate(ROWS):
        conn.execute(
            "INSERT INTO events (resource_id, thread_id, id, kind, role, content, created_at, position) "
            "VALUES (?, ?, ?, 'message', 'user', ?, ?, ?)",
            (rid, tid, f"m{i}", content, created_at, i + 1),
        )
        conn.execute(
            "INSERT INTO events_fts (rowid, terms) VALUES (last_insert_rowid(), ?)", (" ".join(stems(content)),)
        )
    conn.execute("UPDATE fts_state SET indexed_upto = (SELECT max(seq) FROM events)")
    conn.close()


async def lexical(memory: caderno.Memory, rid: str, query: str) -> list[str]:
    hits = await memory.recall(resource_id=rid, query=query, recent=0, salient=0, relevant=0, lexical=10)
    return sorted(h.message.content for h in hits)


async def test_messages_indexed_before_are_found_by_their_neighbours_and_their_day(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _database_before_context(path)
    async with caderno.connect(path, embedder=None) as memory:
        assert await lexical(memory, "a", "car insurance") == ["R$ 310 a month", "how much is the car insurance?"]
        assert await lexical(memory, "a", "maio") == [
            "R$ 310 a month",
            "Risotto tonight.",
            "how much is the car insurance?",
        ]
        assert await lexical(memory, "b", "julho") == ["Pizza tonight."]
        assert await lexical(memory, "b", "car insurance") == []
        # And the index keeps up from there: a new message is context for the one before it.
        await memory.append_messages(resource_id="a", thread_id="u", messages=[Message.user("with mushrooms")])
        assert await lexical(memory, "a", "mushrooms") == ["Risotto tonight.", "with mushrooms"]
    conn = sqlite3.connect(path)
    try:
        applied = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
        assert (
            "0013_index_time_context" in applied
            and applied.index("0013_index_time_context") == applied.index("0012_thread_positions") + 1
        )
    finally:
        conn.close()


async def test_postgres_messages_indexed_before_are_found_by_their_neighbours_and_their_day() -> None:
    import psycopg

    with pg_schema() as url:
        base, schema = url.split("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            postgres_migrated_up_to(conn, "0012_thread_positions")
            conn.execute("INSERT INTO resources VALUES ('a', NULL, 0, now(), now()), ('b', NULL, 0, now(), now())")
            conn.execute(
                "INSERT INTO threads (resource_id, thread_id, created_at) "
                "VALUES ('a', 't', now()), ('a', 'u', now()), ('b', 't', now())"
            )
            for i, (rid, tid, content, created_at) in enumerate(ROWS):
                conn.execute(
                    "INSERT INTO events (resource_id, thread_id, id, role, content, created_at, position) "
                    "VALUES (%s, %s, %s, 'user', %s, %s, %s)",
                    (rid, tid, f"m{i}", content, created_at, i + 1),
                )
        async with caderno.connect(url, embedder=None) as memory:
            assert await lexical(memory, "a", "car insurance") == ["R$ 310 a month", "how much is the car insurance?"]
            assert await lexical(memory, "a", "maio") == [
                "R$ 310 a month",
                "Risotto tonight.",
                "how much is the car insurance?",
            ]
            assert await lexical(memory, "b", "julho") == ["Pizza tonight."]
            assert await lexical(memory, "b", "car insurance") == []
            await memory.append_messages(resource_id="a", thread_id="u", messages=[Message.user("with mushrooms")])
            assert await lexical(memory, "a", "mushrooms") == ["Risotto tonight.", "with mushrooms"]
