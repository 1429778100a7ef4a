"""What a durable append writes on SQLite, and the embedding claims that need no index on new jobs.

Every page a commit changes is one frame of the WAL, fsynced at the commit:
the b-trees a turn touches are the cost of a durable append. The first
test reads the frames of one turn (their page numbers, mapped to b-trees by
``dbstat``) and names the b-trees it wrote, so an index added to the hot
path shows up here by name (migrations 0017 and 0018 took two off it, 0023 to
0026 four more).
"""

from __future__ import annotations

import sqlite3
import struct
from datetime import datetime, timedelta
from pathlib import Path

from _migrations import sqlite_migrated_up_to

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.stores import _sqlite_plans, ops

#: The b-trees a turn on a known thread writes, and why each is there. Not written: the thread's
#: row (positions follow its newest message, migration 0023), the embedding queue (the messages
#: are marked in their rows, above the worker's watermark, 0024), the index of fact candidates
#: (this turn's user message is below the default threshold, 0025), sqlite_sequence (moved ahead
#: of the appends a block of seqs at a time, 0026).
TURN_BTREES = {
    "events",  # the two rows
    "sqlite_autoindex_events_1",  # UNIQUE (resource_id, id): a message is found by id
    "events_thread",  # a thread's messages in order
}


def wal_pages(wal: Path) -> tuple[list[int], int]:
    """The page number of each frame in ``wal``, and how many frames end a commit."""
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, commits, offset = [], 0, 32
    while offset + 24 + page_size <= len(data):
        page, db_size = struct.unpack(">II", data[offset : offset + 8])
        pages.append(page)
        commits += db_size != 0
        offset += 24 + page_size
    return pages, commits


async def test_a_turn_writes_its_rows_and_the_indexes_reads_use_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    memory = await caderno.connect(str(path), embedder=None)
    try:
        turn = [Message.user("quanto custa?"), Message.assistant("seis mil euros")]
        await memory.append_messages(resource_id="r", thread_id="t", messages=turn)
        pin = sqlite3.connect(path, isolation_level=None)
        pin.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pin.execute("BEGIN")  # a snapshot from before the turn: no checkpoint copies its frames away
        pin.execute("SELECT count(*) FROM sqlite_master").fetchone()
        turn = [Message.user("e o carro?"), Message.assistant("mais quatro mil")]
        await memory.append_messages(resource_id="r", thread_id="t", messages=turn)
        pages, commits = wal_pages(Path(f"{path}-wal"))
        pin.execute("COMMIT")
        owner = dict(pin.execute("SELECT pageno, name FROM dbstat").fetchall())
        pin.close()
    finally:
        await memory.close()
    assert commits == 1
    written = {owner[p] for p in pages if p != 1}  # page 1: the file header, written as the file grows
    assert written == TURN_BTREES


def _claim(limit: int, at: datetime) -> ops.ClaimEmbeddings:
    return ops.ClaimEmbeddings(limit=limit, lease_seconds=60, now=at)


async def test_new_jobs_come_in_order_then_taken_ones_once_due(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "c.db"), embedder=None)
    try:
        stored = await memory.append_messages(
            resource_id="r", thread_id="t", messages=[Message.user(f"m{i}") for i in range(4)]
        )
        seqs = [m.seq for m in stored]
        now = utcnow()
        first = await memory.run(_claim(2, now))
        assert [j.seq for j in first] == seqs[:2]
        assert [j.seq for j in await memory.run(_claim(10, now))] == seqs[2:]  # the leased two stay leased
        failed = tuple((j.resource_id, j.seq, "boom", 30.0) for j in first)
        await memory.run(ops.FinishEmbeddings(model="m", dim=1, done=(), failed=failed, now=now))
        assert await memory.run(_claim(10, now + timedelta(seconds=29))) == []  # backing off
        again = await memory.run(_claim(10, now + timedelta(seconds=31)))
        assert [(j.seq, j.attempts) for j in again] == [(seqs[0], 1), (seqs[1], 1)]
        # Later: the leases that ran out first (seqs 2 and 3, at +60 s), then the retries' (+91 s).
        later = await memory.run(_claim(3, now + timedelta(seconds=200)))
        assert [j.seq for j in later] == [seqs[2], seqs[3], seqs[0]]
    finally:
        await memory.close()


async def test_a_job_queued_below_others_is_claimed(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "c.db"), embedder=None)
    try:
        old = await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("old")])
        now = utcnow()
        (job,) = await memory.run(_claim(10, now))
        await memory.run(
            ops.FinishEmbeddings(model="m", dim=1, done=(("r", job.seq, b"\0\0\0\0"),), failed=(), now=now)
        )
        new = await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("new")])
        await memory.run(_claim(10, now))  # "new" is leased: the highest taken job is above "old"
        # A reindex queues "old" again, below a taken job: it must not be lost behind it.
        await memory.run(ops.Reindex(resource_id="r", embed_roles=frozenset({"user"})))
        claimed = await memory.run(_claim(10, now + timedelta(seconds=1)))
        assert old[0].seq in {j.seq for j in claimed} and new[0].seq not in {j.seq for j in claimed}
    finally:
        await memory.close()


async def test_a_claim_reads_no_backlog_of_failed_jobs(tmp_path: Path) -> None:
    await (await caderno.connect(str(tmp_path / "c.db"), embedder=None)).close()
    conn = sqlite3.connect(tmp_path / "c.db")
    new = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + _sqlite_plans._NEW_JOBS, (1,))]
    taken = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + _sqlite_plans._DUE_TAKEN_JOBS, ("", 1))]
    conn.close()
    # New jobs: a range of seq above the highest taken job (that index's last entry), no sort.
    assert new[0] == "SEARCH q USING INTEGER PRIMARY KEY (rowid>?)"
    assert "USING INDEX embedding_queue_taken_seq" in new[2] and not any("TEMP B-TREE" in p for p in new)
    assert taken[0] == "SEARCH q USING INDEX embedding_queue_taken (not_before<?)"


async def test_the_migration_marks_new_jobs_queued_below_a_taken_one(tmp_path: Path) -> None:
    conn = sqlite_migrated_up_to(tmp_path / "c.db", "0017_lean_appends")
    conn.execute("INSERT INTO threads (resource_id, thread_id, created_at) VALUES ('r', 't', '2026-01-01')")
    for seq in (1, 2, 3):
        conn.execute(
            "INSERT INTO events (seq, id, resource_id, thread_id, role, content, created_at) "
            "VALUES (?, ?, 'r', 't', 'user', 'm', '2026-01-01')",
            (seq, f"m{seq}"),
        )
    # seq 2 failed and waits; 1 (a reindex, say) and 3 are new, one on each side of it.
    conn.execute("INSERT INTO embedding_queue (seq, resource_id) VALUES (1, 'r'), (3, 'r')")
    conn.execute(
        "INSERT INTO embedding_queue (seq, resource_id, attempts, not_before) VALUES (2, 'r', 1, '2026-01-01')"
    )
    conn.close()
    memory = await caderno.connect(str(tmp_path / "c.db"), embedder=None)
    try:
        look = sqlite3.connect(tmp_path / "c.db")
        marks = look.execute("SELECT seq, not_before FROM embedding_queue ORDER BY seq").fetchall()
        look.close()
        assert marks == [(1, "0"), (2, "2026-01-01"), (3, "")]
        claimed = await memory.run(_claim(10, utcnow()))
        assert [j.seq for j in claimed] == [3, 1, 2]  # the new job, then the taken ones by when they are due
    finally:
        await memory.close()
