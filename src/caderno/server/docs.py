"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), only when asked for (``caderno serve --docs``).

Both pages run a script from a CDN on the server's own origin, where the
inspector keeps an API key in ``sessionStorage`` and every route trusts a
bearer key: a changed CDN file would run with this origin's rights. So they
are off by default, and when on they are served with a
Content-Security-Policy whose ``script-src`` allows exactly one pinned file
(the exact version's URL: jsDelivr serves a published npm version
unchanged) and the hash of the page's own inline start-up script — nothing
else may run. The OpenAPI document itself (``/openapi.json``) is plain JSON
and always served: clients are generated from it. While they are off, both
paths answer a 404 problem whose sentence says how to turn them on, so someone
who followed FastAPI's habit of opening ``/docs`` learns why there is nothing.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from .problems import problem

__all__ = ["DOCS_OFF", "REDOC_JS", "SWAGGER_CSS", "SWAGGER_JS", "install_docs", "install_docs_off"]

#: Pinned versions (a floating ``@5`` would let the CDN change the code the CSP allows).
SWAGGER_JS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.17.14/swagger-ui-bundle.js"
SWAGGER_CSS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.17.14/swagger-ui.css"
REDOC_JS = "https://cdn.jsdelivr.net/npm/redoc@2.1.5/bundles/redoc.standalone.js"
#: ReDoc's web fonts (style sheet and font files).
_FONTS_CSS = "https://fonts.googleapis.com"
_FONTS = "https://fonts.gstatic.com"

#: What ``/docs`` and ``/redoc`` say while they are off.
DOCS_OFF = (
    "the API documentation pages are off on this server; start it with 'caderno serve --docs' "
    "(or docs = true under [server] in its config) to serve /docs and /redoc. "
    "The OpenAPI document is always at /openapi.json"
)

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def _hashes(html: str) -> str:
    """CSP sources for the page's inline scripts: the SHA-256 of each, exactly as served."""
    found = []
    for body in _INLINE_SCRIPT.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        found.append(f"'sha256-{digest}'")
    return " ".join(found)


def _csp(html: str, script: str, styles: str, fonts: str = "'none'") -> str:
    """The page's policy: the pinned script and the inline ones by hash; data only from this origin."""
    return (
        f"default-src 'none'; script-src {script} {_hashes(html)}; "
        f"style-src 'unsafe-inline' {styles}; font-src {fonts}; img-src 'self' data: https:; "
        "connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def _secured(page: HTMLResponse, csp: str) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = csp
    page.headers["X-Content-Type-Options"] = "nosniff"
    page.headers["Referrer-Policy"] = "no-referrer"
    page.headers["X-Frame-Options"] = "DENY"
    return page


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` over ``app``'s OpenAPI document, each with its CSP."""
    url = app.openapi_url or "/openapi.json"
    title = f"{app.title} — API"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(openapi_url=url, title=title, swagger_js_url=SWAGGER_JS, swagger_css_url=SWAGGER_CSS)
        return _secured(page, _csp(bytes(page.body).decode(), SWAGGER_JS, SWAGGER_CSS))

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        page = get_redoc_html(openapi_url=url, title=title, redoc_js_url=REDOC_JS)
        return _secured(page, _csp(bytes(page.body).decode(), REDOC_JS, _FONTS_CSS, _FONTS))


def install_docs_off(app: FastAPI) -> None:
    """Answer ``/docs`` and ``/redoc`` (and Swagger's OAuth page) with a 404 that says how to turn them on."""

    async def off() -> JSONResponse:
        return problem(404, "not-found", "Not found", DOCS_OFF)

    for path in ("/docs", "/docs/oauth2-redirect", "/redoc"):
        app.add_api_route(path, off, methods=["GET"], include_in_schema=False)
