"""A LangGraph store on caderno's database (extra ``langgraph``).

``CadernoStore`` is a ``langgraph.store.base.BaseStore``: pass it to
``graph.compile(store=...)`` and nodes read and write long-term memory with
``store.put`` / ``store.get`` / ``store.search`` / ``store.list_namespaces``
(or their ``a``-prefixed forms), kept in caderno's database next to the
conversation history::

    memory = await caderno.connect("sqlite:///agent.db")
    store = CadernoStore(memory, resource_id="user-1", index={"fields": ["text"]})
    graph = builder.compile(store=store)

**Namespaces.** Every item lives under one caderno resource (``resource_id``);
the LangGraph namespace tuple is the path inside that resource, so
``("memories", "prefs")`` of store ``CadernoStore(memory, resource_id="u1")``
is the path ``memories/prefs`` of resource ``u1``, and erasing or exporting
the resource takes its items with it. Labels follow LangGraph's rules:
non-empty strings without ``.``.

**Semantics** follow LangGraph's ``InMemoryStore`` (a differential test holds
them to it): the reads of one batch see the state from before its writes, the
last write to a key in a batch wins, ``filter`` takes exact values, nested
dicts, lists and ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``, and
``list_namespaces`` takes prefix/suffix conditions with ``*`` wildcards and
``max_depth``. Two deliberate differences: search without a query returns the
most recently updated items first (as LangGraph's PostgreSQL and SQLite
stores do), where ``InMemoryStore`` keeps insertion order; and only
namespaces that hold an item are listed. TTLs are not supported.

**Filters run in the database** (``json_extract`` on SQLite; on PostgreSQL
``jsonb`` operators on the document parsed once, when written; values and
keys are bound parameters, never SQL text), which also cuts the page
(order, offset, limit) of a search without a query, looking for it among
the newest items first. A
comparison (``$gt`` ...) takes a number and matches fields that are numbers
(or booleans), where ``InMemoryStore`` would convert a numeric string and
raise on anything else. Conditions the database is not given (a list, an
empty object, a comparison with a non-number, a key with ``"``, ``\\`` or a
control character) are checked in Python after it, with the same results.

**Semantic search.** With ``index`` (LangGraph's ``IndexConfig``; only
``fields`` is read, default the whole value as JSON), a search with ``query``
ranks items by cosine similarity through ``memory.embedder``, the best
matching field of an item giving its score. Item vectors are kept like
message vectors: a put queues the item's texts in the database, in its own
transaction, and caderno's background embedding worker (``memory.indexer``,
the one that embeds messages, in this process or any other on the same
database) computes and stores them, so they survive restarts. A new put
replaces the item's job or vectors, so a vector never scores a newer value.
A ranked search is ranked by the store (``RankItems``: the filtered items'
vectors scored where they are read), which then reads only the items up to
the page's end, each checked against the version its vectors describe; when
one changed meanwhile, when fewer items are scored than the page needs, or
in a batch that also writes, it reads items and vectors whole in one
snapshot instead. An item whose
vectors are not there yet (or were made by another model) is still
returned, without a score, after the scored ones.
The write never waits for, nor fails on, the embedder; ``flush()`` waits
for the vectors queued so far (tests, scripts). ``memory.reindex()`` queues
every item again after a change of model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ..core.clock import utcnow
from ..core.errors import MissingExtra, UsageError
from ..core.records import Item as CadernoItem
from ..stores import ops as port
from ..stores.capabilities.item_vectors import best_scores

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
    )
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("langgraph", "langgraph") from None

__all__ = ["CadernoStore", "SyncCallInEventLoop"]

logger = logging.getLogger(__name__)

_TICK = timedelta(microseconds=1)
"""The smallest step the databases keep; puts get strictly increasing times."""


class SyncCallInEventLoop(UsageError, asyncio.InvalidStateError):
    """A synchronous store method was called on the event loop thread that runs the store.

    It is an ``asyncio.InvalidStateError`` too, as LangGraph's own async
    stores raise in the same case.
    """


class CadernoStore(BaseStore):
    """LangGraph's ``BaseStore`` on a ``caderno.Memory``.

    Args:
        memory: an open ``caderno.Memory`` whose store handles the ITEMS
            operations (every built-in backend does).
        resource_id: the caderno resource that holds this store's items;
            namespaces are paths inside it.
        index: LangGraph's ``IndexConfig`` to turn on semantic search;
            ``fields`` (JSON paths, default ``["$"]``, the whole value) says
            what is embedded. ``dims`` and ``embed`` are ignored: vectors come
            from ``memory.embedder``.

    Raises:
        UsageError: ``index`` was given but ``memory`` has no embedder, or
            its store does not keep item vectors (``ITEM_VECTORS``).
    """

    def __init__(self, memory: Any, *, resource_id: str = "default", index: IndexConfig | None = None) -> None:
        if index is not None and memory.embedder is None:
            raise UsageError("semantic search needs an embedder: connect caderno with one, or pass index=None")
        if index is not None and not memory.supports(*port.ITEM_VECTORS):
            raise UsageError(f"{type(memory.store).__name__} does not keep item vectors: pass index=None")
        self.memory = memory
        self.resource_id = resource_id
        self.index_config = index
        self._fields: list[tuple[str, str | list[str]]] = [
            (p, p if p == "$" else tokenize_path(p)) for p in ((index or {}).get("fields") or ["$"])
        ]
        self._last = datetime.min.replace(tzinfo=UTC)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # -- the two primitives ----------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``abatch`` on the store's event loop from another thread and wait for it.

        Raises:
            SyncCallInEventLoop: called on the loop's own thread (it would
                deadlock); use the ``a``-prefixed methods there.
            UsageError: the store has no running event loop to use.
        """
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if running is not None and (loop is None or running is loop):
            raise SyncCallInEventLoop(
                "synchronous CadernoStore call inside the event loop that runs it; "
                "use the async methods (aput, aget, asearch, alist_namespaces) there"
            )
        if loop is None or not loop.is_running():
            raise UsageError(
                "CadernoStore's event loop is not running: create the store (or make one async call) "
                "inside the loop that runs `memory`, and call the sync methods from other threads"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations: reads see the state from before the writes; writes are one transaction."""
        batch = list(ops)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        for op in batch:
            _check(op)
        queries = {op.query for op in batch if isinstance(op, SearchOp) and op.query} if self.index_config else set()
        read_only = not any(isinstance(op, PutOp) for op in batch)
        # Ranked searches of a read-only batch whose filter the database takes whole: ranked in the
        # store first, the items of the page read after (``_rank_first``); any other search reads its
        # items and their vectors in the batch.
        ranked_first: dict[int, SearchOp] = {}
        reads: list[port.Op[Any]] = []
        # batch index -> (index of its read, index of its item-vector read or None)
        slots: dict[int, tuple[int, int | None]] = {}
        for i, op in enumerate(batch):
            if isinstance(op, GetOp):
                reads.append(port.GetItem(resource_id=self.resource_id, namespace=op.namespace, key=op.key))
            elif isinstance(op, SearchOp):
                ranked = op.query in queries
                where, rest = _split_filter(op.filter or {})
                if ranked and read_only and not rest:
                    ranked_first[i] = op
                    continue
                # The database filters; it cuts the page too unless ranking or a condition it
                # cannot take (lists, whole objects, non-number comparisons) comes after.
                window = {} if ranked or rest else {"limit": op.limit, "offset": op.offset}
                reads.append(
                    port.SearchItems(resource_id=self.resource_id, prefix=op.namespace_prefix, where=where, **window)
                )
                if ranked:
                    # The same snapshot as the items: a vector read here belongs to the value read here.
                    reads.append(self._vectors_read(op, where))
                    slots[i] = (len(reads) - 2, len(reads) - 1)
                    continue
            elif isinstance(op, ListNamespacesOp):
                reads.append(port.ListItemNamespaces(resource_id=self.resource_id))
            else:
                continue
            slots[i] = (len(reads) - 1, None)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in batch:
            if isinstance(op, PutOp):
                puts.pop((op.namespace, op.key), None)
                puts[(op.namespace, op.key)] = op  # the last write to a key wins
        writes: dict[tuple[tuple[str, ...], str], port.Op[Any]] = {}
        for (namespace, key), op in puts.items():  # stamped in write order: the newest write is the latest
            if op.value is None:
                writes[(namespace, key)] = port.DeleteItem(resource_id=self.resource_id, namespace=namespace, key=key)
            else:
                now = self._tick()
                item = CadernoItem(
                    resource_id=self.resource_id,
                    namespace=namespace,
                    key=key,
                    value=dict(op.value),
                    created_at=now,
                    updated_at=now,
                )
                writes[(namespace, key)] = port.PutItem(item=item, embed=self._texts_of(op))
        # Written in key order, so two batches writing the same items take their row locks in one
        # order (PostgreSQL) and never deadlock on each other.
        ordered = [writes[k] for k in sorted(writes)]
        query_vectors = await self._embed_queries(queries)
        done = await self.memory.batch(reads + ordered) if reads or ordered else []
        if any(isinstance(w, port.PutItem) and w.embed for w in ordered):
            self.memory.indexer.notify()  # the queue is in the database: this wakes the worker

        results: list[Result] = [None] * len(batch)
        if ranked_first:
            for i, page in (await self._rank_first(ranked_first, query_vectors)).items():
                results[i] = page
        for i, (at, vectors_at) in slots.items():
            op, raw = batch[i], done[at]
            if isinstance(op, GetOp):
                results[i] = _to_item(raw) if raw is not None else None
            elif isinstance(op, SearchOp):
                stored = done[vectors_at] if vectors_at is not None else []
                results[i] = _search(op, raw, stored, query_vectors, ranked=vectors_at is not None)
            else:
                assert isinstance(op, ListNamespacesOp)
                results[i] = _list_namespaces(op, raw)
        return results

    def _texts_of(self, op: PutOp) -> tuple[str, ...]:
        """What a put queues for embedding: the texts at the index's (or the put's own) fields."""
        if not self.index_config or op.index is False or op.value is None:
            return ()
        paths = self._fields if op.index is None else [(p, p if p == "$" else tokenize_path(p)) for p in op.index]
        return tuple(_texts(dict(op.value), paths))

    # -- search and vectors -----------------------------------------------------------------

    def _vectors_read(self, op: SearchOp, where: Any) -> port.ReadItemVectors:
        """The read of the stored vectors of the items ``op`` searches that meet ``where``."""
        return port.ReadItemVectors(
            resource_id=self.resource_id, prefix=op.namespace_prefix, model=self.memory.embedder.name, where=where
        )

    async def _rank_first(
        self, searches: dict[int, SearchOp], query_vectors: dict[str, Any]
    ) -> dict[int, list[SearchItem]]:
        """Ranked searches ranked in the store (``RankItems``): only the items up to each page's end read.

        The page is the one the whole read would give, or the search is read
        whole (``_search``, one snapshot) when it might not be: an item
        changed or went while it was ranked, or fewer items are scored than
        the page's end (unscored items fill it, in recency order).
        """
        ranks: dict[int, port.RankItems] = {}
        again: list[int] = []
        for i, op in searches.items():
            qvec = query_vectors.get(op.query or "")
            if qvec is None or op.offset + op.limit == 0:
                again.append(i)
                continue
            where, _ = _split_filter(op.filter or {})
            ranks[i] = port.RankItems(
                resource_id=self.resource_id,
                prefix=op.namespace_prefix,
                model=self.memory.embedder.name,
                query=tuple(qvec.tolist()),
                k=op.offset + op.limit,
                where=where,
            )
        pages: dict[int, list[SearchItem]] = {}
        done = await self.memory.batch(list(ranks.values())) if ranks else []
        for (i, rank), hits in zip(ranks.items(), done, strict=True):
            if len(hits) < rank.k:
                again.append(i)
                continue
            pages[i] = [_to_item(it, SearchItem, score) for it, score in hits[searches[i].offset :]]
        if again:  # the whole read, in one snapshot
            reads: list[port.Op[Any]] = []
            for i in again:
                op = searches[i]
                where, _ = _split_filter(op.filter or {})
                reads.append(port.SearchItems(resource_id=self.resource_id, prefix=op.namespace_prefix, where=where))
                reads.append(self._vectors_read(op, where))
            whole = await self.memory.batch(reads)
            for n, i in enumerate(again):
                pages[i] = _search(searches[i], whole[2 * n], whole[2 * n + 1], query_vectors, ranked=True)
        return pages

    async def _embed_queries(self, queries: set[str]) -> dict[str, Any]:
        if not queries:
            return {}
        texts = sorted(queries)
        try:
            vectors = await asyncio.to_thread(self.memory.embedder.embed, texts)
        except Exception:
            # Recall's rule: a broken embedder degrades search, it does not fail it.
            logger.warning("embedding a store query failed; searching without scores", exc_info=True)
            return {}
        return {t: np.asarray(v, dtype=np.float32) for t, v in zip(texts, vectors, strict=True)}

    async def flush(self) -> None:
        """Wait until the vectors queued so far are computed (tests, scripts).

        Vectors are computed by ``memory``'s background embedding worker; this
        runs it now in this process, until nothing due is left, and waits for
        it. Items whose embedding failed stay queued for a later retry.
        """
        await self.memory.flush()

    def _tick(self) -> datetime:
        self._last = max(utcnow(), self._last + _TICK)
        return self._last


# -- LangGraph's semantics (as langgraph.store.memory, whose helpers are private) -------------


def _check(op: Any) -> None:
    if isinstance(op, (GetOp, PutOp)):
        _check_labels(op.namespace)
        if isinstance(op, PutOp) and not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
    elif isinstance(op, SearchOp):
        _check_labels(op.namespace_prefix)
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            _check_labels(tuple(p for p in condition.path if p != "*"))
    else:
        raise ValueError(f"Unknown operation type: {type(op)}")


def _check_labels(namespace: tuple[str, ...]) -> None:
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {namespace}: labels are non-empty strings without '.'"
            )


def _texts(value: dict[str, Any], paths: list[tuple[str, str | list[str]]]) -> list[str]:
    return [t for _, field in paths for t in get_text_at_path(value, field)]


Condition = tuple[tuple[str, ...], str, Any]


def _split_filter(filter: dict[str, Any]) -> tuple[tuple[Condition, ...], dict[str, Any]]:
    """LangGraph's ``filter`` as the conditions the database takes, and the rest (kept in Python)."""
    where: list[Condition] = []
    rest: dict[str, Any] = {}
    for key, wanted in filter.items():
        conditions = _conditions((key,), wanted)
        if conditions is None:
            rest[key] = wanted
        else:
            where.extend(conditions)
    return tuple(where), rest


