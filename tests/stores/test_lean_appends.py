"""What a durable append writes on SQLite: the b-trees of one turn, named.

Every page a commit changes is one frame of the WAL, fsynced at the commit:
the b-trees a turn touches are the cost of a durable append. The test
reads the frames of one turn (their page numbers, mapped to b-trees by
``dbstat``) and names the b-trees it wrote, so an index added to the hot
path shows up here by name (migration 0017_lean_appends dropped one).
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import caderno
from caderno import Message

#: The b-trees a turn on a known thread writes, and why each is there.
TURN_BTREES = {
    "events",  # the two rows
    "sqlite_autoindex_events_1",  # UNIQUE (resource_id, id): a message is found by id
    "events_thread",  # a thread's messages in order
    "events_fact_candidates",  # the user message waits for fact extraction
    "embedding_queue",  # both messages wait for a vector, durably
    "embedding_queue_due",  # the worker claims jobs in the order they are due
    "sqlite_sequence",  # AUTOINCREMENT: a seq is never given twice
    "threads",  # the thread's positions are reserved on its row
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
