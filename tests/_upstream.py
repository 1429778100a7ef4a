"""A scripted chat-completions upstream for the memory proxy's tests (``from _upstream import …``).

A real FastAPI app served by uvicorn on a loopback port: it answers each
request with the next scripted reply and records every request, so a test
sees what the model was sent (the prompt, the tools, each tool's result).

A request with ``"stream": true`` is answered as OpenAI streams: server-sent
``chat.completion.chunk`` events built from the same scripted reply, the text
and each tool call's arguments in pieces. ``hold`` and ``finished`` let a test
prove a piece reached its far client before the upstream had finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from _serving import serving_app
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse

Reply = Callable[[dict[str, Any]], dict[str, Any] | Response]
"""Builds the answer to a request body: an assistant message, or a whole HTTP response sent as it is."""


def text(content: str) -> Reply:
    """The model answers with text."""
    return lambda body: {"role": "assistant", "content": content}


def call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> Reply:
    """The model calls a tool; ``arguments`` as text is sent as it is (it need not be valid JSON)."""
    return calls((name, arguments, call_id))


def calls(*wanted: tuple[str, dict[str, Any] | str, str], content: str | None = None) -> Reply:
    """The model calls several tools in one reply (each ``(name, arguments, call_id)``), with optional text."""
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
        }
        for name, arguments, call_id in wanted
    ]
    return lambda body: {"role": "assistant", "content": content, "tool_calls": tool_calls}


def parts(*texts: str) -> Reply:
    """The model answers with ``content`` as a list of text parts, as some OpenAI-compatible servers send it."""
    return lambda body: {"role": "assistant", "content": [{"type": "text", "text": t} for t in texts]}


def content(value: Any) -> Reply:
    """The model answers with ``value`` as its ``content``, whatever its shape (to script a malformed answer)."""
    return lambda body: {"role": "assistant", "content": value}


def refuse(status: int, body: str) -> Reply:
    """The upstream answers with an HTTP error: ``status`` and ``body`` (a JSON text, say) as they are."""
    return lambda request: Response(body, status_code=status, media_type="application/json")


def events(*data: str) -> Reply:
    """The upstream answers with these server-sent events' data, as they are (to script a broken stream)."""
    wire = "".join(f"data: {d}\n\n" for d in data)
    return lambda request: Response(wire, media_type="text/event-stream")


def usage_of(body: dict[str, Any], message: dict[str, Any]) -> dict[str, int]:
    """The token counts the upstream reports: a character count over four, as a rough tokenizer would give."""
    prompt = sum(len(m.get("content") or "") for m in body["messages"]) // 4 + 1
    written = len(message.get("content") or "") + sum(
        len(c["function"]["arguments"]) for c in message.get("tool_calls") or []
    )
    completion = written // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@dataclass
