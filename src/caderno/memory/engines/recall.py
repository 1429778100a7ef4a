"""Recall: recent + salient + relevant + lexical retrieval over past messages.

Four legs, each switchable off with 0:

* **recent** — the thread's last N user messages and final assistant replies;
* **salient** — messages with importance >= 0.8, newest first;
* **relevant** — cosine similarity to the query above ``min_similarity``,
  brute force over the resource's vectors, held as two int8 levels: the
  first is scanned (with ``simsimd``, a dependency; numpy if it cannot
  load) and the best candidates are rescored from both, within ~1e-5 of
  the float32 cosine (``caderno.memory.engines.vector_cache``);
* **lexical** — full-text rank over stems in English and Portuguese
  (SQLite FTS5 BM25, PostgreSQL ts_rank_cd; ``caderno.core.text.stems``).

Each message is indexed for full text with the words of the messages
around it in its thread and its day as words, in columns of their own
(``caderno.core.text.CONTEXT_BEFORE``, ``CONTEXT_AFTER``, ``CONTEXT_COLUMN_WEIGHT``,
``DATE_COLUMN_WEIGHT``; kept exact by every store), so the words of the turn
that asked find the answer too, and "May 2023" finds what was said then.
A question that names a time ("há duas semanas", "last
week", "no dia 10 de março") adds a fifth leg, **when**: the candidates
said on those days (``caderno.memory.engines.when``).

The query legs each bring a pool of ``POOL`` candidates, deeper than what
is returned; the pools are fused (``FUSION``: weighted reciprocal rank, each
leg adding weight/(k + rank); the query legs weigh 1, salient 0.5, recent
0.25), deduplicated by message, cut to ``top`` and returned in conversation
order: thread by thread, then by sequence.

Vectors come from a per-process cache per resource
(``caderno.memory.engines.vector_cache``), refreshed incrementally from the
embeddings change feed and bounded in bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from ...core.clock import utcnow
from ...core.errors import UsageError
from ...core.messages import Message, check_text
from ...core.text import CONTEXT_AFTER, CONTEXT_BEFORE, date_words, fold, stems, tokenize
from ...core.validate import check_id
from ...stores import ops
from ...stores.base import Runner
from .importance import SALIENT
from .vector_cache import VectorIndex
from .when import find_window

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "FUSION",
    "Hits",
    "LEG_WEIGHTS",
    "MAX_LEG_LIMIT",
    "MAX_MESSAGE_RANGE",
    "MAX_QUERY_CHARS",
    "POOL",
    "POOL_LEGS",
    "RRF_K",
    "RecallQuery",
    "Recalled",
    "Retriever",
    "check_query",
    "check_recall_numbers",
    "clip_query",
    "fuse",
]

log = logging.getLogger("caderno.memory.engines.recall")
_T = TypeVar("_T")

#: Cosine threshold of the relevant leg. Questions and the statements that
#: answer them are far apart for this model (median 0.47, p10 0.32 on
#: bench/data); 0.25 keeps ~95 % of true answers and still drops unrelated
#: text (~0.0). aidaemon's 0.65 would lose most answers.
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
#: Most characters of a recall query (``UsageError`` past it, from every
#: interface: Python, HTTP, MCP, the CLI, the model's tool). The embedder reads
#: its first 256 tokens (~1,000 characters) and the lexical leg its first
#: ``MAX_QUERY_TERMS`` words, so a longer query finds nothing more; it only
#: costs parsing (dates, words, stems), which grows with it: 1 M characters of
#: varied words took 1.6 s here, and a 4 MB query 13.9 s. At 10,000 the
#: parse takes ~15 ms, in a worker thread (``INLINE_CHARS``). A turn's automatic
#: recall searches with the last ``MAX_QUERY_CHARS`` of the user's words
#: (``clip_query``) instead of refusing the turn.
MAX_QUERY_CHARS = 10_000
#: Texts up to this many characters are parsed on the event loop (well under
#: a millisecond: a worker thread's hop would cost about as much); longer
#: ones (a long query, a long hit whose words the lexical cover compares) in
#: a worker thread, so no recall holds the loop while it parses.
INLINE_CHARS = 2_000
#: When the question names a time ("há duas semanas", "last week", "on
#: March 10": caderno.memory.engines.when), the messages of those days found by any leg
#: form a "when" leg of this weight, and the query legs read this deep, so
#: a message of that day that ranks low on the words alone still comes up.
WHEN_POOL = 50

#: The learned-sparse rerank (``caderno.embeddings.splade``, SPLADE-tiny):
#: the first ``SPARSE_POOL`` candidates of the fused ranking are ranked again
#: by the dot product of their stored term weights with the query's, and the
#: two rankings fused once more by reciprocal rank (k ``RRF_K``): the fused
#: rank weighs 1, the sparse rank ``SPARSE_WEIGHT``. The pool holds most of
#: what the top 10 misses (LoCoMo: 0.936 of the evidence in the first 100
#: against 0.797 in the first 10). Chosen by bench/recall_tune.py on the
#: tuning parts (recall@10 of LoCoMo 0-2 / LongMemEval dev / en / pt): off
#: 0.797 / 0.788 / 0.943 / 0.694; 0.25: 0.809 / 0.831 / 0.920 / 0.694; 0.4:
#: 0.810 / 0.837 / 0.943 / 0.708; **0.5**: 0.806 / 0.847 / 0.943 / 0.722;
#: 0.75: 0.785 / 0.847 / 0.943 / 0.708 — 0.5 is the one that loses nowhere
#: and gains most. A pool of 200 changed nothing; 50 cost LongMemEval 0.006, pt 0.014.
#: Measured and left out: SPLADE as a first-stage leg over every message
#: (fused at 0.5 beside the rerank: LoCoMo 0-2 0.806 -> 0.777 for
#: LongMemEval +0.008), and at most 2-5 hits a thread (session-level
#: LongMemEval 0 to +0.014, turn-level LoCoMo down 0.011-0.134).
SPARSE_POOL = 100
SPARSE_WEIGHT = 0.5

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


class Hits(list[Recalled]):
    """What ``Memory.recall`` returns: the hits, a list as before, and how many messages it could not search by meaning.

    A recall first embeds the resource's pending messages, at most
    ``caderno.memory.engines.indexer.RECALL_EMBED_LIMIT`` of them (newest first);
    ``not_searchable`` counts those still waiting for a vector after that
    (beyond the bound, failed and retried later, or held by a worker past
    the wait). The lexical, salient and recent legs find them all the same.
    """

    not_searchable: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallQuery:
    """One recall's question and settings: ``Memory.recall``'s arguments, checked once, when it is made.

    Every way in (Python, HTTP, MCP, the ``recall`` tool, a turn's automatic
    recall) builds one, so the checks and the defaults are written here only.

    Raises:
        UsageError: a value of the wrong type or sign, or past its bound
            (``MAX_LEG_LIMIT``, ``MAX_MESSAGE_RANGE``, ``MAX_QUERY_CHARS``).
    """

    resource_id: str
    """Whose messages."""
    query: str
    """What to look for (the relevant and lexical legs)."""
    thread_id: str | None = None
    """The current thread (the recent leg needs it)."""
    scope: str = "resource"
    """``"resource"`` (all the resource's threads) or ``"thread"``."""
    recent: int = 10
    """How many the recent leg may return; 0 switches it off (likewise the next three)."""
    salient: int = 5
    relevant: int = 5
    lexical: int = 5
    min_similarity: float = DEFAULT_MIN_SIMILARITY
    """Cosine threshold of the relevant leg."""
    message_range: tuple[int, int] | int | None = None
    """Neighbours to add around each hit, ``(before, after)`` or one number for both (reason ``context``)."""
    top: int | None = None
    """Keep only the best ``top`` hits by fused score."""
    now: datetime | None = None
    """The moment the question is asked, which "yesterday" or "two weeks ago" in it count from (default: now)."""
    embed_pending: bool = True
    """Embed the resource's pending messages first; False searches only the vectors already stored."""

    def __post_init__(self) -> None:
        check_id(self.resource_id, "resource_id")
        if not isinstance(self.query, str):
            raise UsageError(f"query must be text, not {type(self.query).__name__}")
        check_text(self.query, "query")
        check_query(self.query)
        if self.message_range is not None:
            given = self.message_range
            pair = (given, given) if isinstance(given, int) else given
            if (
                not isinstance(pair, tuple | list)
                or len(pair) != 2
                or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in pair)
            ):
                raise UsageError(f"message_range must be a non-negative integer or a pair of them, not {given!r}")
            object.__setattr__(self, "message_range", (pair[0], pair[1]))
        if self.now is not None and (not isinstance(self.now, datetime) or self.now.tzinfo is None):
            raise UsageError(f"now must be a timezone-aware datetime, not {self.now!r}")
        top = self.top
        if top is not None and (not isinstance(top, int) or isinstance(top, bool) or top < 1):
            raise UsageError(f"top must be a positive integer or None, not {top!r}")
        if not isinstance(self.min_similarity, int | float) or isinstance(self.min_similarity, bool):
            raise UsageError(f"min_similarity must be a number, not {self.min_similarity!r}")
        if self.scope not in ("resource", "thread"):
            raise UsageError(f"scope must be 'resource' or 'thread', not {self.scope!r}")
        if self.thread_id is not None:
            check_id(self.thread_id, "thread_id")
        if self.scope == "thread" and self.thread_id is None:
            raise UsageError("scope='thread' needs a thread_id")
        for name, value in self.limits.items():
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a non-negative integer, not {value!r}")
        check_recall_numbers(self.limits, self.message_range, self.top)

    @property
    def limits(self) -> dict[str, int]:
        """How many each leg may return, by leg."""
        return {"recent": self.recent, "salient": self.salient, "relevant": self.relevant, "lexical": self.lexical}

    @property
    def within(self) -> str | None:
        """The thread the legs search in, or None for the whole resource."""
        return self.thread_id if self.scope == "thread" else None


