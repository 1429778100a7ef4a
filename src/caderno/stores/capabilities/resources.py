"""Working memory and whole resources (``CORE``, with ``history``): read, patch, list, erase, export, import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.errors import Conflict, UsageError
from ...core.messages import Message, WorkingMemory
from .._op import Op, operations_in, plan_of
from .._rows import EVENTS_OF_THREAD, dumps, event_params, loads, row_to_message, row_to_thread
from .._sql import (
    PLACED_EVENT_INSERT,
    RESOURCE_TABLES,
    THREAD_COLUMNS,
    Dialect,
    Plan,
    Q,
    UniqueViolation,
    enqueue_embeddings,
    ensure_resource,
    iso,
)
from ..export import FACT_FIELDS, FACT_HISTORY_FIELDS, new_dump
from .agent_state import export_agent_state, import_agent_state
from .history import LOG_COLUMNS, ReadMessageLog, read_message_log
from .items import export_items, import_items
from .notebook import export_notebook, import_notebook

__all__ = [
    "EraseResource",
    "ExportResource",
    "ImportResource",
    "ListResources",
    "PatchWorkingMemory",
    "ReadWorkingMemory",
    "ReadWorkingMemoryLog",
    "WorkingMemoryUpdate",
    "import_positions",
]


#: Called inside the store's transaction with the current data (``None`` when
#: the resource has none); returns the new data or raises ``InvalidPatch``.
WorkingMemoryUpdate = Callable[[dict[str, Any] | None], dict[str, Any]]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadWorkingMemory(Op["WorkingMemory | None"]):
    """The stored working memory, or ``None``."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ReadWorkingMemory)
def read_working_memory(d: Dialect, op: ReadWorkingMemory) -> Plan[WorkingMemory | None]:
    row = yield Q(
        "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = ?", (op.resource_id,), "one"
    )
    if row is None or row[0] is None:
        return None
    return WorkingMemory(resource_id=op.resource_id, data=loads(row[0]), version=row[1], updated_at=_when(row[2]))


@dataclass(frozen=True, kw_only=True, slots=True)
class PatchWorkingMemory(Op[WorkingMemory]):
    """Atomically read, ``update``, write, and log ``patch``.

    Raises ``Conflict`` when ``expected_version`` is given and differs from
    the stored version (0 when the resource has none).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    update: WorkingMemoryUpdate
    patch: dict[str, Any]
    expected_version: int | None
    source: str
    now: datetime


@plan_of(PatchWorkingMemory)
def patch_working_memory(d: Dialect, op: PatchWorkingMemory) -> Plan[WorkingMemory]:
    rid = op.resource_id
    yield ensure_resource(d, rid, op.now)
    row = yield Q(f"SELECT working_memory, version FROM resources WHERE resource_id = ?{d.for_update}", (rid,), "one")
    current, version = loads(row[0]), row[1]
    if op.expected_version is not None and op.expected_version != version:
        raise Conflict(
            f"working memory of {rid!r} is at version {version}, not {op.expected_version}",
            resource_id=rid,
            expected=op.expected_version,
            actual=version,
        )
    data = op.update(current)
    yield Q(
        "UPDATE resources SET working_memory = ?, version = ?, updated_at = ? WHERE resource_id = ?",
        (dumps(data), version + 1, d.ts(op.now), rid),
        "none",
    )
    yield Q(
        "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
        (rid, version + 1, dumps(op.patch), op.source, d.ts(op.now)),
        "none",
    )
    return WorkingMemory(resource_id=rid, data=data, version=version + 1, updated_at=op.now)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadWorkingMemoryLog(Op[list[dict[str, Any]]]):
    """Every applied patch of the resource: version, patch, source, created_at; oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ReadWorkingMemoryLog)
