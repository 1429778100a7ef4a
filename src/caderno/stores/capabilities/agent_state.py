"""The agent's other durable state (``AGENT_STATE``): scheduled tasks, learned tool macros, approved command prefixes.

The claim of due tasks is planned per dialect (``_sqlite_plans``,
``_postgres_plans``, both through ``fair_claim``); the rest run the plan
beside them on both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.errors import UsageError
from ...core.messages import canonical_json
from ...core.records import Macro, MacroKey, ScheduledTask
from .._op import Op, operations_in, plan_of
from .._rows import loads
from .._sql import Dialect, Plan, Q, UniqueViolation, iso, later

__all__ = [
    "AllowPrefix",
    "ClaimDueTasks",
    "DeleteTask",
    "FinishTask",
    "LearnMacros",
    "ListPrefixes",
    "ListTasks",
    "MarkMacroUsed",
    "PutTask",
    "ReadMacros",
    "RenewTaskClaims",
    "RevokePrefix",
    "SyncConfigTasks",
]


# -- scheduled tasks -------------------------------------------------------------------------------


TASK_FIELDS = (
    "id, resource_id, name, cron_expr, original_schedule, prompt, source, is_oneshot, is_paused, is_trusted, "
    "timezone, thread_id, next_run_at, last_run_at, created_at, updated_at"
)
_TASK_NAMES = TASK_FIELDS.split(", ")


def task_from_row(row: Any) -> ScheduledTask:
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


@dataclass(frozen=True, kw_only=True, slots=True)
class PutTask(Op["ScheduledTask | None"]):
    """Create a task (``create``: ``UsageError`` when its name is taken) or replace one by id.

    Result: the stored task, or ``None`` when replacing a task that is gone.
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    task: ScheduledTask
    create: bool


@plan_of(PutTask)
def put_task(d: Dialect, op: PutTask) -> Plan[ScheduledTask | None]:
    t = op.task
    if op.create:
        try:
            yield Q(_INSERT_TASK, task_params(d, t), "none")
        except UniqueViolation:
            raise UsageError(f"resource {t.resource_id!r} already has a task named {t.name!r}") from None
        return t
    done = yield Q(_UPDATE_TASK, _update_params(d, t), "rowcount")
    return t if done else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ListTasks(Op[list[ScheduledTask]]):
    """The resource's tasks (every resource's when ``None``), by name."""

    one_statement: ClassVar[bool] = True
    resource_id: str | None


