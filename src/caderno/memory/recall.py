"""Recall: recent + salient + relevant + lexical retrieval over past messages.

Four legs, each switchable off with 0:

* **recent** — the thread's last N user messages and final assistant replies;
* **salient** — messages with importance >= 0.8, newest first;
* **relevant** — cosine similarity to the query above ``min_similarity``,
  exact brute force over the resource's vectors (numpy); past
  ``PRESCAN_FROM`` vectors an int8 pre-scan picks candidates that are then
  rescored exactly (with ``simsimd``, a dependency; exact if it cannot load);
* **lexical** — full-text rank over stems in English and Portuguese
  (SQLite FTS5 BM25, PostgreSQL ts_rank_cd; ``caderno.core.text.stems``).

Each message is indexed for full text with the words of the messages
around it in its thread and its day as words, in columns of their own
(``caderno.core.text.CONTEXT_BEFORE``, ``CONTEXT_AFTER``, ``CONTEXT_COLUMN_WEIGHT``,
``DATE_COLUMN_WEIGHT``; kept exact by every store), so the words of the turn
that asked find the answer too, and "May 2023" finds what was said then.
A question that names a time ("há duas semanas", "last
week", "no dia 10 de março") adds a fifth leg, **when**: the candidates
said on those days (``caderno.memory.when``).

The query legs each bring a pool of ``POOL`` candidates, deeper than what
is returned; the pools are fused (``FUSION``: weighted reciprocal rank, each
leg adding weight/(k + rank); the query legs weigh 1, salient 0.5, recent
0.25), deduplicated by message, cut to ``top`` and returned in conversation
order: thread by thread, then by sequence.

Vectors come from a per-process cache per resource, refreshed incrementally
from the embeddings change feed and bounded in bytes (least recently used
resources are dropped first), so a search costs one small query plus a
matrix-vector product over that resource alone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..core.errors import UsageError
from ..core.messages import Message
from ..core.text import CONTEXT_AFTER, CONTEXT_BEFORE, date_words, fold, stems, tokenize
from ..stores import ops
from ..stores.base import Runner
from .importance import SALIENT
from .when import find_window

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "FUSION",
    "LEG_WEIGHTS",
    "MAX_LEG_LIMIT",
    "MAX_MESSAGE_RANGE",
    "POOL",
    "POOL_LEGS",
    "RRF_K",
    "Recalled",
    "Retriever",
    "VectorIndex",
    "check_recall_numbers",
    "fuse",
]

log = logging.getLogger("caderno.memory.recall")

#: Cosine threshold of the relevant leg. Questions and the statements that
#: answer them are far apart for this model (median 0.47, p10 0.32 on
#: bench/data); 0.25 keeps ~95 % of true answers and still drops unrelated
#: text (~0.0). The 0.65 of the reference design would lose most answers.
DEFAULT_MIN_SIMILARITY = 0.25
#: Most neighbours ``message_range`` adds on each side of a hit. A hit with
#: its surrounding exchange is a few messages; 100 is a long stretch of a
#: conversation, and more is reading the thread, which ``get_messages`` pages.
#: The bound keeps a caller's number a small integer before it reaches SQL
#: (10**23 used to overflow SQLite's 64-bit integers: a 500 over HTTP).
MAX_MESSAGE_RANGE = 100
#: Most hits one leg (``recent``, ``salient``, ``relevant``, ``lexical``) or
#: ``top`` may ask for: each hit is a message in the answer, and 1,000 is far
#: past what any prompt holds; the bound keeps the number a SQL ``LIMIT`` can take.
MAX_LEG_LIMIT = 1000
#: How the legs' lists become one ranking (see ``fuse``): ``"rrf"``, weighted
#: reciprocal rank with constant ``RRF_K``, or ``"score"``, each leg's own
#: scores min-max normalised and summed with the leg weights. Score fusion
#: lost on the tuning halves of bench/data: min-max lets a leg's weak tail
#: count as much as a rank. The values below (RRF_K, POOL, LEG_WEIGHTS) were
#: chosen on LoCoMo's tuning part (conversations 0-2, bench/recall_proto.py
#: --stage fusion, 432 combinations; turn-level evidence recall@10).
FUSION: Literal["rrf", "score"] = "rrf"
#: The k of reciprocal rank fusion (weight / (k + rank)). 5 beat 10 and 60
#: on LoCoMo's tuning part: the top of each leg stays on top.
RRF_K = 5
#: Candidates a query leg brings to fusion, however few the caller keeps
#: (5 by default). On LoCoMo's tuning part 100 was best, 50 within 0.004 and
#: 20 lost 0.008 (0.790): an answer the two legs both rank in the 20s-90s
#: rises above what one leg alone ranks high. Recall p50 at 100k messages
#: in one resource, 4 legs, query embedding included (bench/recall_speed.py
#: --only-100k, back to back on one host): 17.0 ms, against 13.7 ms with the
#: pool of 20 and query-time context before.
POOL = 100
#: The legs that get the deeper pool. Recent and salient do not rank by the
#: query; a deeper pool of them would only add candidates that are off topic.
POOL_LEGS = frozenset({"relevant", "lexical"})
#: Weight of each leg in the fused score, chosen with the cover rule below by
#: bench/recall_tune.py (36 combinations, ranked by the mean recall@10 of
#: LoCoMo 0-2 and both project sets' tuning halves: 0.789 / 0.943 / 0.694).
#: Lexical 1.0 : relevant 0.5 (relevant 0.75 cost LoCoMo 0.007, 1.0 0.022,
#: with English level). Recent and salient weigh 0: they are not about the
#: query, so they fill only the places the query legs leave empty (score 0,
#: newest first) and never take one from what the query finds; at 0.1 each
#: they cost the English tuning half a question (0.943 -> 0.932) for +0.003
#: on LoCoMo. ``when``: the leg of a question that names a time (WHEN_POOL).
LEG_WEIGHTS = {"lexical": 1.0, "relevant": 0.5, "recent": 0.0, "salient": 0.0, "when": 1.0}
#: How much of its weight the lexical leg keeps for one question, by its
#: best hit's *cover*: the share of the question's words (those with a stem)
#: found in that hit's indexed row (its text, its neighbours' context, its
#: day as words). Under ``COVER_LOW`` the leg keeps ``COVER_FLOOR`` of its
#: weight, from ``COVER_HIGH`` all of it, linearly between. On questions
#: that reuse the answer's words (LoCoMo) the lexical leg is the better one;
#: on paraphrases (bench/data) its best hit shares few words with the
#: question and the dense leg should lead. The two sets separate at a cover
#: of ~0.5 (LoCoMo's 10th percentile, the English set's 90th, tuning
#: halves): bench/recall_levers.py --stage adapt2 found the rule (LoCoMo
#: tuning 0.798 -> 0.814 in the prototype, English tuning kept at 0.932+);
#: bench/recall_tune.py chose its constants in the real code (floor 0.5
#: over 0.25: Portuguese tuning 0.681 -> 0.694, the rest level; low 0.45
#: ties 0.4, 0.5 costs LoCoMo 0.012; giving the weight the lexical leg
#: loses to the relevant leg lost Portuguese 0.027: mean 0.800 vs 0.809).
COVER_LOW, COVER_HIGH, COVER_FLOOR = 0.45, 0.6, 0.5
#: Fewest messages the recent leg reads to find its user/assistant replies
#: (tool calls and results in between are skipped).
RECENT_WINDOW = 50
#: Most distinct query words the lexical leg searches for.
MAX_QUERY_TERMS = 32
#: When the question names a time ("há duas semanas", "last week", "on
#: March 10": caderno.memory.when), the messages of those days found by any leg
#: form a "when" leg of this weight, and the query legs read this deep, so
#: a message of that day that ranks low on the words alone still comes up.
WHEN_POOL = 50

#: A text said more than once ("Noted.", "Got it.", the same question asked
#: each week) fills one place of the results, at its best rank, so ``top``
#: slots hold ``top`` different things. On the evaluation sets, where most
#: messages are such repeats, it took fused recall@10 on the tuning halves
#: from 0.920 / 0.625 (en / pt) to 0.920 / 0.667 and MRR from 0.734 / 0.497
#: to 0.741 / 0.513 (bench/recall_quality.py --fusion repeats,default).
DISTINCT = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Recalled:
    """One message found by recall."""

    message: Message
    """The stored message."""
    thread_id: str
    """Its thread."""
    reasons: frozenset[str]
    """Which legs found it: recent, salient, relevant, lexical, when (context for neighbours)."""
    score: float
    """Fused score (``fuse``): higher is better; comparable within one recall only."""
    scores: dict[str, float] = field(default_factory=dict)
    """Each leg's own score (similarity, text rank, importance)."""


