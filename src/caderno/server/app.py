"""The application: routes, problems, and the background work of a long-running host.

``create_app(memory)`` returns a FastAPI app serving one ``Memory``. Its
lifespan starts what a host runs in the background — the embedding worker
(started by appends), consolidation every ``interval_hours``, and due
scheduled tasks when a model is configured — and on shutdown (SIGTERM under
uvicorn) stops accepting requests, lets in-flight turns finish (each turn
commits whole or not at all), cancels the background loops and closes the
memory.

Every request passes ``edge.Edge`` first (the key before the body, one
body limit, a problem+json for any crash). ``/docs`` and ``/redoc`` are off
unless asked for (``docs.install_docs``); a path with a trailing slash is
never redirected (a browser follows a 307 with the same method, so a
``DELETE …/x/`` would be replayed on another path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI

from ..agent.config import MAX_REQUEST_BYTES
from ..memory.facade import Memory
from . import problems
from .edge import Edge

__all__ = ["create_app"]

log = logging.getLogger("caderno.server")


def create_app(
    memory: Memory,
    *,
    model: Any = None,
    background: bool = True,
    interval_hours: float | None = None,
    routers: list[Callable[[FastAPI], None]] | None = None,
    max_body_bytes: int = MAX_REQUEST_BYTES,
    docs: bool = False,
) -> FastAPI:
    """The HTTP API over ``memory``.

    Args:
        memory: the memory to serve (opened by the app's lifespan, closed at shutdown).
        model: the chat model for the memory proxy and scheduled tasks (``None``: both off).
        background: run consolidation and due scheduled tasks in this process.
        interval_hours: consolidation period (default: the memory's setting).
        routers: extra ``install(app)`` functions (tests, extensions).
        max_body_bytes: most bytes of any request body (413 past it).
        docs: serve ``/docs`` and ``/redoc`` (with a Content-Security-Policy).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await memory.open()
        tasks: list[asyncio.Task[Any]] = []
        if background:
            tasks.append(asyncio.create_task(memory.run_background(interval_hours=interval_hours)))
            if model is not None:
                from ..agent.chat import AgentChat
                from ..agent.scheduler import run_forever

                chat = AgentChat(model=model, memory=memory, schedule_tool=True)
                tasks.append(asyncio.create_task(run_forever(memory, chat)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await memory.close()

    app = FastAPI(
        title="caderno",
        summary="Durable memory for AI agents: history, working memory, notebook, recall, facts, tasks.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    app.state.memory = memory
    app.state.model = model
    app.openapi = _in_path_order(app.openapi)  # type: ignore[method-assign]  # FastAPI's documented override
    problems.install(app)
    for install in routers or []:
        install(app)
    from .docs import install_docs, install_docs_off

    (install_docs if docs else install_docs_off)(app)
    # Added last, so it wraps every other middleware (``BodyLimit`` included).
    app.add_middleware(Edge, max_body_bytes=max_body_bytes)
    return app


def _in_path_order(build: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` with each operation's path parameters in the order its path names them.

    FastAPI lists a route's own parameters before its dependencies', so
    ``{resource}``, which routes take through ``auth.OwnResource``, would come
    after ``{thread}``; generated clients take path parameters positionally,
    in document order, so ``get_thread("casa", "t1")`` must keep meaning
    resource, then thread. The sort is stable: other parameters keep their place.
    """

    def openapi() -> dict[str, Any]:
        doc = build()
        for path, operations in doc.get("paths", {}).items():
            named = re.findall(r"{([^}]+)}", path)
            for operation in operations.values():
                operation.get("parameters", []).sort(
                    key=lambda p: named.index(p["name"]) if p.get("in") == "path" and p["name"] in named else len(named)
                )
        return doc

    return openapi


def _version() -> str:
    from ..core.version import __version__

    return __version__
