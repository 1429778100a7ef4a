"""The MCP server over streamable HTTP at ``/mcp``, inside ``caderno serve``.

The same tools and resources as ``caderno mcp`` (``caderno.integrations.mcp``), reached
with the API's bearer keys: a small ASGI guard checks the key on every
request (revocation works at once) and hands it to the tools in the request
scope. A tool reaches the key's resource without being told; a key for
several resources (or an admin key) passes ``resource``, checked with
``auth.allowed`` — a resource out of reach is "not found", as in the API.

The transport runs stateless with JSON responses: every request stands
alone, so each one is authorised by its own key and nothing is held between
them (the tools need no server push, so ``GET /mcp`` — the push stream — is
refused with 405 rather than held open forever).

The MCP SDK is imported, and its session manager started, on the first
authorised request to ``/mcp``, not when the server starts: its import is
most of a server's start-up CPU (~0.7 s of ~2.4 s measured), and most
deployments never call it. The app's lifespan stops the manager if it ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..core.errors import NotFound, UsageError
from ..core.records import ApiKey
from . import problems
from .auth import SCOPE_KEY, Unauthorized, allowed, current_key

if TYPE_CHECKING:
    from ..integrations.mcp import Context

__all__ = ["install_mcp"]


async def _key_pick(ctx: Context, given: str | None) -> str:
    """The resource a call reaches with the request's key."""
    request = ctx.request_context.request
    key: ApiKey | None = getattr(request, "scope", {}).get(SCOPE_KEY)
    if key is None:  # only the guard's requests reach the tools
        raise UsageError("no API key on this request")
    if given is None:
        if not key.admin and len(key.resources) == 1:
            return key.resources[0]
        reach = "every resource" if key.admin else ", ".join(key.resources)
        raise UsageError(f"this key reaches several resources ({reach}): pass 'resource' to say whose memory")
    if not allowed(key, given):
        raise NotFound(f"resource {given!r} not found", resource_id=given)
    return given


class _Guard:
    """ASGI app: a live bearer key, or a 401 problem; a POST (or DELETE) then goes to the MCP transport.

    ``GET /mcp`` opens a server-push stream; the transport is stateless and
    has nothing to push, so the stream would stay open forever holding a
    connection: it is refused with 405.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") not in ("POST", "DELETE"):
            refused = problems.problem(
                405, "method-not-allowed", "Method Not Allowed", "this MCP server is stateless: send requests with POST"
            )
            refused.headers["Allow"] = "POST, DELETE"
            await refused(scope, receive, send)
            return
        try:
            key = await current_key(Request(scope, receive))
        except Unauthorized as exc:
            await problems.problem(401, "unauthorized", "Unauthorized", str(exc))(scope, receive, send)
            return
        scope[SCOPE_KEY] = key
        await self.inner(scope, receive, send)


class _Transport:
    """The MCP transport, built and started by the first request that reaches it; stopped by ``close``.

    Its session manager's task group must be entered and left by one task,
    and neither a request's task nor the lifespan's (which a test fixture
    may enter and leave from two tasks) lives as long: the manager gets a
    task of its own.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.handle: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        self.lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.handle is None:
            async with self.lock:
                if self.handle is None:
                    await self._start()
        await self.handle(scope, receive, send)

    async def _start(self) -> None:
        # ~0.7 s of imports: on a thread, so the loop goes on serving other requests meanwhile.
        await asyncio.to_thread(_import_sdk)
        from mcp.server.transport_security import TransportSecuritySettings

        from ..integrations.mcp import build_server

        server = build_server(self.app.state.memory, _key_pick)
        # DNS-rebinding protection guards servers a browser can reach without a
        # credential; here every request needs a bearer key, which a rebound page
        # does not have, and the Host check would refuse deployments by name.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = server.session_manager
        started = asyncio.Event()

        async def run() -> None:
            async with manager.run():
                started.set()
                await self.stop.wait()

        task = asyncio.create_task(run())
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if task.done():
            task.result()  # the manager failed to start: raise its error
        self.task, self.handle = task, manager.handle_request

    async def close(self) -> None:
        """Stop the manager if it ran; a later request (the app started again) builds a new one."""
        self.stop.set()
        if self.task is not None:
            await self.task
        self.handle, self.task, self.stop = None, None, asyncio.Event()


def _import_sdk() -> None:
    import caderno.integrations.mcp  # noqa: F401 - the SDK and the tools' binding, loaded once


def install_mcp(app: FastAPI) -> None:
    """Serve the MCP server at ``/mcp`` (streamable HTTP); the SDK loads on the first request there."""
    transport = _Transport(app)
    app.router.routes.append(Route("/mcp", endpoint=_Guard(transport), include_in_schema=False))

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            try:
                yield state
            finally:
                await transport.close()

    app.router.lifespan_context = lifespan
