"""A scripted chat-completions upstream for the memory proxy's tests (``from _upstream import …``).

A real FastAPI app served by uvicorn on a loopback port: it answers each
request with the next scripted reply and records every request, so a test
sees what the model was sent (the prompt, the tools, each tool's result).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from _serving import serving_app
from fastapi import FastAPI, Request, Response

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def text(content: str) -> Reply:
    """The model answers with text."""
    return lambda body: {"role": "assistant", "content": content}


def call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> Reply:
    """The model calls a tool; ``arguments`` as text is sent as it is (it need not be valid JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    fn = {"name": name, "arguments": raw}
    return lambda body: {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
    }


@dataclass
class Upstream:
    """A scripted chat-completions endpoint: answers from ``script`` in order, records every request."""

    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    """Seconds to wait before answering each request, in order (none left: at once)."""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Response:
            body = await request.json()
            self.requests.append(body)
            message = self.script.pop(0)(body)
            if self.delays:  # after taking its reply: a caller that goes away leaves the script as it was
                await asyncio.sleep(self.delays.pop(0))
            answer = {
                "id": f"up-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
            # ASCII JSON (\u escapes), as many servers write it: it can carry any text a model
            # produced, a lone surrogate included, which UTF-8 cannot.
            return Response(json.dumps(answer), media_type="application/json")

        return app

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
