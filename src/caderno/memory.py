"""The ``Memory`` facade: every policy above the storage port.

Ids, validation, merge-patch rules and ownership live here once, so every
backend behaves the same. ``connect(url)`` picks the backend.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import _dump
from ._time import new_id, utcnow
from .errors import NotFound, UsageError
from .messages import Message, Thread, WorkingMemory, check_text
from .stores.base import ResourceDump, Store
from .working_memory import check_patch, make_validator, merge_patch, schema_of

__all__ = ["MAX_ID_LENGTH", "Memory", "connect", "open_store"]

MAX_ID_LENGTH = 256


def check_id(value: Any, what: str) -> str:
    """Resource and thread ids: non-empty text of at most 256 characters, no NUL."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise UsageError(f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    check_text(value, what)
    return value


class Memory:
    """Durable memory for agents over one store.

    Args:
        store: the backend (see ``connect`` to build one from a URL).
        working_memory_schema: optional pydantic model class or JSON Schema
            dict; every merged working memory must validate against it.
    """

    def __init__(self, store: Store, *, working_memory_schema: Any = None) -> None:
        self.store = store
        self.working_memory_schema = working_memory_schema
        self._validate = make_validator(working_memory_schema)

    async def open(self) -> Memory:
        """Create or migrate the schema (done on first use too)."""
        await self.store.open()
        return self

    async def close(self) -> None:
        """Release the store's connections."""
        await self.store.close()

    async def __aenter__(self) -> Memory:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def working_memory_json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema working memory must follow, if one was given."""
        return schema_of(self.working_memory_schema)

    # -- conversation history ------------------------------------------------

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append messages to a thread in one transaction (all or nothing).

        Missing ids and times are assigned here. Returns the stored messages
        with ``id``, ``created_at`` and ``seq`` set.

        Raises:
            UsageError: bad ids, a non-Message item, text that cannot be
                stored (NUL, lone surrogates), or a non-JSON tool argument.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if isinstance(messages, Message):
            raise UsageError("messages must be a list of Message, not a single Message")
        ready = []
        for m in messages:
            if not isinstance(m, Message):
                raise UsageError(f"messages must be Message instances, got {type(m).__name__}")
            check_text(m.content, "message content")
            if m.id is not None:
                check_id(m.id, "message id")
            if m.tool_calls or m.metadata:
                try:
                    json.dumps([c.to_dict() for c in m.tool_calls or ()], ensure_ascii=False).encode("utf-8")
                    json.dumps(m.metadata, ensure_ascii=False).encode("utf-8")
                except (TypeError, ValueError, UnicodeEncodeError) as exc:
                    raise UsageError(f"tool call arguments and metadata must be JSON: {exc}") from None
            ready.append(m._stamped(id=m.id or new_id(), created_at=m.created_at or utcnow()))
        if not ready:
            return []
        return await self.store.append(resource_id, thread_id, ready)

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages, oldest first; ``limit`` keeps the newest N.

        A thread that does not exist (or belongs to another resource) reads
        as ``[]``.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise UsageError(f"limit must be a non-negative integer or None, not {limit!r}")
        if limit == 0:
            return []
        return await self.store.read(resource_id, thread_id, limit)

    async def list_threads(self, *, resource_id: str) -> list[Thread]:
        """The resource's threads, most recently active first."""
        check_id(resource_id, "resource_id")
        return await self.store.list_threads(resource_id)

    async def delete_thread(self, *, resource_id: str, thread_id: str) -> None:
        """Delete a thread and all its messages.

        Raises:
            NotFound: the resource has no such thread.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if not await self.store.delete_thread(resource_id, thread_id):
            raise NotFound(
                f"resource {resource_id!r} has no thread {thread_id!r}", resource_id=resource_id, thread_id=thread_id
            )

    # -- working memory ------------------------------------------------------

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        """The resource's working memory object, or ``None`` when never set."""
        state = await self.get_working_memory_state(resource_id=resource_id)
        return state.data if state else None

    async def get_working_memory_state(self, *, resource_id: str) -> WorkingMemory | None:
        """Working memory with its version (for ``expected_version``)."""
        check_id(resource_id, "resource_id")
        return await self.store.get_working_memory(resource_id)

    async def update_working_memory(
        self,
        *,
        resource_id: str,
        patch: dict[str, Any],
        expected_version: int | None = None,
        source: str = "app",
    ) -> WorkingMemory:
        """Apply a JSON Merge Patch (RFC 7396) atomically.

        Objects merge recursively, arrays and scalars replace, ``null``
        deletes. With ``expected_version`` the update is a compare-and-swap.

        Raises:
            InvalidPatch: the patch is not an object or the result fails the
                schema; nothing is written.
            Conflict: ``expected_version`` is not the stored version.
        """
        check_id(resource_id, "resource_id")
        patch = check_patch(patch, resource_id)

        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            return self.preview_working_memory(current, patch, resource_id=resource_id)

        return await self.store.update_working_memory(
            resource_id, update, patch=patch, expected_version=expected_version, source=source
        )

    def preview_working_memory(
        self, current: dict[str, Any] | None, patch: Any, *, resource_id: str = ""
    ) -> dict[str, Any]:
        """The result of applying ``patch`` to ``current``, validated, without writing.

        Raises:
            InvalidPatch: as ``update_working_memory`` would.
        """
        patch = check_patch(patch, resource_id)
        merged = merge_patch(current or {}, patch)
        return self._validate(merged) if self._validate else merged

    # -- whole resources -----------------------------------------------------

    async def erase_resource(self, *, resource_id: str) -> None:
        """Delete everything of the resource, in one transaction."""
        check_id(resource_id, "resource_id")
        await self.store.erase_resource(resource_id)

    async def export_resource(self, *, resource_id: str) -> ResourceDump:
        """Everything of the resource as a JSON-able dict."""
        check_id(resource_id, "resource_id")
        return await self.store.export_resource(resource_id)

    async def import_resource(self, data: ResourceDump) -> None:
        """Restore an export into a resource that holds nothing yet (ids and order intact).

        Raises:
            UsageError: not an export, malformed, or the resource already has data.
        """
        dump = _dump.check_dump(data)
        check_id(dump["resource_id"], "resource_id")
        for thread in dump["threads"]:
            check_id(thread["id"], "thread_id")
            for m in thread["_parsed"]:
                check_text(m.content, "message content")
        await self.store.import_resource(dump)


