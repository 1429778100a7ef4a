"""The REST API under /v1, over memory:// and a SQLite file, through the app's real lifespan."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from _api_helpers import Api, api_fixture, assert_problem, build  # noqa: E402, F401
from fastapi.routing import APIRoute  # noqa: E402

import caderno  # noqa: E402
from caderno.core.errors import StorageError  # noqa: E402
from caderno.core.jsonvalue import MAX_PATCH_BYTES  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.routes import MAX_IMPORT_BYTES, install_routes  # noqa: E402
from caderno.stores import ops  # noqa: E402

R = "/v1/resources/casa"
MERGE = {"content-type": "application/merge-patch+json"}


async def test_health_and_ready_need_no_key(api: Api) -> None:
    async with api.client() as c:
        assert (await c.get("/healthz")).json() == {"status": "ok"}
        assert (await c.get("/readyz")).json() == {"status": "ok"}


class _BrokenStore:
    """A store whose database is unreachable."""

    supports = ops.ALL

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def batch(self, batch: Any) -> list[Any]:
        raise StorageError("database unreachable")


async def test_readyz_is_503_when_the_database_is_unreachable() -> None:
    app = create_app(caderno.Memory(_BrokenStore(), embedder=None), background=False, routers=[install_routes])
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert (await c.get("/healthz")).status_code == 200
            assert_problem(await c.get("/readyz"), 503, "not-ready")


async def test_resources_are_the_keys_own_or_all_for_admin(api: Api) -> None:
    token = await api.key("casa", "escritorio")
    async with api.client(api.admin) as admin, api.client(token) as c:
        await admin.post("/v1/resources/outra/threads", json={"thread_id": "t"})
        assert (await c.get("/v1/resources")).json() == ["casa", "escritorio"]
        assert (await admin.get("/v1/resources")).json() == ["outra"]


async def test_another_resource_is_its_404_before_the_body_or_parameters_are_validated(api: Api) -> None:
    """The resource is checked first (``auth.OwnResource``): what else was sent to B's path says nothing."""
    async with api.client(await api.key("casa-a")) as a:
        missing = assert_problem(await a.get("/v1/resources/casa-b/threads"), 404, "not-found")
        for base, status in (("/v1/resources/casa-b", 404), ("/v1/resources/casa-a", 422)):
            for r in (
                await a.post(f"{base}/threads/t/messages", json={"unexpected": 1}),
                await a.get(f"{base}/threads/t/messages", params={"limit": -1}),
                await a.post(f"{base}/notebook/neither", json={"action": "add", "content": "x"}),
            ):
                got = assert_problem(r, status, "not-found" if status == 404 else "invalid-request")
                if status == 404:
                    assert got == missing


