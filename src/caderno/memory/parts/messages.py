"""Changing stored messages (``memory.messages``): pop, edit, delete, importance, and their log.

History is editable where people need it (a framework undoing a turn, a
typo, a secret pasted by mistake), and every change is audited: the
message log keeps who, when and why — the old text for an edit, never the
text of a deletion (deleting erases). Appending and reading stay flat on
``Memory`` (``append_messages``, ``get_messages``), as the ``AgentMemory`` port
names them.
"""

from __future__ import annotations

import copy
from typing import Any

from ...core.clock import utcnow
from ...core.errors import NotFound, UsageError
from ...core.messages import Message, check_text
from ...core.validate import check_actor, check_id, check_name
from ...stores import ops
from ...stores.base import Runner
from ..engines.importance import embeddable
from ..engines.importance import score as importance_score
from ..engines.vector_cache import VectorIndex

__all__ = ["Messages", "detached"]


def detached(messages: list[Message]) -> list[Message]:
    """Copies whose metadata the caller may change without touching what stores and caches hold."""
    return [m._stamped(metadata=copy.deepcopy(m.metadata)) if m.metadata else m for m in messages]


def _rescore(m: Message) -> tuple[float, bool]:
    """Importance and "embed it?" of an edited message: the same policy as at append."""
    importance = importance_score(m._stamped(importance=None))
    return importance, embeddable(m.role, m.content)


def _no_message(resource_id: str, message_id: str) -> NotFound:
    return NotFound(f"resource {resource_id!r} has no message {message_id!r}", resource_id=resource_id)


class Messages:
    """Edits to the stored messages of every resource (``memory.messages``).

    Args:
        run: the memory's runner (one operation, one transaction).
        vectors: the in-process vector cache, forgotten for a resource whose
            message is removed so recall never returns it.
    """

    def __init__(self, run: Runner, vectors: VectorIndex) -> None:
        self._run = run
        self._vectors = vectors

    async def pop(
        self, *, resource_id: str, thread_id: str, actor: str = "app", reason: str | None = None
    ) -> Message | None:
        """Remove and return the thread's newest message (``None`` when it has none).

        Agent frameworks use it to undo a turn. The message log records the
        pop (who, when, why), not the text.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        check_actor(actor, reason)
        op = ops.PopMessage(resource_id=resource_id, thread_id=thread_id, actor=actor, reason=reason, now=utcnow())
        popped = await self._run(op)
        if popped is not None:
            self._vectors.forget(resource_id)
        return popped

    async def edit(
        self, *, resource_id: str, message_id: str, content: str, actor: str = "app", reason: str | None = None
    ) -> Message:
        """Replace a message's text; the old text goes to the message log with who, when and why.

        Full-text search sees the new text at once; its vector is made again
        in the background.

        Raises:
            NotFound: the resource has no such message.
        """
        check_name(resource_id, "resource_id")
        check_name(message_id, "message_id")
        if not isinstance(content, str):
            raise UsageError(f"content must be a string, not {type(content).__name__}")
        check_text(content, "message content")
        check_actor(actor, reason)
        op = ops.EditMessage(
            resource_id=resource_id,
            message_id=message_id,
            content=content,
            rescore=_rescore,
            actor=actor,
            reason=reason,
            now=utcnow(),
        )
        edited = await self._run(op)
        if edited is None:
            raise _no_message(resource_id, message_id)
        return edited

    async def delete(
        self, *, resource_id: str, message_id: str, actor: str = "app", reason: str | None = None
    ) -> Message:
        """Delete one message; the log keeps who, when and why (not the text). Returns it.

        Raises:
            NotFound: the resource has no such message.
        """
        check_id(resource_id, "resource_id")
        check_id(message_id, "message_id")
        check_actor(actor, reason)
        op = ops.DeleteMessage(resource_id=resource_id, message_id=message_id, actor=actor, reason=reason, now=utcnow())
        deleted = await self._run(op)
        if deleted is None:
            raise _no_message(resource_id, message_id)
        self._vectors.forget(resource_id)
        return deleted

    async def log(self, *, resource_id: str, message_id: str | None = None) -> list[dict[str, Any]]:
        """Edits, pops and deletions of the resource's messages, oldest first.

        Each entry: ``message_id, thread_id, action (edit|pop|delete), role,
        old_content`` (edits only)``, actor, reason, created_at``.
        """
        check_id(resource_id, "resource_id")
        if message_id is not None:
            check_id(message_id, "message_id")
        return await self._run(ops.ReadMessageLog(resource_id=resource_id, message_id=message_id))

    async def set_importance(self, *, resource_id: str, message_id: str, value: float) -> None:
        """Change a message's importance (salient means >= 0.8).

        Raises:
            NotFound: the resource has no such message.
        """
        check_name(resource_id, "resource_id")
        check_name(message_id, "message_id")
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
            raise UsageError(f"importance must be a number within [0, 1], got {value!r}")
        op = ops.SetImportance(resource_id=resource_id, message_id=message_id, value=float(value))
        if not await self._run(op):
            raise _no_message(resource_id, message_id)
