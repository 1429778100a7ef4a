"""Long messages are tokenised only as far as the model reads them, with the same word pieces as the whole text."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from caderno.embeddings import MiniLMEmbedder, MultilingualE5Embedder, minilm
from caderno.embeddings.minilm import CUT_CHARS_PER_TOKEN, encode_truncated

PROSE = (
    "the plumber said the kitchen pipes need replacing before winter and the quote came to about "
    "nine hundred euros including labour so we agreed to postpone the bathroom tiles until spring "
    "über café naïve résumé façade 2026-03-14 R$ 310,00 — well, that's it!"
)
WORDS = PROSE.split()


def texts(max_tokens: int) -> list[str]:
    rng = random.Random(3)
    limit = max_tokens * CUT_CHARS_PER_TOKEN
    prose = " ".join(rng.choice(WORDS) for _ in range(3 * limit // 5))
    # Words over 100 characters are one [UNK] piece for MiniLM: the cut holds too few.
    long_words = " ".join("".join(rng.choice("abcdefghij") for _ in range(120)) for _ in range(4 * limit // 120))
    return [
        prose,  # cut, and the cut still fills the model
        prose.replace(" ", "  "),  # double spaces at the cut
        long_words,  # cut, but the cut falls short of the model: encoded whole
        "x" * (2 * limit),  # no space to cut at
        " ".join(WORDS[:12]),  # short: untouched
        prose[: limit - 1],
        "",
    ]


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    return MultilingualE5Embedder().load()


def _cases(e5: MultilingualE5Embedder) -> list[tuple[Any, int, Any]]:
    mini = MiniLMEmbedder().load()
    return [(mini._tokenizer, minilm.MAX_TOKENS, list), (e5._tokenizer, 256, e5._prepare)]


def test_the_cut_keeps_every_word_piece_the_model_reads(e5: MultilingualE5Embedder) -> None:
    for tokenizer, max_tokens, prepare in _cases(e5):
        given = texts(max_tokens)
        assert len(minilm._cut(given[0], max_tokens * CUT_CHARS_PER_TOKEN)) < len(given[0]) // 2  # the cut happens
        whole = tokenizer.encode_batch(prepare(given))
        cut = encode_truncated(tokenizer, given, max_tokens, prepare)
        assert [e.ids for e in cut] == [e.ids for e in whole]
        assert len(cut[0].ids) == max_tokens
    mini = MiniLMEmbedder().load()._tokenizer
    long_words = texts(minilm.MAX_TOKENS)[2]
    cut_short = mini.encode(minilm._cut(long_words, minilm.MAX_TOKENS * CUT_CHARS_PER_TOKEN)).ids
    assert len(cut_short) < len(encode_truncated(mini, [long_words], minilm.MAX_TOKENS)[0].ids)  # encoded whole


def test_long_messages_embed_as_their_first_word_pieces() -> None:
    """A message of thousands of words embeds like its opening: the model reads 256 word pieces."""
    mini = MiniLMEmbedder()
    prose = texts(minilm.MAX_TOKENS)[0]
    opening = " ".join(prose.split()[:400])
    a, b = mini.embed([prose, opening])
    assert float(np.dot(a, b)) > 0.9999
