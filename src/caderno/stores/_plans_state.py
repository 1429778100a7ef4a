"""Shared plans of the agent's other durable state: scheduled tasks, tool macros, command prefixes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..core.clock import from_iso as _from_iso
from ..core.errors import UsageError
from ..core.messages import canonical_json
from ..core.records import ApiKey, Item, Macro, MacroKey, ScheduledTask
from . import ops
from ._rows import dumps, loads
from ._sql import Dialect, Plan, Q, UniqueViolation, iso, later
from .export import item_dict

TASK_FIELDS = (
    "id, resource_id, name, cron_expr, original_schedule, prompt, source, is_oneshot, is_paused, is_trusted, "
    "timezone, thread_id, next_run_at, last_run_at, created_at, updated_at"
)
_TASK_NAMES = TASK_FIELDS.split(", ")
MACRO_FIELDS = (
    "trigger_tool, trigger_pattern, next_tool, next_args, confidence, used_count, success_count, failure_count"
)


def task_from_row(row: Any) -> ScheduledTask:
    from ..core.clock import from_iso

    values = dict(zip(_TASK_NAMES, row, strict=True))
    for flag in ("is_oneshot", "is_paused", "is_trusted"):
        values[flag] = bool(values[flag])
    for when in ("next_run_at", "last_run_at", "created_at", "updated_at"):
        if isinstance(values[when], str):
            values[when] = from_iso(values[when])
    return ScheduledTask(**values)


def task_params(d: Dialect, t: ScheduledTask) -> tuple[Any, ...]:
    """The values of ``TASK_FIELDS`` for an INSERT."""
    ts = _ts(d)
    return (
        t.id,
        t.resource_id,
        t.name,
        t.cron_expr,
        t.original_schedule,
        t.prompt,
        t.source,
        t.is_oneshot,
        t.is_paused,
        t.is_trusted,
        t.timezone,
        t.thread_id,
        ts(t.next_run_at),
        ts(t.last_run_at),
        ts(t.created_at),
        ts(t.updated_at),
    )


def _ts(d: Dialect) -> Callable[[Any], Any]:
    return lambda value: None if value is None else d.ts(value)


_INSERT_TASK = f"INSERT INTO scheduled_tasks ({TASK_FIELDS}) VALUES ({','.join('?' * len(_TASK_NAMES))})"
#: The columns a replace changes (the identity and creation time stay).
_UPDATE_COLUMNS = tuple(n for n in _TASK_NAMES if n not in ("id", "resource_id", "name", "created_at"))
_UPDATE_TASK = (
    f"UPDATE scheduled_tasks SET {', '.join(f'{n} = ?' for n in _UPDATE_COLUMNS)} WHERE resource_id = ? AND id = ?"
)


def _update_params(d: Dialect, t: ScheduledTask) -> tuple[Any, ...]:
    values = dict(zip(_TASK_NAMES, task_params(d, t), strict=True))
    return (*(values[n] for n in _UPDATE_COLUMNS), t.resource_id, t.id)


def put_task(d: Dialect, op: ops.PutTask) -> Plan[ScheduledTask | None]:
    t = op.task
    if op.create:
        try:
            yield Q(_INSERT_TASK, task_params(d, t), "none")
        except UniqueViolation:
            raise UsageError(f"resource {t.resource_id!r} already has a task named {t.name!r}") from None
        return t
    done = yield Q(_UPDATE_TASK, _update_params(d, t), "rowcount")
    return t if done else None


def list_tasks(d: Dialect, op: ops.ListTasks) -> Plan[list[ScheduledTask]]:
    if op.resource_id is None:
        rows = yield Q(f"SELECT {TASK_FIELDS} FROM scheduled_tasks ORDER BY resource_id, name")
    else:
        rows = yield Q(
            f"SELECT {TASK_FIELDS} FROM scheduled_tasks WHERE resource_id = ? ORDER BY name", (op.resource_id,)
        )
    return [task_from_row(r) for r in rows]


def delete_task(d: Dialect, op: ops.DeleteTask) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM scheduled_tasks WHERE resource_id = ? AND name = ?", (op.resource_id, op.name), "rowcount"
    )
    return bool(done)


def due_tasks_claimed(d: Dialect, op: ops.ClaimDueTasks, rows: list[Any]) -> Plan[list[ScheduledTask]]:
    """The second half of a claim, shared: lease each selected task and move its next run."""
    tasks = [task_from_row(r) for r in rows]
    lease = later(d, op.now, op.lease_seconds)
    for t in tasks:
        following = t.next_run_at if t.is_oneshot else op.advance(t, op.now)
        yield Q(
            "UPDATE scheduled_tasks SET claimed_until = ?, claimed_by = ?, next_run_at = ? "
            "WHERE resource_id = ? AND id = ?",
            (lease, op.claimant, None if following is None else d.ts(following), t.resource_id, t.id),
            "none",
        )
    return tasks


def renew_task_claims(d: Dialect, op: ops.RenewTaskClaims) -> Plan[set[tuple[str, str]]]:
    # The claimant's token is a fresh id per claim, so this is exactly the
    # claim's tasks not yet finished and not re-claimed by another worker.
    rows = yield Q(
        "UPDATE scheduled_tasks SET claimed_until = ? WHERE claimed_by = ? RETURNING resource_id, id",
        (later(d, op.now, op.lease_seconds), op.claimant),
    )
    return {(r[0], r[1]) for r in rows}


#: The WHERE clause of a due task (the dialects add their own locking).
DUE = "next_run_at <= ? AND is_paused = ? AND (claimed_until IS NULL OR claimed_until < ?)"
#: A claim's due tasks, fair between resources: each resource's due tasks are
#: ranked by due time (``turn``), and a claim takes every resource's first
#: before anyone's second. Taken first come, first served, one resource with
#: 40 due tasks filled every claim of ``TASK_BATCH`` and another's
#: every-minute task ran once in four minutes. The outer ``DUE`` is checked
#: again so that PostgreSQL, which re-reads a row another worker just
#: claimed, passes over it.
FAIR_DUE = (
    f"SELECT {TASK_FIELDS} FROM scheduled_tasks JOIN ("
    "SELECT resource_id AS fair_resource, id AS fair_id, "
    "ROW_NUMBER() OVER (PARTITION BY resource_id ORDER BY next_run_at, id) AS turn "
    f"FROM scheduled_tasks WHERE {DUE} ORDER BY turn, next_run_at, resource_id, id LIMIT ?"
    ") AS fair ON resource_id = fair_resource AND id = fair_id "
    f"WHERE {DUE} ORDER BY turn, next_run_at, resource_id, id"
)


def fair_claim(d: Dialect, op: ops.ClaimDueTasks, *, lock: str = "") -> Plan[list[ScheduledTask]]:
    """A claim, shared: select ``FAIR_DUE`` (``lock``: the dialect's row lock), then lease each task."""
    now = d.ts(op.now)
    rows = yield Q(f"{FAIR_DUE} {lock}".rstrip(), (now, False, now, op.limit, now, False, now))
    return (yield from due_tasks_claimed(d, op, rows))


def finish_task(d: Dialect, op: ops.FinishTask) -> Plan[None]:
    # Only under our own claim: a task another worker re-claimed (our lease
    # ran out) is theirs to delete or to hand back.
    key = (op.resource_id, op.task_id, op.claimant)
    if op.delete:
        yield Q("DELETE FROM scheduled_tasks WHERE resource_id = ? AND id = ? AND claimed_by = ?", key, "none")
    else:
        yield Q(
            "UPDATE scheduled_tasks SET last_run_at = ?, claimed_until = NULL, claimed_by = NULL, updated_at = ? "
            "WHERE resource_id = ? AND id = ? AND claimed_by = ?",
            (d.ts(op.ran_at), d.ts(op.ran_at), *key),
            "none",
        )


def sync_config_tasks(d: Dialect, op: ops.SyncConfigTasks) -> Plan[dict[str, int]]:
    report = {"added": 0, "updated": 0, "deleted": 0, "skipped": 0}
    rows = yield Q(f"SELECT {TASK_FIELDS} FROM scheduled_tasks")
    existing = {(t.resource_id, t.name): t for t in (task_from_row(r) for r in rows)}
    wanted = {(t.resource_id, t.name) for t in op.tasks}
    for t in op.tasks:
        old = existing.get((t.resource_id, t.name))
        if old is None:
            yield Q(_INSERT_TASK, task_params(d, t), "none")
            report["added"] += 1
        elif old.source != "config":
            report["skipped"] += 1  # a tool-made task holds the name: never touched
        elif (
            old.cron_expr,
            old.original_schedule,
            old.prompt,
            old.is_oneshot,
            old.is_trusted,
            old.timezone,
            old.thread_id,
        ) != (
            t.cron_expr,
            t.original_schedule,
            t.prompt,
            t.is_oneshot,
            t.is_trusted,
            t.timezone,
            t.thread_id,
        ):
            # The schedule changed: keep the id, pause state and history, recompute the next run.
            changed = ScheduledTask(
                **{
                    **{name: getattr(t, name) for name in _TASK_NAMES},
                    "id": old.id,
                    "is_paused": old.is_paused,
                    "last_run_at": old.last_run_at,
                    "created_at": old.created_at,
                }
            )
            yield Q(_UPDATE_TASK, _update_params(d, changed), "none")
            report["updated"] += 1
    for key, old in existing.items():
        if old.source == "config" and key not in wanted:
            yield Q("DELETE FROM scheduled_tasks WHERE resource_id = ? AND id = ?", (old.resource_id, old.id), "none")
            report["deleted"] += 1
    return report


# -- macros ---------------------------------------------------------------------------------


def _macro_from_row(row: Any) -> Macro:
    return Macro(
        trigger_tool=row[0],
        trigger_pattern=row[1],
        next_tool=row[2],
        next_args=loads(row[3]),
        confidence=float(row[4]),
        used_count=row[5],
        success_count=row[6],
        failure_count=row[7],
    )


def read_macros(d: Dialect, op: ops.ReadMacros) -> Plan[list[Macro]]:
    sql, params = f"SELECT {MACRO_FIELDS} FROM macros WHERE resource_id = ?", [op.resource_id]
    if op.trigger_tool is not None:
        sql += " AND trigger_tool = ?"
        params.append(op.trigger_tool)
    rows = yield Q(sql + " ORDER BY confidence DESC, trigger_tool, next_tool, next_args", params)
    return [_macro_from_row(r) for r in rows]


def learn_macros(d: Dialect, op: ops.LearnMacros) -> Plan[None]:
    known = yield from read_macros(d, ops.ReadMacros(resource_id=op.resource_id))
    before: dict[MacroKey, Macro] = {m.key: m for m in known}
    after = op.learn(dict(before))
    now = d.ts(op.now)
    changed = [m for key, m in after.items() if before.get(key) != m]
    yield Q(
        f"INSERT INTO macros (resource_id, {MACRO_FIELDS}, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT (resource_id, trigger_tool, trigger_pattern, next_tool, next_args) DO UPDATE SET "
        "confidence = excluded.confidence, used_count = excluded.used_count, "
        "success_count = excluded.success_count, failure_count = excluded.failure_count, updated_at = excluded.updated_at",
        [
            (
                op.resource_id,
                m.trigger_tool,
                m.trigger_pattern,
                m.next_tool,
                canonical_json(m.next_args),
                m.confidence,
                m.used_count,
                m.success_count,
                m.failure_count,
                now,
                now,
            )
            for m in changed
        ],
        "many",
    )


def mark_macro_used(d: Dialect, op: ops.MarkMacroUsed) -> Plan[bool]:
    done = yield Q(
        "UPDATE macros SET used_count = used_count + 1, updated_at = ? "
        "WHERE resource_id = ? AND trigger_tool = ? AND trigger_pattern = ? AND next_tool = ? AND next_args = ?",
        (d.ts(op.now), op.resource_id, *op.key),
        "rowcount",
    )
    return bool(done)


# -- approved command prefixes --------------------------------------------------------------


def allow_prefix(d: Dialect, op: ops.AllowPrefix) -> Plan[bool]:
    done = yield Q(
        "INSERT INTO allowed_prefixes (resource_id, prefix, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (op.resource_id, op.prefix, d.ts(op.now)),
        "rowcount",
    )
    return bool(done)


def revoke_prefix(d: Dialect, op: ops.RevokePrefix) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM allowed_prefixes WHERE resource_id = ? AND prefix = ?", (op.resource_id, op.prefix), "rowcount"
    )
    return bool(done)


