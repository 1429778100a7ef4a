"""``list_threads`` and ``get_messages``: the user's conversations, for a client that holds none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.clock import to_iso
from .base import NoArguments, Scope, ToolDef, done

__all__ = ["DEFAULT_MESSAGE_LIMIT", "GET_MESSAGES", "LIST_THREADS"]

#: Messages ``get_messages`` returns when the model asks for no limit: enough
#: for a thread's recent turns, small enough for a model's context window.
DEFAULT_MESSAGE_LIMIT = 50
#: The most one ``get_messages`` call may ask for.
MAX_MESSAGE_LIMIT = 500

_WHY = (
    "AgentChat and the Agents SDK session put the conversation in the prompt, and recall reaches the "
    "others; an MCP client holds none of caderno's history."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Page:
    """A ``get_messages`` call."""

    thread_id: str
    limit: int
    before: int | None


async def _list(scope: Scope, request: NoArguments) -> dict[str, Any]:
    threads = await scope.full.list_threads(resource_id=scope.resource_id)
    return done(
        threads=[
            {
                "id": t.id,
                "title": t.title,
                "message_count": t.message_count,
                "created_at": to_iso(t.created_at) if t.created_at else None,
                "updated_at": to_iso(t.updated_at) if t.updated_at else None,
            }
            for t in threads
        ]
    )


async def _page(scope: Scope, request: Page) -> dict[str, Any]:
    messages = await scope.full.get_messages(
        resource_id=scope.resource_id, thread_id=request.thread_id, limit=request.limit, before=request.before
    )
    return done(messages=[m.to_dict() for m in messages])


LIST_THREADS: ToolDef[NoArguments] = ToolDef(
    name="list_threads",
    description="List the user's conversations (threads): id, title, message count, first and last activity.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    request=NoArguments,
    handler=_list,
    result=("threads",),
    effect="read",
    offered=frozenset({"mcp"}),
    why=_WHY,
)

GET_MESSAGES: ToolDef[Page] = ToolDef(
    name="get_messages",
    description=(
        "Read a conversation's messages, oldest first (the newest `limit` of them). A thread that does not "
        "exist reads as no messages."
    ),
    parameters={
        "type": "object",
        "properties": {
            "thread_id": {"type": "string", "description": "The conversation, as list_threads names it."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MESSAGE_LIMIT,
                "default": DEFAULT_MESSAGE_LIMIT,
                "description": "Keep only the newest N messages.",
            },
            "before": {
                "type": "integer",
                "description": "Page backwards: only messages before this position in the thread.",
            },
        },
        "required": ["thread_id"],
        "additionalProperties": False,
    },
    request=Page,
    handler=_page,
    result=("messages",),
    effect="read",
    offered=frozenset({"mcp"}),
    why=_WHY,
)
