"""The memory proxy: ``POST /v1/chat/completions`` in front of the configured model.

An application built on any OpenAI chat-completions client gets durable
memory by pointing its ``base_url`` at ``caderno serve`` and using a caderno
key as its API key. Each request is one ``AgentChat`` turn: caderno injects
working memory, facts, summaries, the resource's notebook
(in the database, as the REST API) and what recall finds in
earlier conversations, runs its own tools (``update_working_memory``,
``recall``, ``remember_fact``, ``memory``, ``schedule``)
server-side, stores the turn in one transaction, and answers with a normal
``chat.completion`` (or server-sent ``chat.completion.chunk`` events when the
client asks for ``stream``).

Who and which conversation:

- **Resource**: the key's own, when it is scoped to exactly one resource.
  A key for several resources (or an admin key) names one with the header
  ``X-Caderno-Resource``; a named resource is always checked against the key
  (a resource the key may not reach is the same 404 as a missing one).
- **Thread**: the header ``X-Caderno-Thread``, else the request's ``user``
  field; neither is a 400 that says how to name it. A thread is created by
  its first turn.

What is stored: clients resend the whole conversation on every call, while
caderno keeps it already. The turn's new messages are the **user and tool
messages after the last assistant message** of the request; everything
before it is taken to be stored history and is not stored again (the
prompt's history comes from caderno, so edits a client makes to earlier
messages are not seen). System (and ``developer``) messages are not stored:
joined, they are the turn's instructions, in place of caderno's default ones.

Client tools: the request's ``tools`` are offered to the model beside
caderno's memory tools (a name caderno's tools use is a 400). A call of
caderno's tool runs on the server, as always; a call of the client's ends
the request with a normal ``tool_calls`` answer (``finish_reason:
"tool_calls"``, only the client's calls in it). The client runs them and
sends the conversation again with their ``tool`` results: the turn goes on.
The thread holds the turn once, in order (user, the model's calls, their
results, the answer), however many requests it took: each request stores
its own steps. A turn the client abandons after a tool call stays stored up
to that step; the next turn's prompt leaves out the step whose calls never
got results.

Streaming (``stream: true``): the upstream is asked to stream and its text
and the client's tool calls reach the client as they arrive; caderno's own
tool calls are run between model steps and are not shown. The turn is
stored once, at its end (its last chunk carries the usage when
``stream_options.include_usage`` is set). An error after the first chunk
arrives as an ``error`` event (nothing is stored); one before it is a normal
problem response.

Bounds (checked before the model is called): the messages' text and the
tool declarations together at most ``MAX_REQUEST_CHARS`` characters, the
instructions at most ``MAX_INSTRUCTIONS_CHARS`` (each a 413 problem), at
most ``MAX_CLIENT_TOOLS`` tools.

Retries: a request with the header ``Idempotency-Key`` is stored once. A
retry with the same key (same resource and thread) answers the stored turn
without calling the model; with other messages it is a 422; see
``caderno.memory.engines.idempotency`` for how long a key holds. The OpenAI SDKs
retry without a key unless given one (``extra_headers={"Idempotency-Key":
...}`` is kept across a call's retries); a request they mark as a retry
(``x-stainless-retry-count`` above 0) is answered with the thread's newest
turn when that turn began with the same messages, is recent
(``RETRY_WINDOW``) and follows the last reply of the conversation the
request resends (a retry of a try that stored nothing is never answered
with an earlier turn in the same words); tool results the thread already
holds are answered with what followed them. A turn whose client disconnects before the answer
is **not cancelled**: it runs to its end and is stored once (the turn is one
transaction), so the client's retry gets it.

One turn may take at most ``AgentChat``'s ``TURN_TIMEOUT`` (a 502
``model-error`` after it, nothing stored).

What the model sends is never the client's fault: tool arguments caderno
cannot store are kept as text and the turn is answered and stored; a reply
it cannot keep at all (a tool call without a usable id or name, one the
model adapter cannot read) is a 502 ``model-error``, never a 400. The
memory tools answer the model in the catalog's one shape
(``caderno.tools``), as they do through AgentChat, MCP and the Agents SDK.

Model settings: ``temperature``, ``top_p``, ``max_tokens``,
``max_completion_tokens``, ``stop``, ``seed``, the penalties and
``response_format`` (``caderno.agent.models.SETTINGS``) are checked (a 400
for a value the API would refuse) and go with every model call of the turn.

Not supported (each a clear 400): ``n`` other than 1, content parts other
than text, tools other than functions. ``tool_choice``,
``parallel_tool_calls``, the other fields and the request's ``model`` are
ignored: the model is the one configured for the server, and it decides
which tools to call (a choice forced on every step of a turn would keep it
from answering).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from ..agent.models import SETTINGS, Delta, check_settings, wire_call
from ..core.clock import new_id
from ..core.errors import KeyReused, UsageError
from ..core.messages import Message, ToolSpec
from ..core.validate import check_id
from .auth import CurrentKey
from .proxy_turn import (
    MAX_CLIENT_TOOLS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_REQUEST_CHARS,
    RESOURCE_HEADER,
    THREAD_HEADER,
    ClientReadableErrors,
    ProxyTurn,
    check_instructions,
    check_size,
    client_tool,
    content_text,
    key_reused,
    no_model,
    resource_for,
    sse,
    stream_error,
    usage_of,
)
from .responses import router as responses_router

if TYPE_CHECKING:
    from ..agent.chat import ChatResult

__all__ = [
    "MAX_CLIENT_TOOLS",
    "MAX_INSTRUCTIONS_CHARS",
    "MAX_REQUEST_CHARS",
    "RESOURCE_HEADER",
    "THREAD_HEADER",
    "install_proxy",
]

_INSTRUCTION_ROLES = ("system", "developer")

router = APIRouter(route_class=ClientReadableErrors)


class ChatCompletionRequest(BaseModel):
    """The fields of an OpenAI chat-completions request the proxy reads; others are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]]
    """The conversation as the client holds it (see the module docstring for what is stored)."""
    model: str | None = None
    """Ignored: the server's configured model answers."""
    stream: bool = False
    """Answer as server-sent ``chat.completion.chunk`` events, as the upstream produces them."""
    stream_options: dict[str, Any] | None = None
    """``{"include_usage": true}`` adds a last chunk with the turn's usage."""
    user: str | None = None
    """The thread, when the header ``X-Caderno-Thread`` is absent."""
    tools: list[dict[str, Any]] | None = None
    """The client's function tools: offered to the model, run by the client."""
    n: int | None = None
    """Only 1."""


