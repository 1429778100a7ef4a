"""Threads as records (``memory.threads``): list, read, create, retitle, delete.

A thread is the pair (resource_id, thread_id). A thread of another
resource reads and deletes exactly like a missing one (``NotFound``), so
no call tells one resource what another holds. Messages come and go
through ``Memory.append_messages``/``get_messages``; this part is the
thread's own record: title, metadata, times, message count.
"""

from __future__ import annotations

import builtins
from typing import Any

from ...core.clock import new_id, utcnow
from ...core.errors import NotFound, UsageError
from ...core.messages import Thread
from ...core.validate import check_id, check_metadata, check_name, check_title
from ...stores import ops
from ...stores.base import Runner
from ..engines.vector_cache import VectorIndex

__all__ = ["Threads"]


def _no_thread(resource_id: str, thread_id: str) -> NotFound:
    """The error for a thread the resource does not have (missing, or another resource's)."""
    return NotFound(
        f"resource {resource_id!r} has no thread {thread_id!r}", resource_id=resource_id, thread_id=thread_id
    )


class Threads:
    """The threads of every resource (``memory.threads``).

    Args:
        run: the memory's runner (one operation, one transaction).
        vectors: the in-process vector cache, forgotten for a resource
            whose thread is deleted so recall never returns its messages.
    """

    def __init__(self, run: Runner, vectors: VectorIndex) -> None:
        self._run = run
        self._vectors = vectors

    async def list(self, *, resource_id: str) -> builtins.list[Thread]:
        """The resource's threads, most recently active first."""
        check_id(resource_id, "resource_id")
        return await self._run(ops.ListThreads(resource_id=resource_id))

    async def get(self, *, resource_id: str, thread_id: str) -> Thread:
        """One thread's record (title, metadata, times, message count).

        Raises:
            NotFound: the resource has no such thread.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        thread = await self._run(ops.GetThread(resource_id=resource_id, thread_id=thread_id))
        if thread is None:
            raise _no_thread(resource_id, thread_id)
        return thread

    async def create(
        self, *, resource_id: str, thread_id: str | None = None, title: str | None = None, metadata: Any = None
    ) -> Thread:
        """Create an empty thread with an optional title and metadata (an id is made when absent).

        Raises:
            UsageError: the resource already has that thread (not ``Conflict``:
                nothing raced, the caller asked for an id in use).
        """
        check_name(resource_id, "resource_id")
        thread_id = check_name(thread_id, "thread_id") if thread_id is not None else new_id()
        check_title(title)
        check_metadata(metadata)
        op = ops.PutThread(
            resource_id=resource_id, thread_id=thread_id, create=True, title=title, metadata=metadata, now=utcnow()
        )
        thread = await self._run(op)
        if thread is None:
            raise UsageError(f"resource {resource_id!r} already has a thread {thread_id!r}")
        return thread

    async def update(
        self, *, resource_id: str, thread_id: str, title: Any = ops.UNSET, metadata: Any = ops.UNSET
    ) -> Thread:
        """Change a thread's title and/or metadata (a field not given is kept; ``None`` clears it).

        Raises:
            NotFound: the resource has no such thread.
        """
        check_name(resource_id, "resource_id")
        check_name(thread_id, "thread_id")
        if title is not ops.UNSET:
            check_title(title)
        if metadata is not ops.UNSET:
            check_metadata(metadata)
        op = ops.PutThread(
            resource_id=resource_id, thread_id=thread_id, create=False, title=title, metadata=metadata, now=utcnow()
        )
        thread = await self._run(op)
        if thread is None:
            raise _no_thread(resource_id, thread_id)
        return thread

    async def delete(self, *, resource_id: str, thread_id: str) -> None:
        """Delete a thread, all its messages, their vectors and their edit log.

        Raises:
            NotFound: the resource has no such thread.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        deleted = await self._run(ops.DeleteThread(resource_id=resource_id, thread_id=thread_id))
        self._vectors.forget(resource_id)
        if not deleted:
            raise _no_thread(resource_id, thread_id)
