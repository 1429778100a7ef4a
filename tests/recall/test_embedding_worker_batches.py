"""The background worker on long messages: claims sized by how long embedding takes, vectors as the embedder gives them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder, MiniLMEmbedder
from caderno.memory.engines.indexer import FIRST_BATCH
from caderno.stores import ops

SENTENCES = [
    "The plumber said the kitchen pipes need replacing before winter.",
    "We agreed to postpone the bathroom tiles until the spring.",
    "Ana wants the Lisbon trip in the second week of May, with a budget of 3000 euros.",
    "The landlord raises the rent in January by six percent.",
    "Rui's judo classes moved to Mondays and Wednesdays at the club.",
    "The car insurance renews in March and the broker suggested a higher deductible.",
]


def long_text(i: int, sentences: int) -> str:
    return f"Reply {i}. " + " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(sentences))


class SlowEmbedder(HashingEmbedder):
    """At least ``seconds`` per text, as a large model on long texts would take."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def embed(self, texts: list[str]) -> Any:
        time.sleep(self.seconds * len(texts))
        return super().embed(texts)


async def queue(path: Path, n: int, sentences: int) -> list[str]:
    """``n`` messages appended with no embedder: they wait in the queue."""
    texts = [long_text(i, sentences) for i in range(n)]
    async with caderno.connect(path, embedder=None) as memory:
        for i in range(0, n, 2):
            await memory.append_messages(
                resource_id="r", thread_id="t", messages=[Message.user(texts[i]), Message.assistant(texts[i + 1])]
            )
    return texts


async def drain(path: Path, embedder: Any, *, lease_seconds: float = 60.0) -> list[int]:
    """``flush()`` with ``embedder``; the limit of every claim of messages it made."""
    async with caderno.connect(path, embedder=embedder) as memory:
        memory.indexer.lease_seconds = lease_seconds
        run, limits = memory.indexer.run, []

        async def seen(op: Any) -> Any:
            if isinstance(op, ops.ClaimEmbeddings):
                limits.append(op.limit)
            return await run(op)

        memory.indexer.run = seen
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 0
    return limits


def stored(path: Path) -> dict[int, np.ndarray]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seq, vector FROM embeddings WHERE resource_id = 'r'").fetchall()
    return {seq: np.frombuffer(blob, dtype=np.float32) for seq, blob in rows}


async def test_slow_texts_come_fewer_to_a_claim(tmp_path: Path) -> None:
    """At 20 ms a text and a 2 s lease (a claim holds at most 0.5 s of work), no claim after the first takes over 25."""
    path = tmp_path / "m.db"
    await queue(path, 80, 3)
    limits = await drain(path, SlowEmbedder(0.02), lease_seconds=2.0)
    assert limits[0] == FIRST_BATCH
    assert all(1 <= n <= 25 for n in limits[1:]), limits
    assert len(stored(path)) == 80


async def test_fast_texts_are_claimed_a_full_batch_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    await queue(path, 600, 1)
    limits = await drain(path, HashingEmbedder())
    assert limits[0] == FIRST_BATCH
    assert max(limits) == 256  # Indexer's batch_size
    assert len(stored(path)) == 600


async def test_long_messages_store_the_embedders_own_vectors(tmp_path: Path) -> None:
    """Messages past the model's 256 word pieces go through the worker and come out as embedding them directly."""
    path = tmp_path / "m.db"
    texts = await queue(path, 40, 30)  # ~450 word pieces each
    embedder = MiniLMEmbedder()
    await drain(path, embedder)
    vectors = stored(path)
    direct = embedder.embed(texts)
    assert sorted(vectors) == list(range(1, 41))
    for seq, v in vectors.items():
        assert float(np.dot(v, direct[seq - 1])) > 0.9999
