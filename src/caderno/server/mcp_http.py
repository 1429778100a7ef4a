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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..core.errors import NotFound, UsageError
from ..core.records import ApiKey
from ..integrations.mcp import Context, build_server
from . import problems
from .auth import SCOPE_KEY, Unauthorized, allowed, current_key

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


def install_mcp(app: FastAPI) -> None:
    """Serve the MCP server at ``/mcp`` (streamable HTTP), its session manager run by the app's lifespan."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(app.state.memory, _key_pick)
    # DNS-rebinding protection guards servers a browser can reach without a
    # credential; here every request needs a bearer key, which a rebound page
    # does not have, and the Host check would refuse deployments by name.
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    app.router.routes.append(Route("/mcp", endpoint=_Guard(manager.handle_request), include_in_schema=False))

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            # The manager's task group must be entered and left by one task,
            # and a lifespan may be entered and left by two (a test fixture's
            # setup and teardown): give the manager a task of its own.
            started, stop = asyncio.Event(), asyncio.Event()

            async def run() -> None:
                async with manager.run():
                    started.set()
                    await stop.wait()

            task = asyncio.create_task(run())
            ready = asyncio.create_task(started.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if task.done():
                task.result()  # the manager failed to start: raise its error
            try:
                yield state
            finally:
                stop.set()
                await task

    app.router.lifespan_context = lifespan
