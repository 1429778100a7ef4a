"""The idempotent append: a turn stored once under its key, whoever sends it.

REST appends (``POST …/messages`` with an ``Idempotency-Key``), the memory
proxy and ``AgentChat`` store a keyed turn through ``append_once``; the
rules it applies (the derived ids, the window searched, what counts as the
same messages) are ``caderno.memory.engines.idempotency``. It runs on any
memory with ``get_messages`` — a ``Memory`` or the four-method
``AgentMemory`` port — and stores through the caller's own ``append`` (a
plain append, or a turn's whole commit).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from ...core.errors import UsageError
from ...core.messages import Message
from ..engines.idempotency import IDEMPOTENCY_WINDOW, check_same, find_repeat, key_turn, turn_ids

__all__ = ["MessageReads", "Replayed", "append_once", "repeated_turn", "stored_turn"]

T = TypeVar("T")


class MessageReads(Protocol):
    """What the append reads: a thread's newest messages (``Memory`` and ``AgentMemory`` both have it)."""

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]: ...


@dataclass(frozen=True, slots=True)
class Replayed:
    """The turn an earlier request stored under the same key (oldest first): this one stored nothing."""

    messages: list[Message]


async def stored_turn(
    reads: MessageReads, *, resource_id: str, thread_id: str, key: str, sent: Sequence[Message]
) -> list[Message] | None:
    """The turn stored under ``key`` when it began with the messages ``sent`` now; None when none is stored.

    Raises:
        KeyReused: the key's turn holds other messages.
        Conflict: the key is spent (its turn is no longer among the thread's newest messages).
    """
    window = await reads.get_messages(resource_id=resource_id, thread_id=thread_id, limit=IDEMPOTENCY_WINDOW)
    found = key_turn(window, resource_id, thread_id, key)
    return None if found is None else check_same(found, sent, key)


async def repeated_turn(
    reads: MessageReads,
    *,
    resource_id: str,
    thread_id: str,
    sent: Sequence[Message],
    since: datetime,
    after: str | None = None,
) -> list[Message] | None:
    """The thread's newest turn when ``sent`` repeats it (a retry that carries no key; see ``find_repeat``)."""
    window = await reads.get_messages(resource_id=resource_id, thread_id=thread_id, limit=IDEMPOTENCY_WINDOW)
    return find_repeat(window, list(sent), since, after)


async def append_once(
    reads: MessageReads,
    *,
    resource_id: str,
    thread_id: str,
    key: str | None,
    sent: Sequence[Message],
    append: Callable[[list[Message]], Awaitable[T]],
    turn: Sequence[Message] | None = None,
    looked: bool = False,
) -> T | Replayed:
    """Store a turn once under ``key``: what ``append`` returned, or the turn stored before (``Replayed``).

    ``sent``: the caller's messages (a retry must send the same ones);
    ``turn``: what is stored (default ``sent``; ``AgentChat`` stores the
    model's steps after them). Without a key, ``append(turn)`` alone.

    With a key: the key's stored turn is looked for first (unless
    ``looked``: the caller did that already, under the thread's turn lease,
    before its model call); found, it is the answer. Else the turn's
    messages get the key's ids (``turn_ids``) and ``append`` stores them; a
    concurrent request that stored the key's turn first makes the store
    refuse those ids (``UsageError``), and the turn it stored is the answer.

    Raises:
        KeyReused: the key's turn holds other messages than ``sent``.
        Conflict: the key is spent.
        UsageError: ``append`` refused the turn for another reason.
    """
    messages = list(sent if turn is None else turn)
    if key is None:
        return await append(messages)
    if not looked:
        found = await stored_turn(reads, resource_id=resource_id, thread_id=thread_id, key=key, sent=sent)
        if found is not None:
            return Replayed(found)
    ids = turn_ids(resource_id, thread_id, key, len(messages))
    try:
        return await append([m.with_(id=i) for m, i in zip(messages, ids, strict=True)])
    except UsageError:
        # Another request stored this key's turn while this one ran: that one is the answer.
        again = await stored_turn(reads, resource_id=resource_id, thread_id=thread_id, key=key, sent=sent)
        if again is None:
            raise
        return Replayed(again)
