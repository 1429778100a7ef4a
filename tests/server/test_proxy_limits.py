"""The memory proxy's bounds, its memory, its deadline and a client that leaves mid-turn.

Issue 21, findings 3 and 7: each distinct system prompt cached an
``AgentChat`` (64 of them, failed turns too: eight 20 MB prompts held +260
MiB for good); a request's size was unbounded; a hung upstream held a
thread's lock for 60 s x max_steps; a client that disconnected had no
stated outcome.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _api_helpers import assert_problem  # noqa: E402

import caderno  # noqa: E402
from caderno import AgentChat, ChatSettings, Message, ScriptedModel  # noqa: E402
from caderno.core.errors import ModelError  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.proxy import MAX_INSTRUCTIONS_CHARS, MAX_REQUEST_CHARS, THREAD_HEADER  # noqa: E402
from caderno.server.routes import default_routers  # noqa: E402


def _app(tmp_path: Path, model: Any) -> tuple[Any, caderno.Memory]:
    memory = caderno.Memory(caderno.memory.adapters.connect.open_store(f"sqlite:///{tmp_path / 'p.db'}"), embedder=None)
    return create_app(memory, model=model, background=False, routers=default_routers()), memory


def _client(app: Any, token: str, **headers: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    base = {"authorization": f"Bearer {token}", THREAD_HEADER: "t", **headers}
    return httpx.AsyncClient(transport=transport, base_url="http://t", headers=base, timeout=30)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "s" * (MAX_INSTRUCTIONS_CHARS + 1)}, {"role": "user", "content": "oi"}],
        [{"role": "user", "content": "u" * (MAX_REQUEST_CHARS // 2)}] * 2 + [{"role": "user", "content": "oi"}],
        [{"role": "user", "content": [{"type": "text", "text": "p" * (MAX_REQUEST_CHARS + 1)}]}],
    ],
    ids=["instructions", "total", "parts"],
)
async def test_an_oversized_request_never_reaches_the_model(tmp_path: Path, messages: list[Any]) -> None:
    model = ScriptedModel([Message.assistant("nunca")])
    app, memory = _app(tmp_path, model)
    async with app.router.lifespan_context(app):
        token, _ = await memory.keys.create(resources=["casa"])
        async with _client(app, token) as c:
            r = await c.post("/v1/chat/completions", json={"messages": messages})
        assert_problem(r, 413, "too-large")
        assert model.requests == []
        assert await memory.list_threads(resource_id="casa") == []


async def test_distinct_system_prompts_hold_no_memory(tmp_path: Path) -> None:
    """Eight large, distinct prompts: after their turns, the app keeps none of them (no per-prompt cache)."""
    size = MAX_INSTRUCTIONS_CHARS  # the largest a request may send
    model = ScriptedModel([Message.assistant("ok")] * 9)
    app, memory = _app(tmp_path, model)
    async with app.router.lifespan_context(app):
        token, _ = await memory.keys.create(resources=["casa"])
        async with _client(app, token) as c:

            async def turn(i: int) -> None:
                prompt = chr(0x4E00 + i) * size  # 3 bytes a character in UTF-8, 2-4 in a str
                body = {"messages": [{"role": "system", "content": prompt}, {"role": "user", "content": f"q{i}"}]}
                r = await c.post("/v1/chat/completions", json=body, headers={THREAD_HEADER: f"t{i}"})
                assert r.status_code == 200, r.text

            await turn(0)  # warm every lazy import and cache once
            model.requests.clear()  # the scripted model keeps its prompts: not the app's memory
            gc.collect()
            tracemalloc.start()
            try:
                start, _ = tracemalloc.get_traced_memory()
                for i in range(1, 9):
                    await turn(i)
                model.requests.clear()
                gc.collect()
                held, _ = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    # each prompt is >= 2 bytes a character in memory; eight kept would be >= 1.6 MB
    assert held - start < 2 * size, f"{held - start} bytes still held after eight prompts"


async def test_a_whole_turn_has_a_deadline(tmp_path: Path) -> None:
    hung = asyncio.Event()

    async def never(messages: list[Message], tools: list[Any]) -> Message:
        await hung.wait()
        return Message.assistant("tarde")

    async with caderno.connect(f"sqlite:///{tmp_path / 'd.db'}") as memory:
        chat = AgentChat(model=ScriptedModel([never]), memory=memory, settings=ChatSettings(turn_timeout=0.5))
        with pytest.raises(ModelError, match="turn_timeout"):
            await asyncio.wait_for(chat.ask(messages="oi", resource_id="r", thread_id="t"), timeout=10)
        assert await memory.get_messages(resource_id="r", thread_id="t") == []
        # the thread's lock was released: the next turn runs at once
        chat.model = ScriptedModel([Message.assistant("agora sim")])
        result = await asyncio.wait_for(chat.ask(messages="oi", resource_id="r", thread_id="t"), timeout=10)
        assert result.reply.content == "agora sim"
    with pytest.raises(caderno.core.errors.UsageError, match="turn_timeout"):
        AgentChat(model=ScriptedModel([]), settings=ChatSettings(turn_timeout=0))


class _Server:
    """caderno's app under a real uvicorn on a loopback port."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)

    async def __aenter__(self) -> _Server:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, timeout=30)


async def test_a_turn_whose_client_left_is_stored_once_and_its_retry_returns_it(tmp_path: Path) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], tools: list[Any]) -> Message:
        entered.set()
        await release.wait()
        return Message.assistant("a resposta")

    model = ScriptedModel([slow])
    memory = caderno.Memory(caderno.memory.adapters.connect.open_store(f"sqlite:///{tmp_path / 's.db'}"), embedder=None)
    app = create_app(memory, model=model, background=False, routers=default_routers())
    async with _Server(app) as server:
        token, _ = await memory.keys.create(resources=["casa"])
        body = json.dumps({"messages": [{"role": "user", "content": "oi"}]}).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"{THREAD_HEADER}: t\r\nIdempotency-Key: req-1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(head + body)
        await writer.drain()
        await asyncio.wait_for(entered.wait(), timeout=10)
        writer.close()  # the client gives up mid-turn
        await writer.wait_closed()
        await asyncio.sleep(0.2)
        release.set()
        for _ in range(100):  # the turn finishes on its own
            if len(await memory.get_messages(resource_id="casa", thread_id="t")) == 2:
                break
            await asyncio.sleep(0.05)
        stored = await memory.get_messages(resource_id="casa", thread_id="t")
        assert [m.content for m in stored] == ["oi", "a resposta"]
        headers = {"authorization": f"Bearer {token}", THREAD_HEADER: "t", "Idempotency-Key": "req-1"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", headers=headers) as c:
            retry = await c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        assert retry.status_code == 200, retry.text
        assert retry.json()["choices"][0]["message"]["content"] == "a resposta"
        assert len(model.requests) == 1
        assert len(await memory.get_messages(resource_id="casa", thread_id="t")) == 2
