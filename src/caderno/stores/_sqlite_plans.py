"""The SQLite plans that differ from PostgreSQL's: append, claims, full text, seq lookups, a page of items.

Each is registered on ``SQLITE`` beside its function (``@SQLITE.plan_of``);
every other operation runs its shared plan (``Op.plan``).
"""

from __future__ import annotations

import functools
from typing import Any

from ..core.errors import UsageError
from ..core.messages import Message
from ..core.records import Item, ScheduledTask
from ..core.text import CONTEXT_COLUMN_WEIGHT, DATE_COLUMN_WEIGHT, stems
from . import ops
from ._op import DialectPlans
from ._rows import EVENT_COLUMNS, event_params, row_to_message
from ._sql import (
    Dialect,
    Plan,
    Q,
    UniqueViolation,
    ensure_resource,
    later,
    marks,
)
from .capabilities import history, items
from .capabilities.agent_state import fair_claim
from .capabilities.consolidation import renew_consolidation

#: SQLite's own plans; the SQLite store (and ``memory://``) looks each operation's plan up here.
SQLITE = DialectPlans("SQLite")


@SQLITE.plan_of(ops.Append)
def append(
    d: Dialect, op: ops.Append, *, known: bool = False, rows: list[list[Any]] | None = None
) -> Plan[list[Message]]:
    """Insert the messages at the thread's next positions and seqs, those to embed marked (``embed``); nothing else.

    What a turn writes is what its commit fsyncs, page by page: the rows,
    and the two indexes reads need (the thread's messages in order, a
    message by id). Full text follows in batches (``_sqlite_fts``); the
    embedding worker finds the marked messages above its watermark
    (``claim_embeddings``); the thread's row is not written (its positions
    follow its newest message), nor, but once a ``SEQ_BLOCK``,
    sqlite_sequence (``_PLACE``).

    ``known``: this store wrote to the thread before, so the two "create if
    missing" statements are skipped; a thread deleted since by another
    connection is created again.
    ``rows``: ``insert_rows(op)``, when the caller made them already.
    """
    rid, tid, messages = op.resource_id, op.thread_id, op.messages
    if rows is None:
        rows = insert_rows(op)
    place = Q(_PLACE, (rid, tid), "one")
    found = (yield place) if known else None
    if found is None:
        now = messages[0].created_at
        assert now is not None  # Memory stamps every message
        yield ensure_resource(d, rid, now)
        yield Q(
            "INSERT INTO threads (resource_id, thread_id, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (resource_id, thread_id) DO NOTHING",
            (rid, tid, d.ts(now)),
            "none",
        )
        found = yield place
    last, seq, ahead = found
    top = seq + len(messages)
    if ahead is None:  # no row yet: AUTOINCREMENT would add it at this append's last seq
        yield Q("INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", (top + SEQ_BLOCK,), "none")
    elif top > ahead:
        yield Q("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", (top + SEQ_BLOCK,), "none")
    return (yield from _insert(rid, messages, rows, last, seq))


#: Seqs sqlite_sequence is moved ahead of the appends by, when they reach it
#: (a page of the WAL once per this many messages, not once per turn).
SEQ_BLOCK = 1024

#: What an append places its messages after (no row when there is no thread):
#: * the thread's last position: its newest positioned message's — positions
#:   grow with seq in a thread, and events_thread is walked back from its end
#:   — or ``last_position``, when a deletion raised it above (migration 0023);
#: * the highest seq ever given: the newest row's, or ``deleted_upto`` when a
#:   deletion took rows above it (0026), so seqs follow commit order and none
#:   is given twice;
#: * sqlite_sequence's value: AUTOINCREMENT writes it only for a seq above it.
_PLACE = (
    "SELECT max(t.last_position, coalesce((SELECT e.position FROM events e WHERE e.resource_id = t.resource_id "
    "AND e.thread_id = t.thread_id AND e.position IS NOT NULL ORDER BY e.seq DESC LIMIT 1), 0)), "
    "max(coalesce((SELECT max(seq) FROM events), 0), (SELECT deleted_upto FROM events_seq)), "
    "(SELECT seq FROM sqlite_sequence WHERE name = 'events') "
    "FROM threads t WHERE t.resource_id = ? AND t.thread_id = ?"
)

