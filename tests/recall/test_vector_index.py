"""VectorIndex: the int8 pre-scan finds what exact search finds; small indexes stay exact."""

from __future__ import annotations

import numpy as np
import pytest

from caderno.memory import recall
from caderno.memory.recall import _Entry

pytest.importorskip("simsimd", reason="the pre-scan needs caderno[fast]")

DIM = 384
N = 120_000


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def big() -> tuple[_Entry, np.ndarray]:
    rng = np.random.default_rng(7)
    vecs = unit(rng.standard_normal((N, DIM), dtype=np.float32))
    entry = _Entry(DIM)
    for lo in range(0, N, 40_000):
        seqs = list(range(lo + 1, lo + 40_001))
        entry.add(seqs, [f"t{s % 7}" for s in seqs], vecs[lo : lo + 40_000].tobytes())
    return entry, vecs


def exact(entry: _Entry, q: np.ndarray, k: int, min_sim: float, thread: str | None) -> list[tuple[int, float]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recall, "PRESCAN_FROM", 10**12)
        return entry.search(q, k, min_sim, thread)


def queries(vecs: np.ndarray, n: int) -> np.ndarray:
    """Near real vectors: a stored vector plus noise of about its own size."""
    rng = np.random.default_rng(11)
    picks = vecs[rng.integers(0, len(vecs), n)]
    return unit(picks + unit(rng.standard_normal(picks.shape, dtype=np.float32)) * 0.8)


def same_top(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return [s for s, _ in a] == [s for s, _ in b] and np.allclose([v for _, v in a], [v for _, v in b], atol=1e-5)


def test_prescan_matches_exact_top10(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big
    qs = queries(vecs, 200)
    hits = sum(same_top(entry.search(q, 10, -1.0, None), exact(entry, q, 10, -1.0, None)) for q in qs)
    assert entry.i8 is not None  # the pre-scan ran
    assert hits >= 198


def test_isotropic_queries_match_exact(big: tuple[_Entry, np.ndarray]) -> None:
    entry, _ = big
    qs = unit(np.random.default_rng(5).standard_normal((50, DIM), dtype=np.float32))
    hits = sum(same_top(entry.search(q, 10, -1.0, None), exact(entry, q, 10, -1.0, None)) for q in qs)
    assert hits >= 49


@pytest.mark.parametrize("min_sim", [-1.0, 0.2, 0.6])
def test_thread_filter_and_threshold_match_exact(big: tuple[_Entry, np.ndarray], min_sim: float) -> None:
    entry, vecs = big
    for q in queries(vecs, 20):
        for thread in (None, "t3", "missing"):
            got = entry.search(q, 10, min_sim, thread)
            assert same_top(got, exact(entry, q, 10, min_sim, thread))
            assert all(v >= min_sim for _, v in got)
            if thread == "t3":
                assert all(s % 7 == 3 for s, _ in got)


def test_large_thread_uses_prescan_with_its_own_candidates(
    big: tuple[_Entry, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    entry, vecs = big
    monkeypatch.setattr(recall, "PRESCAN_FROM", 10_000)  # a thread of ~17k rows now pre-scans
    for q in queries(vecs, 20):
        got = entry.search(q, 10, -1.0, "t3")
        assert len(got) == 10 and all(s % 7 == 3 for s, _ in got)
        assert same_top(got, exact(entry, q, 10, -1.0, "t3"))


def test_small_index_is_exact_and_reembedding_updates_both_copies(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big
    small = _Entry(DIM)
    small.add([1, 2, 3], ["a", "b", "a"], vecs[:3].tobytes())
    assert small.search(vecs[1], 2, -1.0, None)[0] == (2, pytest.approx(1.0))
    assert small.i8 is None  # never quantized: exact only
    q = queries(vecs, 1)[0]
    entry.search(q, 10, -1.0, None)
    entry.add([5], ["t5"], q.tobytes())  # seq 5 re-embedded as the query itself
    assert entry.search(q, 1, -1.0, None) == [(5, pytest.approx(1.0, abs=1e-5))]
    entry.add([5], ["t5"], vecs[4].tobytes())  # back, for the other tests
    assert entry.search(q, 1, -1.0, None) == exact(entry, q, 1, -1.0, None)
