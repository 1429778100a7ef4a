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
caderno keeps it already. The turn's new messages are the **user messages
after the last assistant message** of the request; everything before it is
taken to be stored history and is not stored again (the prompt's history
comes from caderno, so edits a client makes to earlier messages are not
seen). System (and ``developer``) messages are not stored: joined, they are
the turn's instructions, in place of caderno's default ones.

Bounds (checked before the model is called): the messages' text together
at most ``MAX_REQUEST_CHARS`` characters and the instructions at most
``MAX_INSTRUCTIONS_CHARS`` (each a 413 problem).

Retries: a request with the header ``Idempotency-Key`` is stored once. A
retry with the same key (same resource and thread) answers the stored turn
without calling the model; with other messages it is a 422; see
``caderno.agent.idempotency`` for how long a key holds. A turn whose client
disconnects before the answer is **not cancelled**: it runs to its end and is
stored once (the turn is one transaction), so the client's retry with the
same key gets it. Without a key, a retry is a new turn.

One turn may take at most ``AgentChat``'s ``TURN_TIMEOUT`` (a 502
``model-error`` after it, nothing stored).

What the model sends is never the client's fault: tool arguments caderno
cannot store are kept as text and the turn is answered and stored; a reply
it cannot keep at all (a tool call without a usable id or name, one the
model adapter cannot read) is a 502 ``model-error``, never a 400. The
memory tools answer the model in the catalog's one shape
(``caderno.tools``), as they do through AgentChat, MCP and the Agents SDK.

Not supported yet (each a clear 400): client-declared ``tools`` (a turn
cannot pause to hand a tool call back to the client), tool messages, ``n``
other than 1, and content parts other than text. Sampling parameters
(``temperature``, ``max_tokens``…) and the request's ``model`` are ignored:
the model is the one configured for the server. ``stream`` is produced after
the turn completes — the answer arrives in pieces, but not token by token
from the upstream model.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from ..agent.idempotency import IDEMPOTENCY_HEADER, KeyReused
from ..core.errors import UsageError
from ..core.messages import Message
from ..core.records import ApiKey
from ..core.validate import check_id
from . import problems
from .auth import CurrentKey, require
from .problems import problem

if TYPE_CHECKING:
    from ..agent.chat import AgentChat

__all__ = ["MAX_INSTRUCTIONS_CHARS", "MAX_REQUEST_CHARS", "RESOURCE_HEADER", "THREAD_HEADER", "install_proxy"]

log = logging.getLogger("caderno.server.proxy")

#: Names the resource when the key reaches more than one.
RESOURCE_HEADER = "X-Caderno-Resource"
#: Names the conversation (else the request's ``user`` field).
THREAD_HEADER = "X-Caderno-Thread"
#: Most characters of a request's messages, all together. Clients resend the whole
#: conversation; 1,000,000 characters is ~250k tokens, past the context window of the
#: models the proxy fronts, so a longer request could not reach the model whole anyway.
MAX_REQUEST_CHARS = 1_000_000
#: Most characters of the instructions (the request's system and developer messages,
#: joined). Real system prompts are a few thousand characters; 100,000 (~25k tokens)
#: leaves room for long ones, and they are resent on every model call of the turn.
MAX_INSTRUCTIONS_CHARS = 100_000
#: Characters per content delta of a streamed answer (the answer is complete when streaming starts).
STREAM_PIECE = 32

_INSTRUCTION_ROLES = ("system", "developer")


