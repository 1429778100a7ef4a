"""Recall (``RECALL``): the embedding queue, vectors, learned-sparse terms, full text and salience.

The claims, the lease renewal, full text and seq lookups are planned per
dialect (``_sqlite_plans``, ``_postgres_plans``); the rest run the plan
beside them on both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, Protocol

from ...core.messages import Message
from .._op import Op, operations_in, plan_of
from .._rows import EVENT_COLUMNS, EVENTS_OF_THREAD, row_to_message
from .._sql import Dialect, Plan, Q, enqueue_embeddings, later, marks
from .item_vectors import requeue_items

__all__ = [
    "ClaimEmbeddings",
    "CountPendingEmbeddings",
    "EmbeddingJob",
    "FinishEmbeddings",
    "LexicalSearch",
    "ReadBySeq",
    "ReadNeighbours",
    "ReadSalient",
    "ReadSparse",
    "ReadVectors",
    "Reindex",
    "RenewEmbeddings",
    "VectorRows",
    "VectorSink",
]


@dataclass(frozen=True, slots=True)
class EmbeddingJob:
    """A message waiting for its vector."""

    resource_id: str
    seq: int
    content: str
    attempts: int


@dataclass(frozen=True, slots=True)
class VectorRows:
    """New vectors of one resource since a change-feed position, in a few large values.

    A resource's first read brings ~100k vectors; an object per vector cost
    more than the rest of the load together, so the vectors come as blocks
    and the threads as one list per thread. The vector cache takes the
    blocks out of ``vectors`` and ``codes`` as it copies them (those lists
    are left empty), so the store's bytes and the cache's rows are never all
    held at once.
    """

    seqs: list[int]
    """The vectors' seqs in change-feed order, those stored as float32 alone first, then those
    stored with their codes; a seq read twice (PostgreSQL's overlap window) is there twice, and
    its later vector is the current one."""
    vectors: list[bytes]
    """float32, row-major, in the order of ``seqs``: the blocks together hold the first
    ``len(seqs) - coded`` vectors, each block a whole number of them."""
    threads: dict[str, list[int]]
    """Each thread's seqs: every seq of ``seqs`` (unless deleted meanwhile), maybe others; with
    ``ReadVectors.threads`` ``"all"`` every message's of the resource, with ``"none"`` empty."""
    last_id: int
    """The change-feed position to read after next time."""
    coded: int = 0
    """How many of ``seqs``, the last ones, come as ``codes``."""
    codes: list[bytes] = field(default_factory=list)
    """The codes stored beside those vectors (``FinishEmbeddings.codes``), ``2 * dim + 8`` bytes a
    vector (the vector cache's ``code_dtype``), in the order of ``seqs``, each block a whole number."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimEmbeddings(Op[list[EmbeddingJob]]):
    """Take up to ``limit`` due messages off the queue for ``lease_seconds``.

    A claimed job is invisible to other workers until its lease ends, so
    workers in any number of processes share the queue without doubling
    work; a worker that dies just lets the lease expire.

    ``resource_id``: only that resource's jobs, newest first (a recall
    embedding what was just written before it searches).
    """

    writes: ClassVar[bool] = True
    limit: int
    lease_seconds: float
    now: datetime
    resource_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishEmbeddings(Op[None]):
    """Store vectors ``(resource_id, seq, float32 bytes)`` and drop their jobs; record
    failures ``(resource_id, seq, error, retry_after_seconds)``.

    ``codes``: empty, or each vector's quantized form (the vector cache's
    ``quantize``), one per ``done`` in its order, stored beside it so a
    cache's first load reads these instead of quantizing the vectors.

    ``sparse``: empty, or each message's learned-sparse term weights
    (``caderno.embeddings.splade``'s packed form; ``b""`` for none), one per
    ``done``, stored under ``sparse_model`` beside its vector and deleted
    with it: an edit, a delete, an erase or a reindex leaves none stale.
    """

    writes: ClassVar[bool] = True
    model: str
    dim: int
    done: tuple[tuple[str, int, bytes], ...]
    failed: tuple[tuple[str, int, str, float], ...]
    now: datetime
    codes: tuple[bytes, ...] = ()
    sparse: tuple[bytes, ...] = ()
    sparse_model: str = ""


@plan_of(FinishEmbeddings)
def finish_embeddings(d: Dialect, op: FinishEmbeddings, *, vec: bool = False) -> Plan[None]:
    """With ``vec`` (PostgreSQL with pgvector) each vector is stored as a pgvector value too."""
    done = [(rid, seq) for rid, seq, _ in op.done]
    live: set[tuple[str, int]] = set()
    for rid in sorted({rid for rid, _ in done}):
        seqs = sorted(seq for r, seq in done if r == rid)
        # Locked one finish at a time (in seq order: no deadlock): two finishes of one message (a
        # recall embedding what its worker holds, a lease run out) would both delete, then both
        # insert under the unique key; the second now waits, then replaces the first's vector.
        rows = yield Q(
            f"SELECT seq FROM events WHERE resource_id = ? AND seq IN ({marks(len(seqs))}) ORDER BY seq{d.no_key_update}",
            (rid, *seqs),
        )
        live.update((rid, r[0]) for r in rows)
    # A new row (new feed id) even when re-embedding, so vector caches reading
    # the change feed see it; a message deleted meanwhile gets no vector.
    yield Q(
        "DELETE FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?", [(*k, op.model) for k in done], "many"
    )
    rows = [(rid, seq, op.model, op.dim, vector) for rid, seq, vector in op.done if (rid, seq) in live]
    if vec:
        yield Q(
            "INSERT INTO embeddings (resource_id, seq, model, dim, vector, vec) VALUES (?, ?, ?, ?, ?, ?::vector)",
            [(*row, vector_text(row[4])) for row in rows],
            "many",
        )
    else:
        yield Q("INSERT INTO embeddings (resource_id, seq, model, dim, vector) VALUES (?, ?, ?, ?, ?)", rows, "many")
    if op.codes:  # beside each vector, under its change-feed id (read_vectors reads them in its place)
        yield Q(
            "INSERT INTO embedding_codes (resource_id, id, model, seq, codes) SELECT ?, id, model, seq, ? "
            "FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?",
            [
                (rid, codes, rid, seq, op.model)
                for (rid, seq, _), codes in zip(op.done, op.codes, strict=True)
                if (rid, seq) in live
            ],
            "many",
        )
    if op.sparse:  # as the codes: under the vector's id, deleted with it
        yield Q(
            "INSERT INTO sparse_terms (resource_id, id, model, seq, terms) SELECT ?, id, ?, seq, ? "
            "FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?",
            [
                (rid, op.sparse_model, terms, rid, seq, op.model)
                for (rid, seq, _), terms in zip(op.done, op.sparse, strict=True)
                if (rid, seq) in live and terms
            ],
            "many",
        )
    yield Q("DELETE FROM embedding_queue WHERE resource_id = ? AND seq = ?", done, "many")
    yield Q(
        "UPDATE embedding_queue SET attempts = attempts + 1, error = ?, not_before = ? WHERE resource_id = ? AND seq = ?",
        [(error, later(d, op.now, after), rid, seq) for rid, seq, error, after in op.failed],
        "many",
    )


def vector_text(vector: bytes) -> str:
    """float32 bytes as pgvector's text form; ``repr`` of each float32 reads back exactly."""
    from array import array

    return "[" + ",".join(map(repr, array("f", vector))) + "]"


@dataclass(frozen=True, kw_only=True, slots=True)
class RenewEmbeddings(Op[None]):
    """Extend the lease of claimed jobs ``(resource_id, seq)`` to ``now + lease_seconds`` while a batch embeds.

    Only a job still leased (``not_before`` after ``now``) is extended: one
    whose lease ran out is whoever claims it next's, and one finished (or
    queued again by an edit) is not taken back. No token: a renewal that
    extends a lease another worker took after this one's ran out only
    delays that batch should its worker die too, and two workers embedding
    one text store one vector (the finish replaces it, under a unique key).
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    jobs: tuple[tuple[str, int], ...]
    lease_seconds: float
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class CountPendingEmbeddings(Op[int]):
    """How many messages wait for a vector (leased or not); ``resource_id``: that resource's only.

    ``failed=False`` leaves out the jobs whose embedding failed before (they
    wait out a backoff, not a worker that is embedding them now).
    """

    one_statement: ClassVar[bool] = True
    resource_id: str | None = None
    failed: bool = True


@plan_of(CountPendingEmbeddings)
def count_pending_embeddings(d: Dialect, op: CountPendingEmbeddings) -> Plan[int]:
    where = ["resource_id = ?"] if op.resource_id is not None else []
    if not op.failed:
        where.append("attempts = 0")
    sql = "SELECT count(*) FROM embedding_queue" + (" WHERE " + " AND ".join(where) if where else "")
    row = yield Q(sql, () if op.resource_id is None else (op.resource_id,), "one")
    return int(row[0])


class VectorSink(Protocol):
    """What takes a resource's vectors block by block as ``ReadVectors`` reads them (``ReadVectors.into``)."""

    def expect(self, vectors: int) -> None:
        """About how many vectors will come (those stored when the read began), before the first."""

    def take(self, seqs: list[int], block: bytes, coded: bool) -> None:
        """``len(seqs)`` vectors in change-feed order, as in ``VectorRows``: float32 rows, or their
        codes when ``coded``; the float32 ones all come first, and a seq may come twice (the later
        copy is the current vector)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadVectors(Op[VectorRows]):
    """The resource's vectors of ``model`` written after change-feed id ``after_id``."""

    resource_id: str
    model: str
    after_id: int
    threads: Literal["new", "all", "none"] = "new"
    """Whose threads come with them (``VectorRows.threads``): ``"new"``, the new vectors' (at
    ``after_id`` 0 every message's of the resource); ``"all"``, every message's of the resource
    whatever ``after_id``; ``"none"``, none: a resource's first read then skips the scan of its
    messages, ~15% of it at 100k vectors (a search over the whole resource needs no threads)."""
    into: VectorSink | None = None
    """Where each block goes as soon as it is read (in the store's thread, or its event loop),
    instead of into the result (whose ``seqs``, ``vectors`` and ``codes`` then come empty): a
    resource's first read then never holds its blocks all at once, ~80 MB at 100k vectors."""


#: Vectors one statement of ``read_vectors`` hands back as one value (4,096 x
#: 776 bytes of codes is 3.2 MB). Reading 100k codes took the same CPU time at
#: 1,024 to 8,192 a statement on SQLite here, and ~25% less at 4,096 than at
#: 1,024 on PostgreSQL (each statement is a round trip). Not all in one:
#: ``group_concat`` and ``string_agg`` grow their buffer by doubling, and one
#: SQLite value may not pass 1 GB. PostgreSQL reads the ids its overlap window
#: covers in larger statements (``_read_blocks``).
VECTOR_READ_CHUNK = 4_096


@plan_of(ReadVectors)
def read_vectors(d: Dialect, op: ReadVectors) -> Plan[VectorRows]:
    """The vectors after ``op.after_id`` in a few large values: no Python object per vector.

    A vector stored with its codes (``embedding_codes``) comes as those
    codes, half the bytes and already quantized; one stored before them
    comes as float32, read only when the two tables' counts say some lack
    codes. Each statement joins up to ``VECTOR_READ_CHUNK`` vectors into one
    blob and their seqs into one text, in change-feed order; the threads
    come apart, one row per thread, only as ``op.threads`` asks. A
    resource's first read takes them from ``events`` alone (its thread index
    holds them), not through a join per vector.
    """
    feed = (op.resource_id, op.model, max(0, op.after_id - d.feed_overlap) if op.after_id else 0)
    stored, coded, newest = yield Q(
        "SELECT (SELECT count(*) FROM embeddings WHERE resource_id = ? AND model = ? AND id > ?), "
        "(SELECT count(*) FROM embedding_codes WHERE resource_id = ? AND model = ? AND id > ?), "
        "(SELECT coalesce(max(id), 0) FROM embeddings WHERE resource_id = ? AND model = ?)",
        (*feed, *feed, op.resource_id, op.model),
        "one",
    )
    if op.into is not None:
        op.into.expect(stored)
    # The resource's newest vector is visible, so no row that far below it can still appear (_read_blocks).
    settled = newest - d.feed_overlap
    seqs: list[int] = []
    blocks: list[bytes] = []
    last_id = op.after_id
    read = 0
    if stored > coded:
        seqs, blocks, last_id, read = yield from _read_blocks(
            d,
            op,
            settled,
            "SELECT id, seq, vector AS value FROM embeddings m WHERE resource_id = ? AND model = ? "
            "AND id > ? AND id <= ? "
            "AND NOT EXISTS (SELECT 1 FROM embedding_codes c WHERE c.resource_id = m.resource_id AND c.id = m.id)",
            coded=False,
        )
    coded_seqs, codes, coded_last, coded_read = yield from _read_blocks(
        d,
        op,
        settled,
        "SELECT id, seq, codes AS value FROM embedding_codes WHERE resource_id = ? AND model = ? "
        "AND id > ? AND id <= ?",
        coded=True,
    )
    last_id = max(last_id, coded_last)
    seqs += coded_seqs
    threads: dict[str, list[int]] = {}
    if op.threads == "all" or (op.threads == "new" and read + coded_read):
        concat = "group_concat" if d.name == "sqlite" else "string_agg"
        if op.after_id and op.threads == "new":  # a refresh: the threads of the new vectors alone
            rows = yield Q(
                f"SELECT e.thread_id, {concat}(CAST(e.seq AS TEXT), ',') FROM embeddings m "
                "JOIN events e ON e.resource_id = m.resource_id AND e.seq = m.seq "
                "WHERE m.resource_id = ? AND m.model = ? AND m.id > ? GROUP BY e.thread_id",
                (op.resource_id, op.model, max(0, op.after_id - d.feed_overlap)),
            )
        else:
            rows = yield Q(
                f"SELECT thread_id, {concat}(CAST(seq AS TEXT), ',') FROM events WHERE resource_id = ? "
                "GROUP BY thread_id",
                (op.resource_id,),
            )
        threads = {thread_id: json.loads(f"[{text}]") for thread_id, text in rows}
    return VectorRows(seqs=seqs, vectors=blocks, threads=threads, last_id=last_id, coded=len(coded_seqs), codes=codes)


def _read_blocks(
    d: Dialect, op: ReadVectors, settled: int, rows: str, *, coded: bool
) -> Plan[tuple[list[int], list[bytes], int, int]]:
    """The seqs, glued ``value`` blocks, last id and number of vectors of ``rows`` (a SELECT of ``id, seq,
    value`` over the feed's resource, model and ids above and up to a bound, in that order of parameters)
    past ``op.after_id``; the seqs and blocks go to ``op.into`` instead when it is set.

    On PostgreSQL identity values are drawn at insert but become visible at
    commit, so a row with a lower id can appear after a higher one was read,
    though never ``feed_overlap`` ids below one visible (the caller keeps the
    later copy of a seq read twice; the next read starts that far below this
    one's last id). Ids up to ``settled`` (that far below the resource's
    newest when the read began) are read once, ``VECTOR_READ_CHUNK`` a statement;
    those above, rarely more than one statement's worth, the old way: each
    statement re-reads the window below the last id it saw, and reads several
    times the window, so each moves on and a re-read costs at most a fifth of
    it. SQLite's single writer needs no window: its ``settled`` is the
    newest id itself.
    """
    concat, blob = (
        ("group_concat", "CAST(group_concat(value, '') AS BLOB)")
        if d.name == "sqlite"
        else ("string_agg", "string_agg(value, ''::bytea)")
    )
    sql = (
        f"SELECT count(*), max(id), {concat}(CAST(seq AS TEXT), ','), {blob} FROM ({rows} ORDER BY id LIMIT ?) AS chunk"
    )
    seqs: list[int] = []
    blocks: list[bytes] = []
    last_id = op.after_id
    read = 0
    start = max(0, op.after_id - d.feed_overlap) if op.after_id else 0
    while True:
        below = start < settled  # ids still settled: once each
        step = VECTOR_READ_CHUNK if below else VECTOR_READ_CHUNK + 4 * d.feed_overlap
        count, top, seq_text, values = yield Q(
            sql, (op.resource_id, op.model, start, settled if below else _NO_ID_ABOVE, step), "one", binary=True
        )
        if count:
            these = json.loads(f"[{seq_text}]")  # twice as fast as int() on each
            if op.into is not None:
                op.into.take(these, bytes(values), coded)
            else:
                seqs += these
                blocks.append(bytes(values))
            last_id = max(last_id, top)
            read += count
        if below:
            start = top if count == step else settled
        elif count < step:
            break
        else:
            start = top - d.feed_overlap
    return seqs, blocks, last_id, read


#: An id above every id (the bound of a read past the settled ids).
_NO_ID_ABOVE = 2**62


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSparse(Op[dict[int, bytes]]):
    """The learned-sparse term weights of ``model`` stored for the resource's messages ``seqs``
    (``FinishEmbeddings.sparse``), by seq; a message without them is absent."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    model: str
    seqs: tuple[int, ...]


@plan_of(ReadSparse)
def read_sparse(d: Dialect, op: ReadSparse) -> Plan[dict[int, bytes]]:
    if not op.seqs:
        return {}
    rows = yield Q(
        f"SELECT seq, terms FROM sparse_terms WHERE resource_id = ? AND model = ? AND seq IN ({marks(len(op.seqs))})",
        (op.resource_id, op.model, *op.seqs),
    )
    return {int(seq): bytes(terms) for seq, terms in rows}


@dataclass(frozen=True, kw_only=True, slots=True)
class LexicalSearch(Op[list[tuple[int, float]]]):
    """``(seq, score)`` of messages matching any term, best first (higher is better)."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    terms: tuple[str, ...]
    limit: int
    thread_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSalient(Op[list[tuple[str, Message]]]):
    """``(thread_id, message)`` with importance >= threshold, newest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    threshold: float
    limit: int
    thread_id: str | None = None


@plan_of(ReadSalient)
def read_salient(d: Dialect, op: ReadSalient) -> Plan[list[tuple[str, Message]]]:
    # The threshold is inlined (a float, never user text) so both databases
    # can use the partial index events_salient.
    sql = (
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? "
        f"AND importance >= {float(op.threshold)!r} AND kind = 'message'"
    )
    params: list[Any] = [op.resource_id]
    if op.thread_id is not None:
        sql += " AND thread_id = ?"
        params.append(op.thread_id)
    rows = yield Q(sql + " ORDER BY seq DESC LIMIT ?", (*params, op.limit))
    return [(r[0], row_to_message(r[1:])) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadBySeq(Op[list[tuple[str, Message]]]):
    """``(thread_id, message)`` for the given sequence numbers of the resource."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNeighbours(Op[list[Message]]):
    """Up to ``before`` messages before ``seq`` and ``after`` after it, in its thread."""

    resource_id: str
    thread_id: str
    seq: int
    before: int
    after: int


@plan_of(ReadNeighbours)
def read_neighbours(d: Dialect, op: ReadNeighbours) -> Plan[list[Message]]:
    key = (op.resource_id, op.thread_id, op.seq)
    older = yield Q(EVENTS_OF_THREAD + " AND seq < ? ORDER BY seq DESC LIMIT ?", (*key, op.before))
    newer = yield Q(EVENTS_OF_THREAD + " AND seq > ? ORDER BY seq LIMIT ?", (*key, op.after))
    return [row_to_message(r) for r in [*reversed(older), *newer]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Reindex(Op[int]):
    """Drop the vectors of a resource (or all) and queue its embeddable messages again.

    Result: how many messages wait for a vector. The vectors of the
    resource's items are dropped and their texts queued again too (not
    counted), so a new model re-embeds everything.
    """

    writes: ClassVar[bool] = True
    queues_work: ClassVar[bool] = True
    resource_id: str | None
    embed_roles: frozenset[str]
    """Messages of these roles with text are queued again (the rule is the caller's)."""


@plan_of(Reindex)
def reindex(d: Dialect, op: Reindex) -> Plan[int]:
    where, params = ("WHERE resource_id = ?", (op.resource_id,)) if op.resource_id is not None else ("", ())
    yield Q(f"DELETE FROM embeddings {where}", params, "none")
    rows = yield Q(
        f"SELECT resource_id, seq, role, content FROM events {where or 'WHERE 1 = 1'} AND kind = 'message'", params
    )
    by_resource: dict[str, list[int]] = {}
    for rid, seq, role, content in rows:
        if role in op.embed_roles and content:
            by_resource.setdefault(rid, []).append(seq)
    for rid, seqs in by_resource.items():
        yield enqueue_embeddings(rid, seqs)
    yield requeue_items(d, op.resource_id)
    row = yield Q(f"SELECT count(*) FROM embedding_queue {where}", params, "one")
    return int(row[0])


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
