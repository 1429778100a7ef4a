"""SQL written once: plans that both SQL backends run.

A *plan* is a generator that yields queries (``Q``) and receives their
results; it returns the operation's result. The SQLite store runs plans
synchronously on its writer (or a reader) thread, the PostgreSQL store runs
the same plans with psycopg's async connection. Queries use ``?``
placeholders; the PostgreSQL driver turns them into ``%s`` once per text.

What really differs per dialect stays in the backend modules: the append
(PostgreSQL's one statement with its advisory lock), claims (``SKIP
LOCKED``), full text (FTS5 vs ``tsvector``), planner hints and migrations.
The ``Dialect`` value carries the few small differences plans need.

A driver turns a unique-constraint violation into ``UniqueViolation`` thrown
*into* the plan, so plans handle it the same way on both databases.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from ..core.clock import to_iso
from ..core.errors import InternalSignal

T = TypeVar("T")

Fetch = Literal["all", "one", "rowcount", "none", "many"]


@dataclass(frozen=True, slots=True)
class Q:
    """One statement: SQL with ``?`` placeholders, its parameters, and what to hand back.

    ``fetch``: ``all`` rows, ``one`` row (or ``None``), the ``rowcount``,
    ``none``, or ``many`` (``executemany`` over ``params``, a list of rows).
    ``binary``: PostgreSQL sends the results in binary, a ``bytea`` as its
    bytes rather than hex text twice their size (SQLite has but one form).
    """

    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = "all"
    binary: bool = False


#: A plan: yields ``Q``, receives each result, returns the operation's result.
Plan = Generator[Q, Any, T]


class UniqueViolation(InternalSignal):
    """Thrown into a plan by its driver when a statement breaks a unique constraint."""


class ForeignKeyViolation(InternalSignal):
    """Thrown into a plan by its driver when a statement breaks a foreign key."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The small differences shared plans need to know."""

    name: str
    ts: Callable[[datetime], Any]
    """How a time is bound: RFC 3339 text on SQLite, a ``datetime`` on PostgreSQL."""
    for_update: str
    """Row lock for read-modify-write: none on SQLite (one writer), ``FOR UPDATE`` on PostgreSQL."""
    feed_overlap: int
    """How far below the last seen change-feed id a vector refresh re-reads (see ``read_vectors``)."""
    key_share: str
    """Row lock that keeps a row from being deleted meanwhile: ``FOR KEY SHARE`` on PostgreSQL."""
    no_key_update: str
    """Row lock held by one transaction at a time, that also keeps the row from being deleted
    meanwhile: ``FOR NO KEY UPDATE`` on PostgreSQL (two finishes of one message's embedding wait
    for each other); none on SQLite (one writer)."""
    skip_locked: str = ""
    """Lock rows, passing over those another transaction holds: ``FOR UPDATE SKIP LOCKED`` on
    PostgreSQL; none on SQLite (one writer)."""
    json_doc: str = "value"
    """An items row's JSON document as ``json_field`` reads it (``doc``), and how the statement's
    CTE keeps it: the text ``value`` on SQLite, the ``doc`` column PostgreSQL parsed when the item
    was written (migration 0022); inlined on both."""
    json_cte: str = "NOT MATERIALIZED"
    json_field: Callable[[str], str] = lambda kind: "NULL"
    """SQL reading one field of the JSON ``doc`` (``json_doc``) at the path bound to each of its ``?``
    (``json_path``): ``"kind"`` its JSON type where ``null`` and ``object`` are named alike on
    both databases (SQL NULL where missing), ``"string"`` its text if a string, ``"number"``
    its number if a number or boolean (as 1/0); NULL otherwise."""
    json_path: Callable[[tuple[str, ...]], Any] = lambda keys: None
    """How a field's path (keys from the top) is bound: ``$."a"."b"`` text on SQLite, a
    ``text[]`` for ``#>`` on PostgreSQL."""


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (a literal ``%`` doubled first)."""
    return sql.replace("%", "%%").replace("?", "%s")


def marks(n: int) -> str:
    """``?,?,…`` for an ``IN`` list of ``n`` values."""
    return ",".join("?" * n)


def iso(value: Any) -> Any:
    """A stored time as RFC 3339 text, whichever way the driver returned it."""
    return to_iso(value) if isinstance(value, datetime) else value


def later(d: Dialect, now: datetime, seconds: float) -> Any:
    return d.ts(now + timedelta(seconds=seconds))


#: Every table that holds a resource's rows (erase walks it). ``turn_leases``
#: comes first: a turn's commit checks its lease row before it writes, so on
#: PostgreSQL an erase either deletes the lease before the turn checks it (the
#: turn stores nothing: ``Erased``) or waits for the turn's commit and then
#: deletes what it stored; deleted later, the erase's earlier statements would
#: miss a turn committed meanwhile (the embedding worker never touches
#: leases). Then ``events``: its rows are what the embedding worker locks (FOR
#: KEY SHARE) before it touches the queue, so taking them first keeps the lock
#: order of the two the same and an erase never deadlocks with a worker; the queue and vectors
#: go with them by cascade. Items' embedding jobs and vectors likewise go with
#: their items (the item worker skips rows others hold, so it never waits).
RESOURCE_TABLES = (
    "turn_leases",
    "events",
    "items",
    "item_embeddings",
    "scheduled_tasks",
    "macros",
    "allowed_prefixes",
    "embedding_queue",
    "embeddings",
    "message_log",
    "threads",
    "working_memory_log",
    "facts",
    "facts_history",
    "consolidation_log",
    "notebooks",
    "notebook_snapshots",
    "resources",
)

EVENT_INSERT = (
    "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
    "importance, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
#: ``EVENT_INSERT`` with the message's position in its thread (appends and imports).
PLACED_EVENT_INSERT = (
    "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
    "importance, created_at, metadata, position) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
_LAST_EVENT_TIME = (
    "SELECT e.created_at FROM events e WHERE e.resource_id = t.resource_id AND e.thread_id = t.thread_id "
    "ORDER BY e.seq DESC LIMIT 1"
)
THREAD_COLUMNS = (
    "t.thread_id, t.title, t.metadata, t.created_at, "
    f"coalesce(({_LAST_EVENT_TIME}), t.created_at) AS updated_at, "
    "(SELECT count(*) FROM events e WHERE e.resource_id = t.resource_id "
    " AND e.thread_id = t.thread_id AND e.kind = 'message') AS message_count"
)


def ensure_resource(d: Dialect, resource_id: str, now: datetime) -> Q:
    return Q(
        "INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (resource_id) DO NOTHING",
        (resource_id, d.ts(now), d.ts(now)),
        "none",
    )


def enqueue_embeddings(resource_id: str, seqs: Sequence[int]) -> Q:
    """Queue messages for the embedding worker (the caller applied ``policy.embeddable``)."""
    return Q(
        "INSERT INTO embedding_queue (resource_id, seq) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(resource_id, s) for s in seqs],
        "many",
    )


def run_plan_sync(plan: Plan[T], execute: Callable[[Q], Any]) -> T:
    """Drive a plan with a synchronous ``execute`` (SQLite's).

    ``execute`` raises ``UniqueViolation`` / ``ForeignKeyViolation`` for
    those constraint errors; they are thrown into the plan, which may
    handle them.
    """
    try:
        q = next(plan)
        while True:
            try:
                result = execute(q)
            except (UniqueViolation, ForeignKeyViolation) as exc:
                q = plan.throw(exc)
                continue
            q = plan.send(result)
    except StopIteration as stop:
        return stop.value


async def run_plan(plan: Plan[T], execute: Callable[[Q], Awaitable[Any]]) -> T:
    """Drive a plan with an asynchronous ``execute`` (psycopg's); as ``run_plan_sync``."""
    try:
        q = next(plan)
        while True:
            try:
                result = await execute(q)
            except (UniqueViolation, ForeignKeyViolation) as exc:
                q = plan.throw(exc)
                continue
            q = plan.send(result)
    except StopIteration as stop:
        return stop.value


#: A backend's handler: builds the plan of one operation.
Handler = Callable[[Dialect, Any], Plan[Any]]
