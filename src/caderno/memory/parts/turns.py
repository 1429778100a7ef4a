"""A turn's reads and writes in one batch each (``memory.turns``): the seam ``AgentChat`` runs on.

Internal to caderno: ``AgentChat`` and the importers use it; an
application talks to ``Memory``'s flat methods and its other parts, which
keep their signatures. A turn reads everything its prompt needs in one
snapshot (``load``) and stores everything it did in one transaction
(``commit``), so a turn that fails — or a process killed mid-commit —
leaves all of it or none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.clock import new_id, utcnow
from ...core.errors import CadernoError, ThreadBusy, UsageError
from ...core.jsonvalue import MAX_MESSAGES_PER_APPEND
from ...core.messages import Message, WorkingMemory
from ...core.validate import check_id, check_message, check_name
from ...stores import ops
from ..engines.importance import embeddable
from ..engines.importance import score as importance_score
from ..engines.indexer import Indexer
from ..engines.recall import INLINE_CHARS as PREPARE_INLINE_CHARS
from ..engines.recall import Hits, RecallPlan, RecallQuery
from .messages import detached
from .working_memory import WorkingMemoryPart

__all__ = ["TURN_LEASE", "TURN_WAIT", "Committed", "TurnLease", "Turns"]

log = logging.getLogger("caderno.memory.parts.turns")

#: Seconds a thread's turn lease lasts unless renewed. The holder renews it
#: every third of that (every 3 s: one one-row UPDATE) while its turn runs,
#: so one late or failed renewal still leaves it held and only a process that
#: died (or stalled 6 s or more) loses it; a killed process's thread is free
#: again within 9 s, under the 10 s the README promises. It was 30 s: the
#: user's next message after a server was killed mid-turn waited 30 s.
TURN_LEASE = 9.0
#: Renewals of a held turn lease per ``TURN_LEASE`` (see there).
RENEWALS_PER_LEASE = 3
#: Default seconds a turn waits for another turn on its thread (in any process) before ``ThreadBusy``.
TURN_WAIT = 30.0

#: Runs operations in one transaction (``Memory.batch``: refuses what the store does not handle).
Batch = Callable[[Sequence[ops.Op[Any]]], Awaitable[list[Any]]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Committed:
    """What a turn's commit stored (``Turns.commit``)."""

    messages: list[Message]
    """The turn's messages as stored (ids, times, positions)."""
    working_memory: WorkingMemory | None
    """The working memory after the turn's last patch (``None`` when it held none)."""


@dataclass(kw_only=True, slots=True)
class TurnLease:
    """A thread's turn lease held by this process (``Turns.hold``)."""

    holder: str
    """The id the lease row carries."""
    released: bool = False
    """Given back already (the turn's commit releases it in its own transaction)."""


