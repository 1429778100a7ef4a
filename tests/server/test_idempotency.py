"""Idempotency-Key on appends and on the memory proxy: a retry returns the stored turn, never a second one.

Issue 21, finding 7: a client that gave up (the OpenAI SDK then retries by
default) got its turn stored twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from _api_helpers import Api, api_fixture, assert_problem, build  # noqa: E402, F401

import caderno  # noqa: E402
from caderno import Message, ScriptedModel  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.proxy import THREAD_HEADER  # noqa: E402
from caderno.server.routes import default_routers  # noqa: E402

R = "/v1/resources/casa"
TURN = {"messages": [{"role": "user", "content": "oi"}, {"role": "assistant", "content": "olá"}]}


async def _export(memory: caderno.Memory, rid: str = "casa") -> str:
    return json.dumps(await memory.export_resource(resource_id=rid), sort_keys=True)


async def test_an_append_retried_with_its_key_is_stored_once(api: Api) -> None:
    async with api.client(api.admin) as c:
        first = await c.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == 201, first.text
        stored = await _export(api.memory)
        again = await c.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k-1"})
        assert again.status_code == 201 and again.json() == first.json()
        assert await _export(api.memory) == stored
        other = await c.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k-2"})
        assert other.status_code == 201
    assert len(await api.memory.get_messages(resource_id="casa", thread_id="t")) == 4


async def test_the_same_key_with_other_messages_is_refused(api: Api) -> None:
    async with api.client(api.admin) as c:
        await c.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k"})
        stored = await _export(api.memory)
        changed = {"messages": [{"role": "user", "content": "outra coisa"}]}
        r = await c.post(R + "/threads/t/messages", json=changed, headers={"Idempotency-Key": "k"})
        assert_problem(r, 422, "idempotency-key-reused")
        assert await _export(api.memory) == stored


@pytest.mark.parametrize("key", ["", "a b", "x" * 256, "chave-ç"])
async def test_a_malformed_key_is_a_400(api: Api, key: str) -> None:
    async with api.client(api.admin) as c:
        r = await c.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": key.encode("utf-8")})
        assert_problem(r, 400, "invalid-request")
    assert await api.memory.get_messages(resource_id="casa", thread_id="t") == []


async def test_one_key_in_two_resources_and_threads_names_different_turns(api: Api) -> None:
    a, b = await api.key("casa"), await api.key("outra")
    async with api.client(a) as ca, api.client(b) as cb:
        ra = await ca.post(R + "/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k"})
        rb = await cb.post("/v1/resources/outra/threads/t/messages", json=TURN, headers={"Idempotency-Key": "k"})
        rt = await ca.post(R + "/threads/u/messages", json=TURN, headers={"Idempotency-Key": "k"})
    assert ra.status_code == rb.status_code == rt.status_code == 201
    ids = [{m["id"] for m in r.json()} for r in (ra, rb, rt)]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2])


def _proxy_app(tmp_path: Path, model: ScriptedModel) -> tuple[Any, caderno.Memory]:
    memory = caderno.Memory(caderno.memory.adapters.connect.open_store(f"sqlite:///{tmp_path / 'p.db'}"), embedder=None)
    return create_app(memory, model=model, background=False, routers=default_routers()), memory


async def test_a_proxy_retry_with_its_key_returns_the_stored_turn(tmp_path: Path) -> None:
    model = ScriptedModel([Message.assistant("primeira resposta"), Message.assistant("segunda")])
    app, memory = _proxy_app(tmp_path, model)
    async with app.router.lifespan_context(app):
        token, _ = await memory.keys.create(resources=["casa"])
        transport = httpx.ASGITransport(app=app)
        headers = {"authorization": f"Bearer {token}", THREAD_HEADER: "t", "Idempotency-Key": "req-1"}
        body = {"model": "x", "messages": [{"role": "user", "content": "oi"}]}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
            first = await c.post("/v1/chat/completions", json=body)
            again = await c.post("/v1/chat/completions", json=body)
            changed = await c.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "outra"}]}
            )
        assert first.status_code == again.status_code == 200, again.text
        assert again.json()["choices"][0]["message"]["content"] == "primeira resposta"
        assert again.json()["id"] == first.json()["id"]
        assert len(model.requests) == 1  # the retry called no model
        assert_problem(changed, 422, "idempotency-key-reused")
        assert [m.content for m in await memory.get_messages(resource_id="casa", thread_id="t")] == [
            "oi",
            "primeira resposta",
        ]
