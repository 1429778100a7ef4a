"""Idempotency keys for turns, as rules: a retry with the same key names the stored turn, never a second one.

A client that times out does not know whether its turn was stored; the
OpenAI SDK (and any careful client) sends the request again. With an
idempotency key the retry is safe, and this needs no table of its own:

- the turn's messages get ids **derived** from (resource, thread, key,
  position in the turn) — a UUIDv5, so the same key names the same ids
  (``turn_ids``);
- the store already refuses a second message with an id the resource holds
  (``UNIQUE (resource_id, id)``), so a retry that races past the first
  check still cannot store a second copy;
- before doing any work (a model call, an append), the thread's newest
  ``IDEMPOTENCY_WINDOW`` messages are searched for those ids (``key_turn``):
  found, the stored turn is the answer.

The append that runs these rules against a memory — REST appends, the
memory proxy and ``AgentChat`` all call it — is
``caderno.memory.parts.appends.append_once``.

On any server of one PostgreSQL with a read replica: the check may read a
standby that has not replayed the stored turn yet; then the append is refused
by the derived ids, and the refused write makes the store read that resource
on the primary until the standby has replayed past it, so the check after
the refusal finds the turn (``tests/stores/test_standby.py``). ``AgentChat``
checks after taking the thread's turn lease, a write to the resource: its
check reads the primary too.

Safe across resources and threads: both are part of the derived id, so the
same key sent for resource A and for resource B names different messages,
and a key holder of A cannot occupy an id that B's turn will need.

How long a key is kept: as long as its messages are stored and among the
thread's newest ``IDEMPOTENCY_WINDOW`` messages, the retry returns them.
After that (or once they were deleted or popped) the key is not forgotten
but spent: a reuse that would collide is refused (409), never stored twice;
a reuse after the messages were deleted stores a new turn.

A retry that carries no key (``find_repeat``) is matched to the thread's
newest turn only, within ``RETRY_WINDOW``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...core.errors import Conflict, KeyReused, UsageError
from ...core.messages import Message

__all__ = [
    "IDEMPOTENCY_WINDOW",
    "MAX_IDEMPOTENCY_KEY",
    "RETRY_WINDOW",
    "check_key",
    "check_same",
    "find_repeat",
    "key_turn",
    "same_messages",
    "spent",
    "turn_ids",
]

#: Newest messages of the thread searched for a key's turn. A client retries
#: within seconds or minutes, long before 200 more messages arrive in the
#: same thread (a turn with tools is ~5-20 messages); the search is one
#: indexed read of that many rows.
IDEMPOTENCY_WINDOW = 200
#: How old a thread's newest turn may be and still be the answer to a retry that sent no key
#: (``find_repeat``). The OpenAI SDKs retry a failed or timed-out request after a backoff of
#: seconds, and their default timeout is 10 minutes: 15 minutes covers the latest retry, while
#: a user who says the same words again a quarter of an hour later gets a new turn.
RETRY_WINDOW = 15 * 60
#: Longest key accepted. Clients send a UUID (36 characters) or a prefixed one
#: (``stainless-python-retry-<uuid>``, 59); 255 leaves room and bounds the hash input.
MAX_IDEMPOTENCY_KEY = 255

_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_IDEMPOTENCY_KEY}}}", re.ASCII)
# A fixed namespace: ids derived from the same (resource, thread, key, i) are the same in every process.
_NAMESPACE = uuid.UUID("6b0f3c1e-2d1a-5c6e-9a57-63616465726e")


def check_key(key: Any) -> str:
    """The key, if it is 1-255 printable ASCII characters without spaces.

    Raises:
        UsageError: anything else (the message says what a key looks like).
    """
    if not isinstance(key, str) or _KEY.fullmatch(key) is None:
        raise UsageError(
            f"an Idempotency-Key is 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces "
            "(a UUID is a good one)"
        )
    return key


def turn_ids(resource_id: str, thread_id: str, key: str, count: int) -> list[str]:
    """The ids of the first ``count`` messages of the turn this key names."""
    return [str(uuid.uuid5(_NAMESPACE, f"{resource_id}\x00{thread_id}\x00{key}\x00{i}")) for i in range(count)]


def key_turn(window: Sequence[Message], resource_id: str, thread_id: str, key: str) -> list[Message] | None:
    """The key's turn among ``window`` (the thread's newest ``IDEMPOTENCY_WINDOW`` messages), oldest first;
    None when none of it is there.

    Raises:
        Conflict: part of the turn is there but not its first message: the
            key is spent, and a new turn under it would be a second one.
    """
    ids = turn_ids(resource_id, thread_id, key, IDEMPOTENCY_WINDOW)
    position = {message_id: i for i, message_id in enumerate(ids)}
    found = sorted((m for m in window if m.id in position), key=lambda m: position[m.id or ""])
    if not found:
        return None
    if found[0].id != ids[0]:
        raise spent(resource_id, key)
    return found


def spent(resource_id: str, key: str) -> Conflict:
    """The refusal of a key whose turn is stored but can no longer be returned."""
    return Conflict(
        f"the Idempotency-Key {key!r} was used for an earlier turn of this thread that is no longer among its "
        f"newest {IDEMPOTENCY_WINDOW} messages; send a new key for a new turn",
        resource_id=resource_id,
        expected=None,
        actual=None,
    )


def check_same(stored: Sequence[Message], sent: Sequence[Message], key: str) -> list[Message]:
    """``stored`` when the retry sent the same messages; else ``KeyReused``."""
    if not same_messages(stored, sent):
        raise KeyReused(
            f"the Idempotency-Key {key!r} was used for a turn with other messages; "
            "a retry must send the same messages, a new turn a new key"
        )
    return list(stored)


def same_messages(stored: Sequence[Message], sent: Sequence[Message]) -> bool:
    """Whether the stored messages are the ones sent again (role, text, name, tool calls), in order.

    A tool result sent without a tool name matches the stored one (whose name was filled in from its call).
    """
    if len(stored) < len(sent):
        return False
    return all(_shape(a, b.role == "tool" and b.name is None) == _shape(b) for a, b in zip(stored, sent, strict=False))


def find_repeat(
    window: Sequence[Message], sent: Sequence[Message], since: datetime, after: str | None = None
) -> list[Message] | None:
    """The thread's newest turn when ``sent`` repeats its first messages (oldest first), else None.

    For a retry that carries no key: the request is matched to the newest turn
    only (no user message stored after the matched ones), never to an older
    turn that happened to say the same thing, and, unless it answers tool calls
    (their ids name the step), only to a turn stored after ``since``. ``after``
    is the text of the reply the caller saw last (a client that resends its
    conversation): then a turn of user messages must follow that reply, so a retry of
    a request that stored nothing is not answered with an earlier turn in
    the same words.
    """
    n = len(sent)
    for start in range(len(window) - n, -1, -1):
        if same_messages(window[start : start + n], sent):
            rest = window[start + n :]
            first = window[start]
            recent = first.role == "tool" or (first.created_at is not None and first.created_at >= since)
            before = window[start - 1] if start else None
            follows = (
                after is None
                or first.role == "tool"
                or (before is not None and before.role == "assistant" and before.content == after)
            )
            newest = not any(m.role == "user" for m in rest)
            return list(window[start:]) if recent and follows and newest else None
        if window[start].role == "user" and start + n < len(window):
            return None  # past the newest turn's first message
    return None


def _shape(m: Message, unnamed: bool = False) -> tuple[Any, ...]:
    calls = tuple((c.id, c.name, repr(c.arguments)) for c in m.tool_calls or ())
    return (m.role, m.content, None if unnamed else m.name, m.tool_call_id, calls)
