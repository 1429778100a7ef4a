"""Headers beside the inspector, ``/docs`` off by default, and no redirect of a trailing slash."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

pytest.importorskip("fastapi")

from _api_helpers import Api, api_fixture  # noqa: E402, F401

import caderno  # noqa: E402
from caderno.memory.adapters.connect import open_store  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.docs import REDOC_JS, SWAGGER_JS  # noqa: E402
from caderno.server.routes import default_routers  # noqa: E402

SECURITY = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


@pytest.mark.parametrize("path", ["/", "/inspector/index.html", "/inspector/app.js", "/inspector/style.css"])
async def test_every_path_of_the_inspector_carries_its_security_headers(api: Api, path: str) -> None:
    async with api.client() as client:
        answer = await client.get(path)
    assert answer.status_code == 200
    for name, value in SECURITY.items():
        assert answer.headers.get(name) == value, (path, name, answer.headers)
    csp = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
async def test_docs_are_off_by_default(api: Api, path: str) -> None:
    async with api.client() as client:
        assert (await client.get(path)).status_code == 404
        assert (await client.get("/openapi.json")).status_code == 200  # clients are generated from it


@pytest.mark.parametrize("path,script", [("/docs", SWAGGER_JS), ("/redoc", REDOC_JS)])
async def test_docs_when_asked_for_run_only_the_pinned_script_and_their_own(path: str, script: str) -> None:
    import httpx

    memory = caderno.Memory(open_store("memory://"), embedder=None)
    app = create_app(memory, background=False, routers=default_routers(), docs=True)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://caderno.test") as client:
            answer = await client.get(path)
    assert answer.status_code == 200
    csp = answer.headers["content-security-policy"]
    directives = dict(d.strip().partition(" ")[::2] for d in csp.split(";"))
    allowed = directives["script-src"].split()
    inline = re.findall(r"<script>(.*?)</script>", answer.text, re.S)
    hashes = {f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in inline}
    assert set(allowed) == {script} | hashes, csp  # no 'unsafe-inline', no whole CDN host
    assert "@5/" not in script and "@2/" not in script  # a pinned version, not a floating one
    assert script in answer.text and directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'" and answer.headers["x-frame-options"] == "DENY"


async def test_a_trailing_slash_delete_is_not_redirected(api: Api) -> None:
    await api.memory.append_messages(resource_id="bob", thread_id="t1", messages=[caderno.Message.user("oi")])
    before = await api.memory.export_resource(resource_id="bob")
    async with api.client(api.admin) as client:
        for path in ("/v1/resources/bob/", "/v1/resources/bob/threads/t1/"):
            answer = await client.delete(path)
            assert answer.status_code == 404, (path, answer.status_code, answer.headers)
            assert "location" not in answer.headers
    assert await api.memory.export_resource(resource_id="bob") == before