def open_store(url: str | Any, **options: Any) -> Store:
    """Build the store a URL names (not opened yet).

    ``memory://``, ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, a
    bare file path, or ``postgresql://user@host:port/db``. SQLite query
    options: ``synchronous``, ``cache_messages``, ``readers``.
    """
    url = str(url)
    if url == "memory://" or url == "memory:":
        from .stores.memory import InMemoryStore

        return InMemoryStore()
    if url.startswith(("postgresql://", "postgres://")):
        from .stores.postgres import PostgresStore

        return PostgresStore(url, **options)
    if "://" not in url:
        from .stores.sqlite import SQLiteStore

        return SQLiteStore(url, **options)
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise UsageError(
            f"unsupported database URL scheme {parts.scheme!r}; use memory://, sqlite:/// or postgresql://"
        )
    path = url[len("sqlite:///") :].split("?", 1)[0] if url.startswith("sqlite:///") else ""
    if not path:
        raise UsageError(f"sqlite URL needs a path: sqlite:///relative.db or sqlite:////abs/path.db, got {url!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    for key in ("cache_messages", "readers", "busy_timeout_ms"):
        if key in query:
            query[key] = int(query[key])  # type: ignore[assignment]
    from .stores.sqlite import SQLiteStore

    return SQLiteStore(path, **{**query, **options})


class _Connect:
    """Awaitable and async context manager, like ``aiosqlite.connect``."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    def __await__(self) -> Generator[Any, None, Memory]:
        return self._memory.open().__await__()

    async def __aenter__(self) -> Memory:
        return await self._memory.open()

    async def __aexit__(self, *exc: object) -> None:
        await self._memory.close()


def connect(url: str = "sqlite:///caderno.db", *, working_memory_schema: Any = None, **options: Any) -> _Connect:
    """Open a ``Memory`` on the database a URL names.

    Use it awaited (``memory = await caderno.connect(url)``, then
    ``await memory.close()``) or as ``async with caderno.connect(url) as memory``.
    """
    return _Connect(Memory(open_store(url, **options), working_memory_schema=working_memory_schema))
