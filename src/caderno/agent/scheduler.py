"""Running scheduled tasks: claim what is due, ask the agent, record the run.

Any long-running host calls ``run_due`` now and then (``caderno worker``
and ``caderno serve`` do, every ``POLL_SECONDS``); ``caderno tasks
run-due`` calls it once. A due task runs ``AgentChat.ask`` with its prompt,
as its resource, in its own thread; a trusted task's tools skip the
approval question. Claims work like the embedding queue: several workers on
one database never fire a task twice (``SKIP LOCKED`` on PostgreSQL, the
single writer on SQLite), a recurring task's next run moves at the claim —
so runs missed while nothing was running fire once, not once per missed
slot — and a one-shot deletes itself after it fires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..core.clock import utcnow
from ..core.errors import CadernoError
from ..core.records import ScheduledTask

if TYPE_CHECKING:
    from ..memory.facade import Memory
    from .chat import AgentChat, ChatResult

__all__ = ["POLL_SECONDS", "TaskRun", "run_due", "run_forever"]

log = logging.getLogger("caderno.agent.scheduler")

#: How often a long-running host looks for due tasks (cron's resolution is a minute).
POLL_SECONDS = 30.0


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRun:
    """One task that fired."""

    task: ScheduledTask
    """The task as it was claimed."""
    result: ChatResult | None
    """The agent's turn, or ``None`` when it failed."""
    error: str | None = None
    """Why the turn failed (the run still counts: a recurring task waits for its next slot)."""


async def run_due(
    memory: Memory, chat: AgentChat | Callable[[ScheduledTask], AgentChat], *, now: datetime | None = None
) -> list[TaskRun]:
    """Claim the tasks due at ``now`` and run each once, in turn.

    Args:
        memory: where the tasks live.
        chat: the agent, or a factory giving one per task (a model per resource, say).
        now: the moment to compare with (default: the clock).
    """
    now = now or utcnow()
    runs = []
    for task in await memory.tasks.claim_due(now=now):
        agent = chat if isinstance(chat, _agent_chat()) else chat(task)  # type: ignore[operator]
        result: Any = None
        error = None
        try:
            result = await agent.ask(
                messages=task.prompt, resource_id=task.resource_id, thread_id=task.thread_id, trusted=task.is_trusted
            )
        except CadernoError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("scheduled task %s/%s failed: %s", task.resource_id, task.name, error)
        finally:
            await memory.tasks.finish(task, ran_at=now)
        runs.append(TaskRun(task=task, result=result, error=error))
    return runs


def _agent_chat() -> type[AgentChat]:
    from .chat import AgentChat

    return AgentChat


async def run_forever(
    memory: Memory, chat: AgentChat | Callable[[ScheduledTask], AgentChat], *, poll_seconds: float = POLL_SECONDS
) -> None:
    """Run due tasks until cancelled (a turn in flight finishes first: ``ask`` commits or stores nothing)."""
    while True:
        try:
            await run_due(memory, chat)
        except CadernoError:
            log.warning("looking for due tasks failed; trying again in %.0f s", poll_seconds, exc_info=True)
        await asyncio.sleep(poll_seconds)
