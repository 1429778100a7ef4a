"""The ``Memory`` facade: every policy above the storage port.

Ids, validation, merge-patch rules and ownership live here once, so every
backend behaves the same. ``connect(url)`` picks the backend.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import _dump
from ._time import new_id, utcnow
from .consolidation import ConsolidationSettings, Consolidator
from .errors import NotFound, UsageError
from .importance import score as importance_score
from .indexer import Indexer
from .messages import Fact, Message, Thread, WorkingMemory, check_text
from .recall import DEFAULT_MIN_SIMILARITY, Recalled, Retriever, VectorIndex
from .stores.base import ResourceDump, Store
from .working_memory import check_patch, make_validator, merge_patch, schema_of

__all__ = ["DEFAULT", "MAX_ID_LENGTH", "Memory", "connect", "open_store"]

log = logging.getLogger("caderno.memory")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Not given": use caderno's default (for ``embedder``, the local MiniLM).
DEFAULT: Any = _Default()

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
        embedder: turns messages into vectors for recall. Default: the local
            all-MiniLM-L6-v2 (loaded on first use); ``None`` turns embedding
            off (recall then uses its other legs).
        vector_cache_bytes: bound of the in-process vector cache.
        consolidation: summaries and fact extraction settings (fast model,
            thresholds, interval); see ``ConsolidationSettings``.
    """

    def __init__(
        self,
        store: Store,
        *,
        working_memory_schema: Any = None,
        embedder: Any = DEFAULT,
        vector_cache_bytes: int = 512 * 1024 * 1024,
        consolidation: ConsolidationSettings | None = None,
    ) -> None:
        self.store = store
        self.working_memory_schema = working_memory_schema
        self._validate = make_validator(working_memory_schema)
        if embedder is DEFAULT:
            from .embeddings import default_embedder

            embedder = default_embedder()
        self.embedder = embedder
        self.indexer = Indexer(store, embedder)
        self.vectors = VectorIndex(vector_cache_bytes)
        self.retriever = Retriever(store, self.indexer, self.vectors)
        self.consolidation = consolidation or ConsolidationSettings()
        self.consolidator = Consolidator(store, self.consolidation, self.remember_fact)
        self._background: set[asyncio.Task[Any]] = set()
        self._scheduled: set[tuple[str, str]] = set()
        self._fact_vectors: dict[str, Any] = {}

    async def open(self) -> Memory:
        """Create or migrate the schema (done on first use too)."""
        await self.store.open()
        return self

    async def close(self) -> None:
        """Let the embedding batch in flight finish, then release the store.

        Messages still waiting for vectors stay queued in the database for
        the next process.
        """
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.indexer.close()
        await self.store.close()

    async def flush(self) -> None:
        """Wait for pending background work: embeddings and scheduled consolidation (tests, CLI)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.indexer.flush()

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
            ready.append(
                m._stamped(id=m.id or new_id(), created_at=m.created_at or utcnow(), importance=importance_score(m))
            )
        if not ready:
            return []
        stored = await self.store.append(resource_id, thread_id, ready)
        self.indexer.notify()
        return stored

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
        deleted = await self.store.delete_thread(resource_id, thread_id)
        self.vectors.forget(resource_id)
        if not deleted:
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
        self.vectors.forget(resource_id)

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
        self.indexer.notify()

    # -- facts -------------------------------------------------------------------------

    async def remember_fact(
        self, *, resource_id: str, category: str, key: str, value: str, source: str = "agent"
    ) -> Fact:
        """Upsert a fact on (resource, category, key); the previous value goes to its history."""
        check_id(resource_id, "resource_id")
        if source not in ("agent", "user", "consolidation"):
            raise UsageError(f"source must be agent, user or consolidation, not {source!r}")
        for name, text in (("category", category), ("key", key), ("value", value)):
            if not isinstance(text, str) or not text.strip():
                raise UsageError(f"fact {name} must be non-empty text")
            check_text(text, f"fact {name}")
        if len(category) > 64 or len(key) > 256 or len(value) > 4000:
            raise UsageError("fact too long: category <= 64, key <= 256, value <= 4000 characters")
        return await self.store.upsert_fact(resource_id, category.strip().lower(), key.strip(), value.strip(), source)

    async def get_facts(self, *, resource_id: str, category: str | None = None) -> list[Fact]:
        """The resource's facts, most recently updated first."""
        check_id(resource_id, "resource_id")
        return await self.store.get_facts(resource_id, category.lower() if category else None)

    async def fact_history(self, *, resource_id: str, category: str, key: str) -> list[dict[str, Any]]:
        """Earlier values of one fact, oldest first."""
        check_id(resource_id, "resource_id")
        return await self.store.fact_history(resource_id, category.lower(), key)

    async def forget_fact(self, *, resource_id: str, category: str, key: str) -> None:
        """Delete a fact (its history stays).

        Raises:
            NotFound: the resource has no such fact.
        """
        check_id(resource_id, "resource_id")
        if not await self.store.forget_fact(resource_id, category.lower(), key):
            raise NotFound(f"resource {resource_id!r} has no fact {category}/{key}", resource_id=resource_id)

    async def relevant_facts(self, *, resource_id: str, query: str, limit: int = 8, recent: int = 3) -> list[Fact]:
        """Facts for a turn: the closest to ``query`` by embedding, plus the most recent."""
        facts = await self.get_facts(resource_id=resource_id)
        if len(facts) <= limit:
            return facts
        chosen = facts[:recent]
        if self.indexer.active and query.strip():
            texts = [f"{f.category} {f.key}: {f.value}" for f in facts]
            missing = [t for t in texts if t not in self._fact_vectors]
            try:
                if missing:
                    for t, v in zip(missing, await asyncio.to_thread(self.embedder.embed, missing), strict=True):
                        self._fact_vectors[t] = v
                (q,) = await asyncio.to_thread(self.embedder.embed, [query])
                ranked = sorted(range(len(facts)), key=lambda i: -float(self._fact_vectors[texts[i]] @ q))
                chosen += [facts[i] for i in ranked if facts[i] not in chosen]
            except Exception as exc:  # noqa: BLE001 - facts still come, by recency
                log.warning("fact ranking by embedding failed: %s", exc)
        chosen += [f for f in facts if f not in chosen]
        return chosen[:limit]

    # -- summaries and consolidation ---------------------------------------------------------

    async def summaries(self, *, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        """The thread's summary events, oldest first, each with ``merged`` (folded into a later one)."""
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        return await self.store.summaries(resource_id, thread_id)

    async def consolidate(self, *, resource_id: str | None = None) -> dict[str, int]:
        """One consolidation pass: summarise long threads, merge summaries, extract facts.

        Returns counts: ``summaries``, ``merges``, ``facts``, ``failures``.
        Failures are recorded in ``consolidation_log`` and retried next pass.
        """
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        report = {"summaries": 0, "merges": 0, "facts": 0, "failures": 0}
        settings = self.consolidation
        # Characters are a cheap upper bound to find candidates (>= 2 chars a token).
        for rid, tid in await self.store.consolidation_candidates(resource_id, settings.summarize_after_tokens * 2):
            await self.consolidator.thread(rid, tid, report)
        if settings.fast_model is not None:
            await self.consolidator.extract_facts(resource_id, report)
        return report

    def schedule_consolidation(self, *, resource_id: str, thread_id: str) -> None:
        """Consolidate one thread in the background (after a turn); never delays the caller."""
        key = (resource_id, thread_id)
        if key in self._scheduled:
            return
        self._scheduled.add(key)

        async def run() -> None:
            try:
                report = {"summaries": 0, "merges": 0, "facts": 0, "failures": 0}
                await self.consolidator.thread(resource_id, thread_id, report)
                if self.consolidation.fast_model is not None:
                    await self.consolidator.extract_facts(resource_id, report)
            except Exception:  # the store failed; the next pass will retry
                log.warning("background consolidation of %s/%s failed", resource_id, thread_id, exc_info=True)
            finally:
                self._scheduled.discard(key)

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def run_background(self, *, interval_hours: float | None = None) -> None:
        """Embed and consolidate forever, a pass every ``interval_hours`` (default 6): for workers."""
        period = 3600 * (interval_hours if interval_hours is not None else self.consolidation.interval_hours)
        while True:
            await self.indexer.flush()
            report = await self.consolidate()
            log.info("consolidation pass: %s", report)
            await asyncio.sleep(period)

    # -- recall -----------------------------------------------------------------------

    async def set_importance(self, *, resource_id: str, message_id: str, value: float) -> None:
        """Change a message's importance (salient means >= 0.8).

        Raises:
            NotFound: the resource has no such message.
        """
        check_id(resource_id, "resource_id")
        if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
            raise UsageError(f"importance must be a number within [0, 1], got {value!r}")
        if not await self.store.set_importance(resource_id, message_id, float(value)):
            raise NotFound(f"resource {resource_id!r} has no message {message_id!r}", resource_id=resource_id)

    async def reindex(self, *, resource_id: str | None = None) -> int:
        """Drop the vectors of one resource (or all) and embed its messages again.

        Use it after changing the embedding model. Returns how many messages
        were queued; ``flush()`` waits for them.
        """
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        queued = await self.store.reindex(resource_id)
        self.vectors.forget(resource_id)
        self.indexer.notify()
        return queued

    async def recall(
        self,
        *,
        resource_id: str,
        query: str,
        thread_id: str | None = None,
        scope: str = "resource",
        recent: int = 10,
        salient: int = 5,
        relevant: int = 5,
        lexical: int = 5,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        message_range: tuple[int, int] | int | None = None,
        top: int | None = None,
    ) -> list[Recalled]:
        """Find past messages: recent + salient + relevant + lexical, fused.

        Args:
            resource_id: whose messages.
            query: what to look for (relevant and lexical legs).
            thread_id: the current thread (the recent leg needs it).
            scope: ``"resource"`` (all the resource's threads) or ``"thread"``.
            recent, salient, relevant, lexical: how many each leg may return;
                0 switches a leg off.
            min_similarity: cosine threshold of the relevant leg.
            message_range: neighbours to add around each hit, ``(before,
                after)`` or one number for both (reason ``context``).
            top: keep only the best ``top`` hits by fused score.

        Returns:
            Deduplicated hits in conversation order (thread, then sequence).
        """
        check_id(resource_id, "resource_id")
        if scope not in ("resource", "thread"):
            raise UsageError(f"scope must be 'resource' or 'thread', not {scope!r}")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        if scope == "thread" and thread_id is None:
            raise UsageError("scope='thread' needs a thread_id")
        for name, value in (("recent", recent), ("salient", salient), ("relevant", relevant), ("lexical", lexical)):
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a non-negative integer, not {value!r}")
        return await self.retriever.recall(
            resource_id=resource_id,
            query=query,
            thread_id=thread_id,
            within=thread_id if scope == "thread" else None,
            limits={"recent": recent, "salient": salient, "relevant": relevant, "lexical": lexical},
            min_similarity=min_similarity,
            message_range=message_range,
            top=top,
        )


def open_store(url: str | Any, **options: Any) -> Store:
    """Build the store a URL names (not opened yet).

    ``memory://``, ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, a
    bare file path, or ``postgresql://user@host:port/db``. SQLite query
    options: ``synchronous``, ``cache_messages``, ``readers``.
    """
    url = str(url)
    if url == "memory://" or url == "memory:":
        from .stores.memory import InMemoryStore

        if options:
            raise UsageError(f"memory:// takes no store options, got {', '.join(sorted(options))}")
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


def connect(
    url: str = "sqlite:///caderno.db",
    *,
    working_memory_schema: Any = None,
    embedder: Any = DEFAULT,
    consolidation: ConsolidationSettings | None = None,
    vector_cache_bytes: int = 512 * 1024 * 1024,
    **options: Any,
) -> _Connect:
    """Open a ``Memory`` on the database a URL names.

    Use it awaited (``memory = await caderno.connect(url)``, then
    ``await memory.close()``) or as ``async with caderno.connect(url) as memory``.
    Keyword options beyond ``Memory``'s own go to the store (SQLite:
    ``synchronous``, ``cache_messages``, ``readers``…; PostgreSQL:
    ``schema``, ``pool_size``).
    """
    return _Connect(
        Memory(
            open_store(url, **options),
            working_memory_schema=working_memory_schema,
            embedder=embedder,
            consolidation=consolidation,
            vector_cache_bytes=vector_cache_bytes,
        )
    )
