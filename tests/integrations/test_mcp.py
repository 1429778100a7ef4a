"""The MCP server with the SDK's own client: ``caderno mcp`` over a real stdio subprocess, and ``/mcp`` over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

import caderno  # noqa: E402
from caderno.memory.adapters.connect import open_store  # noqa: E402
from conftest import PROCESS_SECONDS, free_port, python_env, wait_healthy  # noqa: E402

TOOLS = {
    "recall",
    "get_working_memory",
    "update_working_memory",
    "memory",
    "remember_fact",
    "get_facts",
    "forget_fact",
    "list_threads",
    "get_messages",
}


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(command, env=python_env(), capture_output=True, text=True, timeout=120)


def _text(result: Any) -> str:
    return "".join(part.text for part in result.content)


async def _ok(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    return json.loads(_text(result))


async def _error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The sentence of a refusal, which comes in the catalog's one shape."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, _text(result)
    refusal = json.loads(_text(result))
    assert refusal["ok"] is False and "Traceback" not in refusal["error"]
    error: str = refusal["error"]
    return error


def _seed(db: Path) -> None:
    script = (
        "import asyncio, caderno\n"
        "async def main():\n"
        f"    async with caderno.connect({str(db)!r}, embedder=None) as m:\n"
        "        await m.append_messages(resource_id='casa', thread_id='jantar', messages=[\n"
        "            caderno.Message(role='user', content='A Ana faz anos a 3 de maio e adora xadrez'),\n"
        "            caderno.Message(role='assistant', content='Anotado: aniversario da Ana em maio.')])\n"
        "        await m.append_messages(resource_id='outra', thread_id='segredo', messages=[\n"
        "            caderno.Message(role='user', content='xadrez secreto de outra pessoa')])\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=python_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


async def test_stdio_server_serves_every_tool_and_resource(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    _seed(db)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "caderno.cli", "--db", str(db), "mcp", "--resource", "casa"],
        env=python_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert all(len(t.description or "") > 40 for t in tools.values())
        assert "resource" not in tools["recall"].input_schema.get("required", [])

        threads = await _ok(session, "list_threads")
        assert [t["id"] for t in threads["threads"]] == ["jantar"]
        messages = (await _ok(session, "get_messages", thread_id="jantar"))["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        hits = (await _ok(session, "recall", query="xadrez"))["hits"]
        assert hits and {h["thread_id"] for h in hits} == {"jantar"}  # never the other resource's thread

        empty = {"ok": True, "working_memory": None, "version": 0, "updated_at": None}
        assert await _ok(session, "get_working_memory") == empty
        state = await _ok(session, "update_working_memory", patch={"plano": {"jantar": "sexta"}})
        assert state == {"ok": True, "working_memory": {"plano": {"jantar": "sexta"}}, "version": 1}
        state = await _ok(session, "update_working_memory", patch={"plano": {"hora": "20h"}}, expected_version=1)
        assert state["working_memory"] == {"plano": {"jantar": "sexta", "hora": "20h"}} and state["version"] == 2
        stale = await _error(session, "update_working_memory", patch={"x": 1}, expected_version=1)
        assert stale == "working memory of 'casa' is at version 2, not 1"
        # caderno's sentences, not the MCP SDK's pydantic text; an unknown argument is refused, not ignored.
        listed_patch = await _error(session, "update_working_memory", patch=["not", "an", "object"])
        assert listed_patch == "'patch' must be an object, not an array"
        extra = await _error(session, "update_working_memory", patch={"x": 1}, colour="red")
        assert extra.startswith("update_working_memory has no argument 'colour'")
        assert "empty" in await _error(session, "recall", query="  ")
        assert (await _ok(session, "get_working_memory"))["version"] == 2  # none of them wrote

        fact = await _ok(session, "remember_fact", category="Family", key="filha", value="Ana, adora xadrez")
        assert fact == {"ok": True, "fact": "family/filha"}
        assert [f["key"] for f in (await _ok(session, "get_facts", category="family"))["facts"]] == ["filha"]
        assert await _ok(session, "forget_fact", category="family", key="filha")
        assert (await _ok(session, "get_facts"))["facts"] == []
        assert "no fact" in await _error(session, "forget_fact", category="family", key="filha")

        added = await _ok(session, "memory", action="add", target="user", content="Prefere respostas curtas.")
        assert added["ok"] and added["entries"] == ["Prefere respostas curtas."]
        assert await _error(session, "memory", action="remove", target="user", old_text="nada disto")
        assert "not found" in await _error(session, "list_threads", resource="outra")

        listed = {str(r.uri) for r in (await session.list_resources()).resources}
        assert listed == {
            "caderno://casa/working-memory",
            "caderno://casa/notebook/memory",
            "caderno://casa/notebook/user",
        }
        wm = (await session.read_resource("caderno://casa/working-memory")).contents[0]
        assert json.loads(wm.text)["version"] == 2  # type: ignore[union-attr]
        # The block as a conversation starting now sees it, from the database
        # notebook (the client keeps what it read for its conversation).
        user = (await session.read_resource("caderno://casa/notebook/user")).contents[0]
        assert "Prefere respostas curtas." in user.text  # type: ignore[union-attr]
        assert (await session.read_resource("caderno://casa/notebook/memory")).contents[0].text == ""  # type: ignore[union-attr]
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        user = (await session.read_resource("caderno://casa/notebook/user")).contents[0]
        assert "Prefere respostas curtas." in user.text  # type: ignore[union-attr]
        await _ok(session, "memory", action="add", target="memory", content="O jantar de sexta ficou marcado.")
        memory_block = (await session.read_resource("caderno://casa/notebook/memory")).contents[0]
        assert "O jantar de sexta ficou marcado." in memory_block.text  # type: ignore[union-attr]
        with pytest.raises(Exception, match="not found"):
            await session.read_resource("caderno://outra/working-memory")
    async with caderno.Memory(open_store(f"sqlite:///{db}"), embedder=None) as stored:
        # The entries are rows of the resource: a second MCP server, or the HTTP API, sees the same notebook.
        assert await stored.notebook("casa").entries("user") == ["Prefere respostas curtas."]


def test_mcp_command_refuses_a_bad_resource_id(tmp_path: Path) -> None:
    done = _cli(tmp_path / "x.db", "mcp", "--resource", "")
    assert done.returncode == 1 and "caderno: error:" in done.stderr and "Traceback" not in done.stderr


def _token(db: Path, *resources: str) -> str:
    args = [a for r in resources for a in ("--resource", r)]
    made = _cli(db, "keys", "create", *args, "--json")
    assert made.returncode == 0, made.stderr
    token: str = json.loads(made.stdout)["token"]
    return token


async def test_http_mount_inside_serve_scopes_tools_to_the_key(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    _seed(db)
    casa, outra, both = _token(db, "casa"), _token(db, "outra"), _token(db, "casa", "outra")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "caderno.cli", "--db", str(db), "serve", "--port", str(port)],
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(server, base, seconds=PROCESS_SECONDS, what="the server")
        url = f"{base}/mcp"
        assert httpx.post(url, json={}).status_code == 401
        assert httpx.post(url, json={}, headers={"Authorization": "Bearer cad_nope"}).status_code == 401

        for token, resource in ((casa, "casa"), (outra, "outra")):
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as client,
                streamable_http_client(url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS
                if resource == "casa":
                    hits = (await _ok(session, "recall", query="xadrez"))["hits"]
                    assert {h["thread_id"] for h in hits} == {"jantar"}
                    state = await _ok(session, "update_working_memory", patch={"humor": "bom"})
                    assert state == {"ok": True, "working_memory": {"humor": "bom"}, "version": 1}
                else:
                    # A key for another resource cannot reach this one: the same words as a missing one.
                    for tool, args in (("get_working_memory", {}), ("list_threads", {}), ("recall", {"query": "x"})):
                        assert "not found" in await _error(session, tool, resource="casa", **args)
                    with pytest.raises(Exception, match="not found"):
                        await session.read_resource("caderno://casa/working-memory")
                    hits = (await _ok(session, "recall", query="xadrez"))["hits"]
                    assert {h["thread_id"] for h in hits} == {"segredo"}
                    assert (await _ok(session, "get_working_memory"))["working_memory"] is None

        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {both}"}) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            assert "pass 'resource'" in await _error(session, "get_working_memory")
            assert (await _ok(session, "get_working_memory", resource="casa"))["working_memory"] == {"humor": "bom"}
            wm = (await session.read_resource("caderno://casa/working-memory")).contents[0]
            assert json.loads(wm.text)["working_memory"] == {"humor": "bom"}  # type: ignore[union-attr]
            assert "not found" in await _error(session, "list_threads", resource="terceira")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_loads_the_mcp_sdk_on_the_first_request_to_mcp_not_at_start(tmp_path: Path) -> None:
    """The SDK's import is most of a server's start-up: an app that nobody asks /mcp of never loads it."""
    program = """
import asyncio, sys
import httpx
import caderno
from caderno.memory.adapters.connect import open_store
from caderno.server.app import create_app
from caderno.server.routes import default_routers

async def main():
    memory = caderno.Memory(open_store(sys.argv[1]), embedder=None)
    app = create_app(memory, background=False, routers=default_routers())
    async with app.router.lifespan_context(app):
        token, _ = await memory.keys.create(resources=["casa"])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            health = await client.get("/healthz")
            assert health.status_code == 200, health.text
            assert (await client.post("/mcp", json={})).status_code == 401  # refused by the key check alone
            print("before", "mcp" in sys.modules)
            headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            answer = await client.post("/mcp", json=hello, headers=headers)
            print("after", "mcp" in sys.modules, answer.status_code, answer.json()["result"]["serverInfo"]["name"])

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "lazy.db")],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=PROCESS_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before False", "after True 200 caderno"], done.stdout
