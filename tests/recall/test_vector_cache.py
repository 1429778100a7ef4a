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
