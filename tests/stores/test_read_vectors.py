"""ReadVectors hands a resource's vectors over in blocks, with each thread's seqs, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines.vector_cache import VectorIndex, _Entry, code_dtype, quantize
from caderno.stores import ops
from caderno.stores.capabilities import recall

DIM = 32


def as_rows(rows: ops.VectorRows) -> dict[int, bytes]:
    """``{seq: codes}`` of the float32 vectors (quantized here) and of the stored codes, the later
    copy of a seq read twice winning, as the cache keeps them."""
    floats = len(rows.seqs) - rows.coded
    blob = b"".join(rows.vectors)
    assert len(blob) == floats * DIM * 4
    codes = np.frombuffer(blob, dtype=np.float32).reshape(-1, DIM)
    codes = np.concatenate([quantize(codes), np.frombuffer(b"".join(rows.codes), dtype=code_dtype(DIM))])
    assert len(codes) == len(rows.seqs)
    return {seq: code.tobytes() for seq, code in zip(rows.seqs, codes, strict=True)}


async def stored(memory: caderno.Memory, emb: HashingEmbedder, thread_id: str) -> dict[int, bytes]:
    """What each message of the thread should have as its codes: the embedder's float32 vector's."""
    messages = await memory.run(ops.ReadThread(resource_id="r", thread_id=thread_id))
    vecs = emb.embed([m.content for m in messages])
    return {m.seq or 0: quantize([v]).tobytes() for m, v in zip(messages, vecs, strict=True)}


async def test_blocks_hold_every_vector_with_its_thread_first_load_and_refresh(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall, "VECTOR_READ_CHUNK", 4)
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        for thread_id, n in (("a", 10), ("b", 7)):
            await memory.append_messages(
                resource_id="r", thread_id=thread_id, messages=[Message.user(f"{thread_id} note {i}") for i in range(n)]
            )
        await memory.append_messages(resource_id="other", thread_id="a", messages=[Message.user("not this one")])
        await memory.flush()
        want = {"a": await stored(memory, emb, "a"), "b": await stored(memory, emb, "b")}

        first = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        # Four vectors a statement on SQLite; PostgreSQL reads past its overlap window a statement.
        assert len(first.seqs) == first.coded == 17 and len(first.codes) == (1 if db_url.startswith("postgres") else 5)
        assert as_rows(first) == {**want["a"], **want["b"]}
        for thread_id in ("a", "b"):
            assert set(want[thread_id]) <= set(first.threads[thread_id])

        await memory.append_messages(resource_id="r", thread_id="b", messages=[Message.user("b note 7")])
        await memory.flush()
        again = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=first.last_id))
        new = set(await stored(memory, emb, "b")) - set(want["b"])
        assert again.last_id > first.last_id and new <= set(again.seqs)
        assert new <= set(again.threads["b"]) and not new & set(again.threads.get("a", []))
        nothing = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=again.last_id))
        assert nothing.last_id == again.last_id and set(nothing.seqs) <= set(again.seqs)


async def test_a_chunked_load_searches_like_one_block(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        for thread_id in ("a", "b", "c"):
            await memory.append_messages(
                resource_id="r",
                thread_id=thread_id,
                messages=[Message.user(f"{thread_id} said thing {i}") for i in range(20)],
            )
        await memory.flush()
        q = emb.embed(["b said thing 3"])[0]
        whole = {t: await VectorIndex().search(memory.run, "r", emb.name, DIM, q, 5, -1.0, t) for t in (None, "b")}
        monkeypatch.setattr(recall, "VECTOR_READ_CHUNK", 7)
        index = VectorIndex()
        for thread_id, hits in whole.items():
            assert await index.search(memory.run, "r", emb.name, DIM, q, 5, -1.0, thread_id) == hits
        b_seqs = set(await stored(memory, emb, "b"))
        assert {seq for seq, _ in whole["b"]} <= b_seqs and whole["b"][0][1] == pytest.approx(1.0, abs=1e-4)


async def test_threads_come_as_asked(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        for thread_id, n in (("a", 5), ("b", 3)):
            await memory.append_messages(
                resource_id="r", thread_id=thread_id, messages=[Message.user(f"{thread_id} note {i}") for i in range(n)]
            )
        await memory.flush()
        want = {t: set(await stored(memory, emb, t)) for t in ("a", "b")}
        eager = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        bare = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0, threads="none"))
        assert bare.threads == {} and bare.seqs == eager.seqs and bare.codes == eager.codes
        assert bare.last_id == eager.last_id
        # Past every vector: nothing new, yet every message's thread when asked for all of them.
        late = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=eager.last_id, threads="all"))
        assert {t: set(s) for t, s in late.threads.items()} == want
        new = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=eager.last_id))
        assert set(new.seqs) <= want["a"] | want["b"] and all(set(s) <= set(new.seqs) for s in new.threads.values())


@pytest.mark.parametrize("overlap", [0, 3])
async def test_ids_below_the_window_are_read_once_and_those_in_it_again(
    db_url: str, monkeypatch: pytest.MonkeyPatch, overlap: int
) -> None:
    """A small chunk and overlap window on either backend: every vector comes, with its own codes;
    those more than the window below the resource's newest come once, those in it maybe twice."""
    from dataclasses import replace

    from caderno.stores import postgres, sqlite

    monkeypatch.setattr(recall, "VECTOR_READ_CHUNK", 4)
    for store in (sqlite, postgres):
        monkeypatch.setattr(store, "DIALECT", replace(store.DIALECT, feed_overlap=overlap))
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        for thread_id, n in (("a", 9), ("b", 8)):
            await memory.append_messages(
                resource_id="r", thread_id=thread_id, messages=[Message.user(f"{thread_id} note {i}") for i in range(n)]
            )
            await memory.append_messages(resource_id="other", thread_id="a", messages=[Message.user("elsewhere")])
        await memory.flush()
        want = {**await stored(memory, emb, "a"), **await stored(memory, emb, "b")}
        first = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0, threads="none"))
        assert as_rows(first) == want
        assert len(first.seqs) - len(set(first.seqs)) <= 4 * overlap  # each statement in the window re-reads it
        if not overlap:
            assert len(first.seqs) == len(want) and len(first.codes) == 5  # 17 vectors, 4 a statement
        # The vector cache's first load takes the same blocks as they are read: the same rows, the same hits.
        gathered = _Entry(DIM)
        gathered.load(first.seqs, first.vectors, first.threads, first.codes)
        q = emb.embed(["b note 3"])[0]
        index = VectorIndex()
        assert await index.search(memory.run, "r", emb.name, DIM, q, 5, -1.0, None) == gathered.search(q, 5, -1.0, None)
        assert index._entries[("r", emb.name)].sorted_seqs.tolist() == sorted(want)

        await memory.append_messages(resource_id="r", thread_id="b", messages=[Message.user("b note 8")])
        await memory.flush()
        again = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=first.last_id))
        fresh = {**await stored(memory, emb, "a"), **await stored(memory, emb, "b")}
        assert set(fresh) - set(want) <= set(again.seqs) and again.last_id > first.last_id
        assert as_rows(again) == {seq: fresh[seq] for seq in set(again.seqs)}