def list_prefixes(d: Dialect, op: ops.ListPrefixes) -> Plan[list[str]]:
    rows = yield Q("SELECT prefix FROM allowed_prefixes WHERE resource_id = ? ORDER BY prefix", (op.resource_id,))
    return [r[0] for r in rows]


# -- in exports -----------------------------------------------------------------------------


def export_state(d: Dialect, resource_id: str) -> Plan[dict[str, Any]]:
    """The resource's tasks, macros and prefixes, as export sections."""
    tasks = yield from list_tasks(d, ops.ListTasks(resource_id=resource_id))
    macros = yield from read_macros(d, ops.ReadMacros(resource_id=resource_id))
    prefixes = yield from list_prefixes(d, ops.ListPrefixes(resource_id=resource_id))
    items = yield from search_items(d, ops.SearchItems(resource_id=resource_id, prefix=()))
    jobs = yield Q("SELECT namespace, key, texts FROM item_embeddings WHERE resource_id = ?", (resource_id,))
    texts = {(tuple(ns.split(".")), key): loads(t) for ns, key, t in jobs}
    return {
        "items": [
            item_dict(it, texts.get((it.namespace, it.key)))
            for it in sorted(items, key=lambda it: (it.namespace, it.key))
        ],
        "scheduled_tasks": [
            {name: iso(getattr(t, name)) for name in _TASK_NAMES if name != "resource_id"} for t in tasks
        ],
        "macros": [
            {
                "trigger_tool": m.trigger_tool,
                "trigger_pattern": m.trigger_pattern,
                "next_tool": m.next_tool,
                "next_args": m.next_args,
                "confidence": m.confidence,
                "used_count": m.used_count,
                "success_count": m.success_count,
                "failure_count": m.failure_count,
            }
            for m in sorted(macros, key=lambda m: m.key)
        ],
        "allowed_prefixes": prefixes,
    }