class Upstream:
    """A scripted chat-completions endpoint: answers from ``script`` in order, records every request."""

    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    """Seconds to wait before answering each request, in order (none left: at once)."""
    piece: int = 4
    """Characters of text (or of a tool call's arguments) per streamed chunk."""
    pause: float = 0.0
    """Seconds between streamed chunks."""
    hold: asyncio.Event | None = None
    """When set, a stream sends its first piece of the reply, then waits for this event before the rest."""
    gate: asyncio.Event | None = None
    """When given, every answer waits for this event before it is sent (``arrived`` is set first)."""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a request has come in (a test then knows the turn is waiting on its model)."""
    finished: list[float] = field(default_factory=list)
    """``time.monotonic()`` when each answer was wholly sent (a stream: after its ``[DONE]``)."""
    streams: bool = True
    """False: ``"stream": true`` is ignored and every answer is one JSON object, as some servers do."""
    usage: bool = True
    """Whether answers report token usage (streamed: when ``stream_options.include_usage`` asks)."""
    reported_usage: Any = None
    """When given, what answers report as their usage instead of the count, as it is (to script a malformed one)."""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Response:
            body = await request.json()
            self.requests.append(body)
            self.arrived.set()
            if self.gate is not None:
                await self.gate.wait()
            message = self.script.pop(0)(body)
            if self.delays:  # after taking its reply: a caller that goes away leaves the script as it was
                await asyncio.sleep(self.delays.pop(0))
            if isinstance(message, Response):
                self.finished.append(time.monotonic())
                return message
            base = {"id": f"up-{len(self.requests)}", "created": 0, "model": body["model"]}
            if body.get("stream") and self.streams:
                wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return StreamingResponse(self._chunks(base, body, message, wants_usage), media_type="text/event-stream")
            answer = base | {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
            if self.usage:
                answer["usage"] = self._usage(body, message)
            self.finished.append(time.monotonic())
            # ASCII JSON (\u escapes), as many servers write it: it can carry any text a model
            # produced, a lone surrogate included, which UTF-8 cannot.
            return Response(json.dumps(answer), media_type="application/json")

        return app

    async def _chunks(
        self, base: dict[str, Any], body: dict[str, Any], message: dict[str, Any], wants_usage: bool
    ) -> AsyncIterator[str]:
        """``message`` as OpenAI streams it: role, text pieces, each call's pieces, the finish, usage, ``[DONE]``."""

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return f"data: {json.dumps(base | {'object': 'chat.completion.chunk', 'choices': [choice]})}\n\n"

        def pieces(whole: Any) -> list[Any]:
            return [whole[i : i + self.piece] for i in range(0, len(whole), self.piece)]

        said = message.get("content") or ""
        # Text (and a list of text parts) in pieces; any other shape in one delta, as it is.
        deltas: list[dict[str, Any]] = [
            {"content": p} for p in (pieces(said) if isinstance(said, str | list) else [said])
        ]
        for i, c in enumerate(message.get("tool_calls") or []):
            arguments = pieces(c["function"]["arguments"])
            # OpenAI's first piece of a call: its index, id, type and name, and the arguments' first piece.
            first = {"name": c["function"]["name"], "arguments": arguments[0] if arguments else ""}
            deltas.append({"tool_calls": [{"index": i, "id": c["id"], "type": "function", "function": first}]})
            deltas += [{"tool_calls": [{"index": i, "function": {"arguments": p}}]} for p in arguments[1:]]

        yield chunk({"role": "assistant", "content": ""})
        for n, delta in enumerate(deltas):
            if self.pause:
                await asyncio.sleep(self.pause)
            yield chunk(delta)
            if n == 0 and self.hold is not None:
                await self.hold.wait()
        yield chunk({}, "tool_calls" if message.get("tool_calls") else "stop")
        if wants_usage and self.usage:
            yield f"data: {json.dumps(base | {'object': 'chat.completion.chunk', 'choices': [], 'usage': self._usage(body, message)})}\n\n"
        yield "data: [DONE]\n\n"
        self.finished.append(time.monotonic())

    def _usage(self, body: dict[str, Any], message: dict[str, Any]) -> Any:
        return usage_of(body, message) if self.reported_usage is None else self.reported_usage

    def prompt(self, i: int = -1) -> str:
        """Every message's text of request ``i``."""
        return "\n".join(m.get("content") or "" for m in self.requests[i]["messages"])

    def tool_results(self, i: int = -1) -> list[str]:
        """The tool results request ``i`` showed the model, in order."""
        return [m["content"] for m in self.requests[i]["messages"] if m.get("role") == "tool"]


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port, in this event loop; yield its base URL."""
    async with serving_app(app) as (host, port):
        yield f"http://{host}:{port}"


@contextlib.asynccontextmanager
async def proxy_in_front(
    memory: Any, upstream: Upstream, *, userinfo: str = "", api: bool = False
) -> AsyncIterator[str]:
    """caderno's app with the memory proxy over ``memory``, its model the scripted ``upstream``; yield its base URL.

    ``userinfo`` (``user:password``) goes into the upstream's URL, as an operator may configure it;
    ``api``: serve the REST API beside the proxy, as ``caderno serve`` does.
    """
    from caderno.agent.models import OpenAIChatModel
    from caderno.server import create_app
    from caderno.server.proxy import install_proxy
    from caderno.server.routes import install_routes

    async with serving(upstream.app()) as up:
        if userinfo:
            up = up.replace("://", f"://{userinfo}@", 1)
        model = OpenAIChatModel(model="scripted-1", base_url=f"{up}/v1", api_key="upstream-secret")
        app = create_app(memory, model=model, background=False, routers=[install_routes, install_proxy] if api else [install_proxy])
        try:
            async with serving(app) as base_url:
                yield base_url
        finally:
            await model.aclose()


#: What an upstream might put where a count goes: a key-shaped secret, which must reach no client.
LEAKED = "sk-UPSTREAMSECRET0123456789abcdef"
#: The one sentence a client reads for an answer caderno cannot read.
NOT_EXPECTED = "the model call failed: the upstream's answer is not in the expected format"
#: Upstream answers of shapes caderno cannot read, as ``(content, usage)``, for ``pytest.mark.parametrize``
#: (``ODD_ANSWER_IDS``): both proxy endpoints must turn each into ``NOT_EXPECTED``.
ODD_ANSWERS = [
    ({"text": "an object"}, None),
    ([{"type": "image_url", "image_url": {"url": "http://x/y.png"}}], None),
    ("fine words", {"prompt_tokens": 3, "completion_tokens": LEAKED}),
]
ODD_ANSWER_IDS = ["content-object", "content-image-part", "usage-a-secret"]


def sse_data(text: str) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event in a response body (the chat stream's ``[DONE]`` left out)."""
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
