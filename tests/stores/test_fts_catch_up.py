"""A SQLite search indexes what is not yet indexed first, and skips that trip when nothing is.

Full text is indexed in batches after appends; a search catches the index up
(a write, through the single writer) so it finds every committed message.
When everything this store committed is indexed and no other connection has
committed since, the search goes straight to its read. Real SQLite files;
"another process" is a second ``Memory`` on the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import caderno
from caderno import Message
from caderno.stores import ops
from caderno.stores.sqlite import SQLiteStore


def _writes(store: SQLiteStore) -> list[Any]:
    """Record every trip through the writer (the calls still run)."""
    seen: list[Any] = []
    write = store._write

    async def counted(fn: Any, *args: Any, **kw: Any) -> Any:
        seen.append(fn)
        return await write(fn, *args, **kw)

    store._write = counted  # type: ignore[method-assign]
    return seen


async def _search(memory: Any, word: str) -> list[int]:
    hits = await memory.run(ops.LexicalSearch(resource_id="casa", terms=(word,), limit=10, thread_id=None))
    return [seq for seq, _ in hits]


async def test_a_second_search_with_nothing_new_makes_no_write(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "f.db"), embedder=None)
    try:
        await memory.append_messages(
            resource_id="casa", thread_id="t", messages=[Message.user("Amsterdam em setembro")]
        )
        store = memory.store
        assert isinstance(store, SQLiteStore)
        writes = _writes(store)
        assert len(await _search(memory, "amsterdam")) == 1
        assert len(writes) == 1  # the first search indexed the append
        assert len(await _search(memory, "amsterdam")) == 1
        assert len(writes) == 1  # nothing new: no catch-up
        await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("Amsterdam de novo")])
        assert len(await _search(memory, "amsterdam")) == 2  # a write since: caught up again
    finally:
        await memory.close()


async def test_an_edit_and_another_process_s_append_are_found_at_once(tmp_path: Path) -> None:
    db = str(tmp_path / "f.db")
    memory = await caderno.connect(db, embedder=None)
    other = await caderno.connect(db, embedder=None)
    try:
        (stored,) = await memory.append_messages(
            resource_id="casa", thread_id="t", messages=[Message.user("guardamos para Lisboa")]
        )
        assert stored.id is not None and stored.seq is not None
        assert await _search(memory, "lisboa") == [stored.seq]
        await memory.messages.edit(resource_id="casa", message_id=stored.id, content="guardamos para Amsterdam")
        assert await _search(memory, "lisboa") == []
        assert await _search(memory, "amsterdam") == [stored.seq]
        (theirs,) = await other.append_messages(
            resource_id="casa", thread_id="u", messages=[Message.user("Amsterdam em setembro")]
        )
        assert theirs.seq is not None
        assert sorted(await _search(memory, "amsterdam")) == sorted([stored.seq, theirs.seq])
    finally:
        await other.close()
        await memory.close()


async def test_another_process_s_append_is_found_after_a_read_noticed_it_first(tmp_path: Path) -> None:
    """The sign of another connection's commit is read once; a read that takes it first must not hide it."""
    db = str(tmp_path / "f.db")
    memory = await caderno.connect(db, embedder=None)
    other = await caderno.connect(db, embedder=None)
    try:
        await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("Amsterdam antes")])
        assert len(await _search(memory, "amsterdam")) == 1  # caught up: nothing left to index
        await memory.get_messages(resource_id="casa", thread_id="t")  # the thread cache, fresh
        await other.append_messages(resource_id="casa", thread_id="u", messages=[Message.user("Amsterdam depois")])
        await memory.get_messages(resource_id="casa", thread_id="t")  # notices the other's commit first
        assert len(await _search(memory, "amsterdam")) == 2
    finally:
        await other.close()
        await memory.close()