def import_state(d: Dialect, resource_id: str, dump: dict[str, Any], now: Any) -> Plan[None]:
    from ..core.clock import from_iso

    yield Q(
        "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) VALUES (?,?,?,?,?,?)",
        [
            (
                resource_id,
                _path(tuple(it["namespace"])),
                it["key"],
                canonical_json(it["value"]),
                d.ts(from_iso(it["created_at"])),
                d.ts(from_iso(it["updated_at"])),
            )
            for it in dump["items"]
        ],
        "many",
    )
    # Vectors are not exported (they are derived): the items' texts are queued again.
    yield Q(
        _QUEUE_ITEM,
        [
            _job_params(d, resource_id, tuple(it["namespace"]), it["key"], from_iso(it["updated_at"]), it["embed"])
            for it in dump["items"]
            if it.get("embed")
        ],
        "many",
    )

    def when(value: Any) -> Any:
        return None if value is None else d.ts(from_iso(value))

    yield Q(
        _INSERT_TASK,
        [
            (
                t["id"],
                resource_id,
                t["name"],
                t["cron_expr"],
                t["original_schedule"],
                t["prompt"],
                t["source"],
                t["is_oneshot"],
                t["is_paused"],
                t["is_trusted"],
                t["timezone"],
                t["thread_id"],
                when(t["next_run_at"]),
                when(t["last_run_at"]),
                when(t["created_at"]),
                when(t["updated_at"]),
            )
            for t in dump["scheduled_tasks"]
        ],
        "many",
    )
    yield Q(
        f"INSERT INTO macros (resource_id, {MACRO_FIELDS}, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                resource_id,
                m["trigger_tool"],
                m["trigger_pattern"],
                m["next_tool"],
                canonical_json(m["next_args"]),
                m["confidence"],
                m["used_count"],
                m["success_count"],
                m["failure_count"],
                d.ts(now),
                d.ts(now),
            )
            for m in dump["macros"]
        ],
        "many",
    )
    yield Q(
        "INSERT INTO allowed_prefixes (resource_id, prefix, created_at) VALUES (?, ?, ?)",
        [(resource_id, p, d.ts(now)) for p in dump["allowed_prefixes"]],
        "many",
    )