class Turns:
    """A turn's snapshot and commit, and the message preparation they share with ``append_messages``.

    Args:
        batch: the memory's ``batch`` (one transaction; ``Unsupported`` for
            an operation the store does not handle).
        working_memory: builds the turn's working-memory patches.
        indexer: woken after a commit to embed the new messages.
    """

    def __init__(
        self,
        batch: Batch,
        working_memory: WorkingMemoryPart,
        indexer: Indexer,
        recall_plan: Callable[[RecallQuery], Awaitable[RecallPlan]],
        finish_recall: Callable[..., Awaitable[Hits]],
    ) -> None:
        self._batch = batch
        self._working_memory = working_memory
        self._indexer = indexer
        self._recall_plan = recall_plan
        self._finish_recall = finish_recall
        self.lease_seconds = TURN_LEASE

    async def recall_plan(self, query: RecallQuery) -> RecallPlan:
        """A recall's first half for a turn: its ``reads`` ride in the turn's ``load``; ``finish_recall``
        gives the hits from their results."""
        return await self._recall_plan(query)

    async def finish_recall(self, plan: RecallPlan, results: list[Any], *, top: int | None = None) -> Hits:
        """The hits of a ``recall_plan`` whose reads gave ``results`` (``top`` overrides the plan's)."""
        return await self._finish_recall(plan, results, top=top)

    @contextlib.asynccontextmanager
    async def hold(self, *, resource_id: str, thread_id: str, wait: float) -> AsyncIterator[TurnLease]:
        """Hold the thread's turn lease while the block runs: one turn at a time per thread, across processes.

        Waits up to ``wait`` seconds for another holder (polling, with a
        growing pause), then raises ``ThreadBusy``. The lease is a row with
        an expiry, renewed in the background; no database lock is held
        while the block runs. Yields the lease that ``commit`` checks and gives back.
        """
        check_name(resource_id, "resource_id")
        check_name(thread_id, "thread_id")
        holder = new_id()

        async def claim(*, renew: bool = False) -> bool:
            op = ops.ClaimTurn(
                resource_id=resource_id,
                thread_id=thread_id,
                holder=holder,
                lease_seconds=self.lease_seconds,
                now=utcnow(),
                renew=renew,
            )
            (claimed,) = await self._batch([op])
            return bool(claimed)

        deadline, pause = time.monotonic() + wait, 0.02
        while not await claim():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ThreadBusy(
                    f"another turn holds thread {thread_id!r}; it was not free within {wait:g} seconds. "
                    f"Nothing was stored; retry when that turn has finished.",
                    resource_id=resource_id,
                    thread_id=thread_id,
                )
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.lease_seconds / RENEWALS_PER_LEASE)
                try:
                    if not await claim(renew=True):
                        log.warning(
                            "turn lease on thread %r was lost (taken over, or the thread erased); "
                            "this turn will not be stored",
                            thread_id,
                        )
                        return
                except CadernoError as exc:  # the database is away: the commit's own check decides
                    log.warning("turn lease on thread %r not renewed: %s", thread_id, exc)

        renewing = asyncio.create_task(renew())
        lease = TurnLease(holder=holder)
        try:
            yield lease
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            try:  # shielded: a cancelled caller still gives the thread back
                if not lease.released:
                    await asyncio.shield(
                        self._batch([ops.ReleaseTurn(resource_id=resource_id, thread_id=thread_id, holder=holder)])
                    )
            except CadernoError as exc:  # it expires on its own
                log.warning("turn lease on thread %r not released (it expires by itself): %s", thread_id, exc)

    async def prepare_off_loop(self, messages: Sequence[Message]) -> list[Message]:
        """``prepare_messages``, in a worker thread when the texts are long: scoring importance
        reads every character (~0.2 µs each), and a 15 MB append held the event loop 3.3 s."""
        if not isinstance(messages, Sequence) or isinstance(messages, Message):
            return self.prepare_messages(messages)
        size = sum(len(m.content) for m in messages if isinstance(m, Message) and isinstance(m.content, str))
        if size <= PREPARE_INLINE_CHARS:
            return self.prepare_messages(messages)
        return await asyncio.to_thread(self.prepare_messages, messages)

    def prepare_messages(self, messages: Sequence[Message]) -> list[Message]:
        """Validate messages and stamp what the store needs (id, time, importance).

        Raises:
            UsageError: a non-Message item, text that cannot be stored (NUL,
                lone surrogates), a bad id, or a non-JSON tool argument.
        """
        if isinstance(messages, Message) or not isinstance(messages, Sequence):
            raise UsageError("messages must be a list of Message")
        if len(messages) > MAX_MESSAGES_PER_APPEND:
            raise UsageError(f"{len(messages)} messages in one append; the limit is {MAX_MESSAGES_PER_APPEND}")
        ready = []
        for m in messages:
            if not isinstance(m, Message):
                raise UsageError(f"messages must be Message instances, got {type(m).__name__}")
            check_message(m)
            ready.append(
                m._stamped(
                    id=m.id or new_id(),
                    created_at=m.created_at or utcnow(),
                    importance=importance_score(m),
                    metadata=copy.deepcopy(m.metadata),  # the caller's dict stays the caller's
                )
            )
        return ready

    def append_op(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> ops.Append:
        """The ``Append`` of prepared messages, with the embedding policy applied."""
        return ops.Append(
            resource_id=resource_id,
            thread_id=thread_id,
            messages=tuple(messages),
            # Queued even without an embedder here: the queue is durable, and a
            # process that has the model (a worker, the CLI) embeds them.
            embed=frozenset(m.id for m in messages if m.id and embeddable(m.role, m.content)),
        )

    async def load(self, *, resource_id: str, thread_id: str, reads: Sequence[ops.Op[Any]]) -> list[Any]:
        """A turn's reads in one snapshot (one round trip): their results, in their order.

        ``reads``: what each of the turn's context providers reads (the
        thread's history, its summaries, the working memory, facts,
        recall's legs, the notebook's snapshot…: ``caderno.agent.context``).
        A thread's messages come back as copies the caller may change.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        results = await self._batch(reads)
        return [detached(r) if isinstance(op, ops.ReadThread) else r for op, r in zip(reads, results, strict=True)]

    async def commit(
        self,
        *,
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message],
        patches: Sequence[tuple[dict[str, Any], str]] = (),
        facts: Sequence[ops.UpsertFact] = (),
        extra: Sequence[ops.Op[Any]] = (),
        lease: TurnLease | None = None,
    ) -> Committed:
        """Store a turn in one transaction: its messages, working-memory patches, facts and ``extra``.

        ``extra``: other writes the turn's tools held (scheduled tasks, the
        macros learned from its tool calls).

        ``lease``: the thread's turn lease (``hold``); the transaction
        checks it first, storing nothing when another turn took the thread
        over after it expired (``ThreadBusy``) or the thread or its resource
        was erased since the turn began (``Erased``: the prompt was built
        from what the erase removed), and gives it back last.

        ``patches`` are ``(patch, source)`` pairs applied in order, each
        merged with the stored state inside the transaction and validated;
        a patch that no longer validates fails the whole turn (nothing is
        stored). Returns the stored messages and the working memory after
        the last patch (``None`` when there were none).
        """
        check_name(resource_id, "resource_id")
        check_name(thread_id, "thread_id")
        ready = await self.prepare_off_loop(messages)
        batch: list[ops.Op[Any]] = [self.append_op(resource_id, thread_id, ready)]
        if lease is not None:
            check = ops.ClaimTurn(
                resource_id=resource_id,
                thread_id=thread_id,
                holder=lease.holder,
                lease_seconds=self.lease_seconds,
                now=utcnow(),
                renew=True,
                required=True,
            )
            batch.insert(0, check)
        batch += [self._working_memory.patch_op(resource_id, patch, None, source) for patch, source in patches]
        batch += list(facts)
        batch += list(extra)
        if lease is not None:
            batch.append(ops.ReleaseTurn(resource_id=resource_id, thread_id=thread_id, holder=lease.holder))
        results = await self._batch(batch)
        self._indexer.notify()
        if lease is not None:
            lease.released = True
            results = results[1:]
        return Committed(messages=detached(results[0]), working_memory=results[len(patches)] if patches else None)