def install_proxy(app: FastAPI) -> None:
    """Add the proxy's routes, chat completions and the Responses API, to ``app`` (``create_app(routers=[...])``)."""
    app.state.proxy_chat = None
    app.state.proxy_turns = set()
    app.include_router(router)
    app.include_router(responses_router)


@router.post("/v1/chat/completions", tags=["proxy"], summary="OpenAI-compatible chat completion with memory")
async def chat_completions(body: ChatCompletionRequest, request: Request, key: CurrentKey) -> Response:
    """One step of the conversation the request names, answered as a ``chat.completion``."""
    model = request.app.state.model
    if model is None:
        return no_model()
    resource_id = resource_for(key, request.headers.get(RESOURCE_HEADER))
    thread_id = request.headers.get(THREAD_HEADER) or body.user
    if not thread_id:
        raise UsageError(
            f"name the conversation: send the header {THREAD_HEADER}: <thread id> (or the request's `user` field)"
        )
    check_id(thread_id, "thread id")
    if body.n not in (None, 1):
        raise UsageError("the proxy answers with one choice: n must be 1")
    tools = [_chat_tool(t, i) for i, t in enumerate(body.tools or [])]
    too_large = check_size(_texts(body.messages), tools)
    if too_large is not None:
        return too_large
    instructions, new = split_messages(body.messages)
    too_long = check_instructions(instructions)
    if too_long is not None:
        return too_long
    turn = ProxyTurn.start(
        request,
        model,
        messages=new,
        resource_id=resource_id,
        thread_id=thread_id,
        instructions=instructions,
        client_tools=tools,
        stream=body.stream,
        settings=check_settings({k: v for k, v in (body.model_extra or {}).items() if k in SETTINGS}),
        seen=_last_reply_text(body.messages),
    )
    name = str(getattr(model, "model", None) or body.model or "caderno")
    try:
        if not body.stream:
            return JSONResponse(completion_object(await turn.result(), name))
        first = await turn.first_pieces()
    except KeyReused as exc:
        return key_reused(exc)
    include_usage = bool((body.stream_options or {}).get("include_usage"))
    return StreamingResponse(_chunks(turn, first, name, include_usage), media_type="text/event-stream")


