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
``caderno.agent.idempotency`` for how long a key holds. The OpenAI SDKs
retry without a key unless given one (``extra_headers={"Idempotency-Key":
...}`` is kept across a call's retries); a request they mark as a retry
(``x-stainless-retry-count`` above 0) is answered with the thread's newest
turn when that turn began with the same messages and is recent
(``RETRY_WINDOW``), and tool results the thread already holds are answered
with what followed them. A turn whose client disconnects before the answer
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

Not supported (each a clear 400): ``n`` other than 1, content parts other
than text, tools other than functions. Sampling parameters
(``temperature``, ``max_tokens``…), ``tool_choice``,
``parallel_tool_calls`` and the request's ``model`` are ignored: the model
is the one configured for the server, and it decides which tools to call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from ..agent.idempotency import IDEMPOTENCY_HEADER, KeyReused
from ..agent.models import Delta
from ..core.clock import new_id
from ..core.errors import UsageError
from ..core.messages import Message, ToolCall, ToolSpec
from ..core.records import ApiKey
from ..core.validate import check_id
from . import problems
from .auth import CurrentKey, require
from .problems import problem

if TYPE_CHECKING:
    from ..agent.chat import AgentChat, ChatResult

__all__ = [
    "MAX_CLIENT_TOOLS",
    "MAX_INSTRUCTIONS_CHARS",
    "MAX_REQUEST_CHARS",
    "RESOURCE_HEADER",
    "THREAD_HEADER",
    "ProxyTurn",
    "install_proxy",
]

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
#: Characters per content delta when a stored answer is sent as a stream (a retry's replayed turn).
STREAM_PIECE = 32
#: Most tools a request may declare (the OpenAI API's own limit): each is resent on every model call.
MAX_CLIENT_TOOLS = 128
#: The header the OpenAI SDKs put on a request they send again (0 on the first try).
RETRY_COUNT_HEADER = "x-stainless-retry-count"

_INSTRUCTION_ROLES = ("system", "developer")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


class ClientReadableErrors(APIRoute):
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
    """Add the proxy's routes to ``app`` (pass it in ``create_app(routers=[...])``)."""
    from .responses import router as responses_router

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
    if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
        detail = f"the instructions (system messages) may be at most {MAX_INSTRUCTIONS_CHARS} characters"
        return problems.with_message(problem(413, "too-large", "Request too large", detail))
    turn = ProxyTurn.start(
        request,
        model,
        messages=new,
        resource_id=resource_id,
        thread_id=thread_id,
        instructions=instructions,
        client_tools=tools,
        stream=body.stream,
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


class ProxyTurn:
    """One proxy request's ``AgentChat`` turn, run apart from the request (shielded), streamed or not.

    A turn outlives a client that goes away: it runs to its end and is stored
    once (see the module docstring). Streamed, the model's pieces queue here
    as they arrive; ``first_pieces`` waits for the first of them (or the end,
    whose error is then the request's), ``pieces`` gives the rest as they come.
    """

    _END = object()

    def __init__(self, task: asyncio.Future[ChatResult], queue: asyncio.Queue[Any]) -> None:
        self.task = task
        self.queue = queue

    @classmethod
    def start(
        cls,
        request: Request,
        model: Any,
        *,
        messages: list[Message],
        resource_id: str,
        thread_id: str,
        instructions: str | None,
        client_tools: list[ToolSpec],
        stream: bool,
    ) -> ProxyTurn:
        """Start the turn: the request's ``Idempotency-Key`` and the SDK's retry mark go with it."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        retries = request.headers.get(RETRY_COUNT_HEADER, "0")
        task = asyncio.ensure_future(
            _chat(request.app, model).ask(
                messages=messages,
                resource_id=resource_id,
                thread_id=thread_id,
                instructions=instructions,
                idempotency_key=request.headers.get(IDEMPOTENCY_HEADER),
                client_tools=client_tools,
                on_delta=queue.put_nowait if stream else None,
                retry=retries.isdigit() and int(retries) > 0,
            )
        )
        running: set[asyncio.Future[Any]] = request.app.state.proxy_turns
        running.add(task)
        task.add_done_callback(lambda done: _settle(running, done))
        task.add_done_callback(lambda _: queue.put_nowait(cls._END))
        return cls(task, queue)

    async def result(self) -> ChatResult:
        """The stored turn (its error, when it failed)."""
        return await asyncio.shield(self.task)

    async def first_pieces(self) -> list[Delta]:
        """The first streamed pieces, once one has arrived; raises the turn's error if it failed before any."""
        item = await self.queue.get()
        if item is self._END:
            self.queue.put_nowait(item)
            await self.result()  # raises the turn's error: the request still gets a normal problem response
            return []
        return [item]

    async def pieces(self) -> AsyncIterator[Delta]:
        """The streamed pieces still to come, as they arrive, until the turn ends."""
        while (item := await self.queue.get()) is not self._END:
            yield item
        self.queue.put_nowait(self._END)


def no_model() -> Response:
    """The 503 of a server without a model."""
    detail = "the memory proxy needs a model: set [model] in caderno.toml"
    return problems.with_message(problem(503, "no-model", "No model configured", detail))


def key_reused(exc: KeyReused) -> Response:
    """The 422 of an idempotency key sent again with other messages."""
    return problems.with_message(problem(422, "idempotency-key-reused", "Idempotency key reused", str(exc)))


def stream_error(exc: BaseException) -> dict[str, Any]:
    """What a client reads when a turn fails after its stream began: the problem it would have had."""
    body = json.loads(bytes(problems.for_error(exc).body))
    return {"message": body["detail"], "type": body["type"].rsplit("/", 1)[-1], "code": body["status"]}


def _settle(running: set[asyncio.Future[Any]], turn: asyncio.Future[Any]) -> None:
    """Forget a finished turn; one whose client left is logged, not left as an unread exception."""
    running.discard(turn)
    if not turn.cancelled() and turn.exception() is not None:
        log.info("a proxy turn failed: %s", type(turn.exception()).__name__)


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


def check_size(chars: int, tools: list[ToolSpec]) -> Response | None:
    """A 413 problem when the request's text and tools pass ``MAX_REQUEST_CHARS``; a 400 past ``MAX_CLIENT_TOOLS``."""
    if len(tools) > MAX_CLIENT_TOOLS:
        raise UsageError(f"a request may declare at most {MAX_CLIENT_TOOLS} tools, not {len(tools)}")
    total = chars + sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    if total <= MAX_REQUEST_CHARS:
        return None
    detail = f"the request holds {total} characters; the proxy takes at most {MAX_REQUEST_CHARS} per request"
    return problems.with_message(problem(413, "too-large", "Request too large", detail))


def client_tool(name: Any, description: Any, parameters: Any, where: str) -> ToolSpec:
    """A client's function tool, checked: a name of 1-64 letters, digits, ``_`` or ``-``; an object schema."""
    if not isinstance(name, str) or _TOOL_NAME.fullmatch(name) is None:
        raise UsageError(f"{where}: a tool's name is 1 to 64 letters, digits, '_' or '-', not {name!r:.80}")
    if description is not None and not isinstance(description, str):
        raise UsageError(f"{where}: a tool's description is text")
    if parameters is not None and not isinstance(parameters, dict):
        raise UsageError(f"{where}: a tool's parameters are a JSON Schema object")
    return ToolSpec(name=name, description=description or "", parameters=parameters or {"type": "object"})


def _chat_tool(tool: Any, index: int) -> ToolSpec:
    """A chat-completions tool declaration (``{"type": "function", "function": {...}}``)."""
    where = f"tools[{index}]"
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise UsageError(f"{where}: the proxy passes function tools only, not {kind!r}")
    fn = tool["function"]
    return client_tool(fn.get("name"), fn.get("description"), fn.get("parameters"), where)


def resource_for(key: ApiKey, named: str | None) -> str:
    """The resource a request acts for: named by the header (checked), else the key's only one."""
    if named:
        return require(key, check_id(named, "resource id"))
    if not key.admin and len(key.resources) == 1:
        return key.resources[0]
    raise UsageError(f"this key reaches several resources: name one with the header {RESOURCE_HEADER}")


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


def wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as the chat-completions wire writes it (arguments as JSON text)."""
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


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


def usage_of(reply: Message) -> dict[str, int]:
    """The turn's tokens (every model call of the turn, summed), from the stored reply's metadata."""
    usage = (reply.metadata or {}).get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def replay_pieces(result: ChatResult) -> list[Delta]:
    """A stored answer as stream pieces: its text in ``STREAM_PIECE`` characters, then the client's calls."""
    text = result.reply.content
    pieces = [Delta(content=text[i : i + STREAM_PIECE]) for i in range(0, len(text), STREAM_PIECE)]
    for i, call in enumerate(result.pending):
        arguments = wire_call(call)["function"]["arguments"]
        pieces.append(Delta(call_index=i, call_id=call.id, call_name=call.name, arguments=arguments))
    return pieces


def sse(data: dict[str, Any]) -> str:
    """One server-sent event's ``data:`` line."""
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


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
        streamed = False
        async for piece in _chained(first, turn.pieces()):
            streamed = True
            yield chunk(_chunk_delta(piece))
        result = await turn.result()
    except Exception as exc:  # after the first chunk the status is sent: the error is an event
        yield sse({"error": stream_error(exc)})
        yield "data: [DONE]\n\n"
        return
    if not streamed:  # a replayed turn: nothing was streamed, the stored answer is
        for piece in replay_pieces(result):
            yield chunk(_chunk_delta(piece))
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


async def _chained(first: list[Delta], rest: AsyncIterator[Delta]) -> AsyncIterator[Delta]:
    for piece in first:
        yield piece
    async for piece in rest:
        yield piece
