"""Where a turn holds its thread, reads its context and commits: a ``Memory``, or the four-method port.

``AgentChat`` runs every turn the same way; what differs between memories
is here, chosen once when the chat is made (``caderno.agent.capabilities``):

- ``StoredTurns`` (a full ``Memory``): the thread's turn lease across
  processes, the context providers' reads in **one batch**, and the turn
  committed in **one transaction** — its messages, working-memory patches
  and the tools' held writes; then the thread's consolidation, in the
  background.
- ``PortTurns`` (any object with the four methods of ``caderno.AgentMemory``):
  no lease and no batch (its providers call the port themselves); the turn
  is appended as the AgentMemory contract (docs/architecture.md) counts it,
  then its patches are applied one by one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..core.errors import CadernoError, UsageError
from ..core.messages import Message, WorkingMemory
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.appends import MessageReads
from ..memory.parts.turns import Committed, TurnLease
from ..stores import ops
from ..tools.base import Turn
from ..tools.working_memory import WM_SOURCE

__all__ = ["PortTurns", "StoredTurns", "TurnMemory"]

log = logging.getLogger("caderno.agent")


class TurnMemory(Protocol):
    """What the turn loop asks of its memory."""

    @property
    def reads(self) -> MessageReads:
        """Where a key's stored turn is looked for (``caderno.memory.parts.appends``)."""
        ...

    def hold(self, resource_id: str, thread_id: str, wait: float) -> AbstractAsyncContextManager[TurnLease | None]:
        """Hold the thread for one turn (``None``: this memory keeps no leases)."""
        ...

    async def load(self, resource_id: str, thread_id: str, reads: Sequence[ops.Op[Any]]) -> list[Any]:
        """The context providers' reads, in one snapshot; their results in order."""
        ...

    async def commit(
        self,
        *,
        resource_id: str,
        thread_id: str,
        messages: list[Message],
        held: Turn,
        writes: Sequence[ops.Op[Any]],
        state: WorkingMemory | None,
        lease: TurnLease | None,
    ) -> Committed:
        """Store the turn: its messages, the tools' patches and ``writes``; returns what was stored."""
        ...

    def finished(self, resource_id: str, thread_id: str) -> None:
        """After a stored turn: the background work it calls for."""
        ...


class StoredTurns:
    """A turn on a ``Memory``: one read batch, one commit (``memory.turns``).

    Args:
        memory: the memory.
        leases: hold the thread's turn lease (the store keeps leases).
        consolidate: summarise the thread in the background after each turn, when it has grown.
    """

    def __init__(self, memory: Memory, *, leases: bool, consolidate: bool) -> None:
        self.memory = memory
        self.leases = leases
        self.consolidate = consolidate

    @property
    def reads(self) -> MessageReads:
        return self.memory

    def hold(self, resource_id: str, thread_id: str, wait: float) -> AbstractAsyncContextManager[TurnLease | None]:
        if self.leases:
            return self.memory.turns.hold(resource_id=resource_id, thread_id=thread_id, wait=wait)
        return contextlib.nullcontext(None)

    async def load(self, resource_id: str, thread_id: str, reads: Sequence[ops.Op[Any]]) -> list[Any]:
        return await self.memory.turns.load(resource_id=resource_id, thread_id=thread_id, reads=reads)

    async def commit(
        self,
        *,
        resource_id: str,
        thread_id: str,
        messages: list[Message],
        held: Turn,
        writes: Sequence[ops.Op[Any]],
        state: WorkingMemory | None,
        lease: TurnLease | None,
    ) -> Committed:
        committed = await self.memory.turns.commit(
            resource_id=resource_id,
            thread_id=thread_id,
            messages=messages,
            patches=[(p, WM_SOURCE) for p in held.patches],
            extra=writes,
            lease=lease,
        )
        return Committed(messages=committed.messages, working_memory=committed.working_memory or state)

    def finished(self, resource_id: str, thread_id: str) -> None:
        if self.consolidate:
            self.memory.consolidation.schedule(resource_id=resource_id, thread_id=thread_id)


class PortTurns:
    """A turn on the four-method port: no lease, no batch, an append then the patches.

    The port has no transaction spanning calls: the turn is appended first,
    so a failed append stores nothing; a patch that fails afterwards is
    logged. It stores the turn as the AgentMemory contract
    (docs/architecture.md) counts it: the caller's messages and the final
    answer; the tool steps stay in the turn.
    """

    def __init__(self, port: AgentMemory) -> None:
        self.port = port

    @property
    def reads(self) -> MessageReads:
        return self.port

    def hold(self, resource_id: str, thread_id: str, wait: float) -> AbstractAsyncContextManager[TurnLease | None]:
        return contextlib.nullcontext(None)

    async def load(self, resource_id: str, thread_id: str, reads: Sequence[ops.Op[Any]]) -> list[Any]:
        if reads:  # its providers read through the port; an operation here is a provider chosen wrongly
            raise UsageError(f"{type(self.port).__name__} runs no store operations; a Memory is needed for them")
        return []

    async def commit(
        self,
        *,
        resource_id: str,
        thread_id: str,
        messages: list[Message],
        held: Turn,
        writes: Sequence[ops.Op[Any]],
        state: WorkingMemory | None,
        lease: TurnLease | None,
    ) -> Committed:
        kept = contract_turn(messages)
        appended = await self.port.append_messages(
            resource_id=resource_id, thread_id=thread_id, messages=[messages[i] for i in kept]
        )
        stored = list(messages)
        for i, message in zip(kept, appended, strict=True):
            stored[i] = message
        for patch in held.patches:
            try:
                await self.port.update_working_memory(resource_id=resource_id, patch=patch)
            except CadernoError as exc:
                log.warning("working-memory patch for %s not applied after the turn: %s", resource_id, exc)
        if held.patches:
            data = await self.port.get_working_memory(resource_id=resource_id)
            state = None if data is None else WorkingMemory(resource_id=resource_id, data=data, version=0)
        return Committed(messages=stored, working_memory=state)

    def finished(self, resource_id: str, thread_id: str) -> None:
        return None


def contract_turn(turn: Sequence[Message]) -> list[int]:
    """The indices of what a four-method adapter stores of a turn: the caller's messages and the final answer.

    The AgentMemory contract (docs/architecture.md) counts a turn as ``[user, final assistant]``:
    the model's tool steps between them inform the answer but are not conversation history. A
    turn that ends waiting for the caller's tools is stored whole, since the caller's results
    must follow its calls.
    """
    last = turn[-1]
    if last.role != "assistant" or last.tool_calls:
        return list(range(len(turn)))
    first_step = next((i for i, m in enumerate(turn) if m.role == "assistant"), len(turn) - 1)
    return [*range(first_step), len(turn) - 1]
