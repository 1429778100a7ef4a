"""Consolidation (``CONSOLIDATION``): the threads' summaries, their leases, the fact-extraction queue and the log.

The claim of a thread is planned per dialect (``_sqlite_plans``,
``_postgres_plans``); the rest run the plan beside them on both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.messages import Message
from .._op import Op, operations_in, plan_of
from .._rows import EVENT_COLUMNS, EVENTS_OF_THREAD, event_params, row_to_message
from .._sql import Dialect, Plan, Q, iso, later, marks

__all__ = [
    "ClaimConsolidation",
    "FindConsolidationCandidates",
    "LogConsolidation",
    "MarkFactsExtracted",
    "ReadConsolidationLog",
    "ReadFactCandidates",
    "ReadSummaries",
    "ReadUnconsolidated",
    "ReleaseConsolidation",
    "WriteSummary",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class FindConsolidationCandidates(Op[list[tuple[str, str]]]):
    """``(resource_id, thread_id)`` whose unconsolidated text passes ``min_chars``."""

    one_statement: ClassVar[bool] = True
    resource_id: str | None
    min_chars: int


@plan_of(FindConsolidationCandidates)
def find_consolidation_candidates(d: Dialect, op: FindConsolidationCandidates) -> Plan[list[tuple[str, str]]]:
    where, params = ("AND resource_id = ?", [op.resource_id]) if op.resource_id is not None else ("", [])
    rows = yield Q(
        "SELECT resource_id, thread_id FROM events WHERE consolidated_at IS NULL "
        f"{where} GROUP BY resource_id, thread_id HAVING sum(length(content)) > ?",
        (*params, op.min_chars),
    )
    return [(r[0], r[1]) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimConsolidation(Op[bool]):
    """Lease a thread for summarising to ``holder``; False when another worker holds it (or no thread).

    ``holder`` is the lease's fencing token (a fresh id per claim): renewing,
    writing a summary under the lease and giving it back touch only a thread
    whose lease still names it. ``renew``: only extend ``holder``'s own lease,
    never take the thread (False once another worker took it over).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str
    lease_seconds: float
    now: datetime
    renew: bool = False


def renew_consolidation(d: Dialect, op: ClaimConsolidation) -> Plan[bool]:
    """Extend ``op.holder``'s own consolidation lease (the dialects' claims call it for ``renew``).

    Never takes the thread: a lease another worker took over stays theirs.
    """
    done = yield Q(
        "UPDATE threads SET consolidating_until = ? WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
        (later(d, op.now, op.lease_seconds), op.resource_id, op.thread_id, op.holder),
        "rowcount",
    )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseConsolidation(Op[None]):
    """Give a thread's lease back (only ``holder``'s own: a lease taken over stays the new holder's)."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str


@plan_of(ReleaseConsolidation)
def release_consolidation(d: Dialect, op: ReleaseConsolidation) -> Plan[None]:
    # Our own lease only: a worker whose lease ran out must not free the
    # thread under the worker that took it over.
    yield Q(
        "UPDATE threads SET consolidating_until = NULL, consolidating_by = NULL "
        "WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
        (op.resource_id, op.thread_id, op.holder),
        "none",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadUnconsolidated(Op[list[Message]]):
    """The thread's messages not yet covered by a summary, oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@plan_of(ReadUnconsolidated)