async def test_threads_crud(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        r = await c.post(f"{R}/threads", json={"thread_id": "t1", "title": "Compras", "metadata": {"a": 1}})
        assert r.status_code == 201
        assert r.json()["id"] == "t1" and r.json()["resource_id"] == "casa" and r.json()["title"] == "Compras"
        assert_problem(await c.post(f"{R}/threads", json={"thread_id": "t1"}), 409, "conflict")
        made = await c.post(f"{R}/threads", json={})
        assert made.status_code == 201 and made.json()["id"]
        # Left out: kept; null: cleared.
        r = await c.patch(f"{R}/threads/t1", json={"title": "Feira"})
        assert r.json()["title"] == "Feira" and r.json()["metadata"] == {"a": 1}
        r = await c.patch(f"{R}/threads/t1", json={"metadata": None})
        assert r.json()["title"] == "Feira" and r.json()["metadata"] is None
        assert (await c.get(f"{R}/threads/t1")).json()["title"] == "Feira"
        assert {t["id"] for t in (await c.get(f"{R}/threads")).json()} == {"t1", made.json()["id"]}
        assert (await c.delete(f"{R}/threads/t1")).status_code == 204
        assert_problem(await c.get(f"{R}/threads/t1"), 404, "not-found")
        assert_problem(await c.delete(f"{R}/threads/t1"), 404, "not-found")
        assert_problem(await c.patch(f"{R}/threads/t1", json={"title": 3}), 422, "invalid-request")


async def test_messages_append_page_pop_edit_delete_and_log(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        turn = {
            "messages": [
                {"role": "user", "content": "Quanto custa o pão?", "metadata": {"via": "api"}},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "preco", "arguments": {"item": "pão"}}],
                },
                {"role": "tool", "content": "R$ 8", "tool_call_id": "c1", "name": "preco"},
                {"role": "assistant", "content": "Custa R$ 8.", "importance": 0.9},
            ]
        }
        r = await c.post(f"{R}/threads/t/messages", json=turn)
        assert r.status_code == 201
        stored = r.json()
        assert [m["position"] for m in stored] == [1, 2, 3, 4]
        assert stored[1]["tool_calls"] == [{"id": "c1", "name": "preco", "arguments": {"item": "pão"}}]
        assert stored[0]["metadata"] == {"via": "api"} and stored[3]["importance"] == 0.9
        assert [m["content"] for m in (await c.get(f"{R}/threads/t/messages", params={"limit": 2})).json()] == [
            "R$ 8",
            "Custa R$ 8.",
        ]
        older = (await c.get(f"{R}/threads/t/messages", params={"before": 3})).json()
        assert [m["position"] for m in older] == [1, 2]
        assert (await c.get(f"{R}/threads/nada/messages")).json() == []
        # A library refusal is a 400; a body of the wrong shape a 422.
        bad = {"messages": [{"role": "tool", "content": "x"}]}
        assert_problem(await c.post(f"{R}/threads/t/messages", json=bad), 400, "invalid-request")
        assert_problem(
            await c.post(f"{R}/threads/t/messages", json={"messages": [{"role": "bot"}]}), 422, "invalid-request"
        )

        popped = await c.delete(f"{R}/threads/t/messages/last", params={"reason": "desfazer"})
        assert popped.status_code == 200 and popped.json()["content"] == "Custa R$ 8."
        edited = await c.patch(
            f"{R}/messages/{stored[0]['id']}", json={"content": "Quanto custa o café?", "reason": "typo"}
        )
        assert edited.json()["content"] == "Quanto custa o café?"
        deleted = await c.delete(f"{R}/messages/{stored[2]['id']}", params={"reason": "lixo"})
        assert deleted.json()["id"] == stored[2]["id"]
        assert_problem(await c.delete(f"{R}/messages/{stored[2]['id']}"), 404, "not-found")
        log = (await c.get(f"{R}/message-log")).json()
        assert [(e["action"], e["actor"], e["reason"]) for e in log] == [
            ("pop", "api", "desfazer"),
            ("edit", "api", "typo"),
            ("delete", "api", "lixo"),
        ]
        assert log[1]["old_content"] == "Quanto custa o pão?"
        r = await c.get(f"{R}/message-log", params={"message_id": stored[0]["id"]})
        assert [e["action"] for e in r.json()] == ["edit"]
        assert (await c.get(f"{R}/threads/t/summaries")).json() == []
        await c.delete(f"{R}/threads/t/messages/last")
        await c.delete(f"{R}/threads/t/messages/last")
        assert_problem(await c.delete(f"{R}/threads/t/messages/last"), 404, "not-found")


async def test_positions_over_http_say_nothing_of_other_tenants(api: Api) -> None:
    """A client sees each message's place in its thread, never the database-wide counter."""
    async with api.client(await api.key("casa")) as c, api.client(await api.key("outra")) as other:
        for n in range(5):
            await other.post("/v1/resources/outra/threads/x/messages", json={"messages": [{"role": "user", "content": f"m{n}"}]})
        r = await c.post(f"{R}/threads/t/messages", json={"messages": [{"role": "user", "content": "oi"}]})
        assert [m["position"] for m in r.json()] == [1]
        stored = (await c.get(f"{R}/threads/t/messages")).json()
        assert [m["position"] for m in stored] == [1]
        assert all("seq" not in m for m in r.json() + stored)


