"""The app's outermost layer: the key before the body, one body limit, and a problem for any crash.

FastAPI reads and parses a JSON body before a route's dependencies run, so a
key checked by a dependency is checked only after the body is in memory: a
43 MiB body without a key cost 1.5 s of event loop and 670 MiB before its
401. ``Edge`` wraps the whole app (every route, the memory proxy and ``/mcp``
included) and, for each HTTP request:

1. on a route that needs a key (``/v1/…``, ``/mcp``), verifies the bearer key
   from the headers alone and answers 401 before a byte of the body is read
   (the verified key travels in the scope: ``auth.current_key`` reuses it);
2. refuses a body over ``max_body_bytes`` with 413 — by ``Content-Length``
   before reading, and by counting a chunked body as it streams, at the
   first chunk past the limit, without reading the rest (the answer closes
   the connection, so the server never drains what the client still sends);
3. closes the connection with any answer given before the body it announced
   was read, on every route, keyed or not: a ``POST /healthz`` with
   ``Content-Length: 1000000`` got its 405 at once, and then the server
   read (and dropped) the body at whatever pace the client sent it, a place
   under ``limit_concurrency`` held for as long (20 such connections made
   ``/healthz`` answer 503); a body that is read has ``[server] body_timeout``
   to arrive (``connections.py``);
4. turns any exception nothing else handled into an ``internal``
   problem+json (500) and logs its traceback: never a plain-text 500, never
   a dropped connection, never the exception's text to the client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..agent.config import MAX_REQUEST_BYTES
from ..core.errors import CadernoError
from . import problems
from .auth import SCOPE_KEY, Unauthorized, current_key

__all__ = ["KEYED_PREFIXES", "Edge", "TooLarge"]

log = logging.getLogger("caderno.server")

#: Paths whose every route needs a key: the API (and the memory proxy) and MCP.
KEYED_PREFIXES = ("/v1/", "/mcp")
#: The memory proxy, whose problems also carry an OpenAI-style ``message``.
PROXY_PATH = "/v1/chat/completions"


class TooLarge(HTTPException, CadernoError):
    """A body passed the limit while streaming in (an ``HTTPException`` first: FastAPI passes it through,
    and its handler, found before the ``CadernoError`` one, answers 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body of a request may be at most {limit} bytes")


def _needs_key(path: str) -> bool:
    return path == "/v1" or path.startswith(KEYED_PREFIXES)


def _announces_body(scope: Scope) -> bool:
    """Whether the request says a body follows (then an early answer must close the connection)."""
    for name, value in scope.get("headers") or []:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


@dataclass(slots=True)
class _Body:
    """Whether a request announced a body, and whether the app has read all of it."""

    announced: bool
    read: bool = False

    def tracking(self, receive: Receive) -> Receive:
        async def tracked() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                self.read = True
            return message

        return tracked


def _closing(headers: Any) -> list[tuple[bytes, bytes]]:
    """``headers`` with ``connection: close``: uvicorn then closes the connection after the answer
    instead of reading the rest of a body nobody wants."""
    kept = [(name, value) for name, value in headers if name.lower() != b"connection"]
    return [*kept, (b"connection", b"close")]


class Edge:
    """ASGI middleware: key, body limit, catch-all (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        body = _Body(announced=_announces_body(scope))

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                if body.announced and not body.read:
                    message = {**message, "headers": _closing(message.get("headers", []))}
            await send(message)

        try:
            await self._guarded(scope, body.tracking(receive), tracked)
        except Exception as exc:  # noqa: BLE001 - the catch-all: every failure gets an answer
            if started:
                # Headers are gone: the only honest end is to stop (uvicorn closes it).
                log.exception("error after the response started: %s %s", scope.get("method"), scope.get("path"))
                return
            await self._answer_failure(exc, scope, receive, tracked)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _needs_key(scope.get("path", "")):
            try:
                scope[SCOPE_KEY] = await current_key(Request(scope))
            except Unauthorized as exc:
                response: Response = problems.problem(401, "unauthorized", "Unauthorized", str(exc))
                if scope.get("path") == PROXY_PATH:
                    response = problems.with_message(response)  # what an OpenAI SDK shows its user
                await response(scope, receive, send)  # closing the connection when a body was announced
                return
        length = Request(scope).headers.get("content-length")
        if length is not None and (not length.strip().isascii() or not length.strip().isdigit()):
            raise HTTPException(400, "Content-Length must be a number of bytes")
        if length is not None and int(length) > self.limit:
            raise TooLarge(self.limit)
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        """``receive`` that raises ``TooLarge`` at the first chunk past the limit."""
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise TooLarge(self.limit)
            return message

        return counted

    async def _answer_failure(self, exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        response: Any
        if isinstance(exc, HTTPException):
            response = problems.http_problem(exc.status_code, str(exc.detail))
        else:
            response = problems.for_error(exc)
            if response.status_code == 500:
                log.exception("unhandled error: %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
        await response(scope, receive, send)
