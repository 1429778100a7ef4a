"""Errors as ``application/problem+json`` (RFC 9457), with a stable ``type`` per caderno error.

Every refusal of the library keeps its meaning over HTTP: the class of the
caderno error picks the status and the ``type`` URI; ``detail`` is the
library's own message (never a driver's text: stores scrub those).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import errors
from .auth import Forbidden, Unauthorized

__all__ = ["PROBLEM_TYPES", "install", "problem"]

#: Base of every problem ``type`` URI (documentation anchors, stable across versions).
TYPE_BASE = "https://caderno.dev/problems/"

#: caderno error class -> (HTTP status, type slug, title); the most specific class wins.
PROBLEM_TYPES: list[tuple[type[BaseException], int, str, str]] = [
    (errors.InvalidPatch, 422, "invalid-patch", "Invalid working-memory patch"),
    (errors.InvalidToolArguments, 422, "invalid-tool-arguments", "Invalid tool arguments"),
    (errors.Unsupported, 501, "unsupported", "Not supported by this store"),
    (errors.UsageError, 400, "invalid-request", "Invalid request"),
    (errors.NotFound, 404, "not-found", "Not found"),
    (errors.Conflict, 409, "conflict", "Version conflict"),
    (errors.NotebookError, 422, "notebook", "Notebook refused the change"),
    (errors.ModelError, 502, "model-error", "The model failed"),
    (errors.SchemaTooNew, 503, "schema-too-new", "Database written by a newer caderno"),
    (errors.StorageError, 503, "storage", "Storage unavailable"),
    (errors.MissingExtra, 501, "missing-extra", "Optional dependency missing"),
    (errors.EmbeddingUnavailable, 503, "embedding-unavailable", "Embeddings unavailable"),
    (errors.CadernoError, 500, "caderno-error", "caderno error"),
    (Unauthorized, 401, "unauthorized", "Unauthorized"),
    (Forbidden, 403, "forbidden", "Forbidden"),
]


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


def _for(exc: BaseException) -> JSONResponse:
    for kind, status, slug, title in PROBLEM_TYPES:
        if isinstance(exc, kind):
            extra: dict[str, Any] = {}
            if isinstance(exc, errors.Conflict):
                extra = {"expected_version": exc.expected, "actual_version": exc.actual}
            return problem(status, slug, title, str(exc), **extra)
    return problem(500, "internal", "Internal error", "an unexpected error; see the server log")


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
        slug = {404: "not-found", 405: "method-not-allowed", 413: "too-large"}.get(exc.status_code, "http")
        return problem(exc.status_code, slug, str(exc.detail), str(exc.detail))

    for kind in (errors.CadernoError, Unauthorized, Forbidden):
        app.add_exception_handler(kind, caderno_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
