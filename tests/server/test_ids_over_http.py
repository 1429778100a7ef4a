"""Ids are names over HTTP: a body or path id that is a path is a 400 with the rule, and nothing is written.

Path parameters reach the memory layer decoded (``%2E%2E`` arrives as
``..``), so the same ``check_name`` refuses them as every other entry.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from _api_helpers import Api, api_fixture, assert_problem  # noqa: E402, F401

from caderno import Message  # noqa: E402
from caderno.core.validate import NAME_RULE  # noqa: E402


async def test_path_ids_are_refused_by_every_write_route(api: Api) -> None:
    await api.memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("oi")])
    dump = await api.memory.export_resource(resource_id="casa")
    poisoned = json.loads(json.dumps(dump).replace('"casa"', '"nova"'))
    poisoned["threads"][0]["id"] = "../../bob"
    casa = "/v1/resources/casa"
    async with api.client(api.admin) as client:
        before = (await client.get(f"{casa}/export")).content
        refused = [
            await client.post(f"{casa}/threads", json={"thread_id": "../../bob"}),
            await client.post(f"{casa}/threads", json={"thread_id": "."}),
            await client.post(f"{casa}/threads/%2E%2E/messages", json={"messages": [{"role": "user", "content": "x"}]}),
            await client.put(f"{casa}/facts/%2E%2E/city", json={"value": "x"}),
            await client.put(f"{casa}/facts/home/%2E", json={"value": "x"}),
            await client.post(f"{casa}/tasks", json={"name": "..", "schedule": "daily at 9am", "prompt": "p"}),
            await client.post("/v1/resources/%2E%2E/threads", json={"thread_id": "t"}),
            await client.post("/v1/resources/nova/import", json=poisoned),
            await client.post("/v1/keys", json={"resources": ["../../bob"]}),
        ]
        for response in refused:
            body = assert_problem(response, 400, "invalid-request")
            assert NAME_RULE in body["detail"], (response.request.method, response.request.url, body)
        assert (await client.get(f"{casa}/export")).content == before
        assert (await client.get("/v1/resources")).json() == ["casa"]
        assert len((await client.get("/v1/keys")).json()) == 1
