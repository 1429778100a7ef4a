"""The numpy SPLADE-tiny encoder against the real model's vectors, and the packed format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from caderno.core.errors import EmbeddingUnavailable
from caderno.embeddings import default_sparse_encoder, splade
from caderno.embeddings.splade import MAX_TERMS, VOCAB, WEIGHTS, SpladeEncoder, dot, pack, unpack

REFERENCE = json.loads((Path(__file__).parent / "data" / "splade_reference.json").read_text())
#: Largest |numpy fp16 - transformers fp32| weight allowed. Measured over every
#: term of 253 LoCoMo and LongMemEval texts: 0.0065 at most (fp16 weights, and
#: fp16 storage: a step of 0.002 for weights in [2, 4)).
TOLERANCE = 0.01


@pytest.fixture(scope="module")
def encoder() -> SpladeEncoder:
    return SpladeEncoder(threads=1).load()


def dense(blob: bytes) -> np.ndarray:
    ids, weights = unpack(blob)
    out = np.zeros(VOCAB, dtype=np.float32)
    out[ids] = weights
    return out


def test_reference_was_made_at_the_encoders_length() -> None:
    assert REFERENCE["max_tokens"] == splade.MAX_TOKENS


@pytest.mark.parametrize("case", REFERENCE["texts"], ids=lambda c: c["text"][:24] or "empty")
def test_matches_the_real_model(encoder: SpladeEncoder, case: dict) -> None:
    [blob] = encoder.encode([case["text"]])
    ours = dense(blob)
    top = dict(case["top"])
    for term, weight in top.items():
        assert ours[term] == pytest.approx(weight, abs=TOLERANCE), term
    # Our own 20 highest: the reference's, but for terms tied with its 20th within the tolerance.
    floor = min(top.values())
    for term in np.argsort(-ours)[:20].tolist():
        assert term in top or ours[term] <= floor + TOLERANCE, term
    assert abs(np.count_nonzero(ours) - case["nonzero"]) <= max(2, case["nonzero"] // 50)


def test_a_batch_gives_each_text_its_own_vector(encoder: SpladeEncoder) -> None:
    texts = [c["text"] for c in REFERENCE["texts"]]
    together = encoder.encode(texts)
    for text, blob in zip(texts, together, strict=True):
        assert np.allclose(dense(blob), dense(encoder.encode([text])[0]), atol=0.004)
    assert SpladeEncoder(threads=2).load().encode(texts) == together


def test_empty_input_and_empty_text(encoder: SpladeEncoder) -> None:
    assert encoder.encode([]) == []
    [blob] = encoder.encode([""])  # [CLS] [SEP] alone still give a few terms
    assert 0 < len(unpack(blob)[0]) < 20


def test_a_very_long_text_is_cut_at_max_tokens(encoder: SpladeEncoder) -> None:
    long = REFERENCE["texts"][-1]["text"]
    assert REFERENCE["texts"][-1]["tokens"] > splade.MAX_TOKENS
    whole, huge = encoder.encode([long, " ".join([long] * 40)])
    assert huge == whole
    assert len(unpack(huge)[0]) <= MAX_TERMS


def test_only_the_highest_terms_are_kept(encoder: SpladeEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    text = REFERENCE["texts"][-1]["text"]
    full = dense(encoder.encode([text])[0])
    monkeypatch.setattr(splade, "MAX_TERMS", 10)
    ids, weights = unpack(encoder.encode([text])[0])
    assert len(ids) == 10
    assert set(ids.tolist()) == set(np.argsort(-full)[:10].tolist())
    assert np.array_equal(weights, full[ids])


def test_pack_unpack_round_trip() -> None:
    rng = np.random.default_rng(3)
    ids = rng.choice(VOCAB, size=300, replace=False)
    weights = rng.uniform(0, 3, size=300).astype(np.float32)
    weights[:7] = 0
    blob = pack(ids, weights)
    got_ids, got_weights = unpack(blob)
    assert len(blob) == 4 * 293
    assert got_ids.dtype == np.int64 and got_weights.dtype == np.float32
    assert np.all(np.diff(got_ids) > 0)
    order = np.argsort(ids[7:])
    assert np.array_equal(got_ids, ids[7:][order])
    assert np.array_equal(got_weights, weights[7:][order].astype(np.float16).astype(np.float32))
    assert blob[:2] == int(got_ids[0]).to_bytes(2, "little")
    assert pack([], []) == b"" and [a.size for a in unpack(b"")] == [0, 0]


def test_pack_and_unpack_refuse_what_is_not_a_vector() -> None:
    with pytest.raises(ValueError):
        pack([1, 2], [1.0])
    with pytest.raises(ValueError):
        pack([VOCAB], [1.0])
    with pytest.raises(ValueError):
        unpack(b"\x01\x00\x00")


def test_dot_equals_the_dense_product() -> None:
    rng = np.random.default_rng(7)

    def vector(n: int) -> bytes:
        return pack(rng.choice(2000, size=n, replace=False), rng.uniform(0.01, 3, size=n))

    query = vector(40)
    docs = [vector(n) for n in (0, 1, 60, 400, 5)] + [b""]
    scores = dot(query, docs)
    expected = np.array([dense(d) @ dense(query) for d in docs], dtype=np.float32)
    assert scores.dtype == np.float32 and scores.shape == (len(docs),)
    assert np.allclose(scores, expected, rtol=1e-5, atol=1e-6)
    assert scores[0] == 0 and scores[-1] == 0
    assert dot(query, []).shape == (0,)
    with pytest.raises(ValueError):
        dot(query, [b"\x00"])


def test_a_corrupt_or_missing_weights_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "splade-tiny.npz"
    shutil.copyfile(WEIGHTS, copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    with pytest.raises(EmbeddingUnavailable, match="corrupt"):
        SpladeEncoder(copy).load()
    with pytest.raises(EmbeddingUnavailable, match="cannot be read"):
        SpladeEncoder(tmp_path / "absent.npz").encode(["hello"])


def test_one_default_encoder_per_process() -> None:
    assert default_sparse_encoder() is default_sparse_encoder()
    assert default_sparse_encoder().name == "splade-tiny-fp16"


def test_a_query_scored_for_the_candidates_terms_alone_equals_its_whole_vector() -> None:
    """Recall's rerank decodes the query only for its candidates' terms (``query_scorer``): the same scores
    as the query's whole vector, within float16's rounding of that vector's weights."""
    encoder = splade.default_sparse_encoder()
    docs = encoder.encode(
        [
            "We are saving EUR 6,000 for the Amsterdam trip, by 1 September 2026.",
            "The car insurance is R$ 310 a month.",
            "Minha irmã adotou um galgo chamado Pipoca.",
            "",
        ]
    )
    query = "how much for the Netherlands holiday?"
    fast = splade.query_scorer(encoder, query)(docs)
    (whole,) = encoder.encode([query])
    assert np.allclose(fast, splade.dot(whole, docs), rtol=2e-3, atol=2e-3)
    assert fast[0] > 0 and fast[3] == 0  # an empty text has no terms
