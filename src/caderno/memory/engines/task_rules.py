"""The rules of a scheduled task: its limits, its checks, and when it runs next.

``memory.tasks`` (``caderno.memory.parts.state``) applies them before a task
is stored, the model's schedule tool and ``caderno.toml`` before they build
one, and the export check before a task is imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from ...core.clock import new_id, utcnow
from ...core.cron import next_run, parse_schedule, shortest_gap
from ...core.errors import UsageError
from ...core.messages import check_text
from ...core.records import ScheduledTask
from ...core.validate import check_name, check_zone

#: Longest task name, in characters.
MAX_TASK_NAME = 100


#: Longest task prompt, in characters: a prompt, not a document.
MAX_TASK_PROMPT = 4000


TASK_SOURCES = ("tool", "config")


#: Shortest interval of a recurring task the model (or a resource key)
#: creates. Reminders and digests people ask an assistant for are hourly at
#: most ("check the price every hour"); 15 minutes leaves room for "every 15
#: minutes" and caps a runaway or manipulated model at 96 model calls a day
#: per task ("every minute" would be 1,440). An operator (an admin key, the
#: CLI, Python, ``caderno.toml``) schedules faster.
MODEL_MIN_INTERVAL = timedelta(minutes=15)


#: Most tasks the model or resource keys may have created for one resource
#: (paused ones count). A household's routines are a handful; 20 leaves room
#: for them and bounds what a model can pile up (20 x 96 runs a day at worst).
MODEL_MAX_TASKS = 20


def _check_zone(timezone: str) -> str:
    return check_zone(timezone)  # AgentChat's zone, checked by the same rule as a task's


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise UsageError("a task needs a name (non-empty text)")
    if len(name) > MAX_TASK_NAME:
        raise UsageError(f"task name is {len(name)} characters long; the limit is {MAX_TASK_NAME}")
    check_name(name, "task name")  # /tasks/{name} is a URL path segment: control characters anywhere,
    return check_name(name.strip(), "task name")  # and what is stored is never '.' or '..'


def check_bounded(task: ScheduledTask, known: Iterable[ScheduledTask], *, now: datetime) -> None:
    """Refuse ``task`` when someone untrusted may not make it: the one policy of the model's tool and the REST API.

    Each run of a task is a model call (cost), and its prompt may come from
    whoever talked to the model or holds a resource key, so a task they make
    runs at most every ``MODEL_MIN_INTERVAL``, a one-shot no sooner than that
    (else each run could schedule the next, "in 1 minute", for ever), and a
    resource holds at most ``MODEL_MAX_TASKS`` of their tasks (source
    ``tool``: config tasks are an operator's).

    Args:
        task: the task about to be created (``build_task``'s result).
        known: the resource's tasks now (those about to be written included).
        now: the moment the task is made.

    Raises:
        UsageError: too many tasks, or a schedule that runs too often or too soon.
    """
    made = sum(1 for t in known if t.source == "tool")
    if made >= MODEL_MAX_TASKS:
        raise UsageError(
            f"resource {task.resource_id!r} already has {made} tasks made by the model or a resource key "
            f"(the most is {MODEL_MAX_TASKS}); delete one first"
        )
    minutes = int(MODEL_MIN_INTERVAL.total_seconds() // 60)
    if task.cron_expr is not None and shortest_gap(
        task.cron_expr, at_least=MODEL_MIN_INTERVAL, after=now, tz=task.timezone
    ):
        raise UsageError(
            f"{task.original_schedule!r} runs more often than every {minutes} minutes, "
            f"the shortest interval that may be scheduled without an admin key; pick a longer one"
        )
    # A one-shot that runs sooner could schedule the next one from its own
    # run: a chain of "in 1 minute" tasks is "every minute" again.
    if task.is_oneshot and task.next_run_at is not None and task.next_run_at - now < MODEL_MIN_INTERVAL:
        raise UsageError(
            f"{task.original_schedule!r} runs in less than {minutes} minutes, "
            f"the soonest that may be scheduled without an admin key; pick a later time"
        )


def advance(task: ScheduledTask, now: datetime) -> datetime | None:
    """A recurring task's next run after ``now`` (missed slots are skipped: they fire once, now)."""
    if task.cron_expr is None:
        return None
    return next_run(task.cron_expr, after=now, tz=task.timezone)


def build_task(
    *,
    resource_id: str,
    name: str,
    schedule: str,
    prompt: str,
    timezone: str = "UTC",
    thread_id: str | None = None,
    trusted: bool = False,
    source: str = "tool",
    now: datetime | None = None,
) -> ScheduledTask:
    """A validated task with its first run computed (policy once, for the API, the tool and the config)."""
    check_name(resource_id, "resource_id")
    name = _check_name(name)
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError(f"task {name!r} needs a prompt (what the agent is asked when it fires)")
    if len(prompt) > MAX_TASK_PROMPT:
        raise UsageError(f"task prompt is {len(prompt)} characters long; the limit is {MAX_TASK_PROMPT}")
    check_text(prompt, "task prompt")
    if source not in TASK_SOURCES:
        raise UsageError(f"task source must be tool or config, not {source!r}")
    if not isinstance(schedule, str):
        raise UsageError("schedule must be text, such as 'daily at 9am' or 'todo dia às 9h'")
    now = now or utcnow()
    parsed = parse_schedule(schedule, now=now, tz=_check_zone(timezone))
    first = parsed.run_at if parsed.is_oneshot else next_run(parsed.cron_expr or "", after=now, tz=timezone)
    return ScheduledTask(
        id=new_id(),
        resource_id=resource_id,
        name=name,
        cron_expr=parsed.cron_expr,
        original_schedule=parsed.original,
        prompt=prompt.strip(),
        source=source,
        is_oneshot=parsed.is_oneshot,
        is_trusted=bool(trusted),
        timezone=timezone,
        thread_id=check_name(thread_id, "thread_id") if thread_id else f"task:{name}"[:256],
        next_run_at=first,
        created_at=now,
        updated_at=now,
    )
