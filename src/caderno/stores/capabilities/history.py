"""Core history: the messages of each thread and the thread records (``CORE``, with ``resources``).

Appends, reads, edits and deletions of messages, the log of edits and
deletions, and thread records. ``Append`` is planned per dialect
(``_sqlite_plans``, ``_postgres_plans``); every other operation here runs
the plan beside it on both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.messages import Message, Thread
from .._op import UNSET, Op, operations_in, plan_of
from .._rows import EVENT_COLUMNS, EVENTS_OF_THREAD, dumps, row_to_message, row_to_thread
from .._sql import THREAD_COLUMNS, Dialect, Plan, Q, enqueue_embeddings, ensure_resource, iso

__all__ = [
    "Append",
    "DeleteMessage",
    "DeleteThread",
    "EditMessage",
    "GetThread",
    "ListThreads",
    "PopMessage",
    "PutThread",
    "ReadMessageLog",
    "ReadThread",
    "SetImportance",
]


#: The columns of ``message_log`` a change writes (``export.MESSAGE_LOG_FIELDS``, in that order).
LOG_COLUMNS = "message_id, thread_id, action, role, old_content, actor, reason, created_at"


@dataclass(frozen=True, kw_only=True, slots=True)
class Append(Op[list[Message]]):
    """Store complete messages (ids, times, importance set) in order, all or nothing.

    Result: the messages with ``seq`` set. Raises ``UsageError`` when a
    message id is already stored for the resource. ``embed`` holds the ids
    of the messages the embedding queue takes (decided above the port).
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True  # up to ``APPEND_CHUNK`` messages: ``postgres.one_statement``
    queues_work: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    messages: tuple[Message, ...]
    embed: frozenset[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadThread(Op[list[Message]]):
    """The newest ``limit`` messages (all when ``None``) with ``position < before``, oldest first.

    ``before`` is a ``Message.position`` (what a client sees and pages by), never a ``seq``.
    """

    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    limit: int | None = None
    before: int | None = None


@plan_of(ReadThread)
def read_thread(d: Dialect, op: ReadThread) -> Plan[list[Message]]:
    sql, params = EVENTS_OF_THREAD, list[Any]([op.resource_id, op.thread_id])
    if op.before is not None:
        sql += " AND position < ?"
        params.append(op.before)
    if op.limit is None:
        rows = yield Q(sql + " ORDER BY seq", params)
    else:
        rows = yield Q(sql + " ORDER BY seq DESC LIMIT ?", [*params, op.limit])
        rows = rows[::-1]
    return [row_to_message(r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ListThreads(Op[list[Thread]]):
    """The resource's threads, most recently active first."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ListThreads)
def list_threads(d: Dialect, op: ListThreads) -> Plan[list[Thread]]:
    rows = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? ORDER BY updated_at DESC, t.thread_id DESC",
        (op.resource_id,),
    )
    return [row_to_thread(op.resource_id, r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class GetThread(Op["Thread | None"]):
    """One thread record, or ``None``."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@plan_of(GetThread)
def get_thread(d: Dialect, op: GetThread | PutThread) -> Plan[Thread | None]:
    row = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? AND t.thread_id = ?",
        (op.resource_id, op.thread_id),
        "one",
    )
    return row_to_thread(op.resource_id, row) if row else None


@dataclass(frozen=True, kw_only=True, slots=True)
class PutThread(Op["Thread | None"]):
    """Create a thread record, or change its title / metadata (``UNSET`` keeps a field).

    With ``create=True`` the thread must not exist (result ``None`` when it
    does); with ``create=False`` it must exist (``None`` when it does not).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    create: bool
    title: Any = UNSET
    metadata: Any = UNSET
    now: datetime


@plan_of(PutThread)
def put_thread(d: Dialect, op: PutThread) -> Plan[Thread | None]:
    if op.create:
        yield ensure_resource(d, op.resource_id, op.now)
        title = None if op.title is UNSET else op.title
        metadata = None if op.metadata is UNSET else op.metadata
        done = yield Q(
            "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (resource_id, thread_id) DO NOTHING",
            (op.resource_id, op.thread_id, title, dumps(metadata), d.ts(op.now)),
            "rowcount",
        )
    else:
        sets: list[tuple[str, Any]] = []
        if op.title is not UNSET:
            sets.append(("title", op.title))
        if op.metadata is not UNSET:
            sets.append(("metadata", dumps(op.metadata)))
        assignments = ", ".join(f"{col} = ?" for col, _ in sets) or "title = title"
        done = yield Q(
            f"UPDATE threads SET {assignments} WHERE resource_id = ? AND thread_id = ?",
            (*(v for _, v in sets), op.resource_id, op.thread_id),
            "rowcount",
        )
    if not done:
        return None
    return (yield from get_thread(d, op))


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteThread(Op[bool]):
    """Delete a thread, its messages and their edit log; False when there was none."""

    writes: ClassVar[bool] = True
    erases: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@plan_of(DeleteThread)
def delete_thread(d: Dialect, op: DeleteThread) -> Plan[bool]:
    key = (op.resource_id, op.thread_id)
    # The lease first, as in ``erase_resource`` (``RESOURCE_TABLES``): a turn in flight on the thread stores nothing.
    yield Q("DELETE FROM turn_leases WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM notebook_snapshots WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM message_log WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM events WHERE resource_id = ? AND thread_id = ?", key, "none")
    deleted = yield Q("DELETE FROM threads WHERE resource_id = ? AND thread_id = ?", key, "rowcount")
    return bool(deleted)


def _log_change(d: Dialect, resource_id: str, thread_id: str, m: Message, action: str, old: str | None, op: Any) -> Q:
    return Q(
        f"INSERT INTO message_log (resource_id, {LOG_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
        (resource_id, m.id, thread_id, action, m.role, old, op.actor, op.reason, d.ts(op.now)),
        "none",
    )


def _message_by_id(resource_id: str, message_id: str) -> Plan[tuple[str, Message] | None]:
    row = yield Q(
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND id = ? AND kind = 'message'",
        (resource_id, message_id),
        "one",
    )
    return (row[0], row_to_message(row[1:])) if row else None


@dataclass(frozen=True, kw_only=True, slots=True)
class PopMessage(Op["Message | None"]):
    """Remove and return the thread's newest message (``None`` when empty); logged."""

    writes: ClassVar[bool] = True
    erases: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    actor: str
    reason: str | None
    now: datetime


@plan_of(PopMessage)
def pop_message(d: Dialect, op: PopMessage) -> Plan[Message | None]:
    row = yield Q(EVENTS_OF_THREAD + " ORDER BY seq DESC LIMIT 1", (op.resource_id, op.thread_id), "one")
    if row is None:
        return None
    m = row_to_message(row)
    yield Q("DELETE FROM events WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    yield _log_change(d, op.resource_id, op.thread_id, m, "pop", None, op)
    return m


@dataclass(frozen=True, kw_only=True, slots=True)
class EditMessage(Op["Message | None"]):
    """Replace one message's content; the old content goes to the message log.

    Result: the edited message, or ``None`` when the resource has no such
    message. ``rescore`` (policy, run inside the transaction) gives the edited
    message's importance and whether it is embedded again; full text follows
    at once.
    """

    writes: ClassVar[bool] = True
    queues_work: ClassVar[bool] = True
    resource_id: str
    message_id: str
    content: str
    rescore: Callable[[Message], tuple[float, bool]]
    actor: str
    reason: str | None
    now: datetime


@plan_of(EditMessage)
def edit_message(d: Dialect, op: EditMessage) -> Plan[Message | None]:
    found = yield from _message_by_id(op.resource_id, op.message_id)
    if found is None:
        return None
    thread_id, m = found
    importance, embed = op.rescore(m._stamped(content=op.content))
    yield Q(
        "UPDATE events SET content = ?, importance = ? WHERE resource_id = ? AND seq = ?",
        (op.content, importance, op.resource_id, m.seq),
        "none",
    )
    yield _log_change(d, op.resource_id, thread_id, m, "edit", m.content, op)
    # The old vector describes the old text: drop it, and queue the new text.
    yield Q("DELETE FROM embeddings WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    if embed:
        yield enqueue_embeddings(op.resource_id, [m.seq or 0])
    else:
        yield Q("DELETE FROM embedding_queue WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    return m._stamped(content=op.content, importance=importance)


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteMessage(Op["Message | None"]):
    """Delete one message (the log keeps who, when and why, not the text); ``None`` if absent."""

    writes: ClassVar[bool] = True
    erases: ClassVar[bool] = True
    resource_id: str
    message_id: str
    actor: str
    reason: str | None
    now: datetime


@plan_of(DeleteMessage)
def delete_message(d: Dialect, op: DeleteMessage) -> Plan[Message | None]:
    found = yield from _message_by_id(op.resource_id, op.message_id)
    if found is None:
        return None
    thread_id, m = found
    yield Q("DELETE FROM events WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    yield _log_change(d, op.resource_id, thread_id, m, "delete", None, op)
    return m


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadMessageLog(Op[list[dict[str, Any]]]):
    """Edits, pops and deletions of the resource's messages (one message or all), oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    message_id: str | None = None


@plan_of(ReadMessageLog)
def read_message_log(d: Dialect, op: ReadMessageLog) -> Plan[list[dict[str, Any]]]:
    sql, params = f"SELECT {LOG_COLUMNS} FROM message_log WHERE resource_id = ?", [op.resource_id]
    if op.message_id is not None:
        sql += " AND message_id = ?"
        params.append(op.message_id)
    rows = yield Q(sql + " ORDER BY id", params)
    keys = LOG_COLUMNS.split(", ")
    return [{**dict(zip(keys, r, strict=True)), "created_at": iso(r[-1])} for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class SetImportance(Op[bool]):
    """Change one message's importance; False when the resource has no such message."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    message_id: str
    value: float


@plan_of(SetImportance)
def set_importance(d: Dialect, op: SetImportance) -> Plan[bool]:
    done = yield Q(
        "UPDATE events SET importance = ? WHERE resource_id = ? AND id = ?",
        (op.value, op.resource_id, op.message_id),
        "rowcount",
    )
    return bool(done)


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
