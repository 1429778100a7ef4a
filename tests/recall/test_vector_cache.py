"""The vector cache's rows: re-read and re-embedded seqs, growth, the numpy scan, a large first load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines import vector_cache
from caderno.memory.engines.vector_cache import VectorIndex, _Entry

DIM = 48


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def vectors(n: int, seed: int = 1) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal((n, DIM), dtype=np.float32))


def test_rows_are_found_by_seq_in_any_order_and_replaced_not_added() -> None:
    vecs = vectors(7)
    entry = _Entry(DIM)
    entry.add([10, 3, 7], ["a", "b", "a"], vecs[:3].tobytes())
    # 7 again (re-read through the overlap window, re-embedded), a newer and an older seq, and 12 twice
    entry.add([7, 12, 1, 12], ["a", "b", "c", "b"], vecs[[3, 4, 5, 6]].tobytes())
    assert entry.n == 5
    assert entry.sorted_seqs.tolist() == [1, 3, 7, 10, 12]
    assert entry.seqs[entry.order].tolist() == [1, 3, 7, 10, 12]
    for seq, row in ((10, 0), (3, 1), (7, 3), (1, 5), (12, 6)):  # 12: the last of its two vectors
        assert entry.search(vecs[row], 1, -1.0, None) == [(seq, pytest.approx(1.0, abs=1e-5))]
    for gone in (2, 4):  # 7's first vector, 12's first
        assert entry.search(vecs[gone], 1, -1.0, None)[0][1] < 0.9
    assert [s for s, _ in entry.search(vecs[5], 5, -1.0, "c")] == [1]


def test_growth_keeps_every_row_and_spare_room_stays_small() -> None:
    vecs = vectors(3_000, seed=2)
    entry = _Entry(DIM)
    for lo in range(0, 3_000, 100):
        entry.add(list(range(lo + 1, lo + 101)), [f"t{lo // 500}"] * 100, vecs[lo : lo + 100].tobytes())
    assert entry.n == 3_000 and len(entry.seqs) <= 1.25 * 3_000 + 1_024
    for i in (0, 999, 1_500, 2_999):
        assert entry.search(vecs[i], 1, -1.0, None) == [(i + 1, pytest.approx(1.0, abs=1e-5))]
    rebuilt = entry.vectors(np.arange(3_000))
    assert np.abs(rebuilt - vecs).max() < 1e-5


def test_numpy_scan_without_simsimd_finds_the_exact_top(monkeypatch: pytest.MonkeyPatch) -> None:
    vecs = vectors(5_000, seed=3)
    entry = _Entry(DIM)
    entry.add(list(range(1, 5_001)), ["t"] * 5_000, vecs.tobytes())
    monkeypatch.setattr(vector_cache, "_int8_kernel", lambda: None)
    for q in vectors(20, seed=4):
        got = entry.search(q, 10, -1.0, None)
        sims = vecs @ q
        want = np.sort(sims)[::-1][:10]
        assert np.allclose([v for _, v in got], want, atol=1e-5)
        assert np.allclose([sims[s - 1] for s, _ in got], [v for _, v in got], atol=1e-5)


async def test_a_large_first_load_gives_the_same_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = HashingEmbedder(32)
    async with caderno.connect(tmp_path / "c.db", embedder=emb) as memory:
        await memory.append_messages(
            resource_id="a", thread_id="t", messages=[Message.user(f"note {i} about the garden") for i in range(300)]
        )
        await memory.flush()
        q = emb.embed(["note 7 about the garden"])[0]
        inline = await VectorIndex().search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None)
        monkeypatch.setattr(vector_cache, "BIG_LOAD", 100)  # now a load worth a worker thread and a heap trim
        index = VectorIndex()
        assert await index.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None) == inline
        assert index._entries[("a", emb.name)].n == 300
        await memory.append_messages(resource_id="a", thread_id="t", messages=[Message.user("note 7 about the garden")])
        await memory.flush()
        again = await index.search(memory.run, "a", emb.name, emb.dim, q, 1, -1.0, None)
        assert again[0][1] == pytest.approx(1.0, abs=1e-5) and index._entries[("a", emb.name)].n == 301


def test_a_load_takes_its_blocks_and_trimming_between_them_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Codes in several blocks, the heap handed back between each (as a 100k load does every 16 MB):
    the same rows as one block of float32, and the blocks' lists left empty (the cache holds no copy)."""
    vecs = vectors(2_000, seed=5)
    seqs = list(range(1, 2_001))
    threads = {"a": seqs[::2], "b": seqs[1::2]}
    whole = _Entry(DIM)
    whole.load(seqs, [vecs.tobytes()], threads)
    codes = vector_cache.quantize(vecs)
    blocks = [codes[lo : lo + 300].tobytes() for lo in range(0, 2_000, 300)]
    monkeypatch.setattr(vector_cache, "TRIM_EVERY", 2 * len(blocks[0]))
    trimmed = []
    monkeypatch.setattr(vector_cache, "_trim_heap", lambda: trimmed.append(1))
    entry, floats = _Entry(DIM), [b""]
    entry.load(seqs, floats, threads, blocks)
    assert blocks == [] and floats == [] and len(trimmed) == 3
    for name in ("hi", "lo", "hi_scale", "lo_scale", "seqs", "thread_codes"):
        assert np.array_equal(getattr(entry, name)[: entry.n], getattr(whole, name)[: whole.n])
    for q in vectors(5, seed=6):
        for thread in (None, "a"):
            assert entry.search(q, 10, -1.0, thread) == whole.search(q, 10, -1.0, thread)