def read_unconsolidated(d: Dialect, op: ReadUnconsolidated) -> Plan[list[Message]]:
    rows = yield Q(EVENTS_OF_THREAD + " AND consolidated_at IS NULL ORDER BY seq", (op.resource_id, op.thread_id))
    return [row_to_message(r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSummaries(Op[list[tuple[Message, bool]]]):
    """The thread's summary events, oldest first, each with ``merged`` (folded into a later one)."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@plan_of(ReadSummaries)
def read_summaries(d: Dialect, op: ReadSummaries) -> Plan[list[tuple[Message, bool]]]:
    rows = yield Q(
        f"SELECT {EVENT_COLUMNS}, consolidated_at IS NOT NULL FROM events "
        "WHERE resource_id = ? AND thread_id = ? AND kind = 'summary' ORDER BY seq",
        (op.resource_id, op.thread_id),
    )
    return [(row_to_message(r[:-1]), bool(r[-1])) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteSummary(Op[bool]):
    """Store a summary covering ``covered`` seqs; False when any of them is covered already.

    ``holder``: the thread's consolidation lease (``ClaimConsolidation``)
    must still name it, else nothing is written (False). The covered-rows
    check alone already keeps two summaries off one range; the lease check
    makes a worker whose lease was taken over store nothing, as every lease
    in caderno does.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    summary: Message
    covered: tuple[int, ...]
    now: datetime
    holder: str | None = None


@plan_of(WriteSummary)
def write_summary(d: Dialect, op: WriteSummary) -> Plan[bool]:
    if op.holder is not None:
        # The lease check first, as a write on the thread's row: on PostgreSQL
        # it holds that row until the commit, so no other worker can take
        # the lease over between this check and the summary (an append
        # locks the same row first, too: one lock order).
        held = yield Q(
            "UPDATE threads SET consolidating_by = consolidating_by "
            "WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
            (op.resource_id, op.thread_id, op.holder),
            "rowcount",
        )
        if not held:
            return False  # our lease was taken over: the new holder summarises
    covered = list(op.covered)
    rows = yield Q(
        f"SELECT seq FROM events WHERE resource_id = ? AND thread_id = ? AND seq IN ({marks(len(covered))}) "
        f"AND consolidated_at IS NULL{d.for_update}",
        (op.resource_id, op.thread_id, *covered),
    )
    if len(rows) != len(covered):
        return False  # someone summarised (part of) this range already
    yield Q(
        "INSERT INTO events (resource_id, thread_id, id, kind, role, content, tool_calls, tool_call_id, "
        "name, importance, created_at, metadata) VALUES (?,?,?,'summary',?,?,?,?,?,?,?,?)",
        (op.resource_id, op.thread_id, *event_params(op.summary)),
        "none",
    )
    yield Q(
        f"UPDATE events SET consolidated_at = ? WHERE resource_id = ? AND seq IN ({marks(len(covered))})",
        (d.ts(op.now), op.resource_id, *covered),
        "none",
    )
    return True


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFactCandidates(Op[list[tuple[str, Message]]]):
    """User messages at or above ``min_importance`` not yet read for facts, oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str | None
    min_importance: float
    limit: int


#: The least importance SQLite's index of fact candidates holds (``events_fact_candidates``, migration
#: 0025): the default threshold of fact extraction (``ConsolidationSettings.fact_min_importance``; a test
#: checks they agree), so a message below it — most of a conversation — writes no entry. A lower
#: threshold reads the messages themselves; PostgreSQL's index holds every user message.
FACT_INDEX_FLOOR = 0.7


@plan_of(ReadFactCandidates)
def read_fact_candidates(d: Dialect, op: ReadFactCandidates) -> Plan[list[tuple[str, Message]]]:
    where, params = ("AND resource_id = ?", [op.resource_id]) if op.resource_id is not None else ("", [])
    # The index's own condition, written as it is, so SQLite sees the query is within it; across
    # resources "+seq", or SQLite walks every message in seq order rather than sort the few candidates.
    floor = f"AND importance >= {FACT_INDEX_FLOOR!r} " if op.min_importance >= FACT_INDEX_FLOOR else ""
    order = "seq" if op.resource_id is not None or not floor else "+seq"
    rows = yield Q(
        f"SELECT resource_id, {EVENT_COLUMNS} FROM events WHERE facts_extracted_at IS NULL "
        f"AND role = 'user' AND kind = 'message' {floor}AND importance >= ? {where} ORDER BY {order} LIMIT ?",
        (op.min_importance, *params, op.limit),
    )
    return [(r[0], row_to_message(r[1:])) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class MarkFactsExtracted(Op[None]):
    """Mark messages as read for facts."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    seqs: tuple[int, ...]
    now: datetime


@plan_of(MarkFactsExtracted)
def mark_facts_extracted(d: Dialect, op: MarkFactsExtracted) -> Plan[None]:
    if op.seqs:
        yield Q(
            f"UPDATE events SET facts_extracted_at = ? WHERE resource_id = ? AND seq IN ({marks(len(op.seqs))})",
            (d.ts(op.now), op.resource_id, *op.seqs),
            "none",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class LogConsolidation(Op[None]):
    """Record a consolidation outcome (failures, mostly)."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str | None
    step: str
    outcome: str
    detail: str | None
    now: datetime


@plan_of(LogConsolidation)
def log_consolidation(d: Dialect, op: LogConsolidation) -> Plan[None]:
    yield Q(
        "INSERT INTO consolidation_log (resource_id, thread_id, step, outcome, detail, created_at) VALUES (?,?,?,?,?,?)",
        (op.resource_id, op.thread_id, op.step, op.outcome, op.detail, d.ts(op.now)),
        "none",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadConsolidationLog(Op[list[dict[str, Any]]]):
    """The resource's consolidation log, oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ReadConsolidationLog)
def read_consolidation_log(d: Dialect, op: ReadConsolidationLog) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT thread_id, step, outcome, detail, created_at FROM consolidation_log WHERE resource_id = ? ORDER BY id",
        (op.resource_id,),
    )
    keys = ("thread_id", "step", "outcome", "detail", "created_at")
    return [dict(zip(keys, (*r[:4], iso(r[4])), strict=True)) for r in rows]


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
