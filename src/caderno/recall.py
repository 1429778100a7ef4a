"""Recall: recent + salient + relevant + lexical retrieval over past messages.

Four legs, each switchable off with 0:

* **recent** — the thread's last N user messages and final assistant replies;
* **salient** — messages with importance >= 0.8, newest first;
* **relevant** — cosine similarity to the query above ``min_similarity``,
  exact brute force over the resource's vectors (numpy);
* **lexical** — full-text rank (SQLite FTS5 BM25, PostgreSQL ts_rank_cd).

Results are fused by weighted reciprocal rank (each leg contributes
weight/(60 + rank); the query legs weigh 1, recent and salient 0.5),
deduplicated by message, and returned in conversation order: thread by
thread, then by sequence.

Vectors come from a per-process cache per resource, refreshed incrementally
from the embeddings change feed and bounded in bytes (least recently used
resources are dropped first), so a search costs one small query plus a
matrix-vector product over that resource alone.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ._text import tokenize
from .importance import SALIENT
from .messages import Message
from .stores import ops
from .stores.base import Runner

__all__ = ["DEFAULT_MIN_SIMILARITY", "LEG_WEIGHTS", "RRF_K", "Recalled", "Retriever", "VectorIndex"]

log = logging.getLogger("caderno.recall")

#: Cosine threshold of the relevant leg. Questions and the statements that
#: answer them are far apart for this model (median 0.47, p10 0.32 on
#: bench/data); 0.25 keeps ~95 % of true answers and still drops unrelated
#: text (~0.0). The 0.65 of the reference design would lose most answers.
DEFAULT_MIN_SIMILARITY = 0.25
RRF_K = 60
#: Weight of each leg in the fused score. The query legs decide; recent and
#: salient are not about the query, so they add a small bonus instead of
#: competing rank for rank (measured in bench/recall_quality.py).
LEG_WEIGHTS = {"relevant": 1.0, "lexical": 1.0, "recent": 0.5, "salient": 0.5}
#: Fewest messages the recent leg reads to find its user/assistant replies
#: (tool calls and results in between are skipped).
RECENT_WINDOW = 50
#: Most distinct query words the lexical leg searches for.
MAX_QUERY_TERMS = 32


@dataclass(frozen=True, kw_only=True, slots=True)
class Recalled:
    """One message found by recall."""

    message: Message
    """The stored message."""
    thread_id: str
    """Its thread."""
    reasons: frozenset[str]
    """Which legs found it: recent, salient, relevant, lexical (context for neighbours)."""
    score: float
    """Fused score: the sum over legs of weight / (60 + rank); higher is better."""
    scores: dict[str, float] = field(default_factory=dict)
    """Each leg's own score (similarity, text rank, importance)."""


