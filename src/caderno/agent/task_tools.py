"""The ``schedule`` tool: the model creates, lists, pauses, resumes and deletes scheduled tasks.

Reads happen at once; writes are held and committed with the turn, like
working-memory patches and facts, so a failed turn schedules nothing.

A model's schedule is bounded, because each run is a model call (cost) and
the prompt that runs may come from whoever talked to the model: a recurring
task the model creates runs at most every ``MODEL_MIN_INTERVAL``, a one-shot
runs no sooner than that (else each run could schedule the next, "in 1
minute", for ever), and a resource holds at most ``MODEL_MAX_TASKS`` tasks
the model created. People
(the API, the CLI, ``caderno.toml``) are not bound by either.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..core.cron import shortest_gap
from ..core.errors import CadernoError
from ..core.messages import ToolCall, ToolSpec
from ..core.records import ScheduledTask
from ..memory.facade import Memory
from ..memory.state import advance, build_task
from ..stores import ops

__all__ = ["MODEL_MAX_TASKS", "MODEL_MIN_INTERVAL", "SCHEDULE_SPEC", "schedule_call"]

#: Shortest interval of a recurring task the model creates. Reminders and
#: digests people ask an assistant for are hourly at most ("check the price
#: every hour"); 15 minutes leaves room for "every 15 minutes" and caps a
#: runaway or manipulated model at 96 model calls a day per task ("every
#: minute" would be 1,440). An operator schedules faster through the API.
MODEL_MIN_INTERVAL = timedelta(minutes=15)
#: Most tasks the model may have created for one resource (paused ones count).
#: A household's routines are a handful; 20 leaves room for them and bounds
#: what a model can pile up (20 x 96 runs a day at worst).
MODEL_MAX_TASKS = 20

SCHEDULE_SPEC = ToolSpec(
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
)


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


async def schedule_call(
    memory: Memory, call: ToolCall, resource_id: str, held: list[ops.Op[Any]], *, now: datetime, timezone: str
) -> tuple[Any, str | None]:
    """Run one ``schedule`` call: ``(result, None)`` or ``(None, error text for the model)``."""
    args = call.arguments
    if not isinstance(args, dict) or not set(args) <= {"action", "name", "schedule", "prompt"}:
        return None, "Error: schedule takes action, name, schedule and prompt"
    action = args.get("action")
    try:
        current = await memory.tasks.list(resource_id=resource_id)
        pending = {op.task.name: op.task for op in held if isinstance(op, ops.PutTask)}
        known = {t.name: t for t in current} | pending
        if action == "list":
            return [_describe(t) for t in known.values()] or "No scheduled tasks.", None
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            return None, f"Error: schedule {action} needs the task's name"
        if action == "create":
            if name.strip() in known:
                return None, f"Error: a task named {name!r} exists already; pick another name or delete it first"
            made = sum(1 for t in known.values() if t.source == "tool")
            if made >= MODEL_MAX_TASKS:
                return None, (
                    f"Error: this user already has {made} tasks you created (the most is {MODEL_MAX_TASKS}); "
                    "delete one first"
                )
            task = build_task(
                resource_id=resource_id,
                name=name,
                schedule=str(args.get("schedule", "")),
                prompt=str(args.get("prompt", "")),
                timezone=timezone,
                now=now,
            )
            minutes = int(MODEL_MIN_INTERVAL.total_seconds() // 60)
            if task.cron_expr is not None and shortest_gap(
                task.cron_expr, at_least=MODEL_MIN_INTERVAL, after=now, tz=timezone
            ):
                return None, (
                    f"Error: {task.original_schedule!r} runs more often than every {minutes} minutes, "
                    f"the shortest interval you may schedule; pick a longer one"
                )
            # A one-shot that runs sooner could schedule the next one from its
            # own run: a chain of "in 1 minute" tasks is "every minute" again.
            if task.is_oneshot and task.next_run_at is not None and task.next_run_at - now < MODEL_MIN_INTERVAL:
                return None, (
                    f"Error: {task.original_schedule!r} runs in less than {minutes} minutes, "
                    f"the soonest you may schedule; pick a later time"
                )
            held.append(ops.PutTask(task=task, create=True))
            return {"ok": True, "task": _describe(task)}, None
        found = known.get(name)
        if found is None:
            return None, f"Error: there is no task named {name!r}"
        task = found
        if action == "delete":
            held.append(ops.DeleteTask(resource_id=resource_id, name=name))
            return {"ok": True, "deleted": name}, None
        if action in ("pause", "resume"):
            paused = action == "pause"
            following = task.next_run_at if paused or task.is_oneshot else advance(task, now)
            changed = replace(task, is_paused=paused, next_run_at=following, updated_at=now)
            held.append(ops.PutTask(task=changed, create=name not in {t.name for t in current}))
            return {"ok": True, "task": _describe(changed)}, None
        return None, "Error: action must be create, list, pause, resume or delete"
    except CadernoError as exc:  # the parser's message already lists the accepted forms
        return None, f"Error: {exc}"