class _ClientReadableErrors(APIRoute):
    """Problems of the proxy's routes also carry a top-level ``message``.

    The body stays the app's problem+json (same status, ``type`` and
    ``detail``); the extra member is where OpenAI clients look for the text
    they put in their exception (``body.get("error", body)["message"]``), so
    an SDK user reads "name the conversation: …" rather than "Error code: 400".
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                render = next(
                    (
                        request.app.exception_handlers[c]
                        for c in type(exc).__mro__
                        if c in request.app.exception_handlers
                    ),
                    None,
                )
                if render is None:
                    raise
                response: Response = await render(request, exc)
                return problems.with_message(response)

        return route


router = APIRouter(route_class=_ClientReadableErrors)


class ChatCompletionRequest(BaseModel):
    """The fields of an OpenAI chat-completions request the proxy reads; others are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]]
    """The conversation as the client holds it (see the module docstring for what is stored)."""
    model: str | None = None
    """Ignored: the server's configured model answers."""
    stream: bool = False
    """Answer as server-sent ``chat.completion.chunk`` events."""
    stream_options: dict[str, Any] | None = None
    """``{"include_usage": true}`` adds a last chunk with the turn's usage."""
    user: str | None = None
    """The thread, when the header ``X-Caderno-Thread`` is absent."""
    tools: list[dict[str, Any]] | None = None
    """Client-side tools: refused for now."""
    n: int | None = None
    """Only 1."""


def install_proxy(app: FastAPI) -> None:
    """Add ``POST /v1/chat/completions`` to ``app`` (pass it in ``create_app(routers=[...])``)."""
    app.state.proxy_chat = None
    app.state.proxy_turns = set()
    app.include_router(router)


@router.post("/v1/chat/completions", tags=["proxy"], summary="OpenAI-compatible chat completion with memory")
async def chat_completions(body: ChatCompletionRequest, request: Request, key: CurrentKey) -> Response:
    """One turn of the conversation the request names, answered as a ``chat.completion``."""
    model = request.app.state.model
    if model is None:
        detail = "the memory proxy needs a model: set [model] in caderno.toml"
        return problems.with_message(problem(503, "no-model", "No model configured", detail))
    resource_id = _resource(key, request.headers.get(RESOURCE_HEADER))
    thread_id = request.headers.get(THREAD_HEADER) or body.user
    if not thread_id:
        raise UsageError(
            f"name the conversation: send the header {THREAD_HEADER}: <thread id> (or the request's `user` field)"
        )
    check_id(thread_id, "thread id")
    if body.tools:
        raise UsageError(
            "client-side tools are not supported by the proxy yet; send the request without `tools` "
            "(caderno's own memory tools run on the server)"
        )
    if body.n not in (None, 1):
        raise UsageError("the proxy answers with one choice: n must be 1")
    too_large = _too_large(body.messages)
    if too_large is not None:
        return problems.with_message(too_large)
    instructions, new = split_messages(body.messages)
    if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
        detail = f"the instructions (system messages) may be at most {MAX_INSTRUCTIONS_CHARS} characters"
        return problems.with_message(problem(413, "too-large", "Request too large", detail))
    idempotency_key = request.headers.get(IDEMPOTENCY_HEADER)
    chat = _chat(request.app, model)
    turn = asyncio.ensure_future(
        chat.ask(
            messages=new,
            resource_id=resource_id,
            thread_id=thread_id,
            instructions=instructions,
            idempotency_key=idempotency_key,
        )
    )
    # The turn outlives a client that goes away: shielded, it is stored once (see the module docstring).
    running: set[asyncio.Future[Any]] = request.app.state.proxy_turns
    running.add(turn)
    turn.add_done_callback(lambda done: _settle(running, done))
    try:
        result = await asyncio.shield(turn)
    except KeyReused as exc:
        return problems.with_message(problem(422, "idempotency-key-reused", "Idempotency key reused", str(exc)))
    name = getattr(model, "model", None) or body.model or "caderno"
    completion = completion_object(result.reply, str(name))
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        return StreamingResponse(_events(completion, include_usage), media_type="text/event-stream")
    return JSONResponse(completion)


def _settle(running: set[asyncio.Future[Any]], turn: asyncio.Future[Any]) -> None:
    """Forget a finished turn; one whose client left is logged, not left as an unread exception."""
    running.discard(turn)
    if not turn.cancelled() and turn.exception() is not None:
        log.info("a proxy turn failed: %s", type(turn.exception()).__name__)