# -- API keys ---------------------------------------------------------------------------------

_KEY_FIELDS = "id, name, resources, admin, created_at, revoked_at"


def _key_from_row(row: Any) -> ApiKey:
    from ..core.clock import from_iso

    def when(value: Any) -> Any:
        return from_iso(value) if isinstance(value, str) else value

    return ApiKey(
        id=row[0],
        name=row[1],
        resources=tuple(loads(row[2])),
        admin=bool(row[3]),
        created_at=when(row[4]),
        revoked_at=when(row[5]),
    )


def create_key(d: Dialect, op: ops.CreateKey) -> Plan[None]:
    k = op.key
    assert k.created_at is not None  # set by memory.keys.create
    yield Q(
        "INSERT INTO api_keys (id, name, token_hash, resources, admin, created_at) VALUES (?,?,?,?,?,?)",
        (k.id, k.name, op.token_hash, canonical_json(list(k.resources)), k.admin, d.ts(k.created_at)),
        "none",
    )


def find_key(d: Dialect, op: ops.FindKey) -> Plan[ApiKey | None]:
    row = yield Q(
        f"SELECT {_KEY_FIELDS} FROM api_keys WHERE token_hash = ? AND revoked_at IS NULL", (op.token_hash,), "one"
    )
    return _key_from_row(row) if row else None


