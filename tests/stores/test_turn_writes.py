"""SQLite: what a turn no longer writes, and the work that finds it all the same.

A turn writes its rows and the two indexes reads need (``test_lean_appends``
names them). The rest is found from what the rows hold: a message to embed
is marked in its row and taken by the worker from its watermark up
(migration 0024); the thread's positions follow its newest message, and its
row keeps only a deleted newest message's (0023); only a user message at or
above the default fact threshold enters the index of fact candidates (0025);
seqs follow the highest ever given, sqlite_sequence moved ahead of them a
block at a time (0026).
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from _migrations import sqlite_migrated_up_to

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.memory.engines.importance import embeddable
from caderno.memory.parts.consolidation import ConsolidationSettings
from caderno.stores import ops
from caderno.stores._sql import Q, run_plan_sync
from caderno.stores._sqlite_plans import SEQ_BLOCK, SQLITE
from caderno.stores.capabilities.consolidation import FACT_INDEX_FLOOR
from caderno.stores.sqlite import DIALECT

R = "casa"


def _claim(limit: int, resource_id: str | None = None, after: float = 0.0) -> ops.ClaimEmbeddings:
    return ops.ClaimEmbeddings(
        limit=limit, lease_seconds=60, now=utcnow() + timedelta(seconds=after), resource_id=resource_id
    )


def _done(jobs: list[ops.EmbeddingJob]) -> ops.FinishEmbeddings:
    return ops.FinishEmbeddings(
        model="m", dim=1, done=tuple((j.resource_id, j.seq, b"\0\0\0\0") for j in jobs), failed=(), now=utcnow()
    )


def _queue_rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq, not_before FROM embedding_queue ORDER BY seq").fetchall()


async def test_marked_messages_are_taken_once_in_order_and_counted_until_stored(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path, embedder=None) as memory:
        msgs = [Message.user("a"), Message.system("rules"), Message.assistant("b"), Message.user("c")]
        stored = await memory.append_messages(resource_id=R, thread_id="t", messages=msgs)
        wanted = [m.seq for m in stored if embeddable(m.role, m.content)]
        assert _queue_rows(path) == []  # the append wrote no queue row
        assert await memory.run(ops.CountPendingEmbeddings()) == 3
        first = await memory.run(_claim(2))
        assert [j.seq for j in first] == wanted[:2]
        rest = await memory.run(_claim(10))
        assert [j.seq for j in rest] == wanted[2:]
        assert await memory.run(_claim(10)) == []  # leased: nobody takes them again
        assert await memory.run(ops.CountPendingEmbeddings()) == 3  # leased jobs still wait
        await memory.run(_done(first + rest))
        assert await memory.run(ops.CountPendingEmbeddings()) == 0
        assert await memory.run(_claim(10, after=3600)) == []  # stored: never again, even when leases would run out
        more = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("d")])
        assert [j.seq for j in await memory.run(_claim(10))] == [more[0].seq]


async def test_a_resource_claim_takes_its_marked_messages_newest_first_and_nobody_takes_them_again(
    tmp_path: Path,
) -> None:
    async with caderno.connect(tmp_path / "c.db", embedder=None) as memory:
        ours, theirs = [], []
        for i in range(3):
            ours += await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user(f"o{i}")])
            theirs += await memory.append_messages(resource_id="x", thread_id="t", messages=[Message.user(f"x{i}")])
        assert await memory.run(ops.CountPendingEmbeddings(resource_id=R)) == 3
        newest = await memory.run(_claim(2, resource_id=R))
        assert [j.seq for j in newest] == [ours[2].seq, ours[1].seq]
        # The rest, once each: the others' below and above them, and our oldest.
        rest = await memory.run(_claim(10))
        assert sorted(j.seq for j in rest) == sorted([ours[0].seq, *(m.seq for m in theirs)])
        await memory.run(_done(newest + rest))
        assert await memory.run(ops.CountPendingEmbeddings()) == 0
        assert await memory.run(_claim(10, after=3600)) == []
        assert await memory.run(_claim(10, resource_id=R, after=3600)) == []


async def test_a_failed_marked_job_is_a_queue_row_retried_after_its_backoff(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path, embedder=None) as memory:
        (m,) = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("a")])
        (job,) = await memory.run(_claim(10))
        failed = ((R, job.seq, "boom", 30.0),)
        await memory.run(ops.FinishEmbeddings(model="m", dim=1, done=(), failed=failed, now=utcnow()))
        assert await memory.run(ops.CountPendingEmbeddings(failed=False)) == 0
        assert await memory.run(ops.CountPendingEmbeddings()) == 1
        assert await memory.run(_claim(10, after=10)) == []
        (again,) = await memory.run(_claim(10, after=40))
        assert (again.seq, again.attempts) == (m.seq, 1)


async def test_an_edit_decides_its_messages_job_in_the_queue(tmp_path: Path) -> None:
    async with caderno.connect(tmp_path / "c.db", embedder=None) as memory:
        stored = await memory.append_messages(
            resource_id=R, thread_id="t", messages=[Message.user("a"), Message.user("b")]
        )

        def edit(m: Message, embed: bool) -> ops.EditMessage:
            return ops.EditMessage(
                resource_id=R,
                message_id=m.id or "",
                content="new",
                rescore=lambda _m: (0.5, embed),
                actor="t",
                reason=None,
                now=utcnow(),
            )

        await memory.run(edit(stored[0], False))  # no vector wanted any more: its mark goes
        await memory.run(edit(stored[1], True))  # queued again: one job, not two
        assert await memory.run(ops.CountPendingEmbeddings()) == 1
        jobs = await memory.run(_claim(10))
        assert [(j.seq, j.content) for j in jobs] == [(stored[1].seq, "new")]
        assert await memory.run(_claim(10)) == []


async def test_a_database_from_before_the_watermark_keeps_its_queue_and_marks_what_comes(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite_migrated_up_to(path, "0022_item_documents")
    conn.execute("INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, 'x', 'x')", (R,))
    conn.execute(
        "INSERT INTO threads (resource_id, thread_id, created_at, last_position) VALUES (?, 't', 'x', 4)", (R,)
    )
    for p in (1, 2, 3):  # position 4 was popped: last_position keeps it
        conn.execute(
            "INSERT INTO events (resource_id, thread_id, id, role, content, created_at, position) "
            "VALUES (?, 't', ?, 'user', ?, '2026-01-01T00:00:00Z', ?)",
            (R, f"m{p}", f"old {p}", p),
        )
    conn.execute("INSERT INTO embedding_queue (seq, resource_id) SELECT seq, resource_id FROM events")
    conn.close()
    async with caderno.connect(path, embedder=None) as memory:
        assert await memory.run(ops.CountPendingEmbeddings()) == 3
        new = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("new")])
        assert new[0].position == 5
        assert await memory.run(ops.CountPendingEmbeddings(resource_id=R)) == 4
        jobs = await memory.run(_claim(10))
        assert sorted(j.content for j in jobs) == ["new", "old 1", "old 2", "old 3"]
        assert await memory.run(_claim(10)) == []


async def test_a_deleted_newest_messages_position_stays_taken_without_the_append_writing_the_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path, embedder=None) as memory:
        await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("a"), Message.user("b")])
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT last_position FROM threads").fetchone() == (0,)  # the appends left it
        await memory.messages.pop(resource_id=R, thread_id="t")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT last_position FROM threads").fetchone() == (2,)  # the deletion raised it
        again = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("c")])
        assert again[0].position == 3


def test_the_fact_index_holds_what_the_default_threshold_reads() -> None:
    assert ConsolidationSettings().fact_min_importance == FACT_INDEX_FLOOR


async def test_fact_candidates_come_off_the_index_at_the_default_threshold_and_below_it_all_the_same(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path, embedder=None) as memory:
        msgs = [Message.user("plain", importance=0.5), Message.user("key", importance=0.9)]
        stored = await memory.append_messages(resource_id=R, thread_id="t", messages=msgs)
        read = ops.ReadFactCandidates(resource_id=R, min_importance=FACT_INDEX_FLOOR, limit=10)
        everywhere = ops.ReadFactCandidates(resource_id=None, min_importance=FACT_INDEX_FLOOR, limit=10)
        lower = ops.ReadFactCandidates(resource_id=R, min_importance=0.5, limit=10)
        at, across, below = await memory.store.batch([read, everywhere, lower])
        assert [m.id for _, m in at] == [m.id for _, m in across] == [stored[1].id]
        assert [m.id for _, m in below] == [stored[0].id, stored[1].id]
    sent: list[str] = []
    with sqlite3.connect(path) as conn:

        def explain(q: Q) -> list[object]:
            sent.extend(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + q.sql, q.params))
            return []

        for op in (read, everywhere):
            run_plan_sync(SQLITE.handler(type(op))(DIALECT, op), explain)  # type: ignore[misc]
    assert sent and all("USING INDEX events_fact_candidates" in p for p in sent if " events" in p), sent


def _sequence(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()[0])


async def test_seqs_follow_commit_order_and_none_is_given_twice(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path, embedder=None) as memory:
        first = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("a")] * 3)
        assert [m.seq for m in first] == [1, 2, 3]
        assert _sequence(path) >= 3 + SEQ_BLOCK  # moved ahead: the next appends leave it be
        popped = await memory.messages.pop(resource_id=R, thread_id="t")
        assert popped is not None and popped.seq == 3
        again = await memory.append_messages(resource_id=R, thread_id="u", messages=[Message.user("b")])
        assert again[0].seq == 4  # after the highest ever given, not after the newest left
        # Any other insert (a summary here) takes AUTOINCREMENT's next, above every seq given.
        summary = memory.turns.prepare_messages([Message.system("s")])[0]
        write = ops.WriteSummary(resource_id=R, thread_id="t", summary=summary, covered=(1,), now=utcnow())
        assert await memory.run(write)
        with sqlite3.connect(path) as conn:
            (summary_seq,) = conn.execute("SELECT seq FROM events WHERE kind = 'summary'").fetchone()
        assert summary_seq > 4
        after = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("c")])
        assert after[0].seq == summary_seq + 1
        stored = await memory.get_messages(resource_id=R, thread_id="t")
        assert [(m.content, m.seq) for m in stored] == [("a", 1), ("a", 2), ("c", summary_seq + 1)]


async def test_a_database_from_before_keeps_the_seqs_its_sequence_gave(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite_migrated_up_to(path, "0025_fact_candidates_at_the_default_threshold")
    conn.execute("INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, 'x', 'x')", (R,))
    conn.execute("INSERT INTO threads (resource_id, thread_id, created_at) VALUES (?, 't', 'x')", (R,))
    for i in range(3):
        conn.execute(
            "INSERT INTO events (resource_id, thread_id, id, role, content, created_at, position) "
            "VALUES (?, 't', ?, 'user', 'x', '2026-01-01T00:00:00Z', ?)",
            (R, f"m{i}", i + 1),
        )
    conn.execute("DELETE FROM events WHERE seq = 3")  # AUTOINCREMENT remembers 3
    conn.close()
    async with caderno.connect(path, embedder=None) as memory:
        new = await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("y")])
        assert (new[0].seq, new[0].position) == (4, 4)