#: Below this many vectors (in the resource, or in the thread when filtering by
#: thread) the search is an exact float32 product: at 20k it takes ~0.3 ms here
#: and a pre-scan has nothing left to win (bench/recall_speed.py).
PRESCAN_FROM = 50_000
#: The int8 pre-scan keeps ``k * OVERSAMPLE`` candidates (at least
#: ``MIN_CANDIDATES``) and rescores them exactly in float32. The int8 score is
#: off by ~0.001 at most here, so even 2x finds the exact top 10 on real
#: queries; 8x leaves room for dense neighbourhoods, and rescoring 200 columns
#: costs ~0.2 ms.
OVERSAMPLE = 8
MIN_CANDIDATES = 200


@functools.cache
def _int8_kernel() -> Any:
    """SimSIMD's int8 dot product, or None when it cannot load: numpy has no fast int8 product."""
    try:
        import simsimd
    except ImportError:
        return None
    return simsimd


class _Entry:
    """Growable arrays of one resource's vectors.

    Vectors are stored column by column (``mat`` is ``(dim, capacity)``):
    ``query @ mat[:, :n]`` runs about a third faster than the row-major
    product on this kind of CPU, where the search is bound by memory reads.
    Past ``PRESCAN_FROM`` vectors an int8 copy (row-major, one scale per
    vector) is kept too: scanning it reads a quarter of the bytes, and the
    best candidates are rescored exactly from ``mat``.
    """

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self.n = 0
        self.last_id = 0
        self.mat = np.zeros((dim, 0), dtype=np.float32)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.thread_codes = np.zeros(0, dtype=np.int32)
        self.code_of: dict[str, int] = {}
        self.row_of: dict[int, int] = {}
        self.i8: Any = None  # (capacity, dim) int8, built on the first pre-scan
        self.i8_scale = np.zeros(0, dtype=np.float32)
        self.i8_n = 0  # rows of i8 that are up to date

    @property
    def nbytes(self) -> int:
        extra = 0 if self.i8 is None else self.i8.nbytes + self.i8_scale.nbytes
        arrays = self.mat.nbytes + self.seqs.nbytes + self.thread_codes.nbytes
        return int(arrays + extra + 64 * len(self.row_of) + 64 * len(self.code_of))

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
                if row < self.i8_n:
                    self._quantize(row, row + 1)
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
            for name in ("seqs", "thread_codes"):
                old = getattr(self, name)
                grown = np.zeros(cap, dtype=old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
        idx = np.array(fresh)
        self.mat[:, self.n : need] = vecs[idx].T
        self.seqs[self.n : need] = np.array(seqs, dtype=np.int64)[idx]
        codes = [self.code_of.setdefault(threads[i], len(self.code_of)) for i in fresh]
        self.thread_codes[self.n : need] = codes
        for offset, i in enumerate(fresh):
            self.row_of[seqs[i]] = self.n + offset
        self.n = need

    def _quantize(self, start: int, stop: int) -> None:
        """Refresh int8 rows ``start:stop`` from ``mat`` (x * 127 / max|x|, per vector)."""
        import numpy as np

        if self.i8 is None or stop > len(self.i8):
            cap = len(self.seqs)
            i8 = np.zeros((cap, self.dim), dtype=np.int8)
            scale = np.zeros(cap, dtype=np.float32)
            if self.i8 is not None:
                i8[: self.i8_n] = self.i8[: self.i8_n]
                scale[: self.i8_n] = self.i8_scale[: self.i8_n]
            self.i8, self.i8_scale = i8, scale
        for lo in range(start, stop, 65_536):  # bounded temporaries
            hi = min(stop, lo + 65_536)
            block = self.mat[:, lo:hi].T
            top = np.maximum(np.abs(block).max(axis=1), 1e-12)
            self.i8[lo:hi] = np.rint(block * (127.0 / top)[:, None])
            self.i8_scale[lo:hi] = top / 127.0

    def search(self, query: Any, k: int, min_similarity: float, thread_id: str | None) -> list[tuple[int, float]]:
        """``(seq, cosine)`` of the best ``k`` vectors at or above ``min_similarity``."""
        import numpy as np

        n = self.n
        q = np.asarray(query, dtype=np.float32)
        rows: Any = None  # None: every row
        if thread_id is not None:
            code = self.code_of.get(thread_id)
            if code is None:
                return []
            rows = np.flatnonzero(self.thread_codes[:n] == code)
        count = n if rows is None else len(rows)
        kernel = _int8_kernel() if count >= PRESCAN_FROM else None
        if kernel is None:  # exact
            cand = rows
            sims = q @ (self.mat[:, :n] if rows is None else self.mat[:, rows])
        else:
            if self.i8_n < n:
                self._quantize(self.i8_n, n)
                self.i8_n = n
            top = np.abs(q).max()
            q8 = np.rint(q * (127.0 / max(float(top), 1e-12))).astype(np.int8)
            approx = np.asarray(kernel.cdist(q8[None], self.i8[:n], metric="dot", out_dtype="float32"))[0]
            approx *= self.i8_scale[:n]
            if rows is not None:  # candidates from that thread only
                mask = np.full(n, -np.inf, dtype=np.float32)
                mask[rows] = approx[rows]
                approx = mask
            m = min(max(k * OVERSAMPLE, MIN_CANDIDATES), count)
            cand = _top(approx, m)
            sims = q @ self.mat[:, np.sort(cand)]
            cand = np.sort(cand)
        keep = np.flatnonzero(sims >= min_similarity)
        if len(keep) > k:
            keep = keep[np.argpartition(-sims[keep], k - 1)[:k]]
        keep = keep[np.argsort(-sims[keep], kind="stable")]
        rows_of_hits = keep if cand is None else cand[keep]
        return [(int(self.seqs[r]), float(sims[i])) for r, i in zip(rows_of_hits, keep, strict=True)]


def _top(scores: Any, m: int) -> Any:
    """Indices of the ``m`` highest ``scores`` (any order).

    A strided sample gives a threshold that ~4m scores pass; one comparison
    then leaves a small set to partition (argpartition over 1M floats alone
    costs ~9 ms here). Falls back to the full partition if too few pass.
    """
    import numpy as np

    stride = 64
    if len(scores) >= 64 * stride * m // 16:
        sample = scores[::stride]
        r = min(len(sample), 4 * m // stride + 8)
        t = np.partition(sample, len(sample) - r)[len(sample) - r]
        sel = np.flatnonzero(scores >= t)
        if len(sel) >= m:
            return sel[np.argpartition(-scores[sel], m - 1)[:m]]
    return np.argpartition(-scores, m - 1)[:m]


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
            if entry.n == 0:
                return []
            return entry.search(query, k, min_similarity, thread_id)


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
        now: datetime,
    ) -> list[Recalled]:
        """Run the legs concurrently, fuse their pools, keep the best, order by conversation.

        Each query leg reads ``max(limit, POOL)`` candidates (``WHEN_POOL``
        when the question names a time, whose words are then left out of
        the search); the fused list is cut to ``top``, or, when ``top`` is
        None, to the sum of the legs' limits: the most a caller got before
        pools were deepened, so a caller that sizes its context by the
        limits still can.
        """
        check_recall_numbers(limits, message_range, top)
        names = ("recent", "salient", "relevant", "lexical")
        window = find_window(query, now) if LEG_WEIGHTS.get("when") and query.strip() else None
        pool = WHEN_POOL if window is not None else POOL
        text = window.rest if window is not None else query
        depth = {leg: max(n, pool) if n and leg in POOL_LEGS else n for leg, n in limits.items()}
        legs = dict(
            zip(
                names,
                await asyncio.gather(
                    self._recent(resource_id, thread_id, depth["recent"]),
                    self._salient(resource_id, within, depth["salient"]),
                    self._relevant(resource_id, within, text, depth["relevant"], min_similarity),
                    # The time words stay in the lexical query: the date column matches them.
                    self._lexical(resource_id, within, query, depth["lexical"]),
                ),
                strict=True,
            )
        )
        found: dict[int, tuple[str, Message]] = {}
        values: dict[int, dict[str, float]] = {}
        for name, hits in legs.items():
            for seq, value, pair in hits:
                values.setdefault(seq, {}).setdefault(name, value)
                if pair is not None:
                    found[seq] = pair
        ranked = {name: [(seq, value) for seq, value, _ in hits] for name, hits in legs.items()}
        share = await self._lexical_share(resource_id, query, legs["lexical"], found)
        weights = {**LEG_WEIGHTS, "lexical": LEG_WEIGHTS["lexical"] * share}
        fused = fuse(ranked, weights=weights)
        if window is not None:
            await self._read_missing(resource_id, list(fused), found)
            then = [
                (seq, 1.0)
                for seq in sorted(fused, key=lambda seq: (-fused[seq], -seq))
                if seq in found and window.holds(found[seq][1].created_at)
            ]
            for seq, value in then:
                values[seq]["when"] = value
            fused = fuse({**ranked, "when": then}, weights=weights)
        keep = top if top is not None else sum(limits[leg] for leg in names)
        best = await self._distinct(resource_id, sorted(fused, key=lambda seq: (-fused[seq], -seq)), keep, found)
        results = [
            Recalled(
                message=found[seq][1],
                thread_id=found[seq][0],
                reasons=frozenset(values[seq]),
                score=fused[seq],
                scores=values[seq],
            )
            for seq in best
        ]
        if message_range:
            results += await self._context(resource_id, results, message_range)
        return _conversation_order(results)

    async def _lexical_share(
        self, resource_id: str, query: str, lexical: list[tuple[int, float, Any]], found: dict[int, tuple[str, Message]]
    ) -> float:
        """The share of its weight the lexical leg keeps for ``query`` (see ``COVER_LOW``).

        Reads the best lexical hit and its neighbours (one small read), to
        see its indexed row as the full-text index does.
        """
        words = [w for w in dict.fromkeys(fold(query).split()) if stems(w)]
        if not lexical or not words:
            return 1.0
        best = lexical[0][0]
        await self._read_missing(resource_id, [best], found)
        if best not in found:
            return 1.0
        thread_id, message = found[best]
        around = ops.ReadNeighbours(
            resource_id=resource_id, thread_id=thread_id, seq=best, before=CONTEXT_BEFORE, after=CONTEXT_AFTER
        )
        row = [message.content, *(m.content for m in await self.run(around))]
        if message.created_at is not None:
            row.append(date_words(message.created_at))
        have = set(stems(" ".join(row)))
        cover = sum(1 for w in words if have.intersection(stems(w))) / len(words)
        return max(min((cover - COVER_LOW) / (COVER_HIGH - COVER_LOW), 1.0), COVER_FLOOR)

    async def _distinct(
        self, resource_id: str, order: list[int], keep: int, found: dict[int, tuple[str, Message]]
    ) -> list[int]:
        """The first ``keep`` of ``order`` whose texts differ: a text said again counts once, at its best rank.

        Every seq returned is in ``found`` (read here when missing); one
        deleted since its vector was cached is passed over.

        Conversations repeat themselves ("Noted.", "Got it.", the same
        question asked each week); ten slots of recall should hold ten
        different things (``DISTINCT``). Texts compare folded, whitespace
        collapsed. Messages are read a slice at a time, so the usual case
        (few repeats) costs one read.
        """
        if not DISTINCT:
            await self._read_missing(resource_id, order[:keep], found)
            return [seq for seq in order[:keep] if seq in found]
        best: list[int] = []
        seen: set[str] = set()
        at = 0
        while len(best) < keep and at < len(order):
            chunk = order[at : at + 2 * (keep - len(best))]
            at += len(chunk)
            await self._read_missing(resource_id, chunk, found)
            for seq in chunk:
                if seq not in found:
                    continue  # deleted since its vector was cached
                text = " ".join(fold(found[seq][1].content).split())
                if text not in seen and len(best) < keep:
                    seen.add(text)
                    best.append(seq)
        return best

    async def _read_missing(self, resource_id: str, seqs: list[int], found: dict[int, tuple[str, Message]]) -> None:
        missing = tuple(seq for seq in seqs if seq not in found)
        if missing:
            for tid, m in await self.run(ops.ReadBySeq(resource_id=resource_id, seqs=missing)):
                found[m.seq or 0] = (tid, m)

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
            from ..core.errors import EmbeddingUnavailable

            if isinstance(exc, EmbeddingUnavailable) and self.indexer.unavailable is None:
                self.indexer.unavailable = str(exc)
                log.warning("embeddings are off: %s; recall falls back to lexical and salient search", exc)
            elif not isinstance(exc, EmbeddingUnavailable):
                log.warning("query embedding failed: %s", exc)
            return []
        from ..core.errors import Unsupported

        model = self.indexer.embedder.name
        try:  # in the database where the store can (PostgreSQL with pgvector), else the process's cache
            search = ops.SearchVectors(
                resource_id=resource_id,
                model=model,
                query=tuple(float(x) for x in vector),
                k=n,
                min_similarity=min_similarity,
                thread_id=thread_id,
            )
            hits = await self.run(search)
        except Unsupported:
            hits = await self.vectors.search(
                self.run, resource_id, model, self.indexer.embedder.dim, vector, n, min_similarity, thread_id
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


def check_recall_numbers(
    limits: Mapping[str, int], message_range: tuple[int, int] | int | None, top: int | None
) -> None:
    """Refuse counts past ``MAX_LEG_LIMIT`` and neighbours past ``MAX_MESSAGE_RANGE``, before any read.

    ``Memory.recall`` checks types and signs; this adds the upper bounds, where
    every caller's arguments (Python, HTTP, MCP, the ``recall`` tool) meet.

    Raises:
        UsageError: a number past its bound (the message names the bound).
    """
    for name, n in [*limits.items(), ("top", top or 0)]:
        if isinstance(n, int) and n > MAX_LEG_LIMIT:
            raise UsageError(f"{name} may be at most {MAX_LEG_LIMIT}, not {n}")
    pair = (message_range, message_range) if isinstance(message_range, int) else message_range or (0, 0)
    if any(isinstance(n, int) and n > MAX_MESSAGE_RANGE for n in pair):
        raise UsageError(
            f"message_range may add at most {MAX_MESSAGE_RANGE} messages on each side of a hit, not {message_range!r}"
        )


def fuse(
    legs: Mapping[str, Sequence[tuple[int, float]]],
    *,
    method: str | None = None,
    k: int | None = None,
    weights: Mapping[str, float] | None = None,
) -> dict[int, float]:
    """Fuse ranked legs into one score per candidate (higher is better).

    Args:
        legs: each leg's ``(seq, value)`` hits, best first; a leg may be
            empty or absent. A seq repeated within a leg counts once, at its
            best rank.
        method: ``"rrf"`` — the sum over legs of ``weight / (k + rank)``,
            rank counted from 1; ``"score"`` — the sum of ``weight *``
            the leg's value min-max normalised over that leg's hits (1.0
            when the leg's values are all equal, one hit included). Defaults
            to ``FUSION``.
        k: the RRF constant; defaults to ``RRF_K``.
        weights: per-leg weights; defaults to ``LEG_WEIGHTS``. A leg
            without a weight there counts for nothing.

    Returns:
        ``{seq: fused score}`` for every candidate of every leg.
    """
    method = FUSION if method is None else method
    k = RRF_K if k is None else k
    weights = LEG_WEIGHTS if weights is None else weights
    if method not in ("rrf", "score"):
        raise ValueError(f"unknown fusion method {method!r}: use 'rrf' or 'score'")
    fused: dict[int, float] = {}
    for leg, hits in legs.items():
        best: dict[int, float] = {}
        for seq, value in hits:
            best.setdefault(seq, value)  # a repeated seq keeps its best rank
        first = list(best.items())
        if not first:
            continue
        weight = weights.get(leg, 0.0)
        if method == "rrf":
            for rank, (seq, _) in enumerate(first, start=1):
                fused[seq] = fused.get(seq, 0.0) + weight / (k + rank)
        else:
            lo = min(v for _, v in first)
            span = max(v for _, v in first) - lo
            for seq, value in first:
                fused[seq] = fused.get(seq, 0.0) + weight * ((value - lo) / span if span > 0 else 1.0)
    return fused


def _conversation_order(hits: list[Recalled]) -> list[Recalled]:
    """Thread by thread (threads in order of their first hit), then by sequence."""
    first: dict[str, int] = {}
    for r in sorted(hits, key=lambda r: r.message.seq or 0):
        first.setdefault(r.thread_id, r.message.seq or 0)
    return sorted(hits, key=lambda r: (first[r.thread_id], r.message.seq or 0))
