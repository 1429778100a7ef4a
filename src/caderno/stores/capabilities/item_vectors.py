"""Item vectors (``ITEM_VECTORS``): the items' embedding queue and vectors, kept like message vectors.

Semantic search of the LangGraph store: the worker claims an item's
texts, stores their vectors only while the item is still at the version
it embedded, and a search ranks the items by them (``RankItems``, in the
plan: only the best few leave it) or reads them back (``ReadItemVectors``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.records import Item
from .._op import Op, operations_in, plan_of
from .._rows import loads
from .._sql import Dialect, Plan, Q, later, marks
from .items import (
    DUE_AT_ONCE,
    ITEM_COLUMNS,
    ITEM_KEY,
    Condition,
    filtered,
    item_from_row,
    json_condition,
    path_text,
    under,
)

__all__ = [
    "ClaimItemEmbeddings",
    "FinishItemEmbeddings",
    "ItemEmbeddingJob",
    "ItemVectors",
    "RankItems",
    "ReadItemVectors",
]


@dataclass(frozen=True, slots=True)
class ItemEmbeddingJob:
    """An item waiting for the vectors of its texts (the version written at ``updated_at``)."""

    resource_id: str
    namespace: tuple[str, ...]
    key: str
    updated_at: datetime
    texts: tuple[str, ...]
    attempts: int


@dataclass(frozen=True, slots=True)
class ItemVectors:
    """The vectors of one item's texts, one per text, in the order of its job's texts."""

    namespace: tuple[str, ...]
    key: str
    updated_at: datetime
    """The version of the item they describe."""
    dim: int
    vectors: bytes  # float32, row-major, len(texts) * dim * 4 bytes


def _when(value: Any) -> Any:
    return from_iso(value) if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimItemEmbeddings(Op[list[ItemEmbeddingJob]]):
    """Take up to ``limit`` due item jobs (of every resource) off the queue for ``lease_seconds``.

    As ``ClaimEmbeddings``: a claimed job is invisible to other workers
    until its lease ends; the model is named when the vectors are stored.
    """

    writes: ClassVar[bool] = True
    limit: int
    lease_seconds: float
    now: datetime


@plan_of(ClaimItemEmbeddings)
def claim_item_embeddings(d: Dialect, op: ClaimItemEmbeddings) -> Plan[list[ItemEmbeddingJob]]:
    # PostgreSQL: SKIP LOCKED, so workers on any number of machines take
    # disjoint batches; the lease (not_before) keeps them theirs after the
    # commit. SQLite: the single writer serialises claims.
    rows = yield Q(
        "SELECT resource_id, namespace, key, updated_at, texts, attempts FROM item_embeddings "
        f"WHERE vectors IS NULL AND not_before <= ? ORDER BY not_before LIMIT ?{d.skip_locked}",
        (d.ts(op.now), op.limit),
    )
    yield Q(
        f"UPDATE item_embeddings SET not_before = ? WHERE {ITEM_KEY}",
        [(later(d, op.now, op.lease_seconds), *r[:3]) for r in rows],
        "many",
    )
    return [
        ItemEmbeddingJob(
            resource_id=r[0],
            namespace=tuple(r[1].split(".")),
            key=r[2],
            updated_at=_when(r[3]),
            texts=tuple(loads(r[4])),
            attempts=r[5],
        )
        for r in rows
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishItemEmbeddings(Op[None]):
    """Store the vectors of claimed jobs ``(job, float32 bytes)``; record failures
    ``(job, error, retry_after_seconds)``.

    Only where the item is still at the job's ``updated_at``: a job whose
    item was written again (or deleted) meanwhile is dropped, so the old
    value's vectors never reach the new value.
    """

    writes: ClassVar[bool] = True
    model: str
    dim: int
    done: tuple[tuple[ItemEmbeddingJob, bytes], ...]
    failed: tuple[tuple[ItemEmbeddingJob, str, float], ...]
    now: datetime


def _version(job: ItemEmbeddingJob) -> tuple[Any, ...]:
    return (job.resource_id, path_text(job.namespace), job.key, job.updated_at, job.texts)


@plan_of(FinishItemEmbeddings)
def finish_item_embeddings(d: Dialect, op: FinishItemEmbeddings) -> Plan[None]:
    jobs = [job for job, _ in op.done] + [job for job, _, _ in op.failed]
    current: set[tuple[Any, ...]] = set()
    for rid in sorted({j.resource_id for j in jobs}):
        keys = sorted({(path_text(j.namespace), j.key) for j in jobs if j.resource_id == rid})
        # Rows another transaction holds are passed over (PostgreSQL): it is
        # replacing or deleting them, so their result would be stale, and the
        # worker never waits on a writer (no lock-order deadlock with puts or
        # erases). A job passed over in a transaction that rolls back is
        # claimed again when its lease ends.
        rows = yield Q(
            "SELECT namespace, key, updated_at, texts FROM item_embeddings WHERE resource_id = ? "
            f"AND (namespace, key) IN (VALUES {','.join(['(?, ?)'] * len(keys))}) "
            f"ORDER BY namespace, key{d.skip_locked}",
            (rid, *(v for k in keys for v in k)),
        )
        current.update((rid, ns, key, _when(at), tuple(loads(texts))) for ns, key, at, texts in rows)
    # Only while the item is still at the job's version: a put since then
    # queued its new value, and the old value's vectors must not reach it.
    yield Q(
        f"UPDATE item_embeddings SET model = ?, dim = ?, vectors = ?, error = NULL WHERE {ITEM_KEY}",
        [
            (op.model, op.dim, v, j.resource_id, path_text(j.namespace), j.key)
            for j, v in op.done
            if _version(j) in current
        ],
        "many",
    )
    yield Q(
        f"UPDATE item_embeddings SET attempts = attempts + 1, error = ?, not_before = ? WHERE {ITEM_KEY}",
        [
            (error, later(d, op.now, after), j.resource_id, path_text(j.namespace), j.key)
            for j, error, after in op.failed
            if _version(j) in current
        ],
        "many",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadItemVectors(Op[list[ItemVectors]]):
    """The stored vectors of ``model`` of the items whose namespace starts with ``prefix``.

    Items still queued, or embedded by another model, have none. ``where``
    (as ``SearchItems.where``) keeps only the vectors of the items that meet it.
    """

    one_statement: ClassVar[bool] = True
    resource_id: str
    prefix: tuple[str, ...]
    model: str
    where: tuple[tuple[tuple[str, ...], str, Any], ...] = ()


#: The filtered items (the CTE ``i`` of ``items.filtered``) and their vectors. CROSS JOIN keeps the
#: items first on SQLite: each item's filter is read once and only the kept ones' vectors are
#: looked up (the other way round it looks an item up for every vector, ~2 ms of 5,000).
FILTERED_FIRST = "i CROSS JOIN item_embeddings e"
JOINED = "i.namespace = e.namespace AND i.key = e.key"


@plan_of(ReadItemVectors)
def read_item_vectors(
    d: Dialect, op: ReadItemVectors, condition: Condition = json_condition
) -> Plan[list[ItemVectors]]:
    """The shared plan; ``condition`` writes each condition of ``where`` (``items.Condition``)."""
    if op.where:
        # Only the vectors of the items the filter keeps, joined on the item's key.
        cte, kept, at, of = filtered(d, op.resource_id, op.prefix, op.where, condition)
        rows = yield Q(
            f"{cte} SELECT e.namespace, e.key, e.updated_at, e.dim, e.vectors FROM {FILTERED_FIRST} "
            f"WHERE {JOINED} AND e.resource_id = ? AND e.model = ? AND e.vectors IS NOT NULL AND {kept} "
            "ORDER BY e.namespace, e.key",
            [*at, op.resource_id, op.model, *of],
        )
    else:
        within, prefix = under(op.prefix)
        rows = yield Q(
            "SELECT namespace, key, updated_at, dim, vectors FROM item_embeddings WHERE resource_id = ? AND model = ? "
            f"AND vectors IS NOT NULL AND {within} ORDER BY namespace, key",
            (op.resource_id, op.model, *prefix),
        )
    return [
        ItemVectors(namespace=tuple(r[0].split(".")), key=r[1], updated_at=_when(r[2]), dim=r[3], vectors=bytes(r[4]))
        for r in rows
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class RankItems(Op["list[tuple[Item, float]]"]):
    """The ``k`` items under ``prefix`` that meet ``where`` whose vectors best match ``query``, best
    first, each with its score: the items alone read, not every one ranked.

    An item's score is the best dot product of its texts' vectors with
    ``query`` (``best_scores``; embedders give unit vectors, so it is the
    cosine). Only items with stored vectors of ``model`` and of
    ``len(query)`` dimensions are ranked. Equal scores keep recency order
    (as ``SearchItems``: ``updated_at`` descending, then namespace, then
    key). ``where`` is as ``SearchItems.where``.

    Fewer than ``k`` come back when fewer items are scored, or when one of
    the best was written again (or deleted) between the read of the vectors
    and the read of the items (only those still at the version their
    vectors describe come back): the caller reads the search whole then.
    """

    resource_id: str
    prefix: tuple[str, ...]
    model: str
    query: tuple[float, ...]
    k: int
    where: tuple[tuple[tuple[str, ...], str, Any], ...] = ()


@plan_of(RankItems)
def rank_items(d: Dialect, op: RankItems, condition: Condition = json_condition) -> Plan[list[tuple[Item, float]]]:
    """The shared plan: the vectors read in one statement and ranked here (in the plan's thread), then
    the best ``k`` items read in another.

    ``condition`` writes each condition of ``where`` (``items.Condition``).
    """
    import numpy as np

    dim = len(op.query)
    if op.k <= 0 or not dim:
        return []
    columns = "e.namespace, e.key, e.updated_at, e.vectors"
    scored = "e.resource_id = ? AND e.model = ? AND e.dim = ? AND e.vectors IS NOT NULL"
    if op.where:
        cte, kept, at, of = filtered(d, op.resource_id, op.prefix, op.where, condition)
        rows = yield Q(
            f"{cte} SELECT {columns} FROM {FILTERED_FIRST} WHERE {JOINED} AND {scored} AND {kept}",
            [*at, op.resource_id, op.model, dim, *of],
        )
    else:
        within, prefix = under(op.prefix)
        rows = yield Q(
            f"SELECT {columns} FROM item_embeddings e WHERE {scored} AND {within}",
            (op.resource_id, op.model, dim, *prefix),
        )
    rows = [r for r in rows if r[3]]
    if not rows:
        return []
    best = best_scores([r[3] for r in rows], np.asarray(op.query, dtype=np.float32))
    if len(rows) > op.k:  # every item scoring at least the k-th best: those tied at the cut come too
        cut = np.partition(best, len(rows) - op.k)[len(rows) - op.k]
        candidates = np.flatnonzero(best >= cut).tolist()
    else:
        candidates = list(range(len(rows)))
    scores = best.tolist()
    # Recency order first (stable sorts: the last one sorted by is the first key), then the best score.
    candidates.sort(key=lambda j: (rows[j][0], rows[j][1]))
    candidates.sort(key=lambda j: rows[j][2], reverse=True)
    candidates.sort(key=lambda j: -scores[j])
    best_k = candidates[: op.k]
    # Two lists, not pairs: SQLite looks each up on the primary key (pairs, it would scan the resource).
    spaces, keys = sorted({rows[j][0] for j in best_k}), sorted({rows[j][1] for j in best_k})
    found = yield Q(
        f"SELECT {ITEM_COLUMNS} FROM items WHERE resource_id = ? "
        f"AND namespace IN ({marks(len(spaces))}) AND key IN ({marks(len(keys))})",
        [op.resource_id, *spaces, *keys],
    )
    # Only an item still at the version its vectors describe (the stored times compared as stored).
    current = {(r[0], r[1]): r for r in found}
    ranked = []
    for j in best_k:
        row = current.get((rows[j][0], rows[j][1]))
        if row is not None and row[4] == rows[j][2]:
            ranked.append((item_from_row(op.resource_id, row), scores[j]))
    return ranked


def best_scores(vectors: list[bytes], query: Any) -> Any:
    """Each item's score: the best dot product of its texts' vectors with ``query``.

    ``vectors``: each item's, float32 bytes, ``len(query)`` each, none empty.

    Summed in float64 and given as float32, so an item's score does not
    depend on which other items are ranked with it (the order of a float32
    sum may follow the matrix's shape): a ranked page and the whole ranking
    agree exactly.
    """
    import numpy as np

    dim = query.shape[-1]
    joined = b"".join(vectors)
    matrix = np.frombuffer(joined, dtype=np.float32).reshape(-1, dim)
    dots = (matrix.astype(np.float64) @ query.astype(np.float64)).astype(np.float32)
    if len(joined) == len(vectors) * 4 * dim:  # one vector each (one text per item): the dots are the scores
        return dots
    counts = np.fromiter(map(len, vectors), dtype=np.int64, count=len(vectors)) // (4 * dim)
    return np.maximum.reduceat(dots, np.concatenate(([0], np.cumsum(counts[:-1]))))


def requeue_items(d: Dialect, resource_id: str | None) -> Q:
    """Drop the items' vectors (of one resource or all) and queue their texts again (``Reindex``)."""
    where, params = (" WHERE resource_id = ?", (resource_id,)) if resource_id is not None else ("", ())
    return Q(
        "UPDATE item_embeddings SET model = NULL, dim = NULL, vectors = NULL, attempts = 0, error = NULL, "
        f"not_before = ?{where}",
        (d.ts(DUE_AT_ONCE), *params),
        "none",
    )


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
