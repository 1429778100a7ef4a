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

A claim is a lease with a fencing token (a fresh id per claim, on each task
it takes). While a batch runs, its worker renews the claim of every task
still waiting and of the one running, every third of the lease, and checks
each task is still its own right before running it; the run is recorded
only on a task that still carries the token. So a batch may outlast the
lease; only a worker that died or stalled a whole lease loses its tasks, and
the one that re-claims them runs them instead. Each run asks with an
idempotency key of the task and its slot, so should two workers still run
one slot (the first stalled mid-turn past both leases), the thread's turn
lease lets one store it and the other replays it: a slot is stored once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..core.clock import new_id, utcnow
from ..core.errors import CadernoError
from ..core.records import ScheduledTask
from ..memory.parts.state import TASK_LEASE_SECONDS

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


#: Renewals of a batch's claim per lease: a late renewal or two still leaves it held.
RENEWALS_PER_LEASE = 3


async def run_due(
    memory: Memory,
    chat: AgentChat | Callable[[ScheduledTask], AgentChat],
    *,
    now: datetime | None = None,
    lease_seconds: float = TASK_LEASE_SECONDS,
) -> list[TaskRun]:
    """Claim the tasks due at ``now`` and run each once, in turn, renewing the claim while the batch runs.

    Args:
        memory: where the tasks live.
        chat: the agent, or a factory giving one per task (a model per resource, say).
        now: the moment to compare with (default: the clock).
        lease_seconds: how long the claim lasts unrenewed (``TASK_LEASE_SECONDS``).
    """
    now = now or utcnow()
    started = time.monotonic()
    claimant = new_id()

    def moment() -> datetime:
        # The claim's own clock: ``now`` moved on by the time the batch has
        # run, so renewals compare with what the claim wrote (a test's ``now``
        # may be days ahead of the wall clock).
        return now + timedelta(seconds=time.monotonic() - started)

    tasks = await memory.tasks.claim_due(now=now, lease_seconds=lease_seconds, claimant=claimant)
    if not tasks:
        return []
    renewing = asyncio.create_task(_keep_claimed(memory, claimant, moment, lease_seconds))
    runs = []
    try:
        for task in tasks:
            ours = await memory.tasks.renew(claimant=claimant, now=moment(), lease_seconds=lease_seconds)
            if (task.resource_id, task.id) not in ours:
                log.warning(
                    "scheduled task %s/%s was re-claimed by another worker (this claim's lease ran out); "
                    "it runs there, not here",
                    task.resource_id,
                    task.name,
                )
                continue
            runs.append(await _run_one(memory, chat, task, claimant, now))
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
    return runs


async def _run_one(
    memory: Memory,
    chat: AgentChat | Callable[[ScheduledTask], AgentChat],
    task: ScheduledTask,
    claimant: str,
    now: datetime,
) -> TaskRun:
    agent = chat if isinstance(chat, _agent_chat()) else chat(task)  # type: ignore[operator]
    result: Any = None
    error = None
    slot = (task.next_run_at or now).isoformat()
    try:
        result = await agent.ask(
            messages=task.prompt,
            resource_id=task.resource_id,
            thread_id=task.thread_id,
            trusted=task.is_trusted,
            # One slot, one stored turn: a second worker firing the same slot
            # replays the first's turn instead of storing another.
            idempotency_key=f"task-{task.id}-{slot}",
        )
    except CadernoError as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("scheduled task %s/%s failed: %s", task.resource_id, task.name, error)
    finally:
        await memory.tasks.finish(task, claimant=claimant, ran_at=now)
    return TaskRun(task=task, result=result, error=error)


async def _keep_claimed(memory: Memory, claimant: str, moment: Callable[[], datetime], lease_seconds: float) -> None:
    """Renew the claim of the batch's tasks not yet finished until they are all done (or re-claimed)."""
    while True:
        await asyncio.sleep(lease_seconds / RENEWALS_PER_LEASE)
        try:
            if not await memory.tasks.renew(claimant=claimant, now=moment(), lease_seconds=lease_seconds):
                return
        except CadernoError as exc:  # the database is away: the check before each task decides
            log.warning("the claim of scheduled tasks was not renewed: %s", exc)


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
