"""Shared by the REST API tests: the app over a real store, with its real lifespan, and an HTTP client.

A helper module, not a ``conftest.py``: a conftest here would shadow
``tests/conftest.py`` for ``from conftest import …`` in this folder.
Import ``api_fixture`` (the ``api`` fixture) into a test module to use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import caderno
from caderno.memory.adapters.connect import open_store

#: Backends of the API tests: the in-process store and a real SQLite file.
API_BACKENDS = ["memory", "sqlite"]


@dataclass
class Api:
    app: Any
    memory: caderno.Memory
    admin: str
    """An admin key's token."""

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(transport=transport, base_url="http://caderno.test", headers=headers)

    async def key(self, *resources: str) -> str:
        token, _ = await self.memory.keys.create(resources=resources)
        return token


def build(url: str) -> tuple[Any, caderno.Memory]:
    """The app ``caderno serve`` runs (REST API, proxy, inspector), no background work, no embedder."""
    from caderno.server import create_app
    from caderno.server.routes import default_routers

    memory = caderno.Memory(open_store(url), embedder=None)
    return create_app(memory, background=False, routers=default_routers()), memory


@pytest.fixture(params=API_BACKENDS, name="api")
async def api_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'api.db'}"
    app, memory = build(url)
    async with app.router.lifespan_context(app):  # the real lifespan: opens, then closes the memory
        token, _ = await memory.keys.create(admin=True, name="test admin")
        yield Api(app=app, memory=memory, admin=token)


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    """The response is an ``application/problem+json`` of this status and type; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["type"] == f"https://caderno.dev/problems/{slug}", body
    assert body["status"] == status
    assert isinstance(body["title"], str) and isinstance(body["detail"], str)
    return body