async def test_working_memory_patch_as_plain_json_is_a_merge_patch(api: Api) -> None:
    """What ``curl --json`` sends (``application/json``) is read as the merge patch it is meant to be."""
    async with api.client(await api.key("casa")) as c:
        r = await c.patch(f"{R}/working-memory", json={"lista": ["pao"], "loja": {"nome": "X", "rua": "Y"}})
        assert r.status_code == 200 and r.headers["etag"] == '"1"'
        r = await c.patch(
            f"{R}/working-memory",
            content=b'{"loja": {"rua": null}, "meta": 3}',
            headers={"content-type": "application/json; charset=utf-8", "if-match": '"1"'},
        )
        assert r.status_code == 200 and r.headers["etag"] == '"2"'
        assert r.json()["data"] == {"lista": ["pao"], "loja": {"nome": "X"}, "meta": 3}
        stale = await c.patch(f"{R}/working-memory", json={"a": 1}, headers={"if-match": '"1"'})
        assert_problem(stale, 412, "precondition-failed")
        broken = await c.patch(f"{R}/working-memory", content=b'{"a": ', headers={"content-type": "application/json"})
        assert_problem(broken, 400, "invalid-request")
        after = await c.get(f"{R}/working-memory")
        assert after.json()["version"] == 2 and after.json()["data"]["meta"] == 3  # nothing refused was stored


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_docs_while_off_say_how_to_turn_them_on(api: Api, path: str) -> None:
    async with api.client() as c:
        body = assert_problem(await c.get(path), 404, "not-found")
    assert "caderno serve --docs" in body["detail"] and "/openapi.json" in body["detail"]


