"""The summary_spans migration: summaries stored with ``covers`` in seqs get ``span`` in positions.

The database is a real one (a SQLite file, a PostgreSQL schema) written by
caderno itself, with summaries in the old form written below the
consolidation layer, as an older caderno wrote them.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from _migrations import migration

import caderno
from caderno import Message
from caderno.core.clock import new_id, utcnow
from caderno.memory.parts.consolidation import summary_span
from caderno.stores import ops

SPANS = "0014_summary_spans"


def old_summary(text: str, covers: tuple[int, int], count: int, merged: int = 0) -> Message:
    """A summary as caderno wrote it before spans: ``covers`` holds seqs."""
    meta: dict[str, Any] = {"covers": list(covers), "count": count, "summarizer": "extractive"}
    if merged:
        meta["merged_summaries"] = merged
    return Message.system(text, id=new_id(), created_at=utcnow(), metadata=meta)


async def write_old(memory: caderno.Memory, rid: str, tid: str, summary: Message, covered: list[int]) -> int:
    assert await memory.run(
        ops.WriteSummary(resource_id=rid, thread_id=tid, summary=summary, covered=tuple(covered), now=utcnow())
    )
    found = await memory.consolidation.summaries(resource_id=rid, thread_id=tid)
    return found[-1][0].seq or 0


async def seed(url: str) -> None:
    """Resource a's thread t interleaved with b's writes; old-form summaries, one merged, one over a deleted message."""
    async with caderno.connect(url, embedder=None) as memory:
        t: list[Message] = []
        for i in range(5):
            t += await memory.append_messages(resource_id="a", thread_id="t", messages=[Message.user(f"a/t {i}")])
            await memory.append_messages(resource_id="b", thread_id="t", messages=[Message.user(f"b/t {i}")] * 2)
        # A message (not a summary) whose own metadata says "covers": it is the user's, never touched.
        await memory.append_messages(
            resource_id="a", thread_id="t", messages=[Message.user("mine", metadata={"covers": [7, 9]})]
        )
        seqs = [m.seq or 0 for m in t]
        first = await write_old(memory, "a", "t", old_summary("first three", (seqs[0], seqs[2]), 3), seqs[:3])
        second = await write_old(memory, "a", "t", old_summary("next two", (seqs[3], seqs[4]), 2), seqs[3:])
        both = old_summary("all five", (seqs[0], seqs[4]), 5, merged=2)
        await write_old(memory, "a", "t", both, [first, second])
        (gone,) = await memory.append_messages(resource_id="a", thread_id="u", messages=[Message.user("soon gone")])
        await write_old(memory, "a", "u", old_summary("of a deleted message", (gone.seq or 0,) * 2, 1), [gone.seq or 0])
        await memory.messages.delete(resource_id="a", message_id=gone.id or "")


def sqlite_rows(path: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq, kind, metadata FROM events ORDER BY seq").fetchall()


def sqlite_migrate(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for statement in migration(SPANS):
            conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()


def pg_parts(url: str) -> tuple[str, str]:
    base, schema = url.split("?schema=")
    return base, schema


def pg_rows(url: str) -> list[tuple[Any, ...]]:
    import psycopg

    base, schema = pg_parts(url)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        return conn.execute("SELECT seq, kind, metadata FROM events ORDER BY seq").fetchall()


def pg_migrate(url: str) -> None:
    import psycopg

    base, schema = pg_parts(url)
    with psycopg.connect(base) as conn:  # one transaction, committed on leaving
        conn.execute(f'SET search_path TO "{schema}"')
        (script,) = migration(SPANS, dialect="postgresql")
        conn.execute(script)


def meta(rows: list[tuple[Any, ...]], kind: str) -> list[dict[str, Any] | None]:
    return [json.loads(m) if m is not None else None for _, k, m in rows if k == kind]


async def test_old_summaries_get_spans_in_positions_and_lose_their_seqs(shared_url: str) -> None:
    # shared_url is a SQLite file's path, or a PostgreSQL URL with its own schema.
    rows, migrate = (pg_rows, pg_migrate) if "://" in shared_url else (sqlite_rows, sqlite_migrate)
    await seed(shared_url)
    before = rows(shared_url)
    assert all("covers" in m for m in meta(before, "summary") if m)  # the old form is really there

    migrate(shared_url)
    after = rows(shared_url)
    # Messages are untouched, byte for byte (the user's own "covers" included).
    assert [r for r in after if r[1] == "message"] == [r for r in before if r[1] == "message"]
    summaries = meta(after, "summary")
    assert all(m is not None and "covers" not in m for m in summaries)
    assert [m.get("span") for m in summaries if m] == [[1, 3], [4, 5], [1, 5], None]
    assert [(m["count"], m.get("merged_summaries")) for m in summaries if m] == [
        (3, None),
        (2, None),
        (5, 2),
        (1, None),
    ]

    migrate(shared_url)  # a second run finds nothing to convert
    assert rows(shared_url) == after

    async with caderno.connect(shared_url, embedder=None) as memory:
        spans = [summary_span(s) for s, _ in await memory.consolidation.summaries(resource_id="a", thread_id="t")]
        assert spans == [(1, 3), (4, 5), (1, 5)]
        ((gone, _),) = await memory.consolidation.summaries(resource_id="a", thread_id="u")
        assert summary_span(gone) is None