def _too_large(messages: list[dict[str, Any]]) -> Response | None:
    """A 413 problem when the messages' text passes ``MAX_REQUEST_CHARS`` (counted before anything is built)."""
    total = 0
    for m in messages:
        content = m.get("content")
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            total += len(text) if isinstance(text, str) else 0
    if total <= MAX_REQUEST_CHARS:
        return None
    detail = f"the messages hold {total} characters; the proxy takes at most {MAX_REQUEST_CHARS} per request"
    return problem(413, "too-large", "Request too large", detail)


def _resource(key: ApiKey, named: str | None) -> str:
    """The resource a request acts for: named by the header (checked), else the key's only one."""
    if named:
        return require(key, check_id(named, "resource id"))
    if not key.admin and len(key.resources) == 1:
        return key.resources[0]
    raise UsageError(f"this key reaches several resources: name one with the header {RESOURCE_HEADER}")


def split_messages(messages: list[dict[str, Any]]) -> tuple[str | None, list[Message]]:
    """The request's instructions (its system messages, joined) and the turn's new messages.

    The new messages are the user messages after the last assistant message:
    what came before is the stored history the client resends.

    Raises:
        UsageError: nothing new to answer, a tool message, or non-text content.
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
            raise UsageError(
                f"messages[{i}]: tool messages answer client-side tools, which the proxy does not support yet"
            )
        if role == "user":
            name = m.get("name")
            new.append(Message.user(_text(m.get("content"), i), name=name if isinstance(name, str) else None))
    if not new:
        raise UsageError("no new user message after the last assistant message: nothing to answer")
    instructions = "\n\n".join(s for s in system if s) or None
    return instructions, new


def _text(content: Any, index: int) -> str:
    """A message's text: a string, or the text parts of a content array."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise UsageError(f"messages[{index}]: only text content is supported by the proxy, not {kind!r}")
            parts.append(part["text"])
        return "\n".join(parts)
    raise UsageError(f"messages[{index}]: content must be text or a list of text parts")


def _chat(app: FastAPI, model: Any) -> AgentChat:
    """The app's one ``AgentChat``: every request shares it, whatever its system prompt.

    The instructions travel with each turn (``ask(instructions=…)``), so
    nothing per prompt is kept: a stream of distinct (or huge) system
    prompts holds no memory after their turns. One shared instance also
    means one per-thread lock per conversation, whatever prompt its
    requests send (across servers, the thread's turn lease in the database
    orders turns, and the notebook snapshot is stored with the thread). (Building an
    ``AgentChat`` costs ~25 µs; the cache of one per prompt it replaces
    saved nothing worth its memory.)
    """
    from ..agent.chat import AgentChat
    from ..memory.turns import TURN_WAIT

    chat: AgentChat | None = app.state.proxy_chat
    if chat is None or chat.model is not model:
        chat = AgentChat(
            model=model,
            memory=app.state.memory,
            notebook=True,  # the database notebook: every server shows the same one
            turn_wait=getattr(app.state, "turn_wait", TURN_WAIT),
            recall=True,
            schedule_tool=True,
        )
        app.state.proxy_chat = chat
    return chat


def completion_object(reply: Message, model: str) -> dict[str, Any]:
    """The stored reply as an OpenAI ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-{reply.id}",
        "object": "chat.completion",
        "created": int(reply.created_at.timestamp()) if reply.created_at else 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(reply),
    }


def _usage(reply: Message) -> dict[str, int]:
    """The turn's tokens (every model call of the turn, summed), from the stored reply's metadata."""
    usage = (reply.metadata or {}).get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _events(completion: dict[str, Any], include_usage: bool) -> AsyncIterator[str]:
    """A finished completion as ``chat.completion.chunk`` server-sent events, then ``[DONE]``."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    content: str = completion["choices"][0]["message"]["content"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return f"data: {json.dumps(base | {'choices': [choice]}, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for start in range(0, len(content), STREAM_PIECE):
        yield chunk({"content": content[start : start + STREAM_PIECE]})
    yield chunk({}, "stop")
    if include_usage:
        yield f"data: {json.dumps(base | {'choices': [], 'usage': completion['usage']})}\n\n"
    yield "data: [DONE]\n\n"
