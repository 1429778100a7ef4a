"""Fusion of the recall legs: reciprocal rank and normalised scores, pools cut to ``top``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines.recall import LEG_WEIGHTS, POOL, RRF_K, fuse

W = {"relevant": 1.0, "lexical": 1.0, "recent": 0.5, "salient": 0.5}


def test_rrf_adds_weight_over_k_plus_rank() -> None:
    got = fuse({"relevant": [(7, 0.9), (8, 0.5)], "recent": [(8, 1.0)]}, method="rrf", k=60, weights=W)
    assert got == pytest.approx({7: 1 / 61, 8: 1 / 62 + 0.5 / 61})


def test_rrf_defaults_to_the_module_constants() -> None:
    got = fuse({"lexical": [(1, 3.0)]}, method="rrf")
    assert got == pytest.approx({1: LEG_WEIGHTS["lexical"] / (RRF_K + 1)})


def test_small_k_lets_the_first_ranks_dominate() -> None:
    legs = {
        "relevant": [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5), (6, 0.4)],
        "lexical": [(7, 9.0), (8, 8.0), (6, 7.0)],
    }
    wide, narrow = fuse(legs, method="rrf", k=60, weights=W), fuse(legs, method="rrf", k=1, weights=W)
    # Found by both legs (ranks 6 and 3) beats a first place in one leg when k is large, not when it is small.
    assert wide[6] > wide[1]
    assert narrow[6] < narrow[1]


def test_ties_in_rank_score_the_same() -> None:
    got = fuse({"relevant": [(1, 0.9), (2, 0.8)], "lexical": [(2, 1.0), (1, 0.5)]}, method="rrf", weights=W)
    assert got[1] == pytest.approx(got[2])


def test_a_seq_repeated_within_a_leg_counts_once_at_its_best_rank() -> None:
    got = fuse({"relevant": [(1, 0.9), (2, 0.8), (1, 0.1)]}, method="rrf", k=60, weights=W)
    assert got == pytest.approx({1: 1 / 61, 2: 1 / 62})


@pytest.mark.parametrize("method", ["rrf", "score"])
def test_missing_and_empty_legs_add_nothing(method: str) -> None:
    assert fuse({}, method=method) == {}
    assert fuse({"relevant": [], "lexical": []}, method=method) == {}
    only = fuse({"lexical": [(4, 2.0), (5, 1.0)], "relevant": []}, method=method, weights=W)
    assert set(only) == {4, 5} and only[4] > only[5]


def test_score_fusion_normalises_each_leg_min_max() -> None:
    got = fuse(
        {"relevant": [(1, 0.8), (2, 0.6), (3, 0.4)], "lexical": [(3, 30.0), (1, 10.0)]}, method="score", weights=W
    )
    # relevant: 1.0, 0.5, 0.0; lexical: 3 -> 1.0, 1 -> 0.0 — the scale of BM25 does not swamp the cosine.
    assert got == pytest.approx({1: 1.0, 2: 0.5, 3: 1.0})


def test_score_fusion_with_one_candidate_or_equal_values_gives_full_weight() -> None:
    assert fuse({"salient": [(9, 0.85)]}, method="score", weights=W) == pytest.approx({9: 0.5})
    assert fuse({"recent": [(1, 1.0), (2, 1.0)]}, method="score", weights=W) == pytest.approx({1: 0.5, 2: 0.5})


def test_an_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse({"relevant": [(1, 1.0)]}, method="borda")


@given(
    st.dictionaries(
        st.sampled_from(sorted(W)),
        st.lists(st.tuples(st.integers(0, 50), st.floats(-100, 100, allow_nan=False)), max_size=20),
    ),
    st.sampled_from(["rrf", "score"]),
)
def test_every_candidate_is_scored_within_bounds(legs: dict, method: str) -> None:
    got = fuse(legs, method=method, weights=W)
    assert set(got) == {seq for hits in legs.values() for seq, _ in hits}
    # Each leg adds at most its weight (score) or weight / (k + 1) (rrf).
    cap = sum(W[leg] for leg, hits in legs.items() if hits)
    assert all(0.0 <= v <= (cap if method == "score" else cap / (RRF_K + 1)) + 1e-9 for v in got.values())


async def test_recall_returns_at_most_top_and_at_most_the_leg_limits(db_url: str) -> None:
    texts = [f"budget note {i}: the trip costs {100 + i} euros" for i in range(2 * POOL)]
    async with caderno.connect(db_url, embedder=HashingEmbedder(64)) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user(t) for t in texts])
        await memory.flush()
        hits = await memory.recall(resource_id="r", query="trip budget euros", thread_id="t", top=3, min_similarity=0.0)
        assert len(hits) == 3
        # Without top, the pools are deeper than the limits but the answer is not longer than their sum.
        hits = await memory.recall(
            resource_id="r",
            query="trip budget euros",
            thread_id="t",
            recent=2,
            salient=0,
            relevant=3,
            lexical=3,
            min_similarity=0.0,
        )
        assert 0 < len(hits) <= 8
        # In conversation order, and only the best by fused score were kept.
        seqs = [h.message.seq for h in hits]
        assert seqs == sorted(seqs)