#: Messages per multi-row INSERT: 14 parameters each, far under SQLite's
#: 32,766-parameter limit. One statement per turn, not one per message: each
#: statement is a trip through the driver that releases and retakes the GIL,
#: and the writer thread's GIL waits are what concurrent writers queue on.
INSERT_ROWS = 500
#: Parameters of one message in ``insert_rows``: its seq first; its position, then its mark for a
#: vector, last.
_ROW_WIDTH = 14
_EVENT_INSERT = (
    "INSERT INTO events (seq, resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
    "importance, created_at, metadata, position, embed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def insert_rows(op: ops.Append) -> list[list[Any]]:
    """The parameters of each multi-row INSERT of ``op`` (``INSERT_ROWS`` messages each).

    Pure Python with no database: the store makes them on the caller's
    thread, so the writer thread, which every concurrent append waits on,
    only runs the statements. Each message's seq and position are
    placeholders (0), filled in by ``_insert`` once the append's place is
    read; ``embed`` is 1 for a message ``op.embed`` names (a new embedding job).
    """
    rid, tid, messages, embed = op.resource_id, op.thread_id, op.messages, op.embed
    return [
        [
            value
            for m in messages[start : start + INSERT_ROWS]
            for value in (0, rid, tid, *event_params(m), 0, 1 if m.id in embed else None)
        ]
        for start in range(0, len(messages), INSERT_ROWS)
    ]


def _insert(
    rid: str, messages: tuple[Message, ...], rows: list[list[Any]], position: int, seq: int
) -> Plan[list[Message]]:
    """Insert ``rows``, the messages taking positions ``position + 1``… and seqs ``seq + 1``…"""
    for i, params in enumerate(rows):
        chunk = messages[i * INSERT_ROWS : (i + 1) * INSERT_ROWS]
        for k in range(len(chunk)):
            at = k * _ROW_WIDTH
            params[at] = seq + i * INSERT_ROWS + k + 1
            params[at + _ROW_WIDTH - 2] = position + i * INSERT_ROWS + k + 1
        try:
            yield Q(_insert_sql(len(chunk)), params, "none")
        except UniqueViolation:
            # The statement left nothing behind; name the id in the error.
            raise UsageError(
                f"message id {(yield from _taken_id(rid, chunk))!r} is already stored for resource {rid!r}"
            ) from None
    return [m._stamped(seq=seq + k + 1, position=position + k + 1) for k, m in enumerate(messages)]


@functools.cache
def _insert_sql(rows: int) -> str:
    head, values = _EVENT_INSERT.split(" VALUES ")
    return f"{head} VALUES {', '.join([values] * rows)}"


def _taken_id(rid: str, messages: tuple[Message, ...]) -> Plan[str | None]:
    """The first id of ``messages`` that is stored already, or repeated among them."""
    seen: set[str | None] = set()
    for m in messages:
        if m.id in seen:
            return m.id
        seen.add(m.id)
    rows = yield Q(
        f"SELECT id FROM events WHERE resource_id = ? AND id IN ({marks(len(messages))})",
        (rid, *(m.id for m in messages)),
    )
    taken = {r[0] for r in rows}
    return next((m.id for m in messages if m.id in taken), None)


_JOBS = "SELECT q.seq, q.resource_id, e.content, q.attempts FROM embedding_queue q JOIN events e ON e.seq = q.seq "
#: New jobs of the queue (``not_before`` ``''``: queued by an edit, a reindex
#: or an import), oldest first. They all lie above the highest taken job
#: (migration 0018), so the walk starts there, off that index's last entry,
#: and reads only what it returns: a backlog of failed jobs below is never
#: walked.
_NEW_JOBS = (
    _JOBS + "WHERE q.seq > (SELECT coalesce(max(seq), 0) FROM embedding_queue WHERE not_before <> '') "
    "AND q.not_before = '' ORDER BY q.seq LIMIT ?"
)
#: Taken jobs due again — a lease ran out, a retry's time came, or queued
#: behind others (``'0'``) — by when they are due, off embedding_queue_taken.
_DUE_TAKEN_JOBS = _JOBS + "WHERE q.not_before <> '' AND q.not_before <= ? ORDER BY q.not_before, q.seq LIMIT ?"
#: One resource's due jobs of the queue, newest first (``ClaimEmbeddings.resource_id``).
_RESOURCE_JOBS = _JOBS + "WHERE q.resource_id = ? AND q.not_before <= ? ORDER BY q.seq DESC LIMIT ?"

#: Messages an append marked (``embed = 1``) above the watermark that no queue
#: row holds: the new jobs no queue row was written for (migration 0024).
_MARKED = (
    "FROM events e WHERE e.seq > (SELECT claimed_upto FROM embedding_state) AND e.embed = 1 "
    "AND NOT EXISTS (SELECT 1 FROM embedding_queue q WHERE q.seq = e.seq)"
)
#: Marked jobs, oldest first: a range of seq from the watermark up (the rowid), no index.
_MARKED_JOBS = f"SELECT e.seq, e.resource_id, e.content, 0 {_MARKED} ORDER BY e.seq LIMIT ?"
#: One resource's marked jobs, newest first: the same range walked down (``+``: not the
#: resource's whole history off an index), stopping at the ``limit``-th.
_RESOURCE_MARKED_JOBS = (
    f"SELECT e.seq, e.resource_id, e.content, 0 {_MARKED} AND +e.resource_id = ? ORDER BY e.seq DESC LIMIT ?"
)


#: The watermark up to a seq, or (``NULL``) to the newest message; written only when it rises.
_RAISE_WATERMARK = (
    "UPDATE embedding_state SET claimed_upto = coalesce(?, (SELECT max(seq) FROM events)) "
    "WHERE claimed_upto < coalesce(?, (SELECT max(seq) FROM events))"
)


@SQLITE.plan_of(ops.ClaimEmbeddings)
def claim_embeddings(d: Dialect, op: ops.ClaimEmbeddings) -> Plan[list[ops.EmbeddingJob]]:
    """New jobs first — the queue's, then the marked messages above the watermark — then taken ones
    due again: the order of ``not_before``, then seq (``''`` is the least).

    A marked message taken becomes a queue row, leased, as every job taken
    does; the watermark rises past what the walk read (the last job taken,
    or every message when fewer than asked came), so a message is a marked
    job once. With ``resource_id``, that resource's due jobs, newest first,
    of the queue and marked alike; its marked ones taken lose their mark
    (the watermark stays: others' below it still wait), and new jobs of
    the queue left below the highest one taken become ``'0'`` (due, queued
    behind others), so new jobs of the queue still all lie above the taken ones.
    """
    # The single writer serialises claims, so a plain read-then-lease is enough.
    marked: list[Any] = []
    if op.resource_id is not None:
        queued = list((yield Q(_RESOURCE_JOBS, (op.resource_id, d.ts(op.now), op.limit))))
        marked = list((yield Q(_RESOURCE_MARKED_JOBS, (op.resource_id, op.limit))))
        rows = sorted(queued + marked, key=lambda r: r[0], reverse=True)[: op.limit]
        taken = {r[0] for r in rows}
        marked = [r for r in marked if r[0] in taken]
        if rows:
            yield Q(
                "UPDATE embedding_queue SET not_before = '0' WHERE not_before = '' AND seq < ?",
                (max(taken),),
                "none",
            )
        yield Q("UPDATE events SET embed = NULL WHERE seq = ?", [(r[0],) for r in marked], "many")
    else:
        rows = list((yield Q(_NEW_JOBS, (op.limit,))))
        if len(rows) < op.limit:  # no new job of the queue is left: the marked ones come next
            want = op.limit - len(rows)
            marked = list((yield Q(_MARKED_JOBS, (want,))))
            upto = marked[-1][0] if len(marked) == want else None  # None: every message was read
            yield Q(_RAISE_WATERMARK, (upto, upto), "none")
            rows += marked
        if len(rows) < op.limit:
            rows += yield Q(_DUE_TAKEN_JOBS, (d.ts(op.now), op.limit - len(rows)))
    until = later(d, op.now, op.lease_seconds)
    new = {r[0] for r in marked}
    yield Q(
        "UPDATE embedding_queue SET not_before = ? WHERE seq = ?",
        [(until, r[0]) for r in rows if r[0] not in new],
        "many",
    )
    yield Q(
        "INSERT INTO embedding_queue (seq, resource_id, not_before) VALUES (?, ?, ?)",
        [(r[0], r[1], until) for r in marked],
        "many",
    )
    return [ops.EmbeddingJob(resource_id=r[1], seq=r[0], content=r[2], attempts=r[3]) for r in rows]


@SQLITE.plan_of(ops.RenewEmbeddings)
def renew_embeddings(d: Dialect, op: ops.RenewEmbeddings) -> Plan[None]:
    """Each job's lease to ``now + lease_seconds``, while it is still leased (see ``ops.RenewEmbeddings``)."""
    until, now = later(d, op.now, op.lease_seconds), d.ts(op.now)
    yield Q(
        "UPDATE embedding_queue SET not_before = ? WHERE seq = ? AND resource_id = ? AND not_before > ?",
        [(until, seq, rid, now) for rid, seq in op.jobs],
        "many",
    )


@SQLITE.plan_of(ops.CountPendingEmbeddings)
def count_pending_embeddings(d: Dialect, op: ops.CountPendingEmbeddings) -> Plan[int]:
    """The queue's jobs (those that failed before left out unless ``failed``) and the marked messages
    above the watermark (none of which failed yet), in one statement."""
    queue = ["resource_id = ?"] if op.resource_id is not None else []
    if not op.failed:
        queue.append("attempts = 0")
    sql = (
        "SELECT (SELECT count(*) FROM embedding_queue" + (" WHERE " + " AND ".join(queue) if queue else "") + ") "
        f"+ (SELECT count(*) {_MARKED}" + (" AND +e.resource_id = ?" if op.resource_id is not None else "") + ")"
    )
    row = yield Q(sql, () if op.resource_id is None else (op.resource_id, op.resource_id), "one")
    return int(row[0])


@SQLITE.plan_of(ops.EditMessage)
def edit_message(d: Dialect, op: ops.EditMessage) -> Plan[Message | None]:
    """The shared plan, and the edited message's mark for a vector taken off: the plan queued its
    new text (or dropped its job) in the queue, where an edit's job is decided."""
    edited = yield from history.edit_message(d, op)
    if edited is not None:
        yield Q(
            "UPDATE events SET embed = NULL WHERE resource_id = ? AND seq = ? AND embed IS NOT NULL",
            (op.resource_id, edited.seq),
            "none",
        )
    return edited


@SQLITE.plan_of(ops.LexicalSearch)
def lexical_search(d: Dialect, op: ops.LexicalSearch) -> Plan[list[tuple[int, float]]]:
    """BM25 over a message's own stems, its neighbours' (``CONTEXT_COLUMN_WEIGHT``) and its day's (``DATE_COLUMN_WEIGHT``).

    A row queued in ``fts_redo`` has a stale context (an edit or deletion
    next to it, not yet indexed again): it is left out rather than used.
    """
    if not op.terms:
        return []
    terms = dict.fromkeys(stems(" ".join(op.terms)))  # the index holds stems (_sqlite_fts.catch_up_fts)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rank = f"bm25(events_fts, 1.0, {float(CONTEXT_COLUMN_WEIGHT)!r}, {float(DATE_COLUMN_WEIGHT)!r})"
    sql = (
        f"SELECT f.rowid, -{rank} AS score FROM events_fts f JOIN events e ON e.seq = f.rowid "
        "WHERE events_fts MATCH ? AND e.resource_id = ? AND e.kind = 'message' "
        "AND f.rowid NOT IN (SELECT seq FROM fts_redo)"
    )
    params: list[Any] = [match, op.resource_id]
    if op.thread_id is not None:
        sql += " AND e.thread_id = ?"
        params.append(op.thread_id)
    rows = yield Q(sql + " ORDER BY score DESC LIMIT ?", (*params, op.limit))
    return [(r[0], r[1]) for r in rows]


@SQLITE.plan_of(ops.ReadBySeq)
def read_by_seq(d: Dialect, op: ops.ReadBySeq) -> Plan[list[tuple[str, Message]]]:
    if not op.seqs:
        return []
    # "+resource_id" keeps SQLite on the rowid lookup; the index on
    # resource_id would scan the whole resource (measured: 25 ms at 100k).
    rows = yield Q(
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE seq IN ({marks(len(op.seqs))}) AND +resource_id = ?",
        (*op.seqs, op.resource_id),
    )
    return [(r[0], row_to_message(r[1:])) for r in rows]


@SQLITE.plan_of(ops.ClaimConsolidation)
def claim_consolidation(d: Dialect, op: ops.ClaimConsolidation) -> Plan[bool]:
    if op.renew:
        return (yield from renew_consolidation(d, op))
    done = yield Q(
        "UPDATE threads SET consolidating_until = ?, consolidating_by = ? WHERE resource_id = ? AND thread_id = ? "
        "AND (consolidating_until IS NULL OR consolidating_until < ?)",
        (later(d, op.now, op.lease_seconds), op.holder, op.resource_id, op.thread_id, d.ts(op.now)),
        "rowcount",
    )
    return bool(done)


@SQLITE.plan_of(ops.ClaimDueTasks)
def claim_due_tasks(d: Dialect, op: ops.ClaimDueTasks) -> Plan[list[ScheduledTask]]:
    # The single writer serialises claims: two workers never take one slot.
    return (yield from fair_claim(d, op))


@SQLITE.plan_of(ops.SearchItems)
def search_items(d: Dialect, op: ops.SearchItems) -> Plan[list[Item]]:
    """A page in a statement for each read of ``items.Page`` it takes: the count of the prefix's items,
    the walk of the newest when there are many, the read of every item when there are few or the walk
    falls short.

    Each result is one read's, so the page is one snapshot's. (In the one
    statement of the shared plan SQLite would run every part: a scalar
    subquery is no constant that skips a loop.) The read of every item is
    kept off ``items_recent`` (``+updated_at``): it reads the prefix's range
    of the primary key.
    """
    items.check_window(op)
    if op.limit is None:
        return (yield from items.search_items(d, op))
    page = items.page_of(d, op, items.json_condition)
    ((held,),) = yield Q(*page.probe)
    if held == page.size:
        rows = yield Q(*page.walk)
        if len(rows) == op.offset + op.limit:
            return items.items_of(op.resource_id, rows[op.offset :])
    every, params = page.every
    rows = yield Q(
        f"{every} ORDER BY +updated_at DESC, namespace, key LIMIT ? OFFSET ?", [*params, op.limit, op.offset]
    )
    return items.items_of(op.resource_id, rows)
