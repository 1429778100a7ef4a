"""Facts (``memory.facts``): durable ``category/key: value`` statements about a resource.

A fact is upserted on (resource, category, key); the value it replaces
goes to the fact's history. Facts come from the agent's ``remember_fact``
tool, from people (CLI, HTTP) and from consolidation, all through
``fact_op`` so the rules are one. A turn's prompt carries a few of them,
chosen by ``Facts.rank``: the newest, then the closest to the question.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections import OrderedDict
from typing import Any

from ...core.clock import utcnow
from ...core.errors import NotFound
from ...core.records import Fact
from ...core.validate import check_fact, check_id, check_name
from ...stores import ops
from ...stores.base import Runner
from ..engines.indexer import Indexer

__all__ = ["FACT_VECTOR_CACHE", "Facts", "fact_op"]

log = logging.getLogger("caderno.memory")

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


class Facts:
    """The facts of every resource (``memory.facts``).

    Args:
        run: the memory's runner (one operation, one transaction).
        indexer: the embedding worker; its embedder ranks facts by
            closeness to a question (when it has one and it loaded).
    """

    def __init__(self, run: Runner, indexer: Indexer) -> None:
        self._run = run
        self._indexer = indexer
        self._vectors: OrderedDict[str, Any] = OrderedDict()

    async def remember(self, *, resource_id: str, category: str, key: str, value: str, source: str = "agent") -> Fact:
        """Upsert a fact on (resource, category, key); the previous value goes to its history."""
        return await self._run(fact_op(resource_id, category, key, value, source))

    async def list(self, *, resource_id: str, category: str | None = None) -> builtins.list[Fact]:
        """The resource's facts, most recently updated first."""
        check_id(resource_id, "resource_id")
        if category is not None:
            check_id(category, "fact category")
        return await self._run(ops.ReadFacts(resource_id=resource_id, category=category.lower() if category else None))

    async def history(self, *, resource_id: str, category: str, key: str) -> builtins.list[dict[str, Any]]:
        """Earlier values of one fact, oldest first."""
        check_id(resource_id, "resource_id")
        check_id(category, "fact category")
        check_id(key, "fact key")
        return await self._run(ops.ReadFactHistory(resource_id=resource_id, category=category.lower(), key=key))

    async def forget(self, *, resource_id: str, category: str, key: str) -> None:
        """Delete a fact (its history stays).

        Raises:
            NotFound: the resource has no such fact.
        """
        check_id(resource_id, "resource_id")
        check_id(category, "fact category")
        check_id(key, "fact key")
        if not await self._run(ops.ForgetFact(resource_id=resource_id, category=category.lower(), key=key)):
            raise NotFound(f"resource {resource_id!r} has no fact {category}/{key}", resource_id=resource_id)

    async def relevant(self, *, resource_id: str, query: str, limit: int = 8, recent: int = 3) -> builtins.list[Fact]:
        """Facts for a turn: the closest to ``query`` by embedding, plus the most recent."""
        return await self.rank(await self.list(resource_id=resource_id), query, limit=limit, recent=recent)

    async def rank(
        self, facts: builtins.list[Fact], query: str, *, limit: int = 8, recent: int = 3
    ) -> builtins.list[Fact]:
        """The ``recent`` newest facts, then the rest by closeness to ``query``, cut to ``limit``."""
        if len(facts) <= limit:
            return facts
        chosen = facts[:recent]
        if self._indexer.active and query.strip():
            texts = [f"{f.category} {f.key}: {f.value}" for f in facts]
            try:
                vectors = await self._vectors_for(texts)
                (q,) = await asyncio.to_thread(self._indexer.embedder.embed, [query])
                ranked = sorted(range(len(facts)), key=lambda i: -float(vectors[i] @ q))
                chosen += [facts[i] for i in ranked if facts[i] not in chosen]
            except Exception as exc:  # noqa: BLE001 - facts still come, by recency
                log.warning("fact ranking by embedding failed: %s", exc)
        chosen += [f for f in facts if f not in chosen]
        return chosen[:limit]

    async def _vectors_for(self, texts: builtins.list[str]) -> builtins.list[Any]:
        cache = self._vectors
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, await asyncio.to_thread(self._indexer.embedder.embed, missing), strict=True):
                cache[t] = v
        vectors = []
        for t in texts:
            cache.move_to_end(t)
            vectors.append(cache[t])
        while len(cache) > FACT_VECTOR_CACHE:
            cache.popitem(last=False)
        return vectors