def list_keys(d: Dialect, op: ops.ListKeys) -> Plan[list[ApiKey]]:
    rows = yield Q(f"SELECT {_KEY_FIELDS} FROM api_keys ORDER BY created_at, id")
    return [_key_from_row(r) for r in rows]


def revoke_key(d: Dialect, op: ops.RevokeKey) -> Plan[bool]:
    done = yield Q(
        "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (d.ts(op.now), op.key_id), "rowcount"
    )
    return bool(done)


# -- items ---------------------------------------------------------------------------------------


def _path(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _item_from_row(resource_id: str, row: Any) -> Item:
    # Per row of every search: no import or closure per call.
    created, updated = row[3], row[4]
    return Item(
        resource_id=resource_id,
        namespace=tuple(row[0].split(".")),
        key=row[1],
        value=loads(row[2]),
        created_at=_from_iso(created) if isinstance(created, str) else created,
        updated_at=_from_iso(updated) if isinstance(updated, str) else updated,
    )


#: ``not_before`` of a job due at once: bound explicitly (the two databases
#: would need different column defaults), earlier than any real time.
_DUE_AT_ONCE = datetime(1, 1, 1, tzinfo=UTC)
_QUEUE_ITEM = (
    "INSERT INTO item_embeddings (resource_id, namespace, key, updated_at, texts, not_before) VALUES (?,?,?,?,?,?)"
)
_ITEM_KEY = "resource_id = ? AND namespace = ? AND key = ?"


def _job_params(
    d: Dialect, resource_id: str, namespace: tuple[str, ...], key: str, updated_at: datetime, texts: Any
) -> tuple[Any, ...]:
    return (resource_id, _path(namespace), key, d.ts(updated_at), dumps(list(texts)), d.ts(_DUE_AT_ONCE))


def put_item(d: Dialect, op: ops.PutItem) -> Plan[None]:
    it = op.item
    assert it.updated_at is not None
    key = (it.resource_id, _path(it.namespace), it.key)
    yield Q(
        "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT (resource_id, namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (*key, canonical_json(it.value), d.ts(it.updated_at), d.ts(it.updated_at)),
        "none",
    )
    # The old job or vectors describe the old value: the new value starts over.
    yield Q(f"DELETE FROM item_embeddings WHERE {_ITEM_KEY}", key, "none")
    if op.embed:
        yield Q(_QUEUE_ITEM, _job_params(d, it.resource_id, it.namespace, it.key, it.updated_at, op.embed), "none")


def delete_item(d: Dialect, op: ops.DeleteItem) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM items WHERE resource_id = ? AND namespace = ? AND key = ?",
        (op.resource_id, _path(op.namespace), op.key),
        "rowcount",
    )
    return bool(done)


