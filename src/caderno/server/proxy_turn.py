"""A memory-proxy request's turn: who it is for, the client's tools, and the turn run apart from the request.

Shared by the two OpenAI-compatible endpoints, chat completions
(``caderno.server.proxy``) and the Responses API (``caderno.server.responses``):
the resource a key acts for, the request's bounds, the client's function
tools, the one ``AgentChat`` of the app, and ``ProxyTurn``, which runs the
turn shielded from the request (a client that goes away does not cancel it)
and queues its streamed pieces.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from ..agent.models import Delta, wire_call
from ..core.errors import KeyReused, UsageError
from ..core.messages import Message, ToolSpec
from ..core.records import ApiKey
from ..core.validate import check_id
from . import problems
from .auth import require
from .problems import problem

if TYPE_CHECKING:
    from ..agent.chat import AgentChat, ChatResult

__all__ = [
    "IDEMPOTENCY_HEADER",
    "MAX_CLIENT_TOOLS",
    "MAX_INSTRUCTIONS_CHARS",
    "MAX_REQUEST_CHARS",
    "RESOURCE_HEADER",
    "THREAD_HEADER",
    "ClientReadableErrors",
    "ProxyTurn",
    "check_instructions",
    "check_size",
    "client_tool",
    "content_text",
    "key_reused",
    "no_model",
    "resource_for",
    "sse",
    "stream_error",
    "usage_of",
]

log = logging.getLogger("caderno.server.proxy")

#: Names the resource when the key reaches more than one.
RESOURCE_HEADER = "X-Caderno-Resource"

#: Names the conversation (else the request's ``user`` field).
THREAD_HEADER = "X-Caderno-Thread"

#: Carries a request's idempotency key (REST appends and the memory proxy; the rules:
#: ``caderno.memory.engines.idempotency``).
IDEMPOTENCY_HEADER = "Idempotency-Key"

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


class ProxyTurn:
    """One proxy request's ``AgentChat`` turn, run apart from the request (shielded), streamed or not.

    A turn outlives a client that goes away: it runs to its end and is stored
    once (see ``caderno.server.proxy``). Streamed, the model's pieces queue here
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
        settings: dict[str, Any] | None = None,
        seen: str | None = None,
    ) -> ProxyTurn:
        """Start the turn: the request's ``Idempotency-Key`` and the SDK's retry mark go with it.

        ``seen``: the text of the last reply in the conversation the client resent (a retry
        is matched only to a turn that followed it)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        retries = request.headers.get(RETRY_COUNT_HEADER, "0")
        task = asyncio.ensure_future(
            proxy_chat(request.app, model).ask(
                messages=messages,
                resource_id=resource_id,
                thread_id=thread_id,
                instructions=instructions,
                idempotency_key=request.headers.get(IDEMPOTENCY_HEADER),
                client_tools=client_tools,
                on_delta=queue.put_nowait if stream else None,
                retry=retries.isdigit() and int(retries) > 0,
                retry_after=seen,
                settings=settings,
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

    async def pieces(self, first: list[Delta]) -> AsyncIterator[Delta]:
        """Every piece of the turn: ``first`` (from ``first_pieces``), then the rest as they arrive.

        A turn answered from storage (a retry: nothing was streamed) gives its stored answer's
        pieces instead. The turn's error, if it failed, is raised by ``result`` afterwards.
        """
        streamed = bool(first)
        for piece in first:
            yield piece
        while (item := await self.queue.get()) is not self._END:
            streamed = True
            yield item
        self.queue.put_nowait(self._END)
        if not streamed and not self.task.cancelled() and self.task.exception() is None:
            for piece in _replay_pieces(self.task.result()):
                yield piece


def check_instructions(instructions: str | None) -> Response | None:
    """A 413 problem when the turn's instructions pass ``MAX_INSTRUCTIONS_CHARS``."""
    if instructions is None or len(instructions) <= MAX_INSTRUCTIONS_CHARS:
        return None
    detail = f"the instructions (system messages) may be at most {MAX_INSTRUCTIONS_CHARS} characters"
    return problems.with_message(problem(413, "too-large", "Request too large", detail))


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


def resource_for(key: ApiKey, named: str | None) -> str:
    """The resource a request acts for: named by the header (checked), else the key's only one."""
    if named:
        return require(key, check_id(named, "resource id"))
    if not key.admin and len(key.resources) == 1:
        return key.resources[0]
    raise UsageError(f"this key reaches several resources: name one with the header {RESOURCE_HEADER}")


def proxy_chat(app: FastAPI, model: Any) -> AgentChat:
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
    from ..agent.chat import AgentChat, ChatSettings
    from ..memory.parts.turns import TURN_WAIT

    chat: AgentChat | None = app.state.proxy_chat
    if chat is None or chat.model is not model:
        chat = AgentChat(
            model=model,
            memory=app.state.memory,
            notebook=True,  # the database notebook: every server shows the same one
            recall=True,
            schedule_tool=True,
            settings=ChatSettings(turn_wait=getattr(app.state, "turn_wait", TURN_WAIT)),
        )
        app.state.proxy_chat = chat
    return chat


def usage_of(reply: Message) -> dict[str, int]:
    """The turn's tokens (every model call of the turn, summed), from the stored reply's metadata."""
    usage = (reply.metadata or {}).get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _replay_pieces(result: ChatResult) -> list[Delta]:
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


def content_text(content: Any, where: str, kinds: tuple[str, ...]) -> str:
    """A message's text: a string, or the parts of a content array whose ``type`` is one of ``kinds``, joined.

    Raises:
        UsageError: any other part (an image, a file, audio) or content, naming ``where``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in kinds or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise UsageError(f"{where}: only text content is supported by the proxy, not {kind!r:.80}")
            parts.append(part["text"])
        return "\n".join(parts)
    raise UsageError(f"{where}: content must be text or a list of text parts")
