"""Rows a database written before "ids are names" may hold, written below the validation layer.

``Memory`` refuses an id that is ``.``/``..`` or holds ``/`` when it is
created, but an older caderno stored them. These helpers put such rows in
through the store port's operations (never through ``Memory``'s checks), so
tests can prove they still read, can be renamed and can be deleted, and that
the inspector refuses to act on them.
"""

from __future__ import annotations

from typing import Any

import caderno
from caderno.core.clock import new_id, utcnow
from caderno.core.messages import Message
from caderno.stores import ops


async def legacy_append(
    memory: caderno.Memory, *, resource_id: str, thread_id: str, messages: list[tuple[str | None, str]]
) -> list[Message]:
    """Append ``(message_id, text)`` user messages as an old caderno would have (no id rule)."""
    now = utcnow()
    stamped = tuple(Message.user(text)._stamped(id=mid or new_id(), created_at=now) for mid, text in messages)
    op = ops.Append(resource_id=resource_id, thread_id=thread_id, messages=stamped, embed=frozenset())
    stored: list[Message] = await memory.run(op)
    return stored


async def legacy_fact(memory: caderno.Memory, *, resource_id: str, category: str, key: str, value: str) -> Any:
    """A fact whose category or key an old caderno let through."""
    op = ops.UpsertFact(resource_id=resource_id, category=category, key=key, value=value, source="user", now=utcnow())
    return await memory.run(op)
