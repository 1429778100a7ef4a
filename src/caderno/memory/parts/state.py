"""The agent's other durable state: scheduled tasks, learned tool macros, approved command prefixes.

Reached from a ``Memory`` as ``memory.tasks``, ``memory.macros`` and
``memory.prefixes``. Validation and policy live here (schedules parsed
with ``caderno.core.cron``, macro rules in ``caderno.memory.engines.macros``, prefix
matching in ``caderno.core.prefixes``); each call is one batch of the port.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ...core import prefixes as approvals
from ...core.clock import new_id, utcnow
from ...core.errors import NotFound, UsageError
from ...core.messages import check_text
from ...core.records import ApiKey, Macro, MacroKey, ScheduledTask
from ...core.validate import check_name
from ...stores import ops
from ...stores.base import Runner
from ..engines import macros as macro_rules
from ..engines.task_rules import MAX_TASK_NAME, advance, build_task, check_bounded

__all__ = [
    "TASK_BATCH",
    "TASK_LEASE_SECONDS",
    "Keys",
    "Macros",
    "Prefixes",
    "Tasks",
]

#: Most due tasks one worker claims at a time.
TASK_BATCH = 10
#: How long a claim on a task lasts unrenewed. The worker renews the claim of
#: every task of its batch still waiting (and of the one running) every third
#: of it (``caderno.agent.scheduler``), so a batch may run any length of time;
#: only a worker that died or stalled this long loses its tasks, which another
#: then fires within this plus its poll. It was 600 s, never renewed: a batch
#: of seven ~110 s tasks outlasted it and a one-shot fired twice.
TASK_LEASE_SECONDS = 60.0


class Tasks:
    """Scheduled tasks of every resource (``memory.tasks``)."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    async def add(self, *, bounded: bool = False, **kwargs: Any) -> ScheduledTask:
        """Create a task from what a person typed; see ``build_task`` for the arguments.

        ``bounded``: the caller is not trusted to schedule freely (a resource
        key over HTTP), so ``check_bounded`` applies, as to the model.

        Raises:
            UsageError: a bad schedule (the message lists the accepted forms),
                an unknown time zone, a name the resource already uses, or
                (``bounded``) a task over the limits.
        """
        task = build_task(**kwargs)
        if bounded:
            check_bounded(task, await self.list(resource_id=task.resource_id), now=task.created_at or utcnow())
        created = await self._run(ops.PutTask(task=task, create=True))
        assert created is not None
        return created

    async def list(self, *, resource_id: str | None = None) -> builtins.list[ScheduledTask]:
        """The resource's tasks by name (every resource's when ``None``)."""
        return await self._run(ops.ListTasks(resource_id=resource_id))

    async def get(self, *, resource_id: str, name: str) -> ScheduledTask:
        """One task by name.

        Raises:
            NotFound: the resource has no task of that name.
        """
        for task in await self.list(resource_id=resource_id):
            if task.name == name:
                return task
        raise NotFound(f"resource {resource_id!r} has no task named {name!r}", resource_id=resource_id)

    async def pause(self, *, resource_id: str, name: str) -> ScheduledTask:
        """Stop a task from firing until it is resumed."""
        task = await self.get(resource_id=resource_id, name=name)
        return await self._replace(replace(task, is_paused=True, updated_at=utcnow()))

    async def resume(self, *, resource_id: str, name: str, now: datetime | None = None) -> ScheduledTask:
        """Let a paused task fire again, from its next slot after ``now`` (a one-shot keeps its moment)."""
        now = now or utcnow()
        task = await self.get(resource_id=resource_id, name=name)
        following = task.next_run_at if task.is_oneshot else advance(task, now)
        return await self._replace(replace(task, is_paused=False, next_run_at=following, updated_at=now))

    async def delete(self, *, resource_id: str, name: str) -> None:
        """Delete a task.

        Raises:
            NotFound: the resource has no task of that name.
        """
        if not await self._run(ops.DeleteTask(resource_id=resource_id, name=name)):
            raise NotFound(f"resource {resource_id!r} has no task named {name!r}", resource_id=resource_id)

    async def sync_config(self, tasks: Sequence[ScheduledTask], *, now: datetime | None = None) -> dict[str, int]:
        """Make the config tasks exactly ``tasks`` (see ``caderno.agent.config``); tool-made tasks are untouched."""
        if any(t.source != "config" for t in tasks):
            raise UsageError("sync_config takes config tasks only (source='config')")
        return await self._run(ops.SyncConfigTasks(tasks=tuple(tasks), now=now or utcnow()))

    async def claim_due(
        self,
        *,
        now: datetime | None = None,
        limit: int = TASK_BATCH,
        lease_seconds: float = TASK_LEASE_SECONDS,
        claimant: str | None = None,
    ) -> builtins.list[ScheduledTask]:
        """Take the tasks due now; no other worker gets them until they are finished or the lease ends.

        ``claimant``: the claim's fencing token (default: a fresh id, which
        then cannot be renewed or finished: a caller that runs the tasks
        passes its own and gives it to ``renew`` and ``finish``).
        """
        op = ops.ClaimDueTasks(
            now=now or utcnow(),
            limit=limit,
            lease_seconds=lease_seconds,
            advance=advance,
            claimant=claimant or new_id(),
        )
        return await self._run(op)

    async def renew(
        self, *, claimant: str, now: datetime | None = None, lease_seconds: float = TASK_LEASE_SECONDS
    ) -> set[tuple[str, str]]:
        """Extend the claim on every task ``claimant`` still holds; returns their ``(resource_id, id)``.

        A task missing from the result was re-claimed by another worker
        after this claim's lease ran out: it is theirs to run.
        """
        return await self._run(ops.RenewTaskClaims(claimant=claimant, lease_seconds=lease_seconds, now=now or utcnow()))

    async def finish(self, task: ScheduledTask, *, claimant: str, ran_at: datetime | None = None) -> None:
        """Record that a claimed task ran: a one-shot deletes itself (only while ``claimant`` still holds it)."""
        op = ops.FinishTask(
            resource_id=task.resource_id,
            task_id=task.id,
            ran_at=ran_at or utcnow(),
            delete=task.is_oneshot,
            claimant=claimant,
        )
        await self._run(op)

    async def _replace(self, task: ScheduledTask) -> ScheduledTask:
        stored = await self._run(ops.PutTask(task=task, create=False))
        if stored is None:
            raise NotFound(f"task {task.name!r} was deleted meanwhile", resource_id=task.resource_id)
        return stored