def get_item(d: Dialect, op: ops.GetItem) -> Plan[Item | None]:
    row = yield Q(
        "SELECT namespace, key, value, created_at, updated_at FROM items WHERE resource_id = ? AND namespace = ? AND key = ?",
        (op.resource_id, _path(op.namespace), op.key),
        "one",
    )
    return _item_from_row(op.resource_id, row) if row else None


#: A namespace under a prefix of whole labels: the path itself, or the path followed by '.'.
_UNDER = "(? = '' OR namespace = ? OR substr(namespace, 1, ?) = ?)"


def _under(prefix: tuple[str, ...]) -> tuple[Any, ...]:
    """The parameters of ``_UNDER``."""
    path = _path(prefix)
    return (path, path, len(path) + 1, path + ".")


#: LangGraph's comparison operators in SQL; ``$ne`` is ``$eq`` negated.
_COMPARE = {"$eq": "=", "$ne": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _field(d: Dialect, kind: str, path: tuple[str, ...]) -> tuple[str, list[Any]]:
    sql = d.json_field(kind)
    return sql, [d.json_path(path)] * sql.count("?")


def _condition(d: Dialect, path: tuple[str, ...], operator: str, operand: Any) -> tuple[str, list[Any]]:
    """One condition of ``SearchItems.where`` in SQL: the operand is a parameter, the path too."""
    if not ops.SearchItems.takes(path, operator, operand):
        raise UsageError(f"unsupported item filter condition on {list(path)!r}: {operator} {type(operand).__name__}")
    if operand is None:
        kind, params = _field(d, "kind", path)
        sql = f"coalesce({kind}, 'null') {'=' if operator == '$eq' else '<>'} 'null'"
    else:
        field, params = _field(d, "string" if isinstance(operand, str) else "number", path)
        bound = operand if isinstance(operand, str | float) else int(operand)
        sql, params = f"coalesce({field} {_COMPARE[operator]} ?, FALSE)", [*params, bound]
        if operator == "$ne":
            sql = f"NOT {sql}"
    if len(path) > 1 and (operator == "$ne" or operand is None):
        # A missing field under a parent that is not an object meets neither $eq None nor $ne.
        parent, more = _field(d, "kind", path[:-1])
        sql, params = f"{parent} = 'object' AND {sql}", [*more, *params]
    return sql, params


def _filtered(
    d: Dialect, resource_id: str, prefix: tuple[str, ...], where: Any
) -> tuple[str, str, list[Any], list[Any]]:
    """The items under ``prefix`` as the CTE ``i``, and ``where`` (``SearchItems.where``) on them.

    Returns the ``WITH`` clause, the conditions (SQL on ``i.doc``) and the parameters of each.
    """
    # The conditions read the document of each row under the prefix, parsed once (json_doc).
    conditions = [_condition(d, path, operator, operand) for path, operator, operand in where]
    cte = (
        f"WITH i AS {d.json_cte} (SELECT namespace, key, value, created_at, updated_at, {d.json_doc} AS doc "
        f"FROM items WHERE resource_id = ? AND {_UNDER})"
    )
    return (
        cte,
        " AND ".join(c for c, _ in conditions),
        [resource_id, *_under(prefix)],
        [p for _, more in conditions for p in more],
    )


def search_items(d: Dialect, op: ops.SearchItems) -> Plan[list[Item]]:
    if op.offset < 0 or (op.limit is not None and op.limit < 0):
        raise UsageError(f"limit and offset must not be negative: {op.limit}, {op.offset}")
    columns = "namespace, key, value, created_at, updated_at"
    sql = f"SELECT {columns} FROM items WHERE resource_id = ? AND {_UNDER}"
    params = [op.resource_id, *_under(op.prefix)]
    if op.where:
        cte, kept, at, of = _filtered(d, op.resource_id, op.prefix, op.where)
        sql, params = f"{cte} SELECT {columns} FROM i WHERE {kept}", [*at, *of]
    if op.limit is not None:
        sql += " ORDER BY updated_at DESC, namespace, key LIMIT ? OFFSET ?"
        params += [op.limit, op.offset]
    else:
        sql += " ORDER BY updated_at DESC, namespace, key"
    rows = yield Q(sql, params)
    if op.limit is None and op.offset:
        rows = rows[op.offset :]
    return [_item_from_row(op.resource_id, r) for r in rows]


def list_item_namespaces(d: Dialect, op: ops.ListItemNamespaces) -> Plan[list[tuple[str, ...]]]:
    rows = yield Q("SELECT DISTINCT namespace FROM items WHERE resource_id = ? ORDER BY namespace", (op.resource_id,))
    return [tuple(r[0].split(".")) for r in rows]


# -- item vectors -----------------------------------------------------------------------------


def _when(value: Any) -> Any:
    return _from_iso(value) if isinstance(value, str) else value


def claim_item_embeddings(d: Dialect, op: ops.ClaimItemEmbeddings) -> Plan[list[ops.ItemEmbeddingJob]]:
    # PostgreSQL: SKIP LOCKED, so workers on any number of machines take
    # disjoint batches; the lease (not_before) keeps them theirs after the
    # commit. SQLite: the single writer serialises claims.
    rows = yield Q(
        "SELECT resource_id, namespace, key, updated_at, texts, attempts FROM item_embeddings "
        f"WHERE vectors IS NULL AND not_before <= ? ORDER BY not_before LIMIT ?{d.skip_locked}",
        (d.ts(op.now), op.limit),
    )
    yield Q(
        f"UPDATE item_embeddings SET not_before = ? WHERE {_ITEM_KEY}",
        [(later(d, op.now, op.lease_seconds), *r[:3]) for r in rows],
        "many",
    )
    return [
        ops.ItemEmbeddingJob(
            resource_id=r[0],
            namespace=tuple(r[1].split(".")),
            key=r[2],
            updated_at=_when(r[3]),
            texts=tuple(loads(r[4])),
            attempts=r[5],
        )
        for r in rows
    ]


def _version(job: ops.ItemEmbeddingJob) -> tuple[Any, ...]:
    return (job.resource_id, _path(job.namespace), job.key, job.updated_at, job.texts)


def finish_item_embeddings(d: Dialect, op: ops.FinishItemEmbeddings) -> Plan[None]:
    jobs = [job for job, _ in op.done] + [job for job, _, _ in op.failed]
    current: set[tuple[Any, ...]] = set()
    for rid in sorted({j.resource_id for j in jobs}):
        keys = sorted({(_path(j.namespace), j.key) for j in jobs if j.resource_id == rid})
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
        f"UPDATE item_embeddings SET model = ?, dim = ?, vectors = ?, error = NULL WHERE {_ITEM_KEY}",
        [(op.model, op.dim, v, j.resource_id, _path(j.namespace), j.key) for j, v in op.done if _version(j) in current],
        "many",
    )
    yield Q(
        f"UPDATE item_embeddings SET attempts = attempts + 1, error = ?, not_before = ? WHERE {_ITEM_KEY}",
        [
            (error, later(d, op.now, after), j.resource_id, _path(j.namespace), j.key)
            for j, error, after in op.failed
            if _version(j) in current
        ],
        "many",
    )