def read_working_memory_log(d: Dialect, op: ReadWorkingMemoryLog) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT version, patch, source, created_at FROM working_memory_log WHERE resource_id = ? ORDER BY id",
        (op.resource_id,),
    )
    return [{"version": v, "patch": loads(p), "source": s, "created_at": iso(c)} for v, p, s, c in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ListResources(Op[list[str]]):
    """Every resource that holds anything, sorted (for admin views)."""

    one_statement: ClassVar[bool] = True


@plan_of(ListResources)
def list_resources(d: Dialect, op: ListResources) -> Plan[list[str]]:
    rows = yield Q(
        "SELECT resource_id FROM resources UNION SELECT resource_id FROM facts UNION "
        "SELECT resource_id FROM scheduled_tasks UNION SELECT resource_id FROM macros UNION "
        "SELECT resource_id FROM allowed_prefixes UNION SELECT resource_id FROM notebooks ORDER BY 1"
    )
    return [r[0] for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class EraseResource(Op[None]):
    """Delete every row of the resource, indexes included."""

    writes: ClassVar[bool] = True
    erases: ClassVar[bool] = True
    resource_id: str


@plan_of(EraseResource)
def erase_resource(d: Dialect, op: EraseResource) -> Plan[None]:
    for table in RESOURCE_TABLES:
        yield Q(f"DELETE FROM {table} WHERE resource_id = ?", (op.resource_id,), "none")


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportResource(Op[dict[str, Any]]):
    """Everything of the resource (see ``caderno.memory.engines.dump``), read in one snapshot."""

    resource_id: str


@plan_of(ExportResource)
def export_resource(d: Dialect, op: ExportResource) -> Plan[dict[str, Any]]:
    rid = op.resource_id
    dump = new_dump(rid)
    wm = yield from read_working_memory(d, ReadWorkingMemory(resource_id=rid))
    if wm is not None:
        dump["working_memory"] = {"data": wm.data, "version": wm.version, "updated_at": iso(wm.updated_at)}
    dump["working_memory_log"] = yield from read_working_memory_log(d, ReadWorkingMemoryLog(resource_id=rid))
    facts = yield Q(f"SELECT {', '.join(FACT_FIELDS)} FROM facts WHERE resource_id = ? ORDER BY category, key", (rid,))
    dump["facts"] = [dict(zip(FACT_FIELDS, (*r[:4], iso(r[4]), iso(r[5])), strict=True)) for r in facts]
    history = yield Q(
        f"SELECT {', '.join(FACT_HISTORY_FIELDS)} FROM facts_history WHERE resource_id = ? ORDER BY id", (rid,)
    )
    dump["fact_history"] = [
        dict(zip(FACT_HISTORY_FIELDS, (*r[:4], iso(r[4]), iso(r[5])), strict=True)) for r in history
    ]
    dump["message_log"] = yield from read_message_log(d, ReadMessageLog(resource_id=rid))
    dump.update((yield from export_agent_state(d, rid)))
    dump.update((yield from export_items(d, rid)))
    dump["notebook"] = yield from export_notebook(d, rid)
    threads = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? "
        "ORDER BY coalesce((SELECT min(seq) FROM events e WHERE e.resource_id = t.resource_id "
        "AND e.thread_id = t.thread_id), 0), t.thread_id",
        (rid,),
    )
    for row in threads:
        t = row_to_thread(rid, row)
        rows = yield Q(EVENTS_OF_THREAD + " ORDER BY seq", (rid, t.id))
        dump["threads"].append(
            {
                "id": t.id,
                "title": t.title,
                "metadata": t.metadata,
                "created_at": iso(t.created_at),
                "updated_at": iso(t.updated_at),
                "messages": [row_to_message(r).to_dict() for r in rows],
            }
        )
    return dump


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportResource(Op[None]):
    """Restore a checked export into a resource that holds nothing yet (``UsageError`` otherwise)."""

    writes: ClassVar[bool] = True
    queues_work: ClassVar[bool] = True
    dump: Any  # caderno.memory.engines.dump.Dump: validated, messages parsed
    now: datetime
    embed_roles: frozenset[str]
    """Messages of these roles with text are queued for embedding (the rule is the caller's)."""


#: Inserts a new thread's messages at their positions: ``(resource_id, thread_id, messages, positions)``.
MessageInsert = Callable[[str, str, list[Message], list[int]], Plan[None]]


def _insert_messages(rid: str, tid: str, messages: list[Message], positions: list[int]) -> Plan[None]:
    rows = [(rid, tid, *event_params(m), p) for m, p in zip(messages, positions, strict=True)]
    yield Q(PLACED_EVENT_INSERT, rows, "many")


@plan_of(ImportResource)
def import_resource(d: Dialect, op: ImportResource, *, insert_messages: MessageInsert = _insert_messages) -> Plan[None]:
    """``insert_messages``: how each thread's messages go in (PostgreSQL's gives each its full text as it does)."""
    dump, now = op.dump, op.now
    rid = dump["resource_id"]
    exists = yield Q(
        "SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM facts WHERE resource_id = ? UNION ALL SELECT 1 FROM scheduled_tasks "
        "WHERE resource_id = ? UNION ALL SELECT 1 FROM macros WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM allowed_prefixes WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM items WHERE resource_id = ? UNION ALL SELECT 1 FROM notebooks "
        "WHERE resource_id = ? LIMIT 1",
        (rid,) * 8,
        "one",
    )
    if exists:
        raise UsageError(f"resource {rid!r} already holds data; erase it before importing")
    wm = dump.get("working_memory")
    yield Q(
        "INSERT INTO resources (resource_id, working_memory, version, created_at, updated_at) VALUES (?,?,?,?,?)",
        (
            rid,
            dumps(wm["data"]) if wm else None,
            int(wm["version"]) if wm else 0,
            d.ts(now),
            d.ts(from_iso(wm["updated_at"])) if wm and wm.get("updated_at") else d.ts(now),
        ),
        "none",
    )
    yield Q(
        "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
        [(rid, e["version"], dumps(e["patch"]), e["source"], e["created_at"]) for e in dump["working_memory_log"]],
        "many",
    )
    yield Q(
        f"INSERT INTO facts (resource_id, {', '.join(FACT_FIELDS)}) VALUES (?,?,?,?,?,?,?)",
        [(rid, *(f[k] for k in FACT_FIELDS)) for f in dump["facts"]],
        "many",
    )
    yield Q(
        f"INSERT INTO facts_history (resource_id, {', '.join(FACT_HISTORY_FIELDS)}) VALUES (?,?,?,?,?,?,?)",
        [(rid, *(h[k] for k in FACT_HISTORY_FIELDS)) for h in dump["fact_history"]],
        "many",
    )
    yield Q(
        f"INSERT INTO message_log (resource_id, {LOG_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
        [(rid, *(e[k] for k in LOG_COLUMNS.split(", "))) for e in dump["message_log"]],
        "many",
    )
    for t in dump["threads"]:
        positions = import_positions(t["_parsed"])
        yield Q(
            "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at, last_position) "
            "VALUES (?,?,?,?,?,?)",
            (
                rid,
                t["id"],
                t.get("title"),
                dumps(t.get("metadata")),
                t.get("created_at") or d.ts(now),
                max(positions, default=0),
            ),
            "none",
        )
        try:
            yield from insert_messages(rid, t["id"], list(t["_parsed"]), positions)
        except UniqueViolation:
            raise UsageError("the export holds a message id twice") from None
    yield from import_items(d, rid, dump)
    yield from import_agent_state(d, rid, dump, now)
    yield from import_notebook(d, rid, dump.get("notebook") or {}, now)
    rows = yield Q("SELECT seq, role, content FROM events WHERE resource_id = ?", (rid,))
    yield enqueue_embeddings(rid, [seq for seq, role, content in rows if role in op.embed_roles and content])


def import_positions(messages: list[Message] | tuple[Message, ...]) -> list[int]:
    """The positions an imported thread's messages take, in order: every backend imports alike.

    An export carries each message's position; they are kept as long as they
    increase, so a thread keeps its numbers (gaps of deleted messages
    included) across export and import. A message without one (an older
    export) or out of order takes the next number after its predecessor.
    """
    out: list[int] = []
    for m in messages:
        last = out[-1] if out else 0
        out.append(m.position if m.position is not None and m.position > last else last + 1)
    return out


def _when(value: Any) -> Any:
    return from_iso(value) if isinstance(value, str) else value


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
