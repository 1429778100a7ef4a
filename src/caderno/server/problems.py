"""Errors as ``application/problem+json`` (RFC 9457), with a stable ``type`` per caderno error.

Every refusal of the library keeps its meaning over HTTP: the class of the
caderno error picks the status and the ``type`` URI; ``detail`` is the
library's own message (never a driver's text: stores scrub those).

Anything else — a bug, an error no handler knows — is ``internal`` (500)
with a fixed sentence; its text and traceback go to the server log only
(``edge.Edge`` catches it, so the client always gets this body, never a
plain-text 500 or a reset connection).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core import errors

__all__ = ["PROBLEM_TYPES", "for_error", "http_problem", "install", "problem", "with_message"]

#: Base of every problem ``type`` URI (documentation anchors, stable across versions).
TYPE_BASE = "https://caderno.dev/problems/"

#: caderno error class -> (HTTP status, type slug, title); the most specific class wins.
PROBLEM_TYPES: list[tuple[type[BaseException], int, str, str]] = [
    (errors.InvalidPatch, 422, "invalid-patch", "Invalid working-memory patch"),
    (errors.InvalidToolArguments, 422, "invalid-tool-arguments", "Invalid tool arguments"),
    (errors.Unsupported, 501, "unsupported", "Not supported by this store"),
    (errors.UsageError, 400, "invalid-request", "Invalid request"),
    (errors.NotFound, 404, "not-found", "Not found"),
    (errors.ThreadBusy, 409, "thread-busy", "Another turn holds this thread"),
    (errors.Erased, 409, "erased", "The thread was erased while the turn ran"),
    (errors.Conflict, 409, "conflict", "Version conflict"),
    (errors.NotebookError, 422, "notebook", "Notebook refused the change"),
    (errors.ModelError, 502, "model-error", "The model failed"),
    (errors.SchemaTooNew, 503, "schema-too-new", "Database written by a newer caderno"),
    (errors.StorageBusy, 503, "busy", "A lock this write needs is held: nothing was stored"),
    (errors.OutcomeUnknown, 503, "storage-unknown", "Storage failed mid-commit: the write may be stored"),
    (errors.StorageError, 503, "storage", "Storage unavailable"),
    (errors.MissingExtra, 501, "missing-extra", "Optional dependency missing"),
    (errors.EmbeddingUnavailable, 503, "embedding-unavailable", "Embeddings unavailable"),
    (errors.Unauthorized, 401, "unauthorized", "Unauthorized"),
    (errors.Forbidden, 403, "forbidden", "Forbidden"),
    (errors.CadernoError, 500, "caderno-error", "caderno error"),
]


#: HTTP statuses (from Starlette's own errors) -> type slug.
HTTP_SLUGS = {400: "invalid-request", 404: "not-found", 405: "method-not-allowed", 413: "too-large"}


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    """An ``application/problem+json`` response.

    A 413 also closes the connection: the client may still be sending the
    body it was refused, and reading it all just to keep the connection
    would be the very cost the limit is there to refuse.
    """
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status == 413:
        headers["Connection"] = "close"
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers or None)


def http_problem(status: int, detail: str) -> JSONResponse:
    """The problem for an HTTP-level refusal (unknown route, wrong method, body too large…)."""
    return problem(status, HTTP_SLUGS.get(status, "http"), detail, detail)


def for_error(exc: BaseException) -> JSONResponse:
    """The problem for ``exc``: its caderno type, or ``internal`` with nothing of its text."""
    return _for(exc)


def _for(exc: BaseException) -> JSONResponse:
    for kind, status, slug, title in PROBLEM_TYPES:
        if isinstance(exc, kind):
            extra: dict[str, Any] = {}
            if isinstance(exc, errors.Conflict):
                extra = {"expected_version": exc.expected, "actual_version": exc.actual}
            return problem(status, slug, title, str(exc), **extra)
    return problem(500, "internal", "Internal error", "an unexpected error; see the server log")


def with_message(response: Response) -> Response:
    """The same problem with a top-level ``message`` (= ``detail``), where OpenAI clients read the text."""
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        return response
    if not isinstance(body, dict) or "detail" not in body:
        return response
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
    return JSONResponse(
        {**body, "message": body["detail"]},
        status_code=response.status_code,
        media_type=response.media_type,
        headers=headers,
    )


def install(app: FastAPI) -> None:
    """Route every error of the app through ``problem``."""

    async def caderno_error(request: Request, exc: Exception) -> JSONResponse:
        return _for(exc)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'body'}: {e.get('msg')}" for e in exc.errors()
        )
        return problem(422, "invalid-request", "Invalid request", problems[:2000])

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        response = http_problem(exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    app.add_exception_handler(errors.CadernoError, caderno_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