@plan_of(ListTasks)
def list_tasks(d: Dialect, op: ListTasks) -> Plan[list[ScheduledTask]]:
    if op.resource_id is None:
        rows = yield Q(f"SELECT {TASK_FIELDS} FROM scheduled_tasks ORDER BY resource_id, name")
    else:
        rows = yield Q(
            f"SELECT {TASK_FIELDS} FROM scheduled_tasks WHERE resource_id = ? ORDER BY name", (op.resource_id,)
        )
    return [task_from_row(r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteTask(Op[bool]):
    """Delete a task by name; False when there was none."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    name: str


@plan_of(DeleteTask)
def delete_task(d: Dialect, op: DeleteTask) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM scheduled_tasks WHERE resource_id = ? AND name = ?", (op.resource_id, op.name), "rowcount"
    )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimDueTasks(Op[list[ScheduledTask]]):
    """Take the tasks due at ``now`` (not paused, not claimed by a live worker) for ``lease_seconds``.

    A recurring task's ``next_run_at`` moves to ``advance(task, now)`` at
    once (so runs missed while nothing ran fire once, and no other worker
    fires the same slot); a one-shot keeps it until ``FinishTask`` deletes
    it, so a worker that dies lets another fire it after the lease. Result:
    the claimed tasks as they were before the claim.

    ``claimant``: the claim's fencing token (a fresh id per claim), written
    on each task it takes; ``RenewTaskClaims`` and ``FinishTask`` touch only
    a task that still carries it.
    """

    writes: ClassVar[bool] = True
    now: datetime
    limit: int
    lease_seconds: float
    advance: Callable[[ScheduledTask, datetime], datetime | None]
    claimant: str


def due_tasks_claimed(d: Dialect, op: ClaimDueTasks, rows: list[Any]) -> Plan[list[ScheduledTask]]:
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


def fair_claim(d: Dialect, op: ClaimDueTasks, *, lock: str = "") -> Plan[list[ScheduledTask]]:
    """A claim, shared: select ``FAIR_DUE`` (``lock``: the dialect's row lock), then lease each task."""
    now = d.ts(op.now)
    rows = yield Q(f"{FAIR_DUE} {lock}".rstrip(), (now, False, now, op.limit, now, False, now))
    return (yield from due_tasks_claimed(d, op, rows))


@dataclass(frozen=True, kw_only=True, slots=True)
class RenewTaskClaims(Op[set[tuple[str, str]]]):
    """Extend the lease of every task ``claimant`` still holds; result: their ``(resource_id, id)``.

    A fencing check as well as a renewal: a task another worker re-claimed
    (after this claim's lease ran out) carries that worker's token and is
    not in the result, so the first worker must not run it.
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    claimant: str
    lease_seconds: float
    now: datetime


@plan_of(RenewTaskClaims)
def renew_task_claims(d: Dialect, op: RenewTaskClaims) -> Plan[set[tuple[str, str]]]:
    # The claimant's token is a fresh id per claim, so this is exactly the
    # claim's tasks not yet finished and not re-claimed by another worker.
    rows = yield Q(
        "UPDATE scheduled_tasks SET claimed_until = ? WHERE claimed_by = ? RETURNING resource_id, id",
        (later(d, op.now, op.lease_seconds), op.claimant),
    )
    return {(r[0], r[1]) for r in rows}


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishTask(Op[None]):
    """Record a run: a one-shot is deleted; a recurring task gets ``last_run_at`` and its claim back.

    Only while the task still carries ``claimant`` (its claim's token): a
    task another worker re-claimed is that worker's to finish.
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    task_id: str
    ran_at: datetime
    delete: bool
    claimant: str


@plan_of(FinishTask)
def finish_task(d: Dialect, op: FinishTask) -> Plan[None]:
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


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncConfigTasks(Op[dict[str, int]]):
    """Make the ``config`` tasks exactly ``tasks`` (upserted by resource and name); tool tasks untouched.

    Result: counts ``added``, ``updated``, ``deleted``, ``skipped`` (a name
    a tool-made task already holds).
    """

    writes: ClassVar[bool] = True
    tasks: tuple[ScheduledTask, ...]
    now: datetime


@plan_of(SyncConfigTasks)
def sync_config_tasks(d: Dialect, op: SyncConfigTasks) -> Plan[dict[str, int]]:
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


# -- macros ----------------------------------------------------------------------------------------


MACRO_FIELDS = (
    "trigger_tool, trigger_pattern, next_tool, next_args, confidence, used_count, success_count, failure_count"
)


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


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadMacros(Op[list[Macro]]):
    """The resource's macros (of one trigger tool, or all), best first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    trigger_tool: str | None = None


@plan_of(ReadMacros)
def read_macros(d: Dialect, op: ReadMacros) -> Plan[list[Macro]]:
    sql, params = f"SELECT {MACRO_FIELDS} FROM macros WHERE resource_id = ?", [op.resource_id]
    if op.trigger_tool is not None:
        sql += " AND trigger_tool = ?"
        params.append(op.trigger_tool)
    rows = yield Q(sql + " ORDER BY confidence DESC, trigger_tool, next_tool, next_args", params)
    return [_macro_from_row(r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class LearnMacros(Op[None]):
    """Read the resource's macros, ``learn`` (policy, run in the transaction), write what changed."""

    writes: ClassVar[bool] = True
    resource_id: str
    learn: Callable[[dict[MacroKey, Macro]], dict[MacroKey, Macro]]
    now: datetime


@plan_of(LearnMacros)
def learn_macros(d: Dialect, op: LearnMacros) -> Plan[None]:
    known = yield from read_macros(d, ReadMacros(resource_id=op.resource_id))
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


@dataclass(frozen=True, kw_only=True, slots=True)
class MarkMacroUsed(Op[bool]):
    """Count one use of a macro's suggestion; False when there is no such macro."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    key: MacroKey
    now: datetime


@plan_of(MarkMacroUsed)
def mark_macro_used(d: Dialect, op: MarkMacroUsed) -> Plan[bool]:
    done = yield Q(
        "UPDATE macros SET used_count = used_count + 1, updated_at = ? "
        "WHERE resource_id = ? AND trigger_tool = ? AND trigger_pattern = ? AND next_tool = ? AND next_args = ?",
        (d.ts(op.now), op.resource_id, *op.key),
        "rowcount",
    )
    return bool(done)


# -- approved command prefixes ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AllowPrefix(Op[bool]):
    """Approve a command prefix for good; False when it was already approved."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    prefix: str
    now: datetime


@plan_of(AllowPrefix)
def allow_prefix(d: Dialect, op: AllowPrefix) -> Plan[bool]:
    done = yield Q(
        "INSERT INTO allowed_prefixes (resource_id, prefix, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (op.resource_id, op.prefix, d.ts(op.now)),
        "rowcount",
    )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class RevokePrefix(Op[bool]):
    """Withdraw an approved prefix; False when there was none."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    prefix: str


@plan_of(RevokePrefix)
def revoke_prefix(d: Dialect, op: RevokePrefix) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM allowed_prefixes WHERE resource_id = ? AND prefix = ?", (op.resource_id, op.prefix), "rowcount"
    )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class ListPrefixes(Op[list[str]]):
    """The resource's approved prefixes, sorted."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ListPrefixes)
def list_prefixes(d: Dialect, op: ListPrefixes) -> Plan[list[str]]:
    rows = yield Q("SELECT prefix FROM allowed_prefixes WHERE resource_id = ? ORDER BY prefix", (op.resource_id,))
    return [r[0] for r in rows]


# -- in exports ------------------------------------------------------------------------------------


def export_agent_state(d: Dialect, resource_id: str) -> Plan[dict[str, Any]]:
    """The resource's tasks, macros and prefixes, as export sections."""
    tasks = yield from list_tasks(d, ListTasks(resource_id=resource_id))
    macros = yield from read_macros(d, ReadMacros(resource_id=resource_id))
    prefixes = yield from list_prefixes(d, ListPrefixes(resource_id=resource_id))
    return {
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


def import_agent_state(d: Dialect, resource_id: str, dump: dict[str, Any], now: Any) -> Plan[None]:
    """Restore the export sections of ``export_agent_state``."""

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


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