def _texts(messages: list[dict[str, Any]]) -> int:
    """Characters of the messages' text (counted before anything is built)."""
    total = 0
    for m in messages:
        content = m.get("content")
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            total += len(text) if isinstance(text, str) else 0
    return total


def _chat_tool(tool: Any, index: int) -> ToolSpec:
    """A chat-completions tool declaration (``{"type": "function", "function": {...}}``)."""
    where = f"tools[{index}]"
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise UsageError(f"{where}: the proxy passes function tools only, not {kind!r}")
    fn = tool["function"]
    return client_tool(fn.get("name"), fn.get("description"), fn.get("parameters"), where)


def _last_reply_text(messages: list[dict[str, Any]]) -> str | None:
    """The text of the last assistant message the client resent (``None``: it resent none)."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            content = m.get("content")
            if isinstance(content, list):
                return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
            return content if isinstance(content, str) else ""
    return None


def split_messages(messages: list[dict[str, Any]]) -> tuple[str | None, list[Message]]:
    """The request's instructions (its system messages, joined) and the turn's new messages.

    The new messages are the user and tool messages after the last assistant
    message: what came before is the stored history the client resends.

    Raises:
        UsageError: nothing new to answer, an unknown role, or non-text content.
    """
    system: list[str] = []
    last_assistant = -1
    for i, m in enumerate(messages):
        role = m.get("role")
        if role in _INSTRUCTION_ROLES:
            system.append(_text(m.get("content"), i))
        elif role == "assistant":
            last_assistant = i
        elif role not in ("user", "tool"):
            raise UsageError(f"messages[{i}]: unknown role {role!r}")
    new: list[Message] = []
    for i, m in enumerate(messages[last_assistant + 1 :], start=last_assistant + 1):
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise UsageError(f"messages[{i}]: a tool message needs the tool_call_id of the call it answers")
            new.append(Message.tool(_text(m.get("content"), i), tool_call_id=check_id(call_id, "tool_call_id")))
        elif role == "user":
            name = m.get("name")
            new.append(Message.user(_text(m.get("content"), i), name=name if isinstance(name, str) else None))
    if not new:
        raise UsageError("no new user message or tool result after the last assistant message: nothing to answer")
    instructions = "\n\n".join(s for s in system if s) or None
    return instructions, new


def _text(content: Any, index: int) -> str:
    """A message's text: a string, or the text parts of a content array."""
    return content_text(content, f"messages[{index}]", ("text",))


def completion_object(result: ChatResult, model: str) -> dict[str, Any]:
    """The turn's answer (or the client's calls it stopped at) as an OpenAI ``chat.completion`` object."""
    reply = result.reply
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if result.pending:
        message["content"] = reply.content or None
        message["tool_calls"] = [wire_call(c) for c in result.pending]
    return {
        "id": f"chatcmpl-{reply.id}",
        "object": "chat.completion",
        "created": int(reply.created_at.timestamp()) if reply.created_at else 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if result.pending else "stop",
                "logprobs": None,
            }
        ],
        "usage": usage_of(reply),
    }


async def _chunks(turn: ProxyTurn, first: list[Delta], model: str, include_usage: bool) -> AsyncIterator[str]:
    """The turn as ``chat.completion.chunk`` events as the model produces them, then ``[DONE]``."""
    base = {
        "id": f"chatcmpl-{new_id()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for piece in turn.pieces(first):
            yield chunk(_chunk_delta(piece))
        result = await turn.result()
    except Exception as exc:  # after the first chunk the status is sent: the error is an event
        yield sse({"error": stream_error(exc)})
        yield "data: [DONE]\n\n"
        return
    yield chunk({}, "tool_calls" if result.pending else "stop")
    if include_usage:
        yield sse(base | {"choices": [], "usage": usage_of(result.reply)})
    yield "data: [DONE]\n\n"


def _chunk_delta(piece: Delta) -> dict[str, Any]:
    """One piece as a chunk's ``delta``."""
    if piece.call_index is None:
        return {"content": piece.content}
    call: dict[str, Any] = {"index": piece.call_index, "function": {"arguments": piece.arguments}}
    if piece.call_id is not None:
        call["id"] = piece.call_id
        call["type"] = "function"
    if piece.call_name is not None:
        call["function"]["name"] = piece.call_name
    return {"tool_calls": [call]}
