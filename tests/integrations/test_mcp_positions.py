"""MCP's get_messages over a real stdio subprocess: positions in the thread, never the database-wide seq."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

import caderno  # noqa: E402
from caderno import Message  # noqa: E402
from conftest import python_env  # noqa: E402


def _text(result: Any) -> str:
    return "".join(part.text for part in result.content)


async def test_get_messages_pages_by_position_and_refuses_a_huge_before(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    async with caderno.connect(db, embedder=None) as memory:
        # Another resource writes first, so seq and position part ways.
        await memory.append_messages(resource_id="outra", thread_id="x", messages=[Message.user("not yours")] * 5)
        await memory.append_messages(
            resource_id="casa", thread_id="jantar", messages=[Message.user("um"), Message.assistant("dois")]
        )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "caderno.cli", "--db", str(db), "mcp", "--resource", "casa"],
        env=python_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "position" in tools["get_messages"].input_schema["properties"]["before"]["description"]

        async def get(**arguments: Any) -> Any:
            return await asyncio.wait_for(session.call_tool("get_messages", {"thread_id": "jantar", **arguments}), 60)

        messages = json.loads(_text(await get()))["messages"]
        assert [m["position"] for m in messages] == [1, 2] and all("seq" not in m for m in messages)
        older = json.loads(_text(await get(before=2)))["messages"]
        assert [m["content"] for m in older] == ["um"]
        refused = await get(before=10**23)
        assert refused.is_error and "before must be a message position" in _text(refused)
        assert "Traceback" not in _text(refused)