def read_item_vectors(d: Dialect, op: ops.ReadItemVectors) -> Plan[list[ops.ItemVectors]]:
    if op.where:
        # Only the vectors of the items the filter keeps, joined on the item's key.
        cte, kept, at, of = _filtered(d, op.resource_id, op.prefix, op.where)
        rows = yield Q(
            f"{cte} SELECT e.namespace, e.key, e.updated_at, e.dim, e.vectors FROM item_embeddings e "
            "JOIN i ON i.namespace = e.namespace AND i.key = e.key "
            f"WHERE e.resource_id = ? AND e.model = ? AND e.vectors IS NOT NULL AND {kept} "
            "ORDER BY e.namespace, e.key",
            [*at, op.resource_id, op.model, *of],
        )
    else:
        rows = yield Q(
            "SELECT namespace, key, updated_at, dim, vectors FROM item_embeddings WHERE resource_id = ? AND model = ? "
            f"AND vectors IS NOT NULL AND {_UNDER} ORDER BY namespace, key",
            (op.resource_id, op.model, *_under(op.prefix)),
        )
    return [
        ops.ItemVectors(
            namespace=tuple(r[0].split(".")), key=r[1], updated_at=_when(r[2]), dim=r[3], vectors=bytes(r[4])
        )
        for r in rows
    ]