def _conditions(path: tuple[str, ...], wanted: Any) -> list[Condition] | None:
    """``_compare``'s meaning of ``wanted`` at ``path`` as ``SearchItems`` conditions, or ``None``."""
    if isinstance(wanted, dict):
        if not wanted:
            return None  # "is an object": kept in Python
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            pairs = [(path, operator, operand) for operator, operand in wanted.items()]
            return pairs if all(port.SearchItems.takes(*c) for c in pairs) else None
        nested: list[Condition] = []
        for key, inner in wanted.items():
            more = _conditions((*path, key), inner) if isinstance(key, str) else None
            if more is None:
                return None
            nested.extend(more)
        return nested
    condition = (path, "$eq", wanted)
    return [condition] if port.SearchItems.takes(*condition) else None


def _search(
    op: SearchOp,
    raw: list[CadernoItem],
    stored: list[port.ItemVectors],
    query_vectors: dict[str, Any],
    *,
    ranked: bool,
) -> list[SearchItem]:
    """One search's page from its items (filtered by the database) and, when ``ranked``, their vectors."""
    _, rest = _split_filter(op.filter or {})
    found = [it for it in raw if all(_compare(it.value.get(k), v) for k, v in rest.items())] if rest else raw
    window = slice(op.offset, op.offset + op.limit)
    qvec = query_vectors.get(op.query) if op.query else None
    if qvec is None:
        # Without ranking or a condition left to Python, the database already cut the page.
        return [_to_item(it, SearchItem) for it in (found[window] if rest or ranked else found)]
    dim = qvec.shape[-1]
    vectors = {(v.namespace, v.key): v for v in stored}
    owners: list[CadernoItem] = []  # in recency order
    scoreless: list[CadernoItem] = []
    for it in found:
        v = vectors.get((it.namespace, it.key))
        if v is not None and v.updated_at == it.updated_at and v.vectors and v.dim == dim:
            owners.append(it)
        else:
            scoreless.append(it)
    kept: list[SearchItem] = []
    if owners:
        # The scores ``RankItems`` gives (``best_scores``): a ranked page is a slice of this ranking.
        best = best_scores([vectors[(it.namespace, it.key)].vectors for it in owners], qvec)
        order = np.argsort(-best, kind="stable")[window]  # ties keep recency order
        kept = [_to_item(owners[i], SearchItem, float(best[i])) for i in order.tolist()]
    # As InMemoryStore: items without a vector fill the page after the scored ones.
    if scoreless and len(kept) < op.limit:
        kept.extend(_to_item(it, SearchItem) for it in scoreless[: op.limit - len(kept)])
    return kept


def _to_item(it: CadernoItem, cls: type[Any] = Item, score: float | None = None) -> Any:
    fields: dict[str, Any] = {
        "namespace": it.namespace,
        "key": it.key,
        "value": it.value,
        "created_at": it.created_at,
        "updated_at": it.updated_at,
    }
    if cls is SearchItem:
        fields["score"] = score
    return cls(**fields)


def _list_namespaces(op: ListNamespacesOp, namespaces: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    if op.match_conditions:
        namespaces = [ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions)]
    depth = op.max_depth
    namespaces = sorted(namespaces) if depth is None else sorted({ns[:depth] for ns in namespaces})
    return namespaces[op.offset : op.offset + op.limit]


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def _compare(item_value: Any, filter_value: Any) -> bool:
    """JSONB-like comparison: nested dicts, lists, and ``$``-operators."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_apply(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(_compare(i, f) for i, f in zip(item_value, filter_value, strict=False))
        )
    return bool(item_value == filter_value)


def _apply(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator}")
