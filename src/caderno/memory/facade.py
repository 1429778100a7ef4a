"""The ``Memory`` facade: one object over one store, flat where the contract names it, parts for the rest.

Ids, validation, merge-patch rules and ownership live in the memory layer
once, so every backend behaves the same. ``caderno.connect(url)`` picks the
backend (``caderno.memory.adapters.connect``).

The rule for where a method lives:

- **Flat on ``Memory``**: what the contract (docs/architecture.md) and the ``AgentMemory`` port name, which
  callers cannot be asked to rename — the four ``AgentMemory`` methods
  (``get_messages``, ``append_messages``, ``get_working_memory``,
  ``update_working_memory``), the contract's thread and resource verbs
  (``list_threads``, ``delete_thread``, ``list_resources``,
  ``erase_resource``, ``export_resource``, ``import_resource``), ``recall``,
  ``get_context``, ``reindex``, and the lifecycle and the port (``open``,
  ``close``, ``flush``, ``supports``, ``batch``, ``run``,
  ``run_background``).
- **Everything else in a part**, an attribute holding a small class from
  its own module that is given what it needs (the runner, the vector cache,
  the indexer…), never the ``Memory``: ``memory.threads``
  (``caderno.memory.parts.threads``), ``memory.messages``, ``memory.working_memory``,
  ``memory.facts``, ``memory.consolidation``, ``memory.tasks``,
  ``memory.macros``, ``memory.prefixes``, ``memory.keys``
  (``caderno.memory.parts.state``), and ``memory.turns``: the seam ``AgentChat``
  runs a turn on, internal to caderno (not a stable API).

``list_threads`` and ``delete_thread`` stay flat for good: they are the
contract's spelling of ``memory.threads.list`` and ``memory.threads.delete``.
CHANGELOG.md ("The parts of Memory") lists the old flat names and where each moved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from ..core.clock import utcnow
from ..core.errors import Unsupported, UsageError
from ..core.messages import Message, Thread, WorkingMemory, check_text
from ..core.validate import MAX_ID_LENGTH, check_id, check_name
from ..stores import ops
from ..stores.base import ResourceDump, Store
from .engines import dump as _dump
from .engines.get_context import GET_CONTEXT_MIN_SIMILARITY, GET_CONTEXT_SCOPE, ContextParts, gather_context
from .engines.importance import EMBEDDED_ROLES
from .engines.indexer import Indexer
from .engines.notebook_rules import MEMORY_CHAR_LIMIT, USER_CHAR_LIMIT
from .engines.recall import MAX_LEG_LIMIT, Hits, RecallPlan, RecallQuery, Retriever
from .engines.vector_cache import VectorIndex
from .parts.consolidation import Consolidation, ConsolidationSettings
from .parts.facts import Facts
from .parts.messages import Messages, detached
from .parts.notebook import StoredNotebook
from .parts.state import Keys, Macros, Prefixes, Tasks
from .parts.threads import Threads
from .parts.turns import Turns
from .parts.working_memory import WorkingMemoryPart

__all__ = ["DEFAULT", "MAX_ID_LENGTH", "AgentMemory", "Memory"]

log = logging.getLogger("caderno.memory")

T = TypeVar("T")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Not given": use caderno's default (for ``embedder``, the local MiniLM).
DEFAULT: Any = _Default()


@runtime_checkable
class AgentMemory(Protocol):
    """The four-method port: all ``AgentChat`` needs.

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
    (``caderno.stores.ops``): validation and policy in the memory layer,
    then one transaction. A store that does not handle an operation a method
    needs makes that method raise ``Unsupported``; the others work. The
    module docstring says which methods are flat and which live in a part.

    Args:
        store: the backend (see ``connect`` to build one from a URL).
        working_memory_schema: optional pydantic model class or JSON Schema
            dict; every merged working memory must validate against it.
        embedder: turns messages into vectors for recall. Default: the local
            all-MiniLM-L6-v2 (loaded on first use); ``None`` turns embedding
            off (recall then uses its other legs).
        sparse: the learned-sparse encoder whose term weights, stored beside
            each vector, rerank recall's candidates. Default: SPLADE-tiny
            (``caderno.embeddings.splade``) when ``embedder`` is left to its
            default too; ``None`` (or an embedder of your own without a
            ``sparse`` given) turns it off.
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
        sparse: Any = DEFAULT,
        vector_cache_bytes: int = 512 * 1024 * 1024,
        consolidation: ConsolidationSettings | None = None,
    ) -> None:
        if not isinstance(store, Store):
            raise UsageError(f"store must implement caderno.Store (supports, open, close, batch), got {store!r}")
        self.store = store
        if sparse is DEFAULT and embedder is DEFAULT:  # the defaults come together
            from ..embeddings import default_sparse_encoder

            sparse = default_sparse_encoder()
        elif sparse is DEFAULT:  # an embedder of your own comes without the sparse rerank unless you give one
            sparse = None
        if embedder is DEFAULT:
            from ..embeddings import default_embedder

            embedder = default_embedder()
        if not store.supports >= ops.RECALL or embedder is None:
            embedder = sparse = None  # nothing to store vectors in; sparse terms are stored beside the vectors
        self.embedder = embedder
        self.indexer = Indexer(self.run, embedder, sparse=sparse, items=store.supports >= ops.ITEM_VECTORS)
        self.vectors = VectorIndex(vector_cache_bytes)
        self.retriever = Retriever(self.run, self.indexer, self.vectors, self.batch, self.supports)
        self._background: set[asyncio.Task[Any]] = set()
        self.threads = Threads(self.run, self.vectors)
        """Thread records: list, get, create, update, delete (``caderno.memory.parts.threads``)."""
        self.messages = Messages(self.run, self.vectors)
        """Stored messages changed and audited: pop, edit, delete, log, importance (``caderno.memory.parts.messages``)."""
        self.working_memory = WorkingMemoryPart(self.run, working_memory_schema)
        """Versioned state, patch log, dry run, schema (``caderno.memory.parts.working_memory``)."""
        self.facts = Facts(self.run, self.indexer)
        """Facts and their history, and the ranking a turn uses (``caderno.memory.parts.facts``)."""
        self.consolidation = Consolidation(
            self.run, consolidation or ConsolidationSettings(), self.facts.remember, self._background
        )
        """Summaries and fact extraction, and their settings (``caderno.memory.parts.consolidation``)."""
        self.turns = Turns(self.batch, self.working_memory, self.indexer, self._recall_plan, self._finish_recall)
        """A turn's snapshot and commit, for ``AgentChat``: internal (``caderno.memory.parts.turns``)."""
        self.tasks = Tasks(self.run)
        """Scheduled tasks (``caderno.memory.parts.state.Tasks``)."""
        self.macros = Macros(self.run)
        """Learned tool macros (``caderno.memory.parts.state.Macros``)."""
        self.prefixes = Prefixes(self.run)
        """Approved command prefixes (``caderno.memory.parts.state.Prefixes``)."""
        self.keys = Keys(self.run)
        """HTTP API keys (``caderno.memory.parts.state.Keys``)."""

    def notebook(
        self, resource_id: str, *, memory_char_limit: int = MEMORY_CHAR_LIMIT, user_char_limit: int = USER_CHAR_LIMIT
    ) -> StoredNotebook:
        """The resource's notebook in this database (``caderno.memory.parts.notebook.StoredNotebook``).

        The same rules and budgets as a file ``Notebook``, seen alike by every
        process on the database.
        """
        return StoredNotebook(
            self.run, resource_id, memory_char_limit=memory_char_limit, user_char_limit=user_char_limit
        )

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

    # -- lifecycle ---------------------------------------------------------------------

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

    async def run_background(self, *, interval_hours: float | None = None) -> None:
        """Embed and consolidate forever, a pass every ``interval_hours`` (default 6): for workers and servers.

        The embedding worker runs from the start, whether or not anything is
        appended through this process: it looks at the queue every
        ``indexer.POLL_SECONDS``, at once after an append here, and on
        PostgreSQL at once after another process's (its notice), so work
        queued anywhere — and a batch whose worker died, once its lease runs
        out — is taken up (``caderno.memory.engines.indexer``).
        """
        settings = self.consolidation.settings
        period = 3600 * (interval_hours if interval_hours is not None else settings.interval_hours)
        # A store that hears of other processes' appends (PostgreSQL's LISTEN) wakes the worker.
        watch = getattr(self.store, "watch_embedding_queue", None)
        if watch is not None:
            watch(self.indexer.notify)
        try:
            self.indexer.start()
            while True:
                report = await self.consolidation.run()
                log.info("consolidation pass: %s", report)
                await asyncio.sleep(period)
        finally:
            if watch is not None:
                watch(None)

    # -- AgentMemory: history and working memory ------------------------------

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
        ready = await self.turns.prepare_off_loop(messages)
        if not ready:
            return []
        stored = await self.run(self.turns.append_op(resource_id, thread_id, ready))
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

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        """The resource's working memory object, or ``None`` when never set."""
        state = await self.working_memory.state(resource_id=resource_id)
        return state.data if state else None

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
        return await self.run(self.working_memory.patch_op(resource_id, patch, expected_version, source))

    # -- the contract's thread verbs (the contract's spelling of memory.threads.list/delete) --

    async def list_threads(self, *, resource_id: str) -> list[Thread]:
        """The resource's threads, most recently active first (``memory.threads.list``)."""
        return await self.threads.list(resource_id=resource_id)

    async def delete_thread(self, *, resource_id: str, thread_id: str) -> None:
        """Delete a thread, its messages, their vectors and edit log (``memory.threads.delete``).

        Raises:
            NotFound: the resource has no such thread.
        """
        await self.threads.delete(resource_id=resource_id, thread_id=thread_id)

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

    # -- recall ------------------------------------------------------------------------

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

    async def recall(self, *, resource_id: str, query: str, **options: Any) -> Hits:
        """Find past messages: recent + salient + relevant + lexical (+ when), fused.

        What was just appended is found by meaning, in this process or
        another, with no ``flush()``: the resource's messages still waiting
        for a vector are embedded first, newest first, at most
        ``caderno.memory.engines.indexer.RECALL_EMBED_LIMIT`` (past it, and for a
        text whose embedding failed, ``Hits.not_searchable`` says how many
        the relevant leg could not see; the other legs see them all).

        Args:
            resource_id: whose messages.
            query: what to look for (relevant and lexical legs).
            **options: the rest of ``caderno.RecallQuery``, each checked
                there: ``thread_id`` (the current thread; the recent leg
                needs it), ``scope`` (``"resource"``, all the resource's
                threads, or ``"thread"``), ``recent``, ``salient``,
                ``relevant``, ``lexical`` (how many each leg may return; 0
                switches a leg off), ``min_similarity`` (cosine threshold of
                the relevant leg), ``message_range`` (neighbours to add
                around each hit, ``(before, after)`` or one number for both),
                ``top`` (keep only the best ``top`` hits by fused score),
                ``now`` (the moment "yesterday" or "two weeks ago" count
                from), ``embed_pending`` (False searches only the vectors
                already stored).

        Returns:
            Deduplicated hits in conversation order (thread, then sequence):
            a list, with ``not_searchable`` (see above).
        """
        plan = await self._recall_plan(RecallQuery(resource_id=resource_id, query=query, **options))
        return await self._finish_recall(plan, await self.batch(plan.reads) if plan.reads else [])

    async def _recall_plan(self, q: RecallQuery) -> RecallPlan:
        """``recall`` in two halves, for a caller that reads the legs inside a batch of its own (a turn
        reads them with its context, through ``memory.turns.recall_plan``): the plan's ``reads``, then
        ``_finish_recall`` with their results."""
        return await self.retriever.plan(q)

    async def _finish_recall(self, plan: RecallPlan, results: list[Any], *, top: int | None = None) -> Hits:
        """The hits of a ``recall_plan`` whose ``reads`` gave ``results`` (``top`` overrides the plan's)."""
        hits = await plan.finish(results, top=top)
        out = Hits(dataclasses.replace(h, message=detached([h.message])[0]) for h in hits)
        out.not_searchable = hits.not_searchable
        return out

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
        scope: str = GET_CONTEXT_SCOPE,
        now: datetime | None = None,
    ) -> ContextParts:
        """aidaemon's three-part context: recent, salient and relevant, each part whole.

        Unlike ``recall``, which fuses its legs (the lexical one included)
        into one ranking and keeps the best, this returns three parts, no
        message in two of them: the thread's last ``recent`` messages of
        every role (tool calls and tool results too, as aidaemon's
        recency; a window that would begin with tool results whose call is
        before it starts after them, so the part never opens on an orphan
        result and never holds more than ``recent``), then up to
        ``salient`` messages of importance >= 0.8 (newest first), then up
        to ``relevant`` messages most similar to ``query`` (cosine >=
        ``min_similarity``). ``caderno.memory.engines.get_context`` says where the
        design comes from (davo20019/aidaemon, ``src/state/sqlite.rs``
        ``get_context`` at 620a136) and why the floor is not the
        reference's 0.65.

        Salient and relevant look in the whole resource by default
        (``GET_CONTEXT_SCOPE``), where aidaemon looks in the session
        only. Measured by bench/get_context.py (relevant@5, resource
        against thread scope): LoCoMo dev 0.425 against 0.012 (tuning) and
        0.457 against 0.006 (check); LongMemEval_S dev 0.614 against 0.000
        (tuning) and 0.585 against 0.000 (check), asked from a new thread as
        its protocol does, 0.602 against 0.027 and 0.562 against 0.028
        asked from the latest earlier session; bench/data en 0.761 against
        0.000 and pt 0.389 against 0.042 (tuning halves). The whole context
        follows: LoCoMo 0.442 / 0.487 against 0.018 / 0.025.

        Args:
            resource_id: whose messages.
            thread_id: the current thread (the recent part).
            query: what the relevant part looks for ("" switches it off).
            recent, salient, relevant: each part's limit; 0 switches it off.
            min_similarity: cosine floor of the relevant part, in [-1, 1].
            scope: where salient and relevant look: ``"resource"`` (every
                thread of the resource, as ``recall``; the default) or
                ``"thread"`` (aidaemon's session). The recent part is
                the thread's either way.
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
        off: dict[str, Any] = {"recent": 0, "salient": 0, "relevant": 0, "lexical": 0}
        await self.recall(resource_id=resource_id, query=query, thread_id=thread_id, scope=scope, now=now, **off)
        return await gather_context(
            self.recall,
            self.run,
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