def requeue_items(d: Dialect, resource_id: str | None) -> Q:
    """Drop the items' vectors (of one resource or all) and queue their texts again (``Reindex``)."""
    where, params = (" WHERE resource_id = ?", (resource_id,)) if resource_id is not None else ("", ())
    return Q(
        "UPDATE item_embeddings SET model = NULL, dim = NULL, vectors = NULL, attempts = 0, error = NULL, "
        f"not_before = ?{where}",
        (d.ts(_DUE_AT_ONCE), *params),
        "none",
    )


SHARED_STATE: dict[type[Any], Callable[[Dialect, Any], Plan[Any]]] = {
    ops.ClaimItemEmbeddings: claim_item_embeddings,
    ops.FinishItemEmbeddings: finish_item_embeddings,
    ops.ReadItemVectors: read_item_vectors,
    ops.PutItem: put_item,
    ops.DeleteItem: delete_item,
    ops.GetItem: get_item,
    ops.SearchItems: search_items,
    ops.ListItemNamespaces: list_item_namespaces,
    ops.CreateKey: create_key,
    ops.FindKey: find_key,
    ops.ListKeys: list_keys,
    ops.RevokeKey: revoke_key,
    ops.PutTask: put_task,
    ops.ListTasks: list_tasks,
    ops.DeleteTask: delete_task,
    ops.RenewTaskClaims: renew_task_claims,
    ops.FinishTask: finish_task,
    ops.SyncConfigTasks: sync_config_tasks,
    ops.ReadMacros: read_macros,
    ops.LearnMacros: learn_macros,
    ops.MarkMacroUsed: mark_macro_used,
    ops.AllowPrefix: allow_prefix,
    ops.RevokePrefix: revoke_prefix,
    ops.ListPrefixes: list_prefixes,
}