async def test_threads_are_read_once_a_search_within_one_needs_them(tmp_path: Path) -> None:
    """A first load for the whole resource reads no threads; the first search within a thread reads
    every message's, then each refresh the new vectors'; the hits are those of a cache that read them at once."""
    emb = HashingEmbedder(32)
    async with caderno.connect(tmp_path / "t.db", embedder=emb) as memory:
        for t in range(4):
            await memory.append_messages(
                resource_id="a", thread_id=f"t{t}", messages=[Message.user(f"note {i} of {t}") for i in range(40)]
            )
        await memory.flush()
        q = emb.embed(["note 7 of 2"])[0]
        lazy, eager = VectorIndex(), VectorIndex()
        assert await eager.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, "t2")  # threads at once
        assert lazy.feed("a", emb.name).threads == "none"
        assert await lazy.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None) == await eager.search(
            memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None
        )
        entry = lazy._entries[("a", emb.name)]
        assert entry.unthreaded and not entry.code_of
        assert lazy.feed("a", emb.name, "t2").threads == "all"
        for thread in ("t2", "t0", "missing"):
            want = await eager.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, thread)
            assert await lazy.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, thread) == want
        assert not entry.unthreaded and lazy.feed("a", emb.name).threads == "new"

        await memory.append_messages(resource_id="a", thread_id="t3", messages=[Message.user("note 7 of 2")])
        await memory.flush()
        for thread in ("t3", "t2", None):
            want = await eager.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, thread)
            assert await lazy.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, thread) == want
        assert (await lazy.search(memory.run, "a", emb.name, emb.dim, q, 1, -1.0, "t3"))[0][1] == pytest.approx(1.0)


def test_rows_appended_as_they_come_are_found_like_rows_loaded_at_once() -> None:
    """A first load's rows (``extend``, then ``finish``): out of seq order, and a seq twice (its later row
    kept), float32 and codes mixed, the same cache as ``load`` makes of the same vectors."""
    vecs = vectors(900, seed=8)
    seqs = [*range(500, 0, -1), 250, 7, *range(501, 899)]  # 250 and 7 again, later: rows 500 and 501 win
    threads = {"a": seqs[::3], "b": seqs[1::3], "c": seqs[2::3]}
    whole = _Entry(DIM)
    whole.load(seqs, [vecs[:400].tobytes()], threads, [vector_cache.quantize(vecs[400:]).tobytes()])
    streamed = _Entry(DIM)
    streamed.extend(seqs[:400], vecs[:400].tobytes(), coded=False)
    for lo in range(400, 900, 128):
        streamed.extend(seqs[lo : lo + 128], vector_cache.quantize(vecs[lo : lo + 128]).tobytes(), coded=True)
    streamed.finish(threads)
    assert streamed.n == whole.n == 898
    assert streamed.sorted_seqs.tolist() == whole.sorted_seqs.tolist() == list(range(1, 899))
    for seq, row in ((250, 500), (7, 501), (1, 499)):
        assert streamed.search(vecs[row], 1, -1.0, None) == [(seq, pytest.approx(1.0, abs=1e-5))]
    for q in vectors(10, seed=9):
        for thread in (None, "b"):
            assert streamed.search(q, 10, -1.0, thread) == whole.search(q, 10, -1.0, thread)


async def test_a_first_load_holds_a_block_or_two_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store hands a first load's blocks over as it reads them: the memory the load allocates
    peaks at its rows and a block or two (the one read, the one before it), not its rows and all
    twelve blocks (as a refresh's load does)."""
    import tracemalloc

    from caderno.core.clock import utcnow
    from caderno.stores import ops
    from caderno.stores.capabilities import recall

    dim, n = 384, 12_000
    rng = np.random.default_rng(10)
    async with caderno.connect(tmp_path / "big.db", embedder=None) as memory:
        messages = []
        for t in range(n // 1_000):
            messages += await memory.append_messages(
                resource_id="r", thread_id=f"t{t}", messages=[Message.user(f"m{i}") for i in range(1_000)]
            )
        vecs = unit(rng.standard_normal((n, dim), dtype=np.float32))
        codes = vector_cache.quantize(vecs)
        await memory.run(
            ops.FinishEmbeddings(
                model="m",
                dim=dim,
                done=tuple(("r", m.seq or 0, v.tobytes()) for m, v in zip(messages, vecs, strict=True)),
                failed=(),
                now=utcnow(),
                codes=tuple(c.tobytes() for c in codes),
            )
        )
        monkeypatch.setattr(recall, "VECTOR_READ_CHUNK", 1_024)
        block = recall.VECTOR_READ_CHUNK * codes.itemsize
        peaks = {}
        for name in ("streamed", "gathered"):
            index = VectorIndex()
            feed = index.feed("r", "m")
            if name == "gathered":  # the whole read first, as a refresh reads
                feed = ops.ReadVectors(resource_id="r", model="m", after_id=0, threads="none")
            tracemalloc.start()
            hits = await index.search_rows(feed, dim, await memory.run(feed), vecs[5], 3, -1.0, None)
            peaks[name] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert hits[0] == (messages[5].seq, pytest.approx(1.0, abs=1e-5))
            entry = index._entries[("r", "m")]
            assert entry.n == n
        assert peaks["streamed"] < entry.nbytes + 4 * block < entry.nbytes + 10 * block < peaks["gathered"]