class Macros:
    """Tool macros learned per resource (``memory.macros``); the rules are in ``caderno.memory.engines.macros``."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    def learn_op(
        self, resource_id: str, calls: Sequence[macro_rules.ObservedCall], used: Sequence[MacroKey] = ()
    ) -> ops.LearnMacros:
        """The operation that learns from one turn's calls (and counts the suggestions taken)."""
        check_name(resource_id, "resource_id")

        def learn(known: dict[MacroKey, Macro]) -> dict[MacroKey, Macro]:
            learned = macro_rules.observe(known, list(calls))
            for key in used:
                if key in learned:
                    learned = macro_rules.mark_used(learned, key)
            return learned

        return ops.LearnMacros(resource_id=resource_id, learn=learn, now=utcnow())

    async def learn(self, *, resource_id: str, calls: Sequence[macro_rules.ObservedCall]) -> None:
        """Learn from a sequence of ``(tool, args, ok)`` calls of one turn."""
        await self._run(self.learn_op(resource_id, calls))

    async def list(self, *, resource_id: str) -> builtins.list[Macro]:
        """The resource's macros, most confident first."""
        return await self._run(ops.ReadMacros(resource_id=resource_id))

    async def suggest_next(self, *, resource_id: str, tool: str, args: Any) -> builtins.list[Macro]:
        """Follow-ups worth suggesting after a successful ``tool(args)``, best first."""
        known = await self._run(ops.ReadMacros(resource_id=resource_id, trigger_tool=tool))
        return macro_rules.suggest_next({m.key: m for m in known}, tool, args)

    async def mark_used(self, *, resource_id: str, key: MacroKey) -> None:
        """Count that a suggestion was taken.

        Raises:
            NotFound: the resource has no such macro.
        """
        if not await self._run(ops.MarkMacroUsed(resource_id=resource_id, key=key, now=utcnow())):
            raise NotFound(f"resource {resource_id!r} has no macro {key!r}", resource_id=resource_id)


