"""Erasure over HTTP wins over a proxy turn in flight, on both endpoints, streamed or not, on SQLite and PostgreSQL.

A proxy turn waits on its model (the scripted upstream holds its answer
behind a gate) while the client's app erases the resource or deletes the
thread (``DELETE``, 204). When the model answers, the turn stores nothing:
the prompt it was built from held what the erase removed. The client gets a
409 ``erased`` (streamed: the error event of its endpoint), and the
resource, its thread and its working memory stay gone.

Before the commit's lease check became a fence these failed: the turn was
stored after the 204, thread, erased message and all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from _upstream import Upstream, call, proxy_in_front, sse_data, text  # noqa: E402

import caderno  # noqa: E402
from caderno.server.proxy import THREAD_HEADER  # noqa: E402

SSN = "123-45-6789"
ERASES = {"resource": "/v1/resources/casa", "thread": "/v1/resources/casa/threads/t"}


@dataclass
class Served:
    memory: caderno.Memory
    upstream: Upstream
    http: httpx.AsyncClient


@pytest.fixture
async def served(shared_url: str) -> AsyncIterator[Served]:
    upstream = Upstream()
    memory = await caderno.connect(shared_url, embedder=None)
    token, _ = await memory.keys.create(resources=["casa"], name="app")
    try:
        async with proxy_in_front(memory, upstream, api=True) as base_url:
            headers = {"Authorization": f"Bearer {token}", THREAD_HEADER: "t"}
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
                try:
                    yield Served(memory=memory, upstream=upstream, http=http)
                finally:
                    if upstream.gate is not None:  # a failed test must not leave a turn waiting for ever
                        upstream.gate.set()
    finally:
        await memory.close()


def body(endpoint: str, stream: bool, ask: str) -> dict[str, Any]:
    if endpoint == "chat":
        return {"model": "m", "messages": [{"role": "user", "content": ask}], "stream": stream}
    return {"model": "m", "input": ask, "stream": stream}


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


def failure_of(endpoint: str, stream: bool, response: httpx.Response) -> str:
    """The problem type a client reads: the 409's, or the streamed error event's."""
    if not stream:
        assert response.status_code == 409, response.text
        return str(response.json()["type"]).rsplit("/", 1)[-1]
    events = sse_data(response.text)
    if endpoint == "chat":
        [error] = [e["error"] for e in events if "error" in e]
        return str(error["type"])
    [failed] = [e for e in events if e.get("type") == "response.failed"]
    return str(failed["response"]["error"]["code"])


@pytest.mark.parametrize("erase", sorted(ERASES))
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("endpoint", sorted(PATHS))
async def test_a_proxy_turn_in_flight_stores_nothing_after_an_erase(
    served: Served, endpoint: str, stream: bool, erase: str
) -> None:
    memory, upstream = served.memory, served.upstream
    await memory.append_messages(
        resource_id="casa", thread_id="t", messages=[caderno.Message.user(f"o meu SSN é {SSN}")]
    )
    await memory.update_working_memory(resource_id="casa", patch={"ssn": SSN})
    upstream.script = [call("update_working_memory", {"patch": {"ssn": SSN, "back": True}}), text(f"SSN {SSN}")]
    upstream.gate = gate = asyncio.Event()
    turn = asyncio.create_task(served.http.post(PATHS[endpoint], json=body(endpoint, stream, "e o meu SSN?")))
    await upstream.arrived.wait()  # the turn's prompt is built and the model is working on it
    assert SSN in json.dumps(upstream.requests[0]["messages"])
    erased = await served.http.delete(ERASES[erase])
    assert erased.status_code == 204
    gate.set()
    response = await turn
    assert failure_of(endpoint, stream, response) == "erased"
    assert await memory.get_messages(resource_id="casa", thread_id="t") == []
    dump = await memory.export_resource(resource_id="casa")
    assert dump["threads"] == []
    if erase == "resource":
        assert await memory.get_working_memory(resource_id="casa") is None and SSN not in repr(dump)
    else:
        assert await memory.get_working_memory(resource_id="casa") == {"ssn": SSN}  # the turn's patch is not stored


async def test_a_paused_client_tool_turn_does_not_come_back_after_an_erase(served: Served) -> None:
    """A turn paused on the client's tool: its steps so far are erased, and the client's results are refused."""
    memory, upstream = served.memory, served.upstream
    tool = {
        "type": "function",
        "function": {"name": "lookup", "description": "Look it up.", "parameters": {"type": "object"}},
    }
    upstream.script = [call("lookup", {}, "call_l"), text(f"SSN {SSN}")]
    ask = {"role": "user", "content": f"o meu SSN é {SSN}; confere?"}
    first = await served.http.post(PATHS["chat"], json={"model": "m", "messages": [ask], "tools": [tool]})
    assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert (await served.http.delete(ERASES["thread"])).status_code == 204
    step = first.json()["choices"][0]["message"]
    result = {"role": "tool", "tool_call_id": "call_l", "content": "ok"}
    again = await served.http.post(PATHS["chat"], json={"model": "m", "messages": [ask, step, result], "tools": [tool]})
    assert again.status_code == 400, again.text  # no stored call waits for that result any more
    assert len(upstream.requests) == 1  # no model call for it
    assert await memory.get_messages(resource_id="casa", thread_id="t") == []
