"""``recall``: search every earlier conversation of the user, by meaning and by words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import InvalidToolArguments
from ..memory.engines.recall import Recalled
from ..memory.facade import Memory
from ..stores import ops
from .base import Scope, ToolDef, done

__all__ = ["RECALL", "RECALL_TOP", "thread_titles"]

#: Hits a call returns unless it asks for more: a handful of messages, each
#: whole, is what a model reads before answering; more crowds its context.
RECALL_TOP = 8
#: The most a call may ask for.
MAX_RECALL_TOP = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Query:
    """A ``recall`` call."""

    query: str
    top: int
    thread_id: str | None

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise InvalidToolArguments("'query' is empty; say in a few words what to look for", tool="recall")


async def thread_titles(memory: Memory, resource_id: str, hits: Sequence[Recalled]) -> dict[str, str | None]:
    """The titles of the threads ``hits`` come from (``None``: untitled): those threads alone, in one batch."""
    wanted = list(dict.fromkeys(h.thread_id for h in hits))
    if not wanted:
        return {}
    found = await memory.batch([ops.GetThread(resource_id=resource_id, thread_id=tid) for tid in wanted])
    return {t.id: t.title for t in found if t is not None}


async def _recall(scope: Scope, request: Query) -> dict[str, Any]:
    memory = scope.full
    # The recent leg is off: it would hand back the conversation the model is in.
    hits = await memory.recall(
        resource_id=scope.resource_id,
        query=request.query,
        thread_id=request.thread_id,
        scope="thread" if request.thread_id is not None else "resource",
        recent=0,
        top=request.top,
    )
    titles = await thread_titles(memory, scope.resource_id, hits)
    return done(
        hits=[
            {
                "thread_id": h.thread_id,
                "title": titles.get(h.thread_id),
                "position": h.message.position,
                "date": f"{h.message.created_at:%Y-%m-%d}" if h.message.created_at else None,
                "role": h.message.role,
                "content": h.message.content,
                "found_by": sorted(h.reasons),
            }
            for h in hits
        ]
    )


RECALL: ToolDef[Query] = ToolDef(
    name="recall",
    description=(
        "Search everything said in earlier conversations with this user (all threads), by meaning and by "
        "words. Use it before answering anything that may have come up before ('what did I say about…', "
        "names, plans, preferences) and is not in this conversation. Returns the messages found, in "
        "conversation order, each with its thread, date and why it was found."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in a few words: a topic, a name, a phrase."},
            "top": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RECALL_TOP,
                "default": RECALL_TOP,
                "description": "Keep only the best N messages found.",
            },
            "thread_id": {
                "type": "string",
                "description": "Search only this conversation (a thread_id from an earlier hit); omit to search all.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    request=Query,
    handler=_recall,
    result=("hits",),
    effect="read",
    offered=frozenset({"agent", "mcp", "openai-agents"}),
)
