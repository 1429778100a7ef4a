"""``Memory.get_context``: aidaemon's three-part context (recent, salient, relevant), kept apart.

aidaemon (davo20019/aidaemon, the agent caderno's contract grew from; commit 620a136 "Implement
Tri-Hybrid Memory Architecture", ``src/state/sqlite.rs``, ``get_context``;
the same through v0.6.0, d634ffa) builds an agent's context from three
parts, deduplicated by message id in this order:

1. **recency** — ``get_history(session_id, 10)``: the session's last 10
   messages, whatever their role (user, assistant, tool calls, tool
   results, system);
2. **salience** — ``WHERE session_id = ? AND importance >= 0.8 ORDER BY
   created_at DESC LIMIT 5`` (taken before the dedup, so fewer than 5 may
   remain);
3. **relevance** — cosine similarity > 0.65 to the query over the session's
   newest 2,000 embedded messages (``WHERE session_id = ?``), best 5 not
   already taken;

and returns them as one list sorted by ``created_at``. All three parts are
scoped to the session (a comment there: "to prevent bleeding context from
other sessions"). The newest version (v0.9.31, 39a1955,
``src/state/sqlite/messages.rs``) dropped salience and relevance
altogether: ``get_context`` is ``get_history(session_id, limit)``, the
session's last ``limit`` messages of every role (``truncate_with_anchor``
keeps the slice's first user message), and the prompt builder
(``src/agent/loop/loop_utils.rs``, ``fixup_message_ordering``) drops a tool
result whose call is not in the window.

caderno keeps the names and the limits, with these differences, each chosen:

* **recent** is the thread's last ``recent`` messages of every role, as the
  reference's, read straight from the store (``ops.ReadThread``), not
  through recall's recent leg (which keeps only user messages and final
  assistant replies: what ``recall`` fuses). One exception: a window that
  begins with tool results whose call lies before it starts after them
  (``_from_unit_start``). A prompt builder never sends a tool result
  without its call (``caderno.memory.engines.context.history_units`` drops it, as
  aidaemon's ``fixup_message_ordering`` does), so such a result would
  only take room; reaching back for its call instead would take the call
  and all its results, more than the ``recent`` the caller asked for. So
  the part may hold fewer than ``recent`` messages, never more, and never
  starts with a tool result.
* **salient** and **relevant** are built on the same recall as
  ``Memory.recall`` (one leg switched on at a time, so each part is exactly
  what that leg finds) and filled up to their limits with messages not
  already in an earlier part (each leg is asked for as many more as the
  earlier parts may hold);
* they look in the whole resource by default, not only the thread (the
  reference's session): ``GET_CONTEXT_SCOPE``, measured (see there);
  ``scope="thread"`` gives aidaemon's;
* the parts stay apart (``ContextParts.recent`` / ``.salient`` /
  ``.relevant``), each a list of ``Recalled`` (thread, why, scores), and
  ``ContextParts.messages`` is aidaemon's single list;
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

from ...core.messages import Message
from ...stores import ops
from ...stores.base import Runner
from .recall import MAX_LEG_LIMIT, Recalled, _conversation_order

__all__ = ["GET_CONTEXT_MIN_SIMILARITY", "GET_CONTEXT_SCOPE", "ContextParts", "gather_context"]

#: Cosine floor of ``get_context``'s relevant part. The part keeps the 5 most
#: similar anyway, so a floor only matters when fewer than 5 clear it; it
#: should drop unrelated text (~0.0) and nothing that answers.
#: bench/get_context.py, relevant@5 at 0.65 (aidaemon's) / 0.25
#: (recall's ``DEFAULT_MIN_SIMILARITY``) / 0.15: LoCoMo 0-4 (759 questions,
#: turn evidence) 0.131 / 0.441 / 0.441; bench/data en tuning half 0.034 /
#: 0.727 / 0.739 (held out 0.030 / 0.636 / 0.657); pt tuning 0.194 / 0.389 /
#: 0.389. 0.0 adds nothing over 0.15 on any of them.
GET_CONTEXT_MIN_SIMILARITY = 0.15

#: Where ``get_context``'s salient and relevant parts look by default:
#: "resource" (every thread of the resource) or "thread" (the current one:
#: aidaemon's session; the recent part is the thread's either way).
#: bench/get_context.py --scope both, relevant@5 / whole context, resource
#: against thread: LoCoMo dev tuning 0.425 / 0.442 against 0.012 / 0.018,
#: check 0.457 / 0.487 against 0.006 / 0.025 (asked from the last session);
#: LongMemEval_S dev tuning 0.614 / 0.638 against 0 / 0, check 0.585 /
#: 0.591 against 0 / 0 (asked from a new thread, its protocol), and asked
#: from the latest earlier session tuning 0.602 / 0.680 against 0.027 /
#: 0.080, check 0.562 / 0.601 against 0.028 / 0.061; bench/data en tuning
#: 0.761 / 0.966 against 0.000 / 0.182 (held out 0.646 / 0.949 against
#: 0.000 / 0.283), pt tuning 0.389 / 0.611 against 0.042 / 0.236 (held out
#: 0.349 / 0.508 against 0.079 / 0.222). What a question needs is mostly in
#: an earlier conversation, which the thread scope cannot see.
GET_CONTEXT_SCOPE = "resource"


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextParts:
    """What ``Memory.get_context`` found: three parts, no message in two of them.

    Each part is in conversation order (thread by thread, then by
    sequence), as ``recall`` returns; ``Recalled.score`` keeps each hit's
    rank within its part (higher is better).
    """

    recent: list[Recalled]
    """The thread's last messages of every role (tool calls and results too), never starting with a tool result."""
    salient: list[Recalled]
    """Messages with importance >= 0.8 (``caderno.memory.engines.importance.SALIENT``), the newest first chosen, not in ``recent``."""
    relevant: list[Recalled]
    """The messages most similar to the query, at or above the floor, not in ``recent`` or ``salient``."""

    @property
    def messages(self) -> list[Recalled]:
        """All three parts as one list in conversation order: aidaemon's single return value."""
        return _conversation_order([*self.recent, *self.salient, *self.relevant])


