"""Summaries over HTTP name their span in positions of the thread, never in the database-wide seq."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from _api_helpers import Api, api_fixture  # noqa: E402, F401

R = "/v1/resources/casa"


async def test_summaries_over_http_name_positions_not_seq(api: Api) -> None:
    async with api.client(await api.key("casa")) as c, api.client(await api.key("outra")) as other:
        for n in range(6):  # another tenant writes first: seq and position part ways
            turn = {"messages": [{"role": "user", "content": f"someone else {n}"}]}
            assert (await other.post("/v1/resources/outra/threads/x/messages", json=turn)).status_code == 201
        for n in range(30):  # past the default summarize_after_tokens (2000)
            text = f"Turn {n}: we paid R$ {100 + n},00 at Mercado Central. " * 8
            turn = {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": f"Noted {n}."}]}
            assert (await c.post(f"{R}/threads/t/messages", json=turn)).status_code == 201
        assert (await api.memory.consolidation.run(resource_id="casa"))["summaries"] == 1
        (summary,) = (await c.get(f"{R}/threads/t/summaries")).json()
        body = summary["message"]
        assert "seq" not in body and "covers" not in body["metadata"] and body["position"] is None
        first, last = body["metadata"]["span"]
        assert first == 1 and body["metadata"]["count"] == last
        stored = (await c.get(f"{R}/threads/t/messages")).json()
        assert [m["position"] for m in stored] == list(range(1, 61)) and last < 60