class Prefixes:
    """Command prefixes a resource approved for good (``memory.prefixes``)."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    async def allow_always(self, *, resource_id: str, prefix: str) -> str:
        """Approve every command that starts with ``prefix`` (whole words); returns it normalised.

        Raises:
            UsageError: an empty prefix, or one with shell operators.
        """
        check_name(resource_id, "resource_id")
        prefix = approvals.normalize_prefix(prefix)
        await self._run(ops.AllowPrefix(resource_id=resource_id, prefix=prefix, now=utcnow()))
        return prefix

    async def revoke(self, *, resource_id: str, prefix: str) -> None:
        """Withdraw an approval.

        Raises:
            NotFound: the resource never approved that prefix.
        """
        prefix = approvals.normalize_prefix(prefix)
        if not await self._run(ops.RevokePrefix(resource_id=resource_id, prefix=prefix)):
            raise NotFound(f"resource {resource_id!r} has no approved prefix {prefix!r}", resource_id=resource_id)

    async def list(self, *, resource_id: str) -> builtins.list[str]:
        """The approved prefixes, sorted."""
        return await self._run(ops.ListPrefixes(resource_id=resource_id))

    async def is_allowed(self, *, resource_id: str, command: str) -> bool:
        """Whether an approved prefix covers ``command`` (never one with shell operators)."""
        return approvals.is_allowed(await self.list(resource_id=resource_id), command)


#: What every token starts with, so a leaked one is recognisable (and greppable by secret scanners).
TOKEN_PREFIX = "cad_"


def hash_token(token: str) -> str:
    """SHA-256 of a token: tokens are 256 random bits, so a fast hash is enough (no password to stretch)."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Keys:
    """HTTP API keys (``memory.keys``): a random token shown once, only its hash stored."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    async def create(self, *, resources: Sequence[str] = (), admin: bool = False, name: str = "") -> tuple[str, ApiKey]:
        """A new key for ``resources`` (or every resource, ``admin``): ``(token, record)``.

        The token is returned once and never stored; keep it.

        Raises:
            UsageError: no resource and not admin, or a bad resource id.
        """
        import secrets

        resources = tuple(dict.fromkeys(check_name(r, "resource") for r in resources))
        if not resources and not admin:
            raise UsageError("a key needs at least one resource, or admin=True")
        if not isinstance(name, str) or len(name) > MAX_TASK_NAME:
            raise UsageError(f"a key's name is text of at most {MAX_TASK_NAME} characters")
        check_text(name, "key name")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(id=new_id(), name=name, resources=resources, admin=bool(admin), created_at=utcnow())
        await self._run(ops.CreateKey(key=key, token_hash=hash_token(token)))
        return token, key

    async def verify(self, token: str) -> ApiKey | None:
        """The live key a token belongs to, or ``None`` (unknown, malformed or revoked)."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        return await self._run(ops.FindKey(token_hash=hash_token(token)))

    async def list(self) -> builtins.list[ApiKey]:
        """Every key, revoked ones included (never a token)."""
        return await self._run(ops.ListKeys())

    async def revoke(self, *, key_id: str) -> None:
        """Stop a key at once.

        Raises:
            NotFound: no live key has that id.
        """
        if not await self._run(ops.RevokeKey(key_id=key_id, now=utcnow())):
            raise NotFound(f"no live key with id {key_id!r}")