Recall = Callable[..., Awaitable[list[Recalled]]]


async def gather_context(
    recall: Recall,
    read: Runner,
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
    """Read the thread's window through ``read`` (``Memory.run``) and the two other legs through ``recall``
    (``Memory.recall``), concurrently, then deduplicate them in that order.

    Each later leg is asked for as many more hits as the earlier parts may
    hold, so that after removing those it still has its own limit's worth.
    """
    off = {"recent": 0, "salient": 0, "relevant": 0, "lexical": 0}
    common: dict[str, Any] = {"resource_id": resource_id, "query": query, "thread_id": thread_id, "scope": scope}
    common["now"] = now

    async def window() -> list[Recalled]:
        if not recent:
            return []
        found = await read(ops.ReadThread(resource_id=resource_id, thread_id=thread_id, limit=recent))
        kept = _from_unit_start(found)
        # The newest scores highest: Recalled.score is a rank within the part, higher is better.
        return [
            Recalled(
                message=m,
                thread_id=thread_id,
                reasons=frozenset({"recent"}),
                score=1.0 / (len(kept) - i),
                scores={"recent": 1.0},
            )
            for i, m in enumerate(kept)
        ]

    async def leg(name: str, limit: int, extra: int, **more: Any) -> list[Recalled]:
        if not limit:
            return []
        return await recall(**common, **{**off, name: min(limit + extra, MAX_LEG_LIMIT)}, **more)

    got_recent, got_salient, got_relevant = await asyncio.gather(
        window(),
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


def _from_unit_start(window: list[Message]) -> list[Message]:
    """``window`` from its first message that is not a tool result: those before it answer a call outside the window."""
    start = next((i for i, m in enumerate(window) if m.role != "tool"), len(window))
    return window[start:]


def _rank(hit: Recalled) -> tuple[float, int]:
    """Best first within one leg: recall's fused score, the newer message first on a tie."""
    return (-hit.score, -(hit.message.seq or 0))
