"""A key for one resource never reaches another's data: generated over every route of the OpenAPI document.

Key A may see ``casa-a`` only. For every operation whose path names a
``{resource}``, key A calls it for ``casa-b`` (other path parameters filled
with casa-b's real ids, a plausible body) and must get the same 404 problem as
for a resource that does not exist; afterwards casa-b's export is byte for
byte what it was. The same calls under A's own resource, with B's ids, must
never show B's text.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _api_helpers import Api, api_fixture, assert_problem  # noqa: E402, F401

SECRET = "SEGREDO-DA-CASA-B"
MERGE = {"content-type": "application/merge-patch+json"}


async def _seed(api: Api) -> dict[str, str]:
    """casa-a and casa-b each with a thread, messages, working memory, facts, a task and notebook notes."""
    ids: dict[str, str] = {}
    async with api.client(api.admin) as admin:
        for rid in ("casa-a", "casa-b"):
            base = f"/v1/resources/{rid}"
            text = SECRET if rid == "casa-b" else "nada a esconder"
            turn = {"messages": [{"role": "user", "content": f"{text} {rid}"}]}
            r = await admin.post(f"{base}/threads/t-{rid}/messages", json=turn)
            assert r.status_code == 201, r.text
            ids[rid] = r.json()[0]["id"]
            assert (await admin.patch(f"{base}/working-memory", content=b'{"x": 1}', headers=MERGE)).status_code == 200
            assert (await admin.put(f"{base}/facts/pref/bebida", json={"value": f"{text} cafe"})).status_code == 200
            task = {"name": "nightly", "schedule": "daily at 9am", "prompt": "resuma o dia"}
            assert (await admin.post(f"{base}/tasks", json=task)).status_code == 201
            note = {"action": "add", "content": f"nota {rid}"}
            assert (await admin.post(f"{base}/notebook/memory", json=note)).status_code == 200
    return ids


def _bodies(export_b: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A plausible request for each operation that takes a body (httpx keyword arguments)."""
    return {
        "create_thread": {"json": {"thread_id": "t-casa-b", "title": "x"}},
        "update_thread": {"json": {"title": "tomado"}},
        "append_messages": {"json": {"messages": [{"role": "user", "content": "invasão"}]}},
        "edit_message": {"json": {"content": "reescrito", "reason": "x"}},
        "patch_working_memory": {"content": b'{"x": 2}', "headers": {**MERGE, "if-match": '"1"'}},
        "edit_notebook": {"json": {"action": "add", "content": "nota invasora"}},
        "recall": {"json": {"query": SECRET}},
        "put_fact": {"json": {"value": "chá"}},
        "create_task": {"json": {"name": "outra", "schedule": "daily at 10am", "prompt": "p"}},
        "import_resource": {"json": export_b},
    }


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, methods in doc["paths"].items()
        if "{resource}" in path
        for method, op in methods.items()
    ]


def _fill(path: str, resource: str, ids: dict[str, str]) -> str:
    values = {
        "resource": resource,
        "thread": "t-casa-b",
        "message_id": ids["casa-b"],
        "category": "pref",
        "key": "bebida",
        "name": "nightly",
        "target": "memory",
    }

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in values, f"no value for path parameter {{{name}}} of {path}: add one to this test"
        return values[name]

    return re.sub(r"\{(\w+)\}", one, path)


async def test_a_key_never_reaches_another_resource(api: Api) -> None:
    ids = await _seed(api)
    key_a = await api.key("casa-a")
    async with api.client(api.admin) as admin, api.client(key_a) as a:
        before = (await admin.get("/v1/resources/casa-b/export")).content
        bodies = _bodies((await admin.get("/v1/resources/casa-b/export")).json())
        missing = assert_problem(await a.get("/v1/resources/casa-nenhuma/threads"), 404, "not-found")

        operations = _operations(api.app.openapi())
        assert len(operations) >= 30
        for method, path, op in operations:
            plan = bodies.get(op["operationId"], {})
            if "requestBody" in op:
                assert plan, f"add a plausible body for {op['operationId']} to this test"
            for resource in ("casa-b", "casa-nenhuma"):
                r = await a.request(method, _fill(path, resource, ids), **plan)
                got = assert_problem(r, 404, "not-found")
                # Identical in shape to the 404 of a resource that does not exist.
                assert set(got) == set(missing), (method, path)
                assert {k: v for k, v in got.items() if k != "detail"} == {
                    k: v for k, v in missing.items() if k != "detail"
                }
                assert got["detail"].replace(resource, "casa-nenhuma") == missing["detail"], (method, path)
                assert SECRET not in r.text
            # Under A's own resource, B's ids must not reach B's data either.
            r = await a.request(method, _fill(path, "casa-a", ids), **plan)
            assert SECRET not in r.text, (method, path, r.text)

        after = (await admin.get("/v1/resources/casa-b/export")).content
        assert after == before
        book = (await admin.get("/v1/resources/casa-b/notebook")).json()
        assert book["entries"]["memory"] == ["nota casa-b"]


async def test_no_key_a_malformed_key_and_a_revoked_key_are_401(api: Api) -> None:
    token = await api.key("casa-a")
    async with api.client() as anonymous, api.client("cad_not-a-real-key") as fake, api.client("Basic x") as odd:
        for c in (anonymous, fake):
            r = await c.get("/v1/resources/casa-a/threads")
            assert_problem(r, 401, "unauthorized")
            assert r.headers["www-authenticate"] == "Bearer"
        assert_problem(await odd.get("/v1/resources"), 401, "unauthorized")
    async with api.client(token) as a, api.client(api.admin) as admin:
        assert (await a.get("/v1/resources/casa-a/threads")).status_code == 200
        key_id = next(k["id"] for k in (await admin.get("/v1/keys")).json() if k["resources"] == ["casa-a"])
        assert (await admin.delete(f"/v1/keys/{key_id}")).status_code == 204
        # Revocation works at once: the very next request is refused.
        assert_problem(await a.get("/v1/resources/casa-a/threads"), 401, "unauthorized")


async def test_keys_routes_need_an_admin_key(api: Api) -> None:
    async with api.client(await api.key("casa-a")) as a:
        assert_problem(await a.get("/v1/keys"), 403, "forbidden")
        assert_problem(await a.post("/v1/keys", json={"resources": ["casa-b"]}), 403, "forbidden")
        assert_problem(await a.delete("/v1/keys/qualquer"), 403, "forbidden")
        assert (await a.get("/v1/resources")).json() == ["casa-a"]
