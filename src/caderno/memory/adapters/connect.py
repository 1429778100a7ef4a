"""Opening a ``Memory``: ``connect(url)`` and ``open_store(url)``, the one place a URL becomes a backend."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...core.errors import UsageError
from ...stores.base import Store
from ..facade import DEFAULT, Memory
from ..parts.consolidation import ConsolidationSettings

__all__ = ["connect", "open_store"]


def open_store(url: str | Any, **options: Any) -> Store:
    """Build the store a URL names (not opened yet).

    ``memory://``, ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, a
    bare file path, or ``postgresql://user@host:port/db``. SQLite query
    options: ``synchronous``, ``cache_messages``, ``readers``;
    ``import_from="aidaemon"`` (with ``legacy_resource_id``) imports
    aidaemon's database in place as it opens (``caderno.stores._sqlite_legacy``).
    """
    url = str(url)
    if options.get("import_from") is not None and url.startswith(("memory:", "postgresql://", "postgres://")):
        raise UsageError(
            f"import_from={options['import_from']!r} imports a SQLite file in place: give the file's path "
            "(or a sqlite:/// URL), not a memory:// or PostgreSQL URL"
        )
    if url.startswith("sqlite://") and url.split("?", 1)[0] in ("sqlite://", "sqlite:///:memory:", "sqlite://:memory:"):
        raise UsageError(
            "sqlite:///:memory: is not supported (each connection would see its own empty database); "
            "use memory:// for an in-process store, or a file path"
        )
    if url == "memory://" or url == "memory:":
        from ...stores.memory import InMemoryStore

        if options:
            raise UsageError(f"memory:// takes no store options, got {', '.join(sorted(options))}")
        return InMemoryStore()
    if url.startswith(("postgresql://", "postgres://")):
        from ...stores.postgres import PostgresStore

        return _build(PostgresStore, url, options)
    if "://" not in url:
        from ...stores.sqlite import SQLiteStore

        return _build(SQLiteStore, url, options)
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
    from ...stores.sqlite import SQLiteStore

    return _build(SQLiteStore, path, {**query, **options})


def _build(kind: Any, where: str, options: dict[str, Any]) -> Store:
    """A store of ``kind``; an option it does not take is a ``UsageError`` naming the ones it does."""
    accepted = [p for p in inspect.signature(kind).parameters if p not in ("url", "path")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise UsageError(f"{kind.__name__} takes no option {', '.join(unknown)}; it takes {', '.join(accepted)}")
    store: Store = kind(where, **options)
    return store


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


def connect(
    url: str = "sqlite:///caderno.db",
    *,
    working_memory_schema: Any = None,
    embedder: Any = DEFAULT,
    sparse: Any = DEFAULT,
    consolidation: ConsolidationSettings | None = None,
    vector_cache_bytes: int = 512 * 1024 * 1024,
    **options: Any,
) -> _Connect:
    """Open a ``Memory`` on the database a URL names.

    Use it awaited (``memory = await caderno.connect(url)``, then
    ``await memory.close()``) or as ``async with caderno.connect(url) as memory``.
    Keyword options beyond ``Memory``'s own go to the store (SQLite:
    ``synchronous``, ``cache_messages``, ``readers``…, and
    ``import_from="aidaemon"`` to import aidaemon's file as it opens;
    PostgreSQL: ``schema``, ``pool_size``).
    """
    return _Connect(
        Memory(
            open_store(url, **options),
            working_memory_schema=working_memory_schema,
            embedder=embedder,
            sparse=sparse,
            consolidation=consolidation,
            vector_cache_bytes=vector_cache_bytes,
        )
    )