class _Entry:
    """Growable arrays of one resource's vectors.

    Vectors are stored column by column (``mat`` is ``(dim, capacity)``):
    ``query @ mat[:, :n]`` runs about a third faster than the row-major
    product on this kind of CPU, where the search is bound by memory reads.
    """

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self.n = 0
        self.last_id = 0
        self.mat = np.zeros((dim, 0), dtype=np.float32)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.threads = np.zeros(0, dtype=object)
        self.row_of: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return int(self.mat.nbytes + self.seqs.nbytes + self.threads.nbytes + 64 * len(self.row_of))

    def add(self, seqs: list[int], threads: list[str], blob: bytes) -> None:
        import numpy as np

        if not seqs:
            return
        vecs = np.frombuffer(blob, dtype=np.float32).reshape(len(seqs), self.dim)
        fresh = []
        for i, seq in enumerate(seqs):
            row = self.row_of.get(seq)
            if row is not None:  # re-embedded or re-read through the overlap window
                self.mat[:, row] = vecs[i]
            else:
                fresh.append(i)
        if not fresh:
            return
        need = self.n + len(fresh)
        if need > len(self.seqs):
            cap = max(need, 2 * len(self.seqs), 1024)
            mat = np.zeros((self.dim, cap), dtype=np.float32)
            mat[:, : self.n] = self.mat[:, : self.n]
            self.mat = mat
            for name in ("seqs", "threads"):
                old = getattr(self, name)
                grown = np.zeros(cap, dtype=old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
        idx = np.array(fresh)
        self.mat[:, self.n : need] = vecs[idx].T
        self.seqs[self.n : need] = np.array(seqs, dtype=np.int64)[idx]
        self.threads[self.n : need] = np.array(threads, dtype=object)[idx]
        for offset, i in enumerate(fresh):
            self.row_of[seqs[i]] = self.n + offset
        self.n = need


class VectorIndex:
    """Per-resource vector cache with an upper bound in bytes (LRU over resources)."""

    def __init__(self, max_bytes: int = 512 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, resource_id: str | None = None) -> None:
        """Drop cached vectors of one resource (or all): after deletes or a reindex."""
        with self._lock:
            for key in [k for k in self._entries if resource_id is None or k[0] == resource_id]:
                del self._entries[key]

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    async def search(
        self,
        run: Runner,
        resource_id: str,
        model: str,
        dim: int,
        query: Any,
        k: int,
        min_similarity: float,
        thread_id: str | None,
    ) -> list[tuple[int, float]]:
        """``(seq, cosine)`` of the best ``k`` vectors at or above ``min_similarity``."""
        import numpy as np

        key = (resource_id, model)
        with self._lock:
            entry = self._entries.get(key) or _Entry(dim)
        rows = await run(ops.ReadVectors(resource_id=resource_id, model=model, after_id=entry.last_id))
        with self._lock:
            entry.add(rows.seqs, rows.thread_ids, rows.vectors)
            entry.last_id = max(entry.last_id, rows.last_id)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > 1 and sum(e.nbytes for e in self._entries.values()) > self.max_bytes:
                self._entries.popitem(last=False)
            n = entry.n
            if n == 0:
                return []
            sims = np.asarray(query, dtype=np.float32) @ entry.mat[:, :n]
            if thread_id is not None:
                sims = np.where(entry.threads[:n] == thread_id, sims, -np.inf)
            keep = np.flatnonzero(sims >= min_similarity)
            if len(keep) > k:
                keep = keep[np.argpartition(-sims[keep], k - 1)[:k]]
            keep = keep[np.argsort(-sims[keep], kind="stable")]
            return [(int(entry.seqs[i]), float(sims[i])) for i in keep]


class Retriever:
    """The four legs and their fusion, over one store (used by ``Memory.recall``)."""

    def __init__(self, run: Runner, indexer: Any, vectors: VectorIndex) -> None:
        self.run = run
        self.indexer = indexer
        self.vectors = vectors

    async def recall(
        self,
        *,
        resource_id: str,
        query: str,
        thread_id: str | None,
        within: str | None,
        limits: dict[str, int],
        min_similarity: float,
        message_range: tuple[int, int] | int | None,
        top: int | None,
    ) -> list[Recalled]:
        """Run the legs concurrently, fuse by weighted reciprocal rank, order by conversation."""
        legs = await asyncio.gather(
            self._recent(resource_id, thread_id, limits["recent"]),
            self._salient(resource_id, within, limits["salient"]),
            self._relevant(resource_id, within, query, limits["relevant"], min_similarity),
            self._lexical(resource_id, within, query, limits["lexical"]),
        )
        found: dict[int, tuple[str, Message]] = {}
        ranked: dict[int, dict[str, tuple[int, float]]] = {}
        pending: list[int] = []
        for name, hits in zip(("recent", "salient", "relevant", "lexical"), legs, strict=True):
            for rank, (seq, value, pair) in enumerate(hits):
                ranked.setdefault(seq, {})[name] = (rank, value)
                if pair is not None:
                    found[seq] = pair
                elif seq not in found:
                    pending.append(seq)
        missing = [s for s in dict.fromkeys(pending) if s not in found]
        for tid, m in await self.run(ops.ReadBySeq(resource_id=resource_id, seqs=tuple(missing))):
            found[m.seq or 0] = (tid, m)
        results = [
            Recalled(
                message=found[seq][1],
                thread_id=found[seq][0],
                reasons=frozenset(legs_of),
                score=sum(LEG_WEIGHTS[leg] / (RRF_K + rank + 1) for leg, (rank, _) in legs_of.items()),
                scores={leg: value for leg, (_, value) in legs_of.items()},
            )
            for seq, legs_of in ranked.items()
            if seq in found  # a message deleted since its vector was cached
        ]
        if top is not None:
            results = sorted(results, key=lambda r: -r.score)[:top]
        if message_range:
            results += await self._context(resource_id, results, message_range)
        return _conversation_order(results)

    async def _recent(self, resource_id: str, thread_id: str | None, n: int) -> list[tuple[int, float, Any]]:
        if not n or thread_id is None:
            return []
        window = await self.run(
            ops.ReadThread(resource_id=resource_id, thread_id=thread_id, limit=max(4 * n, RECENT_WINDOW))
        )
        replies = [m for m in window if m.role == "user" or (m.role == "assistant" and not m.tool_calls)][-n:]
        return [(m.seq or 0, 1.0, (thread_id, m)) for m in reversed(replies)]

    async def _salient(self, resource_id: str, thread_id: str | None, n: int) -> list[tuple[int, float, Any]]:
        if not n:
            return []
        hits = await self.run(ops.ReadSalient(resource_id=resource_id, threshold=SALIENT, limit=n, thread_id=thread_id))
        return [(m.seq or 0, m.importance or 0.0, (tid, m)) for tid, m in hits]

    async def _relevant(
        self, resource_id: str, thread_id: str | None, query: str, n: int, min_similarity: float
    ) -> list[tuple[int, float, Any]]:
        if not n or not query.strip() or not self.indexer.active:
            return []
        try:
            (vector,) = await asyncio.to_thread(self.indexer.embedder.embed, [query])
        except Exception as exc:  # noqa: BLE001 - the model may be missing; recall goes on without this leg
            from .errors import EmbeddingUnavailable

            if isinstance(exc, EmbeddingUnavailable) and self.indexer.unavailable is None:
                self.indexer.unavailable = str(exc)
                log.warning("embeddings are off: %s; recall falls back to lexical and salient search", exc)
            elif not isinstance(exc, EmbeddingUnavailable):
                log.warning("query embedding failed: %s", exc)
            return []
        hits = await self.vectors.search(
            self.run,
            resource_id,
            self.indexer.embedder.name,
            self.indexer.embedder.dim,
            vector,
            n,
            min_similarity,
            thread_id,
        )
        return [(seq, sim, None) for seq, sim in hits]

    async def _lexical(
        self, resource_id: str, thread_id: str | None, query: str, n: int
    ) -> list[tuple[int, float, Any]]:
        terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]
        if not n or not terms:
            return []
        search = ops.LexicalSearch(resource_id=resource_id, terms=tuple(terms), limit=n, thread_id=thread_id)
        return [(seq, score, None) for seq, score in await self.run(search)]

    async def _context(
        self, resource_id: str, hits: list[Recalled], message_range: tuple[int, int] | int
    ) -> list[Recalled]:
        before, after = (message_range, message_range) if isinstance(message_range, int) else message_range
        have = {r.message.seq for r in hits}
        extra: list[Recalled] = []
        for r in hits:
            around = ops.ReadNeighbours(
                resource_id=resource_id, thread_id=r.thread_id, seq=r.message.seq or 0, before=before, after=after
            )
            for m in await self.run(around):
                if m.seq not in have:
                    have.add(m.seq)
                    extra.append(Recalled(message=m, thread_id=r.thread_id, reasons=frozenset({"context"}), score=0.0))
        return extra


def _conversation_order(hits: list[Recalled]) -> list[Recalled]:
    """Thread by thread (threads in order of their first hit), then by sequence."""
    first: dict[str, int] = {}
    for r in sorted(hits, key=lambda r: r.message.seq or 0):
        first.setdefault(r.thread_id, r.message.seq or 0)
    return sorted(hits, key=lambda r: (first[r.thread_id], r.message.seq or 0))