async def test_blocks_go_to_the_sink_as_they_are_read(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``into``: told how many vectors to expect first, then handed every block the result would hold,
    in the same order; the result keeps the rest (threads, position) and no block."""
    monkeypatch.setattr(recall, "VECTOR_READ_CHUNK", 4)
    emb = HashingEmbedder(DIM)

    class Sink:
        def __init__(self) -> None:
            self.calls: list[tuple[str, Any]] = []

        def expect(self, vectors: int) -> None:
            self.calls.append(("expect", vectors))

        def take(self, seqs: list[int], block: bytes, coded: bool) -> None:
            self.calls.append(("take", (seqs, block, coded)))

    async with caderno.connect(db_url, embedder=emb) as memory:
        await memory.append_messages(
            resource_id="r", thread_id="a", messages=[Message.user(f"a note {i}") for i in range(10)]
        )
        await memory.flush()
        gathered = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0, threads="all"))
        sink = Sink()
        rows = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0, threads="all", into=sink))
        assert sink.calls[0] == ("expect", 10) and all(kind == "take" for kind, _ in sink.calls[1:])
        taken = [call for _, call in sink.calls[1:]]
        assert [s for seqs, _, _ in taken for s in seqs] == gathered.seqs
        assert [block for _, block, _ in taken] == gathered.codes and all(coded for *_, coded in taken)
        assert rows.seqs == [] and rows.codes == [] and rows.vectors == [] and rows.coded == 0
        assert rows.threads == gathered.threads and rows.last_id == gathered.last_id
