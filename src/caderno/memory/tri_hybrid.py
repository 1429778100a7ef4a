"""``Memory.get_context``: the seed's tri-hybrid context (recent, salient, relevant), kept apart.

The reference agent (davo20019/aidaemon, commit 620a136 "Implement
Tri-Hybrid Memory Architecture", ``src/state/sqlite.rs``, ``get_context``)
builds an agent's context from three parts of one session, deduplicated by
message id in this order:

1. **recency** — the session's last 10 messages;
2. **salience** — messages with importance >= 0.8, newest first, ``LIMIT 5``
   (taken before the dedup, so fewer than 5 may remain);
3. **relevance** — cosine similarity > 0.65 to the query over the newest
   2,000 embedded messages, best 5 not already taken;

and returns them as one list sorted by ``created_at``.

caderno keeps the names and the limits and builds each part on the same
recall as ``Memory.recall`` (one leg switched on at a time, so each part is
exactly what that leg finds), with three differences, each chosen:

* the parts stay apart (``ContextParts.recent`` / ``.salient`` /
  ``.relevant``), each a list of ``Recalled`` (thread, why, scores), and
  ``ContextParts.messages`` is the reference's single list;
* salient and relevant are filled up to their limits with messages not
  already in an earlier part (each leg is asked for as many more as the
  earlier parts hold);
* the similarity floor is ``GET_CONTEXT_MIN_SIMILARITY``, measured, not
  0.65 (see there).

How it differs from ``recall``: ``recall`` fuses every leg (the lexical one
included) into one ranked list and keeps the best; ``get_context`` returns
the three parts whole, without the lexical leg, so the recent exchange and
the salient messages are there whatever the query finds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .recall import MAX_LEG_LIMIT, Recalled, _conversation_order

__all__ = ["GET_CONTEXT_MIN_SIMILARITY", "ContextParts", "gather_context"]

#: Cosine floor of ``get_context``'s relevant part. The part keeps the 5 most
#: similar anyway, so a floor only matters when fewer than 5 clear it; it
#: should drop unrelated text (~0.0) and nothing that answers.
#: bench/get_context.py, relevant@5 at 0.65 (the reference's) / 0.25
#: (recall's ``DEFAULT_MIN_SIMILARITY``) / 0.15: LoCoMo 0-4 (759 questions,
#: turn evidence) 0.131 / 0.441 / 0.441; bench/data en tuning half 0.034 /
#: 0.727 / 0.739 (held out 0.030 / 0.636 / 0.657); pt tuning 0.194 / 0.389 /
#: 0.389. 0.0 adds nothing over 0.15 on any of them.
GET_CONTEXT_MIN_SIMILARITY = 0.15


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextParts:
    """What ``Memory.get_context`` found: three parts, no message in two of them.

    Each part is in conversation order (thread by thread, then by
    sequence), as ``recall`` returns; ``Recalled.score`` keeps each hit's
    rank within its part (higher is better).
    """

    recent: list[Recalled]
    """The thread's last user messages and final assistant replies (recall's recent leg)."""
    salient: list[Recalled]
    """Messages with importance >= 0.8 (``caderno.memory.importance.SALIENT``), the newest first chosen, not in ``recent``."""
    relevant: list[Recalled]
    """The messages most similar to the query, at or above the floor, not in ``recent`` or ``salient``."""

    @property
    def messages(self) -> list[Recalled]:
        """All three parts as one list in conversation order: the reference's single return value."""
        return _conversation_order([*self.recent, *self.salient, *self.relevant])


Recall = Callable[..., Awaitable[list[Recalled]]]


async def gather_context(
    recall: Recall,
    *,
    resource_id: str,
    thread_id: str,
    query: str,
    scope: str,
    recent: int,
    salient: int,
    relevant: int,
    min_similarity: float,
    now: datetime | None,
) -> ContextParts:
    """Run the three legs through ``recall`` (``Memory.recall``) concurrently and deduplicate them.

    Each later leg is asked for as many more hits as the earlier parts may
    hold, so that after removing those it still has its own limit's worth.
    """
    off = {"recent": 0, "salient": 0, "relevant": 0, "lexical": 0}
    common: dict[str, Any] = {"resource_id": resource_id, "query": query, "thread_id": thread_id, "scope": scope}
    common["now"] = now

    async def leg(name: str, limit: int, extra: int, **more: Any) -> list[Recalled]:
        if not limit:
            return []
        return await recall(**common, **{**off, name: min(limit + extra, MAX_LEG_LIMIT)}, **more)

    got_recent, got_salient, got_relevant = await asyncio.gather(
        leg("recent", recent, 0),
        leg("salient", salient, recent),
        leg("relevant", relevant, recent + salient, min_similarity=min_similarity),
    )
    seen: set[str] = set()
    parts = []
    for hits, limit in ((got_recent, recent), (got_salient, salient), (got_relevant, relevant)):
        best = [h for h in sorted(hits, key=_rank) if h.message.id not in seen][:limit]
        seen.update(h.message.id or "" for h in best)
        parts.append(_conversation_order(best))
    return ContextParts(recent=parts[0], salient=parts[1], relevant=parts[2])


def _rank(hit: Recalled) -> tuple[float, int]:
    """Best first within one leg: recall's fused score, the newer message first on a tie."""
    return (-hit.score, -(hit.message.seq or 0))
