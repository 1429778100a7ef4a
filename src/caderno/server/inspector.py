"""The inspector: one page, served at ``/``, that reads and edits a resource through the REST API.

The page is plain HTML, a stylesheet and one script (``static/``): no build
step and nothing fetched from outside, so it works on a closed network. It
signs in with an API key kept in ``sessionStorage`` and calls ``/v1/…``
with it, so it sees exactly what that key may see — the server decides, the
page only displays.

Stored text is hostile input (a model wrote it, or a user pasted it): the
script only ever sets it as text, and the Content-Security-Policy below
refuses inline scripts, so markup in a message cannot run even if a future
edit forgot that rule.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["STATIC", "install_inspector"]

#: The page's files (shipped as package data).
STATIC = Path(__file__).parent / "static"

#: Where the page's script and stylesheet are served.
PREFIX = "/inspector"

# Only this origin's script, style and API; no framing (clickjacking), no <base>.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # The page is tiny; never serve one older than the script it loads.
    "Cache-Control": "no-cache",
}


class _WithHeaders:
    """ASGI wrapper: every response of ``app`` carries the inspector's security headers.

    The page is also reachable as ``/inspector/index.html``: it must be no
    easier to frame or sniff there than at ``/``, nor may its script be.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


def install_inspector(app: FastAPI) -> None:
    """Serve the inspector page at ``/`` and its files under ``/inspector/``.

    Pass it to ``create_app(memory, routers=[install_routes, install_inspector])``.
    """

    @app.get("/", include_in_schema=False)
    async def inspector_page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS)

    app.mount(PREFIX, _WithHeaders(StaticFiles(directory=STATIC, check_dir=True)), name="inspector")