@dataclass(kw_only=True)
class RecallPlan:
    """One recall between its two halves: the legs' ``reads`` (run them in any batch, in this
    order), then ``finish`` with their results.

    ``vector`` is the query's embedding: a future while it is computed beside
    the reads, the vector itself when the store searches it (``SearchVectors``).
    """

    retriever: Retriever
    names: list[str]
    reads: list[ops.Op[Any]]
    vector: Any
    resource_id: str
    thread_id: str | None
    within: str | None
    query: str
    window: Any
    depth: dict[str, int]
    limits: dict[str, int]
    min_similarity: float
    message_range: tuple[int, int] | int | None
    top: int | None
    not_searchable: int = 0
    sparse: Any = None
    """What scores candidates' sparse terms against the query, being made beside the reads (a future), or None."""

    async def finish(self, results: list[Any], *, top: int | None = None) -> Hits:
        """The hits, from the reads' ``results``; ``top`` overrides the plan's (a turn knows it once its history is read)."""
        legs = await self.retriever._legs(self, results)
        hits = Hits(await self.retriever._fuse(self, legs, top if top is not None else self.top))
        hits.not_searchable = self.not_searchable
        return hits


class Retriever:
    """The four legs and their fusion, over one store (used by ``Memory.recall``).

    The legs' reads go to the store as one batch (one transaction, one
    snapshot; on SQLite one trip to a reader thread), while the query is
    embedded beside it; the reads the fusion then needs (the best lexical
    hit's neighbours, the texts of the best hits) follow in small batches.
    """

    def __init__(
        self, run: Runner, indexer: Any, vectors: VectorIndex, batch: Any, supports: Callable[..., bool]
    ) -> None:
        self.run = run
        self.batch = batch
        self.supports = supports
        self.indexer = indexer
        self.vectors = vectors

    async def plan(self, q: RecallQuery) -> RecallPlan:
        """The legs' reads (for any batch of the caller's: a turn reads them with its context), the query
        embedding started beside them, and what ``finish`` needs to fuse what they find.

        Each query leg reads ``max(limit, POOL)`` candidates (``WHEN_POOL``
        when the question names a time, whose words are then left out of
        the search); the fused list is cut to ``top``, or, when ``top`` is
        None, to the sum of the legs' limits: the most a caller got before
        pools were deepened, so a caller that sizes its context by the
        limits still can.

        With ``embed_pending`` (and the relevant leg on), the resource's
        messages still waiting for a vector are embedded first, up to a
        bound (``Indexer.embed_pending``), so what was just written is
        found by meaning; those left are counted in ``not_searchable``.
        """
        resource_id, query, thread_id, within = q.resource_id, q.query, q.thread_id, q.within
        limits, message_range, top, min_similarity = q.limits, q.message_range, q.top, q.min_similarity
        now = utcnow() if q.now is None else q.now
        window, terms = await _off_loop(len(query), _parse_query, query, now)
        pool = WHEN_POOL if window is not None else POOL
        text = window.rest if window is not None else query
        depth = {leg: max(n, pool) if n and leg in POOL_LEGS else n for leg, n in limits.items()}
        reads: dict[str, ops.Op[Any]] = {}
        if (n := depth["recent"]) and thread_id is not None:
            reads["recent"] = ops.ReadThread(
                resource_id=resource_id, thread_id=thread_id, limit=max(4 * n, RECENT_WINDOW)
            )
        if n := depth["salient"]:
            reads["salient"] = ops.ReadSalient(resource_id=resource_id, threshold=SALIENT, limit=n, thread_id=within)
        if (n := depth["lexical"]) and terms:
            reads["lexical"] = ops.LexicalSearch(resource_id=resource_id, terms=tuple(terms), limit=n, thread_id=within)
        vector: Any = None
        not_searchable = 0
        if q.embed_pending and depth["relevant"] and text.strip() and self.indexer.active:
            not_searchable = await self.indexer.embed_pending(resource_id)
        if depth["relevant"] and text.strip() and self.indexer.active:
            model = self.indexer.embedder.name
            if self.supports(ops.SearchVectors):  # the store searches: the search needs the vector first
                vector = await self._embed(text)
                if vector is not None:
                    reads["relevant"] = ops.SearchVectors(
                        resource_id=resource_id,
                        model=model,
                        query=tuple(float(x) for x in vector),
                        k=depth["relevant"],
                        min_similarity=min_similarity,
                        thread_id=within,
                    )
            else:  # the feed now, the vector embedded meanwhile, the search in the cache once both are in
                reads["relevant"] = self.vectors.feed(resource_id, model, within)
                vector = asyncio.ensure_future(self._embed(text))
        sparse = None
        if self.indexer.sparse is not None and text.strip() and (depth["relevant"] or depth["lexical"]):
            sparse = asyncio.ensure_future(self._encode_sparse(text))
        return RecallPlan(
            retriever=self,
            sparse=sparse,
            names=list(reads),
            reads=list(reads.values()),
            vector=vector,
            resource_id=resource_id,
            thread_id=thread_id,
            within=within,
            query=query,
            window=window,
            depth=depth,
            limits=limits,
            min_similarity=min_similarity,
            message_range=message_range,
            top=top,
            not_searchable=not_searchable,
        )

    async def _legs(self, plan: RecallPlan, results: list[Any]) -> dict[str, list[tuple[int, float, Any]]]:
        """Every leg's candidates, ``(seq, value, (thread, message) or None)`` best first."""
        got = dict(zip(plan.names, results, strict=True))
        depth, thread_id = plan.depth, plan.thread_id
        legs: dict[str, list[tuple[int, float, Any]]] = {
            leg: [] for leg in ("recent", "salient", "relevant", "lexical")
        }
        if "recent" in got and thread_id is not None:
            replies = [m for m in got["recent"] if m.role == "user" or (m.role == "assistant" and not m.tool_calls)]
            legs["recent"] = [(m.seq or 0, 1.0, (thread_id, m)) for m in reversed(replies[-depth["recent"] :])]
        if "salient" in got:
            legs["salient"] = [(m.seq or 0, m.importance or 0.0, (tid, m)) for tid, m in got["salient"]]
        if "lexical" in got:
            legs["lexical"] = [(seq, score, None) for seq, score in got["lexical"]]
        if "relevant" in got:
            hits = got["relevant"]
            if isinstance(plan.vector, asyncio.Future):
                vector = await plan.vector
                feed = plan.reads[plan.names.index("relevant")]
                assert isinstance(feed, ops.ReadVectors)
                hits = (
                    []
                    if vector is None
                    else await self.vectors.search_rows(
                        feed,
                        self.indexer.embedder.dim,
                        hits,
                        vector,
                        depth["relevant"],
                        plan.min_similarity,
                        plan.within,
                    )
                )
            legs["relevant"] = [(seq, sim, None) for seq, sim in hits]
        return legs

    async def _fuse(
        self, plan: RecallPlan, legs: dict[str, list[tuple[int, float, Any]]], top: int | None
    ) -> list[Recalled]:
        """Fuse the legs' pools, keep the best distinct texts (plus neighbours), in conversation order."""
        resource_id, query, window = plan.resource_id, plan.query, plan.window
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
        fused = await self._rerank(plan, fused, values)
        keep = top if top is not None else sum(plan.limits[leg] for leg in ("recent", "salient", "relevant", "lexical"))
        best = await self._distinct(resource_id, sorted(fused, key=lambda seq: (-fused[seq], -seq)), keep, found)
        results = [
            Recalled(
                message=found[seq][1],
                thread_id=found[seq][0],
                reasons=frozenset(values[seq]) - {"sparse"},  # the sparse rerank orders, it finds nothing
                score=fused[seq],
                scores=values[seq],
            )
            for seq in best
        ]
        if plan.message_range:
            results += await self._context(resource_id, results, plan.message_range)
        return _conversation_order(results)

    async def _rerank(
        self, plan: RecallPlan, fused: dict[int, float], values: dict[int, dict[str, float]]
    ) -> dict[int, float]:
        """``fused`` with its first ``SPARSE_POOL`` ranked again by their sparse terms (see ``SPARSE_WEIGHT``)."""
        sparse = self.indexer.sparse
        scorer = await plan.sparse if plan.sparse is not None else None
        if scorer is None or sparse is None or not fused:
            return fused
        order = sorted(fused, key=lambda seq: (-fused[seq], -seq))
        pool = tuple(order[:SPARSE_POOL])
        terms = await self.run(ops.ReadSparse(resource_id=plan.resource_id, model=sparse.name, seqs=pool))
        seqs = [seq for seq in pool if seq in terms]
        if not seqs:
            return fused
        blobs = [terms[seq] for seq in seqs]
        scores = await asyncio.to_thread(scorer, blobs)  # ~1 ms of products: not on the loop
        ranked = sorted(((seq, float(v)) for seq, v in zip(seqs, scores, strict=True) if v > 0), key=lambda p: -p[1])
        for seq, value in ranked:
            values[seq]["sparse"] = value
        # Reciprocal rank fusion of the two rankings (``fuse``'s, written out for the places): a
        # candidate without terms (embedded before they were stored, until a reindex) keeps its fused
        # place in the sparse ranking too, so it is neither lifted nor sunk; those with terms take the
        # other places in their sparse order, and one whose terms match none of the query's gets none.
        places = [at for at, seq in enumerate(pool, 1) if seq in terms]
        sparse_rank = {seq: at for at, seq in enumerate(pool, 1) if seq not in terms}
        sparse_rank.update({seq: at for (seq, _), at in zip(ranked, places, strict=False)})
        out = {seq: 1.0 / (RRF_K + at) for at, seq in enumerate(order, 1)}
        for seq, at in sparse_rank.items():
            out[seq] += SPARSE_WEIGHT / (RRF_K + at)
        return out

    async def _encode_sparse(self, text: str) -> Callable[[Sequence[bytes]], Any] | None:
        """What scores the candidates' stored terms against the query (``splade.query_scorer``), or
        None when the encoder cannot give it (recall goes on without the rerank)."""
        sparse = self.indexer.sparse
        if sparse is None:
            return None
        from ...embeddings.splade import query_scorer

        try:
            return await asyncio.to_thread(query_scorer, sparse, text)
        except Exception as exc:  # noqa: BLE001 - the rerank is an extra: recall goes on without it
            log.warning("query sparse encoding failed: %s", exc)
            return None

    async def _lexical_share(
        self, resource_id: str, query: str, lexical: list[tuple[int, float, Any]], found: dict[int, tuple[str, Message]]
    ) -> float:
        """The share of its weight the lexical leg keeps for ``query`` (see ``COVER_LOW``).

        Reads the best lexical hit and its neighbours (one small read), to
        see its indexed row as the full-text index does.
        """
        words = await _off_loop(len(query), _stemmed_words, query)
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
        cover = await _off_loop(sum(map(len, row)), _cover, row, words)
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
            present = [seq for seq in chunk if seq in found]  # one deleted since its vector was cached is not
            texts = [found[seq][1].content for seq in present]
            # Folding a million-character message held the event loop ~70 ms: long ones fold in a thread.
            for seq, text in zip(present, await _off_loop(sum(map(len, texts)), _distinct_keys, texts), strict=True):
                if text not in seen and len(best) < keep:
                    seen.add(text)
                    best.append(seq)
        return best

    async def _read_missing(self, resource_id: str, seqs: list[int], found: dict[int, tuple[str, Message]]) -> None:
        missing = tuple(seq for seq in seqs if seq not in found)
        if missing:
            for tid, m in await self.run(ops.ReadBySeq(resource_id=resource_id, seqs=missing)):
                found[m.seq or 0] = (tid, m)

    async def _embed(self, text: str) -> Any:
        """The query's vector, or None when the model cannot give one (recall goes on without the leg).

        It comes from the model's embedding service (``caderno.embeddings.batcher``): in one model
        call with concurrent recalls' queries and pending messages, or from its cache of recent
        queries (the same read-only array for the same text).
        """
        try:
            from ...embeddings.batcher import batcher  # on first use: see indexer.batcher

            vector = await batcher(self.indexer.embedder).query(text)
        except Exception as exc:  # noqa: BLE001 - the model may be missing; recall goes on without this leg
            from ...core.errors import EmbeddingUnavailable

            if isinstance(exc, EmbeddingUnavailable) and self.indexer.unavailable is None:
                self.indexer.unavailable = str(exc)
                log.warning("embeddings are off: %s; recall falls back to lexical and salient search", exc)
            elif not isinstance(exc, EmbeddingUnavailable):
                log.warning("query embedding failed: %s", exc)
            return None
        return vector

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