async def test_working_memory_etag_if_match_and_merge_patch(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        r = await c.get(f"{R}/working-memory")
        assert r.json() == {"data": None, "version": 0, "updated_at": None} and r.headers["etag"] == '"0"'
        refused = await c.patch(f"{R}/working-memory", content=b'{"a": 1}', headers={"content-type": "text/plain"})
        assert "application/merge-patch+json" in assert_problem(refused, 415, "unsupported-media-type")["detail"]
        r = await c.patch(
            f"{R}/working-memory",
            content=b'{"lista": ["pao"], "loja": {"nome": "X"}}',
            headers={**MERGE, "if-match": '"0"'},
        )
        assert r.status_code == 200 and r.headers["etag"] == '"1"' and r.json()["version"] == 1
        stale = await c.patch(f"{R}/working-memory", content=b'{"a": 1}', headers={**MERGE, "if-match": '"0"'})
        body = assert_problem(stale, 412, "precondition-failed")
        assert (body["expected_version"], body["actual_version"]) == (0, 1)
        r = await c.patch(f"{R}/working-memory", content=b'{"loja": {"nome": null, "bairro": "Centro"}}', headers=MERGE)
        assert r.headers["etag"] == '"2"' and r.json()["data"] == {"lista": ["pao"], "loja": {"bairro": "Centro"}}
        weak = await c.patch(f"{R}/working-memory", content=b'{"z": 1}', headers={**MERGE, "if-match": 'W/"2"'})
        assert_problem(weak, 412, "precondition-failed")  # If-Match compares strongly (RFC 9110 13.1.1)
        r = await c.patch(f"{R}/working-memory", content=b'{"z": 1}', headers={**MERGE, "if-match": '"2"'})
        assert r.headers["etag"] == '"3"'
        assert (await c.get(f"{R}/working-memory")).headers["etag"] == '"3"'
        assert_problem(await c.patch(f"{R}/working-memory", content=b"[1]", headers=MERGE), 422, "invalid-patch")
        assert_problem(await c.patch(f"{R}/working-memory", content=b"{nope", headers=MERGE), 400, "invalid-request")
        bad_tag = await c.patch(f"{R}/working-memory", content=b"{}", headers={**MERGE, "if-match": "3"})
        assert_problem(bad_tag, 400, "invalid-request")
        log = (await c.get(f"{R}/working-memory/log")).json()
        assert [e["version"] for e in log] == [1, 2, 3] and all(e["source"] == "api" for e in log)


async def test_working_memory_conflict_without_if_match_stays_409(api: Api) -> None:
    from caderno.core.errors import Conflict
    from caderno.server import problems

    # The library's own Conflict (no If-Match sent) keeps its 409 problem.
    response = problems._for(Conflict("x", resource_id="casa", expected=1, actual=2))
    assert response.status_code == 409 and json.loads(bytes(response.body))["type"].endswith("/conflict")


async def test_bodies_over_the_limits_are_413(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        big = json.dumps({"x": "a" * MAX_PATCH_BYTES}).encode()
        assert_problem(await c.patch(f"{R}/working-memory", content=big, headers=MERGE), 413, "too-large")

        async def chunks() -> Any:  # no Content-Length: the streamed size is counted
            for _ in range(MAX_PATCH_BYTES // 1024 + 2):
                yield b" " * 1024

        assert_problem(await c.patch(f"{R}/working-memory", content=chunks(), headers=MERGE), 413, "too-large")
        r = await c.post(
            f"{R}/import", content=b" " * (MAX_IMPORT_BYTES + 1), headers={"content-type": "application/json"}
        )
        assert_problem(r, 413, "too-large")
        assert (await c.get(f"{R}/working-memory")).json()["version"] == 0


async def test_notebook_lives_in_the_database_and_refusals_are_422(api: Api, caderno_home: Path) -> None:
    async with api.client(await api.key("casa")) as c:
        r = await c.post(f"{R}/notebook/user", json={"action": "add", "content": "Prefere café sem açúcar."})
        assert (
            r.status_code == 200 and r.json()["success"] is True and r.json()["entries"] == ["Prefere café sem açúcar."]
        )
        r = await c.post(f"{R}/notebook/memory", json={"action": "add", "content": "Feira às quintas."})
        book = (await c.get(f"{R}/notebook")).json()
        # Without a thread: what a conversation starting now would freeze.
        assert "Feira às quintas." in book["snapshot"]["memory"] and "café" in book["snapshot"]["user"]
        assert book["entries"] == {"memory": ["Feira às quintas."], "user": ["Prefere café sem açúcar."]}
        # A conversation's snapshot: none before it froze one, then the stored one, unmoved by later writes.
        frozen = (await c.get(f"{R}/notebook", params={"thread_id": "jantar"})).json()["snapshot"]
        assert frozen == {"memory": None, "user": None}
        taken = await api.memory.notebook("casa").freeze("jantar")
        r = await c.post(
            f"{R}/notebook/memory", json={"action": "replace", "old_text": "quintas", "content": "Feira às sextas."}
        )
        assert r.json()["entries"] == ["Feira às sextas."]
        assert (await c.get(f"{R}/notebook", params={"thread_id": "jantar"})).json()["snapshot"] == taken
        assert "sextas" in (await c.get(f"{R}/notebook")).json()["snapshot"]["memory"]
        refused = await c.post(f"{R}/notebook/memory", json={"action": "remove", "old_text": "não existe"})
        assert "não existe" in assert_problem(refused, 422, "notebook")["detail"]
        assert_problem(
            await c.post(f"{R}/notebook/diario", json={"action": "add", "content": "x"}), 422, "invalid-request"
        )
        assert_problem(await c.post(f"{R}/notebook/memory", json={"action": "add"}), 422, "notebook")
    # Rows, not files: the server wrote nothing under its home, and the export carries the notebook.
    assert not (caderno_home / "notebooks").exists()
    dump = await api.memory.export_resource(resource_id="casa")
    assert dump["notebook"] == {"memory": ["Feira às sextas."], "user": ["Prefere café sem açúcar."]}


async def test_notebook_routes_refuse_ids_that_are_paths_and_write_nothing(
    api: Api, caderno_home: Path
) -> None:
    # The notebook routes apply the id rules as every route does, and write nothing for a refused id.
    before = sorted(p.relative_to(caderno_home) for p in caderno_home.rglob("*"))
    async with api.client(api.admin) as c:
        for bad in ("%2E%2E", "a%01b", "%E2%80%AEevil"):
            refused = await c.post(f"/v1/resources/{bad}/notebook/memory", json={"action": "add", "content": "x"})
            assert "resource id" in assert_problem(refused, 400, "invalid-request")["detail"]
        assert_problem(await c.get("/v1/resources/a%00b/notebook"), 400, "invalid-request")
        assert (await c.get("/v1/resources/casa/notebook")).status_code == 200
    assert sorted(p.relative_to(caderno_home) for p in caderno_home.rglob("*") if "casa" not in str(p)) == before


async def test_recall_finds_past_messages(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        await c.post(
            f"{R}/threads/t1/messages", json={"messages": [{"role": "user", "content": "A senha do wifi é girassol"}]}
        )
        await c.post(
            f"{R}/threads/t2/messages", json={"messages": [{"role": "user", "content": "Comprar leite amanhã"}]}
        )
        hits = (await c.post(f"{R}/recall", json={"query": "wifi", "recent": 0, "salient": 0})).json()
        assert [(h["thread_id"], h["message"]["content"]) for h in hits] == [("t1", "A senha do wifi é girassol")]
        assert hits[0]["reasons"] == ["lexical"] and hits[0]["score"] > 0
        assert_problem(await c.post(f"{R}/recall", json={"query": "x", "scope": "thread"}), 400, "invalid-request")


async def test_facts_put_list_history_delete(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        r = await c.put(f"{R}/facts/Preferencias/bebida", json={"value": "chá"})
        assert r.status_code == 200 and r.json()["source"] == "user" and r.json()["category"] == "preferencias"
        await c.put(f"{R}/facts/preferencias/bebida", json={"value": "café"})
        await c.put(f"{R}/facts/casa/cidade", json={"value": "Recife"})
        assert {f["key"] for f in (await c.get(f"{R}/facts")).json()} == {"bebida", "cidade"}
        only = (await c.get(f"{R}/facts", params={"category": "preferencias"})).json()
        assert [(f["key"], f["value"]) for f in only] == [("bebida", "café")]
        history = (await c.get(f"{R}/facts/preferencias/bebida/history")).json()
        assert [h["value"] for h in history] == ["chá"]
        assert (await c.delete(f"{R}/facts/preferencias/bebida")).status_code == 204
        assert_problem(await c.delete(f"{R}/facts/preferencias/bebida"), 404, "not-found")


async def test_tasks_create_pause_resume_delete(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        body = {"name": "bom-dia", "schedule": "daily at 9am", "prompt": "Diga bom dia", "timezone": "America/Recife"}
        r = await c.post(f"{R}/tasks", json=body)
        assert r.status_code == 201 and r.json()["cron_expr"] and r.json()["thread_id"] == "task:bom-dia"
        assert_problem(await c.post(f"{R}/tasks", json=body), 409, "conflict")
        assert_problem(
            await c.post(f"{R}/tasks", json={**body, "name": "x", "schedule": "whenever"}), 400, "invalid-request"
        )
        assert (await c.post(f"{R}/tasks/bom-dia/pause")).json()["is_paused"] is True
        assert (await c.post(f"{R}/tasks/bom-dia/resume")).json()["is_paused"] is False
        assert [t["name"] for t in (await c.get(f"{R}/tasks")).json()] == ["bom-dia"]
        assert (await c.delete(f"{R}/tasks/bom-dia")).status_code == 204
        assert_problem(await c.delete(f"{R}/tasks/bom-dia"), 404, "not-found")
        assert_problem(await c.post(f"{R}/tasks/bom-dia/pause"), 404, "not-found")


async def test_export_erase_import_round_trip(api: Api) -> None:
    async with api.client(await api.key("casa")) as c:
        await c.post(f"{R}/threads/t/messages", json={"messages": [{"role": "user", "content": "oi"}]})
        await c.patch(f"{R}/working-memory", content=b'{"a": 1}', headers=MERGE)
        await c.put(f"{R}/facts/x/y", json={"value": "z"})
        exported = (await c.get(f"{R}/export")).json()
        assert exported["resource_id"] == "casa" and exported["threads"][0]["messages"][0]["content"] == "oi"
        assert_problem(await c.post(f"{R}/import", json=exported), 400, "invalid-request")  # not empty
        assert (await c.delete(R)).status_code == 204
        assert (await c.get(f"{R}/threads")).json() == []
        assert_problem(await c.post(f"{R}/import", json={**exported, "resource_id": "outra"}), 400, "invalid-request")
        assert (await c.post(f"{R}/import", json=exported)).status_code == 204
        assert (await c.get(f"{R}/export")).json() == exported


async def test_keys_admin_create_list_revoke(api: Api) -> None:
    async with api.client(api.admin) as admin:
        r = await admin.post("/v1/keys", json={"resources": ["casa"], "name": "app"})
        assert (
            r.status_code == 201 and r.json()["token"].startswith("cad_") and r.json()["key"]["resources"] == ["casa"]
        )
        token, key_id = r.json()["token"], r.json()["key"]["id"]
        assert_problem(await admin.post("/v1/keys", json={}), 400, "invalid-request")
        listed = {k["id"]: k for k in (await admin.get("/v1/keys")).json()}
        assert listed[key_id]["revoked_at"] is None and "token" not in listed[key_id]
        async with api.client(token) as c:
            assert (await c.get(f"{R}/threads")).status_code == 200
            assert (await admin.delete(f"/v1/keys/{key_id}")).status_code == 204
            assert_problem(await c.get(f"{R}/threads"), 401, "unauthorized")
        assert_problem(await admin.delete(f"/v1/keys/{key_id}"), 404, "not-found")
        listed = {k["id"]: k for k in (await admin.get("/v1/keys")).json()}
        assert listed[key_id]["revoked_at"] is not None


async def test_every_route_has_an_operation_id_tags_and_documented_problems(api: Api) -> None:
    doc = api.app.openapi()
    from caderno.server import routes

    ours = [r for r in (*routes.health.routes, *routes.v1.routes) if isinstance(r, APIRoute)]
    assert len(ours) >= 35
    for route in ours:
        assert route.operation_id, route.path
        assert route.tags, route.path
    explicit = {r.operation_id for r in ours}
    for path, methods in doc["paths"].items():
        if path.startswith(("/v1/resources", "/v1/keys", "/healthz", "/readyz")):
            assert {op["operationId"] for op in methods.values()} <= explicit, path
    ids = [op["operationId"] for path in doc["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    for path, methods in doc["paths"].items():
        if "{resource}" not in path:
            continue
        for method, op in methods.items():
            for status in ("401", "404", "422"):
                assert "application/problem+json" in op["responses"][status]["content"], (method, path, status)
    wm = doc["paths"]["/v1/resources/{resource}/working-memory"]["patch"]
    assert {"409", "412", "413", "415"} <= set(wm["responses"])
    assert "application/merge-patch+json" in wm["requestBody"]["content"]
    assert "Problem" in doc["components"]["schemas"]


def test_path_parameters_are_documented_once_in_the_order_of_the_path() -> None:
    """``{resource}`` comes from a dependency, yet generated clients still take (resource, thread, …) in that order."""
    app, _ = build("memory://")
    for path, methods in app.openapi()["paths"].items():
        for method, op in methods.items():
            named = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
            assert named == re.findall(r"{(\w+)}", path), (method, path, named)


def test_build_alone_imports_without_a_running_loop(tmp_path: Any) -> None:
    app, _ = build("memory://")
    assert "/v1/resources" in app.openapi()["paths"]
