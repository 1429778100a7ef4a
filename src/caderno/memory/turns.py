"""A turn's reads and writes in one batch each (``memory.turns``): the seam ``AgentChat`` runs on.

Internal to caderno: ``AgentChat`` and the importers use it; an
application talks to ``Memory``'s flat methods and its other parts, which
keep their signatures. A turn reads everything its prompt needs in one
snapshot (``load``) and stores everything it did in one transaction
(``commit``), so a turn that fails — or a process killed mid-commit —
leaves all of it or none of it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.clock import new_id, utcnow
from ..core.errors import UsageError
from ..core.jsonvalue import MAX_MESSAGES_PER_APPEND
from ..core.messages import Message, WorkingMemory
from ..core.records import Fact, Macro
from ..core.validate import check_id, check_message, check_name
from ..stores import ops
from .importance import embeddable
from .importance import score as importance_score
from .indexer import Indexer
from .messages import detached
from .working_memory import WorkingMemoryPart

__all__ = ["TurnContext", "Turns"]

#: Runs operations in one transaction (``Memory.batch``: refuses what the store does not handle).
Batch = Callable[[Sequence[ops.Op[Any]]], Awaitable[list[Any]]]


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnContext:
    """What a turn reads before the model runs, in one snapshot (``Turns.load``)."""

    history: list[Message]
    """The newest messages of the thread (up to the limit asked), oldest first."""
    summaries: list[tuple[Message, bool]]
    """The thread's summaries, oldest first, each with ``merged``."""
    working_memory: WorkingMemory | None
    """The resource's working memory."""
    facts: list[Fact]
    """The resource's facts, most recently updated first (empty when not asked)."""
    macros: list[Macro] = field(default_factory=list)
    """The resource's learned tool macros (empty when not asked)."""


class Turns:
    """A turn's snapshot and commit, and the message preparation they share with ``append_messages``.

    Args:
        batch: the memory's ``batch`` (one transaction; ``Unsupported`` for
            an operation the store does not handle).
        supports: the memory's ``supports``: a turn reads summaries, facts
            and macros only from a store that keeps them.
        working_memory: builds the turn's working-memory patches.
        indexer: woken after a commit to embed the new messages.
    """

    def __init__(
        self,
        batch: Batch,
        supports: Callable[..., bool],
        working_memory: WorkingMemoryPart,
        indexer: Indexer,
    ) -> None:
        self._batch = batch
        self._supports = supports
        self._working_memory = working_memory
        self._indexer = indexer

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

    async def load(
        self, *, resource_id: str, thread_id: str, history_limit: int, facts: bool = True, macros: bool = False
    ) -> TurnContext:
        """Everything a turn's prompt needs, read in one snapshot (one round trip).

        History, summaries (when the store has them), working memory, and
        the resource's facts when ``facts`` is true and the store has them.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        batch: list[ops.Op[Any]] = [
            ops.ReadThread(resource_id=resource_id, thread_id=thread_id, limit=history_limit),
            ops.ReadWorkingMemory(resource_id=resource_id),
        ]
        if with_summaries := self._supports(ops.ReadSummaries):
            batch.append(ops.ReadSummaries(resource_id=resource_id, thread_id=thread_id))
        if with_facts := facts and self._supports(ops.ReadFacts):
            batch.append(ops.ReadFacts(resource_id=resource_id))
        if with_macros := macros and self._supports(ops.ReadMacros):
            batch.append(ops.ReadMacros(resource_id=resource_id))
        results = await self._batch(batch)
        return TurnContext(
            history=detached(results[0]),
            working_memory=results[1],
            summaries=results[2] if with_summaries else [],
            facts=results[2 + with_summaries] if with_facts else [],
            macros=results[-1] if with_macros else [],
        )

    async def commit(
        self,
        *,
        resource_id: str,
        thread_id: str,
        messages: Sequence[Message],
        patches: Sequence[tuple[dict[str, Any], str]] = (),
        facts: Sequence[ops.UpsertFact] = (),
        extra: Sequence[ops.Op[Any]] = (),
    ) -> tuple[list[Message], WorkingMemory | None]:
        """Store a turn in one transaction: its messages, working-memory patches, facts and ``extra``.

        ``extra``: other writes the turn's tools held (scheduled tasks, the
        macros learned from its tool calls).

        ``patches`` are ``(patch, source)`` pairs applied in order, each
        merged with the stored state inside the transaction and validated;
        a patch that no longer validates fails the whole turn (nothing is
        stored). Returns the stored messages and the working memory after
        the last patch (``None`` when there were none).
        """
        check_name(resource_id, "resource_id")
        check_name(thread_id, "thread_id")
        ready = self.prepare_messages(messages)
        batch: list[ops.Op[Any]] = [self.append_op(resource_id, thread_id, ready)]
        batch += [self._working_memory.patch_op(resource_id, patch, None, source) for patch, source in patches]
        batch += list(facts)
        batch += list(extra)
        results = await self._batch(batch)
        self._indexer.notify()
        return detached(results[0]), (results[len(patches)] if patches else None)
