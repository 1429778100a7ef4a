"""The ``schedule`` tool: the model creates, lists, pauses, resumes and deletes scheduled tasks.

A tool of the catalog's kind (``caderno.tools.base.ToolDef``: one schema, one
validator, one result shape), offered by AgentChat alone and so kept beside
it: every run of a task is an AgentChat turn (``caderno.agent.scheduler``).
Reads happen at once; writes are held and committed with the turn, like
working-memory patches and facts, so a failed turn schedules nothing.

A model's schedule is bounded, because each run is a model call (cost) and
the prompt that runs may come from whoever talked to the model: a recurring
task the model creates runs at most every ``MODEL_MIN_INTERVAL``, a one-shot
runs no sooner than that (else each run could schedule the next, "in 1
minute", for ever), and a resource holds at most ``MODEL_MAX_TASKS`` tasks
the model created. The policy is ``caderno.memory.parts.state.check_bounded``, the
one the REST API applies to a resource key; operators (an admin key, the
CLI, Python, ``caderno.toml``) are not bound by it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.clock import utcnow
from ..core.errors import UsageError
from ..core.records import ScheduledTask
from ..memory.engines.task_rules import MODEL_MAX_TASKS, MODEL_MIN_INTERVAL, advance, build_task, check_bounded
from ..stores import ops
from ..tools.base import Scope, ToolDef, done

__all__ = ["MODEL_MAX_TASKS", "MODEL_MIN_INTERVAL", "SCHEDULE"]

# The limits are defined with their policy (``check_bounded``); re-exported
# here, where the tool's readers look for them.


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """A ``schedule`` call."""

    action: str
    name: str | None
    schedule: str | None
    prompt: str | None


def _describe(t: ScheduledTask) -> dict[str, Any]:
    return {
        "name": t.name,
        "schedule": t.original_schedule,
        "cron": t.cron_expr,
        "once": t.is_oneshot,
        "paused": t.is_paused,
        "next_run_at": f"{t.next_run_at:%Y-%m-%d %H:%M} UTC" if t.next_run_at else None,
        "prompt": t.prompt,
    }


async def _schedule(scope: Scope, request: Action) -> dict[str, Any]:
    """One ``schedule`` call; its writes join the open turn (AgentChat always has one)."""
    memory, resource_id, action = scope.full, scope.resource_id, request.action
    now = scope.now or utcnow()
    current = await memory.tasks.list(resource_id=resource_id)
    held = scope.turn.writes if scope.turn is not None else []
    pending = {op.task.name: op.task for op in held if isinstance(op, ops.PutTask)}
    known = {t.name: t for t in current} | pending
    if action == "list":
        return done(tasks=[_describe(t) for t in known.values()])
    name = request.name
    if name is None or not name.strip():
        raise UsageError(f"schedule {action} needs the task's name")
    if action == "create":
        if name.strip() in known:
            raise UsageError(f"a task named {name!r} exists already; pick another name or delete it first")
        task = build_task(
            resource_id=resource_id,
            name=name,
            schedule=request.schedule or "",
            prompt=request.prompt or "",
            timezone=scope.timezone,
            now=now,
        )
        check_bounded(task, known.values(), now=now)
        await scope.write(ops.PutTask(task=task, create=True))
        return done(task=_describe(task))
    found = known.get(name)
    if found is None:
        raise UsageError(f"there is no task named {name!r}")
    if action == "delete":
        await scope.write(ops.DeleteTask(resource_id=resource_id, name=name))
        return done(deleted=name)
    paused = action == "pause"
    following = found.next_run_at if paused or found.is_oneshot else advance(found, now)
    changed = replace(found, is_paused=paused, next_run_at=following, updated_at=now)
    await scope.write(ops.PutTask(task=changed, create=name not in {t.name for t in current}))
    return done(task=_describe(changed))


SCHEDULE: ToolDef[Action] = ToolDef(
    name="schedule",
    description=(
        "Schedule a prompt for yourself to run later, once or repeatedly, in its own conversation; or list, "
        "pause, resume or delete the user's scheduled tasks. Schedules are written as people say them, in "
        "English or Portuguese: 'daily at 9am', 'weekdays at 18:30', 'every monday at 8', 'every 2 hours', "
        "'in 2 hours', 'tomorrow at 9', 'todo dia às 9h', 'dias úteis às 18h30', 'amanhã às 8', or 5-field cron."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "list", "pause", "resume", "delete"]},
            "name": {"type": "string", "description": "Short unique name of the task (all actions but list)."},
            "schedule": {"type": "string", "description": "When it runs (create only)."},
            "prompt": {"type": "string", "description": "What you will be asked when it runs (create only)."},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    request=Action,
    handler=_schedule,
    result=("task", "tasks", "deleted"),
    effect="write",
    offered=frozenset({"agent"}),
    why="Every run of a task is an AgentChat turn (caderno.agent.scheduler), so the tool is offered where an "
    "AgentChat runs: AgentChat itself and the memory proxy.",
)
