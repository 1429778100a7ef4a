"""VectorIndex: the int8 pre-scan and two-level rescoring find what exact float32 search finds."""

from __future__ import annotations

import numpy as np
import pytest

from caderno.memory.engines.vector_cache import _Entry

pytest.importorskip("simsimd", reason="the pre-scan needs caderno[fast]")

DIM = 384
N = 120_000


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def big() -> tuple[_Entry, np.ndarray]:
    """The cache and the float32 vectors it was given (the exact answer is computed from those)."""
    rng = np.random.default_rng(7)
    vecs = unit(rng.standard_normal((N, DIM), dtype=np.float32))
    entry = _Entry(DIM)
    for lo in range(0, N, 40_000):
        seqs = list(range(lo + 1, lo + 40_001))
        entry.add(seqs, [f"t{s % 7}" for s in seqs], vecs[lo : lo + 40_000].tobytes())
    return entry, vecs


def exact(vecs: np.ndarray, q: np.ndarray, k: int, min_sim: float, thread: str | None) -> list[tuple[int, float]]:
    """Brute force over the float32 vectors (seq ``i + 1`` is row ``i``, thread ``t{seq % 7}``)."""
    return top(vecs @ q, k, min_sim, thread)


def exact_many(
    vecs: np.ndarray, qs: np.ndarray, k: int, min_sim: float, thread: str | None
) -> list[list[tuple[int, float]]]:
    """``exact`` for each query, from one matrix product: the 180 MB of vectors are read once, not once a query."""
    return [top(sims, k, min_sim, thread) for sims in qs @ vecs.T]


def top(sims: np.ndarray, k: int, min_sim: float, thread: str | None) -> list[tuple[int, float]]:
    """The ``k`` best of one query's similarities to every row, best first (ties by seq), at least ``min_sim``."""
    seqs = np.arange(1, len(sims) + 1)
    if thread is not None:
        keep = seqs % 7 == int(thread[1:]) if thread[1:].isdigit() else np.zeros(len(seqs), dtype=bool)
        sims, seqs = sims[keep], seqs[keep]
    # A partial sort: the k best, then only those ordered (a full sort of 120k rows per query is most of the time).
    best = np.argpartition(-sims, k - 1)[:k] if len(sims) > k else np.arange(len(sims))
    order = best[np.lexsort((seqs[best], -sims[best]))]
    return [(int(seqs[i]), float(sims[i])) for i in order if sims[i] >= min_sim]


def queries(vecs: np.ndarray, n: int) -> np.ndarray:
    """Near real vectors: a stored vector plus noise of about its own size."""
    rng = np.random.default_rng(11)
    picks = vecs[rng.integers(0, len(vecs), n)]
    return unit(picks + unit(rng.standard_normal(picks.shape, dtype=np.float32)) * 0.8)


def same_top(got: list[tuple[int, float]], want: list[tuple[int, float]], vecs: np.ndarray, q: np.ndarray) -> bool:
    """The exact top k up to ties: the same scores, each that of the seq returned with it.

    Rescored vectors are within ~5e-6 of float32, so two hits closer than that
    may come in either order (or trade the last place); nothing else may differ.
    """
    seqs = [s for s, _ in got]
    return (
        len(got) == len(want)
        and len(set(seqs)) == len(seqs)
        and np.allclose([v for _, v in got], [v for _, v in want], atol=1e-5)
        and np.allclose([float(vecs[s - 1] @ q) for s in seqs], [v for _, v in got], atol=1e-5)
    )


def test_prescan_matches_exact_top10(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big
    qs = queries(vecs, 200)
    wants = exact_many(vecs, qs, 10, -1.0, None)
    hits = sum(same_top(entry.search(q, 10, -1.0, None), want, vecs, q) for q, want in zip(qs, wants, strict=True))
    assert hits >= 198


def test_isotropic_queries_match_exact(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big
    qs = unit(np.random.default_rng(5).standard_normal((50, DIM), dtype=np.float32))
    wants = exact_many(vecs, qs, 10, -1.0, None)
    hits = sum(same_top(entry.search(q, 10, -1.0, None), want, vecs, q) for q, want in zip(qs, wants, strict=True))
    assert hits >= 49


@pytest.mark.parametrize("min_sim", [-1.0, 0.2, 0.6])
def test_thread_filter_and_threshold_match_exact(big: tuple[_Entry, np.ndarray], min_sim: float) -> None:
    entry, vecs = big
    qs = queries(vecs, 20)
    for q, sims in zip(qs, qs @ vecs.T, strict=True):
        for thread in (None, "t3", "missing"):
            got = entry.search(q, 10, min_sim, thread)
            assert same_top(got, top(sims, 10, min_sim, thread), vecs, q)
            assert all(v >= min_sim for _, v in got)
            if thread == "t3":
                assert all(s % 7 == 3 for s, _ in got)


def test_a_thread_is_prescanned_among_its_own_rows(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big  # thread t3 holds ~17k rows: more than the candidates, so it is pre-scanned
    qs = queries(vecs, 20)
    for q, want in zip(qs, exact_many(vecs, qs, 10, -1.0, "t3"), strict=True):
        got = entry.search(q, 10, -1.0, "t3")
        assert len(got) == 10 and all(s % 7 == 3 for s, _ in got)
        assert same_top(got, want, vecs, q)


def test_small_index_is_rescored_whole_and_reembedding_replaces_the_row(big: tuple[_Entry, np.ndarray]) -> None:
    entry, vecs = big
    small = _Entry(DIM)
    small.add([1, 2, 3], ["a", "b", "a"], vecs[:3].tobytes())
    assert small.search(vecs[1], 2, -1.0, None)[0] == (2, pytest.approx(1.0, abs=1e-5))
    assert same_top(small.search(vecs[1], 3, -1.0, None), exact(vecs[:3], vecs[1], 3, -1.0, None), vecs, vecs[1])
    q = queries(vecs, 1)[0]
    n = entry.n
    entry.add([5], ["t5"], q.tobytes())  # seq 5 re-embedded as the query itself
    assert entry.n == n
    assert entry.search(q, 1, -1.0, None) == [(5, pytest.approx(1.0, abs=1e-5))]
    entry.add([5], ["t5"], vecs[4].tobytes())  # back, for the other tests
    assert same_top(entry.search(q, 1, -1.0, None), exact(vecs, q, 1, -1.0, None), vecs, q)


def test_two_bytes_a_dimension(big: tuple[_Entry, np.ndarray]) -> None:
    entry, _ = big
    assert entry.nbytes / N < 2 * DIM + 40  # float32 alone would be 4 * DIM
