"""The ``Memory`` facade: every policy above the storage port.

Ids, validation, merge-patch rules and ownership live here once, so every
backend behaves the same. ``connect(url)`` picks the backend.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from ..core.clock import new_id, utcnow
from ..core.errors import NotFound, Unsupported, UsageError
from ..core.jsonvalue import MAX_MESSAGES_PER_APPEND
from ..core.messages import Message, Thread, WorkingMemory, check_text
from ..core.records import Fact, Macro
from ..core.validate import (
    MAX_ID_LENGTH,
    check_actor,
    check_fact,
    check_id,
    check_message,
    check_metadata,
    check_name,
    check_title,
)
from ..stores import ops
from ..stores.base import ResourceDump, Store
from . import dump as _dump
from .consolidation import ConsolidationSettings, Consolidator
from .importance import EMBEDDED_ROLES, embeddable
from .importance import score as importance_score
from .indexer import Indexer
from .recall import DEFAULT_MIN_SIMILARITY, MAX_LEG_LIMIT, Recalled, Retriever, VectorIndex
from .state import Keys, Macros, Prefixes, Tasks
from .tri_hybrid import GET_CONTEXT_MIN_SIMILARITY, ContextParts, gather_context
from .working_memory import check_patch, make_validator, merge_patch, schema_of

__all__ = ["DEFAULT", "MAX_ID_LENGTH", "AgentMemory", "Memory", "TurnContext"]

log = logging.getLogger("caderno.memory")

T = TypeVar("T")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Not given": use caderno's default (for ``embedder``, the local MiniLM).
DEFAULT: Any = _Default()

#: Fact texts whose vectors are kept for ranking facts per turn (least recently used go first).
FACT_VECTOR_CACHE = 4096


def fact_op(resource_id: str, category: str, key: str, value: str, source: str) -> ops.UpsertFact:
    """Validate a fact and build its upsert (policy once, for the tool, the API and consolidation)."""
    check_name(resource_id, "resource_id")
    check_fact(category, key, value, source)
    return ops.UpsertFact(
        resource_id=resource_id,
        category=category.strip().lower(),
        key=key.strip(),
        value=value.strip(),
        source=source,
        now=utcnow(),
    )


def detached(messages: list[Message]) -> list[Message]:
    """Copies whose metadata the caller may change without touching what stores and caches hold."""
    return [m._stamped(metadata=copy.deepcopy(m.metadata)) if m.metadata else m for m in messages]


@runtime_checkable
class AgentMemory(Protocol):
    """The four methods of the household design: all ``AgentChat`` needs.

    ``Memory`` implements it; so can any object (a dict in a test, a service
    client). Features that need more — recall, facts, summaries,
    consolidation — switch themselves off for such an object.
    """

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages, oldest first; ``limit`` keeps the newest N."""
        ...

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append messages to a thread, all or nothing."""
        ...

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        """The resource's working memory object, or ``None``."""
        ...

    async def update_working_memory(
        self, *, resource_id: str, patch: dict[str, Any], expected_version: int | None = None
    ) -> Any:
        """Apply a JSON merge patch."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnContext:
    """What a turn reads before the model runs, in one snapshot (``Memory.load_turn``)."""

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


def _check_before(before: Any) -> None:
    """Refuse a ``before`` that is not a position a store can compare (a 64-bit integer)."""
    if not isinstance(before, int) or isinstance(before, bool):
        raise UsageError(f"before must be a message position (an integer) or None, not {type(before).__name__}")
    if abs(before) > _dump.MAX_INT64:
        # Not echoed: a huge int has thousands of digits (and str() of one refuses past 4300).
        raise UsageError("before must be a message position within ±(2**63-1): this integer is larger")


class Memory:
    """Durable memory for agents over one store.

    Every method is a thin wrapper over one batch of the store port
    (``caderno.stores.ops``): validation and policy here, then one
    transaction. A store that does not handle an operation a method needs
    makes that method raise ``Unsupported``; the others work.

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
        if not isinstance(store, Store):
            raise UsageError(f"store must implement caderno.Store (supports, open, close, batch), got {store!r}")
        self.store = store
        self.working_memory_schema = working_memory_schema
        self._validate = make_validator(working_memory_schema)
        if embedder is DEFAULT:
            from ..embeddings import default_embedder

            embedder = default_embedder()
        if not store.supports >= ops.RECALL:
            embedder = None  # nothing to store vectors in
        self.embedder = embedder
        self.indexer = Indexer(self.run, embedder, items=store.supports >= ops.ITEM_VECTORS)
        self.vectors = VectorIndex(vector_cache_bytes)
        self.retriever = Retriever(self.run, self.indexer, self.vectors)
        self.consolidation = consolidation or ConsolidationSettings()
        self.consolidator = Consolidator(self.run, self.consolidation, self.remember_fact)
        self._background: set[asyncio.Task[Any]] = set()
        self._scheduled: set[tuple[str, str]] = set()
        self._fact_vectors: OrderedDict[str, Any] = OrderedDict()
        self.tasks = Tasks(self.run)
        """Scheduled tasks (``caderno.memory.state.Tasks``)."""
        self.macros = Macros(self.run)
        """Learned tool macros (``caderno.memory.state.Macros``)."""
        self.prefixes = Prefixes(self.run)
        """Approved command prefixes (``caderno.memory.state.Prefixes``)."""
        self.keys = Keys(self.run)
        """HTTP API keys (``caderno.memory.state.Keys``)."""

    # -- the port ----------------------------------------------------------------------

    def supports(self, *kinds: type[ops.Op[Any]]) -> bool:
        """Whether the store handles every one of these operation types."""
        return set(kinds) <= self.store.supports

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        """Run operations in one transaction (see ``caderno.stores.base.Store.batch``).

        Raises:
            Unsupported: the store does not handle one of them; nothing ran.
        """
        for op in batch:
            if type(op) not in self.store.supports:
                name = type(op).__name__
                raise Unsupported(
                    f"{type(self.store).__name__} does not support {name}, which this call needs", operation=name
                )
        return await self.store.batch(batch)

    async def run(self, op: ops.Op[T]) -> T:
        """Run one operation in its own transaction."""
        (result,) = await self.batch([op])
        return cast(T, result)

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

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append messages to a thread in one transaction (all or nothing).

        Missing ids and times are assigned here. Returns the stored messages
        with ``id``, ``created_at`` and ``position`` (1, 2, 3… in the thread) set.

        Raises:
            UsageError: bad ids, a non-Message item, text that cannot be
                stored (NUL, lone surrogates), or a non-JSON tool argument.
        """
        check_name(resource_id, "resource_id")
        check_name(thread_id, "thread_id")
        ready = self.prepare_messages(messages)
        if not ready:
            return []
        stored = await self.run(self.append_op(resource_id, thread_id, ready))
        self.indexer.notify()
        return detached(stored)

    async def get_messages(
        self, *, resource_id: str, thread_id: str, limit: int | None = None, before: int | None = None
    ) -> list[Message]:
        """The thread's messages, oldest first; ``limit`` keeps the newest N.

        ``before`` (a ``Message.position``) pages backwards: only messages
        older than it. It is a 64-bit integer, as the stores hold it.
        A thread that does not exist (or belongs to another resource) reads
        as ``[]``.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise UsageError(f"limit must be a non-negative integer or None, not {limit!r}")
        if before is not None:
            _check_before(before)
        if limit == 0:
            return []
        found = await self.run(ops.ReadThread(resource_id=resource_id, thread_id=thread_id, limit=limit, before=before))
        return detached(found)

    async def load_turn(
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
        if with_summaries := self.supports(ops.ReadSummaries):
            batch.append(ops.ReadSummaries(resource_id=resource_id, thread_id=thread_id))
        if with_facts := facts and self.supports(ops.ReadFacts):
            batch.append(ops.ReadFacts(resource_id=resource_id))
        if with_macros := macros and self.supports(ops.ReadMacros):
            batch.append(ops.ReadMacros(resource_id=resource_id))
        results = await self.batch(batch)
        return TurnContext(
            history=detached(results[0]),
            working_memory=results[1],
            summaries=results[2] if with_summaries else [],
            facts=results[2 + with_summaries] if with_facts else [],
            macros=results[-1] if with_macros else [],
        )

    async def commit_turn(
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
        batch += [self._patch_op(resource_id, patch, None, source) for patch, source in patches]
        batch += list(facts)
        batch += list(extra)
        results = await self.batch(batch)
        self.indexer.notify()
        return detached(results[0]), (results[len(patches)] if patches else None)

    async def list_threads(self, *, resource_id: str) -> list[Thread]:
        """The resource's threads, most recently active first."""
        check_id(resource_id, "resource_id")
        return await self.run(ops.ListThreads(resource_id=resource_id))

    async def get_thread(self, *, resource_id: str, thread_id: str) -> Thread:
        """One thread's record (title, metadata, times, message count).

        Raises:
            NotFound: the resource has no such thread.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        thread = await self.run(ops.GetThread(resource_id=resource_id, thread_id=thread_id))
        if thread is None:
            raise _no_thread(resource_id, thread_id)
        return thread

    async def create_thread(
        self, *, resource_id: str, thread_id: str | None = None, title: str | None = None, metadata: Any = None
    ) -> Thread:
        """Create an empty thread with an optional title and metadata (an id is made when absent).

        Raises:
            Conflict-free: UsageError when the resource already has that thread.
        """
        check_name(resource_id, "resource_id")
        thread_id = check_name(thread_id, "thread_id") if thread_id is not None else new_id()
        check_title(title)
        check_metadata(metadata)
        op = ops.PutThread(
            resource_id=resource_id, thread_id=thread_id, create=True, title=title, metadata=metadata, now=utcnow()
        )
        thread = await self.run(op)
        if thread is None:
            raise UsageError(f"resource {resource_id!r} already has a thread {thread_id!r}")
        return thread

    async def update_thread(
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
        thread = await self.run(op)
        if thread is None:
            raise _no_thread(resource_id, thread_id)
        return thread

    async def delete_thread(self, *, resource_id: str, thread_id: str) -> None:
        """Delete a thread, all its messages, their vectors and their edit log.

        Raises:
            NotFound: the resource has no such thread.
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        deleted = await self.run(ops.DeleteThread(resource_id=resource_id, thread_id=thread_id))
        self.vectors.forget(resource_id)
        if not deleted:
            raise _no_thread(resource_id, thread_id)

    async def pop_message(
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
        popped = await self.run(op)
        if popped is not None:
            self.vectors.forget(resource_id)
        return popped

    async def edit_message(
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
            rescore=self._rescore,
            actor=actor,
            reason=reason,
            now=utcnow(),
        )
        edited = await self.run(op)
        if edited is None:
            raise NotFound(f"resource {resource_id!r} has no message {message_id!r}", resource_id=resource_id)
        return edited

    def _rescore(self, m: Message) -> tuple[float, bool]:
        """Importance and "embed it?" of an edited message: the same policy as at append."""
        importance = importance_score(m._stamped(importance=None))
        return importance, embeddable(m.role, m.content)

    async def delete_message(
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
        deleted = await self.run(op)
        if deleted is None:
            raise NotFound(f"resource {resource_id!r} has no message {message_id!r}", resource_id=resource_id)
        self.vectors.forget(resource_id)
        return deleted

    async def message_log(self, *, resource_id: str, message_id: str | None = None) -> list[dict[str, Any]]:
        """Edits, pops and deletions of the resource's messages, oldest first.

        Each entry: ``message_id, thread_id, action (edit|pop|delete), role,
        old_content`` (edits only)``, actor, reason, created_at``.
        """
        check_id(resource_id, "resource_id")
        if message_id is not None:
            check_id(message_id, "message_id")
        return await self.run(ops.ReadMessageLog(resource_id=resource_id, message_id=message_id))

    # -- working memory ------------------------------------------------------

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        """The resource's working memory object, or ``None`` when never set."""
        state = await self.get_working_memory_state(resource_id=resource_id)
        return state.data if state else None

    async def get_working_memory_state(self, *, resource_id: str) -> WorkingMemory | None:
        """Working memory with its version (for ``expected_version``)."""
        check_id(resource_id, "resource_id")
        return await self.run(ops.ReadWorkingMemory(resource_id=resource_id))

    async def working_memory_log(self, *, resource_id: str) -> list[dict[str, Any]]:
        """Every applied patch (version, patch, source, created_at), oldest first."""
        check_id(resource_id, "resource_id")
        return await self.run(ops.ReadWorkingMemoryLog(resource_id=resource_id))

    def _patch_op(
        self, resource_id: str, patch: Any, expected_version: int | None, source: str
    ) -> ops.PatchWorkingMemory:
        patch = check_patch(patch, resource_id)

        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            return self.preview_working_memory(current, patch, resource_id=resource_id)

        return ops.PatchWorkingMemory(
            resource_id=resource_id,
            update=update,
            patch=patch,
            expected_version=expected_version,
            source=source,
            now=utcnow(),
        )

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
        check_name(resource_id, "resource_id")
        return await self.run(self._patch_op(resource_id, patch, expected_version, source))

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

    async def list_resources(self) -> list[str]:
        """Every resource that holds anything, sorted."""
        return await self.run(ops.ListResources())

    async def erase_resource(self, *, resource_id: str) -> None:
        """Delete everything of the resource, in one transaction."""
        check_id(resource_id, "resource_id")
        await self.run(ops.EraseResource(resource_id=resource_id))
        self.vectors.forget(resource_id)

    async def export_resource(self, *, resource_id: str) -> ResourceDump:
        """Everything of the resource as a JSON-able dict."""
        check_id(resource_id, "resource_id")
        return await self.run(ops.ExportResource(resource_id=resource_id))

    async def import_resource(self, data: ResourceDump) -> None:
        """Restore an export into a resource that holds nothing yet (ids and order intact).

        Raises:
            UsageError: not an export, malformed, or the resource already has data.
        """
        dump = _dump.check_dump(data)
        check_name(dump["resource_id"], "resource_id")
        for thread in dump["threads"]:
            check_name(thread["id"], "thread_id")
            for m in thread["_parsed"]:
                check_text(m.content, "message content")
        await self.run(ops.ImportResource(dump=dump, now=utcnow(), embed_roles=EMBEDDED_ROLES))
        self.indexer.notify()

    # -- facts -------------------------------------------------------------------------

    async def remember_fact(
        self, *, resource_id: str, category: str, key: str, value: str, source: str = "agent"
    ) -> Fact:
        """Upsert a fact on (resource, category, key); the previous value goes to its history."""
        return await self.run(fact_op(resource_id, category, key, value, source))

    async def get_facts(self, *, resource_id: str, category: str | None = None) -> list[Fact]:
        """The resource's facts, most recently updated first."""
        check_id(resource_id, "resource_id")
        if category is not None:
            check_id(category, "fact category")
        return await self.run(ops.ReadFacts(resource_id=resource_id, category=category.lower() if category else None))

    async def fact_history(self, *, resource_id: str, category: str, key: str) -> list[dict[str, Any]]:
        """Earlier values of one fact, oldest first."""
        check_id(resource_id, "resource_id")
        check_id(category, "fact category")
        check_id(key, "fact key")
        return await self.run(ops.ReadFactHistory(resource_id=resource_id, category=category.lower(), key=key))

    async def forget_fact(self, *, resource_id: str, category: str, key: str) -> None:
        """Delete a fact (its history stays).

        Raises:
            NotFound: the resource has no such fact.
        """
        check_id(resource_id, "resource_id")
        check_id(category, "fact category")
        check_id(key, "fact key")
        if not await self.run(ops.ForgetFact(resource_id=resource_id, category=category.lower(), key=key)):
            raise NotFound(f"resource {resource_id!r} has no fact {category}/{key}", resource_id=resource_id)

    async def relevant_facts(self, *, resource_id: str, query: str, limit: int = 8, recent: int = 3) -> list[Fact]:
        """Facts for a turn: the closest to ``query`` by embedding, plus the most recent."""
        return await self.rank_facts(await self.get_facts(resource_id=resource_id), query, limit=limit, recent=recent)

    async def rank_facts(self, facts: list[Fact], query: str, *, limit: int = 8, recent: int = 3) -> list[Fact]:
        """The ``recent`` newest facts, then the rest by closeness to ``query``, cut to ``limit``."""
        if len(facts) <= limit:
            return facts
        chosen = facts[:recent]
        if self.indexer.active and query.strip():
            texts = [f"{f.category} {f.key}: {f.value}" for f in facts]
            try:
                vectors = await self._fact_vectors_for(texts)
                (q,) = await asyncio.to_thread(self.embedder.embed, [query])
                ranked = sorted(range(len(facts)), key=lambda i: -float(vectors[i] @ q))
                chosen += [facts[i] for i in ranked if facts[i] not in chosen]
            except Exception as exc:  # noqa: BLE001 - facts still come, by recency
                log.warning("fact ranking by embedding failed: %s", exc)
        chosen += [f for f in facts if f not in chosen]
        return chosen[:limit]

    async def _fact_vectors_for(self, texts: list[str]) -> list[Any]:
        cache = self._fact_vectors
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, await asyncio.to_thread(self.embedder.embed, missing), strict=True):
                cache[t] = v
        vectors = []
        for t in texts:
            cache.move_to_end(t)
            vectors.append(cache[t])
        while len(cache) > FACT_VECTOR_CACHE:
            cache.popitem(last=False)
        return vectors
    # -- summaries and consolidation ---------------------------------------------------------

    async def summaries(self, *, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        """The thread's summary events, oldest first, each with ``merged`` (folded into a later one)."""
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        return await self.run(ops.ReadSummaries(resource_id=resource_id, thread_id=thread_id))

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
        find = ops.FindConsolidationCandidates(resource_id=resource_id, min_chars=settings.summarize_after_tokens * 2)
        for rid, tid in await self.run(find):
            await self.consolidator.thread(rid, tid, report)
        if settings.fast_model is not None:
            await self.consolidator.extract_facts(resource_id, report)
        return report

    async def consolidation_log(self, *, resource_id: str) -> list[dict[str, Any]]:
        """Consolidation outcomes recorded for the resource (failures, mostly), oldest first."""
        check_id(resource_id, "resource_id")
        return await self.run(ops.ReadConsolidationLog(resource_id=resource_id))

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
        check_name(resource_id, "resource_id")
        check_name(message_id, "message_id")
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
            raise UsageError(f"importance must be a number within [0, 1], got {value!r}")
        op = ops.SetImportance(resource_id=resource_id, message_id=message_id, value=float(value))
        if not await self.run(op):
            raise NotFound(f"resource {resource_id!r} has no message {message_id!r}", resource_id=resource_id)

    async def reindex(self, *, resource_id: str | None = None) -> int:
        """Drop the vectors of one resource (or all) and embed its messages again.

        Use it after changing the embedding model. Returns how many messages
        were queued; ``flush()`` waits for them. The vectors of the
        resource's LangGraph store items are queued again too.
        """
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        queued = await self.run(ops.Reindex(resource_id=resource_id, embed_roles=EMBEDDED_ROLES))
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
        now: datetime | None = None,
    ) -> list[Recalled]:
        """Find past messages: recent + salient + relevant + lexical (+ when), fused.

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
            now: the moment the question is asked, which "yesterday" or
                "two weeks ago" in it count from (default: now).

        Returns:
            Deduplicated hits in conversation order (thread, then sequence).
        """
        check_id(resource_id, "resource_id")
        if not isinstance(query, str):
            raise UsageError(f"query must be text, not {type(query).__name__}")
        check_text(query, "query")
        if message_range is not None:
            pair = (message_range, message_range) if isinstance(message_range, int) else message_range
            if (
                not isinstance(pair, tuple | list)
                or len(pair) != 2
                or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in pair)
            ):
                raise UsageError(f"message_range must be a non-negative integer or a pair of them, not {message_range!r}")
            message_range = (pair[0], pair[1])
        if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
            raise UsageError(f"now must be a timezone-aware datetime, not {now!r}")
        if top is not None and (not isinstance(top, int) or isinstance(top, bool) or top < 1):
            raise UsageError(f"top must be a positive integer or None, not {top!r}")
        if not isinstance(min_similarity, int | float) or isinstance(min_similarity, bool):
            raise UsageError(f"min_similarity must be a number, not {min_similarity!r}")
        if scope not in ("resource", "thread"):
            raise UsageError(f"scope must be 'resource' or 'thread', not {scope!r}")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        if scope == "thread" and thread_id is None:
            raise UsageError("scope='thread' needs a thread_id")
        for name, value in (("recent", recent), ("salient", salient), ("relevant", relevant), ("lexical", lexical)):
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a non-negative integer, not {value!r}")
        hits = await self.retriever.recall(
            resource_id=resource_id,
            query=query,
            thread_id=thread_id,
            within=thread_id if scope == "thread" else None,
            limits={"recent": recent, "salient": salient, "relevant": relevant, "lexical": lexical},
            min_similarity=min_similarity,
            message_range=message_range,
            top=top,
            now=utcnow() if now is None else now,
        )
        return [dataclasses.replace(h, message=detached([h.message])[0]) for h in hits]


    async def get_context(
        self,
        *,
        resource_id: str,
        thread_id: str,
        query: str,
        recent: int = 10,
        salient: int = 5,
        relevant: int = 5,
        min_similarity: float = GET_CONTEXT_MIN_SIMILARITY,
        scope: str = "resource",
        now: datetime | None = None,
    ) -> ContextParts:
        """The reference agent's tri-hybrid context: recent, salient and relevant, each part whole.

        Unlike ``recall``, which fuses its legs (the lexical one included)
        into one ranking and keeps the best, this returns three parts, no
        message in two of them: the thread's ``recent`` last replies, then
        up to ``salient`` messages of importance >= 0.8 (newest first), then
        up to ``relevant`` messages most similar to ``query`` (cosine >=
        ``min_similarity``). ``caderno.memory.tri_hybrid`` says where the design
        comes from and why the floor is not the reference's 0.65.

        Args:
            resource_id: whose messages.
            thread_id: the current thread (the recent part).
            query: what the relevant part looks for ("" switches it off).
            recent, salient, relevant: each part's limit; 0 switches it off.
            min_similarity: cosine floor of the relevant part, in [-1, 1].
            scope: where salient and relevant look: ``"resource"`` (every
                thread of the resource, as ``recall``) or ``"thread"`` (the
                reference's session).
            now: when the question is asked (see ``recall``).

        Raises:
            UsageError: a bad id, query, limit, floor or scope (nothing is read).
        """
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        for name, value in (("recent", recent), ("salient", salient), ("relevant", relevant)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LEG_LIMIT:
                raise UsageError(f"{name} must be an integer from 0 to {MAX_LEG_LIMIT}, not {value!r}")
        if (
            not isinstance(min_similarity, int | float)
            or isinstance(min_similarity, bool)
            or not -1.0 <= min_similarity <= 1.0
        ):
            raise UsageError(f"min_similarity must be a number from -1 to 1, not {min_similarity!r}")
        # recall checks the query, scope and now; with every leg off it reads nothing.
        off = {"recent": 0, "salient": 0, "relevant": 0, "lexical": 0}
        await self.recall(resource_id=resource_id, query=query, thread_id=thread_id, scope=scope, now=now, **off)
        return await gather_context(
            self.recall,
            resource_id=resource_id,
            thread_id=thread_id,
            query=query,
            scope=scope,
            recent=recent,
            salient=salient,
            relevant=relevant,
            min_similarity=float(min_similarity),
            now=now,
        )

def _no_thread(resource_id: str, thread_id: str) -> NotFound:
    return NotFound(
        f"resource {resource_id!r} has no thread {thread_id!r}", resource_id=resource_id, thread_id=thread_id
    )