def check_query(query: str) -> None:
    """Refuse a query past ``MAX_QUERY_CHARS``, before any work on it.

    Raises:
        UsageError: naming its length and the limit.
    """
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}")


def clip_query(text: str) -> str:
    """The last ``MAX_QUERY_CHARS`` characters of ``text``: what a turn's automatic recall searches
    with when the user's words are longer (the question usually ends a pasted text)."""
    return text[-MAX_QUERY_CHARS:]


async def _off_loop(size: int, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` on the loop for a text of ``size`` characters up to ``INLINE_CHARS``, else in a thread."""
    if size <= INLINE_CHARS:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _parse_query(query: str, now: datetime) -> tuple[Any, list[str]]:
    """The time window ``query`` names (None: none) and its distinct words for the lexical leg."""
    window = find_window(query, now) if LEG_WEIGHTS.get("when") and query.strip() else None
    # The time words stay in the lexical query: the date column matches them.
    return window, list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]


def _stemmed_words(query: str) -> list[str]:
    """The query's distinct words that have a stem (what the lexical cover counts)."""
    return [w for w in dict.fromkeys(fold(query).split()) if stems(w)]


def _distinct_keys(texts: list[str]) -> list[str]:
    """What ``_distinct`` compares: each text folded, its whitespace collapsed."""
    return [" ".join(fold(text).split()) for text in texts]


def _cover(row: list[str], words: list[str]) -> float:
    """The share of ``words`` whose stems are in ``row`` (a hit's indexed texts)."""
    have = set(stems(" ".join(row)))
    return sum(1 for w in words if have.intersection(stems(w))) / len(words)


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
