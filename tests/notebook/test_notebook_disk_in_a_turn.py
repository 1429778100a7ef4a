"""A file notebook write the disk refuses inside ``AgentChat.ask``: the model reads why, the turn goes on.

RLIMIT_FSIZE in a subprocess (SIGXFSZ ignored, so the write gets EFBIG
instead of the process being killed). The memory is a PostgreSQL schema: its
writes happen in the server, so the file-size limit reaches only the notebook.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _pg import pg_schema

from caderno import Notebook
from conftest import python_env

pytestmark = pytest.mark.postgres

_TURN = textwrap.dedent(
    """
    import asyncio, json, resource, signal, sys
    import caderno
    from caderno import AgentChat, Message, Notebook, ScriptedModel, ToolCall

    async def main(directory, url):
        async with caderno.connect(url, embedder=None) as memory:
            call = ToolCall(id="m1", name="memory", arguments={"action": "add", "target": "memory",
                                                               "content": "long entry " * 50})
            model = ScriptedModel([Message.assistant(tool_calls=[call]), Message.assistant("ok")])
            chat = AgentChat(model=model, memory=memory, notebook=Notebook(directory, memory_char_limit=10_000))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.RLIM_INFINITY))
            result = await chat.ask(messages="note it", resource_id="r", thread_id="t")
            print(json.dumps({"error": result.tool_calls[0].error, "text": result.reply.content,
                              "seen": model.requests[-1].messages[-1].content}))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_a_notebook_write_past_the_file_size_limit_is_the_tools_error_text(tmp_path: Path) -> None:
    directory = tmp_path / "nb"
    Notebook(directory).add("memory", "seed")
    before = (directory / "MEMORY.md").read_bytes()
    with pg_schema() as url:
        done = subprocess.run(
            [sys.executable, "-c", _TURN, str(directory), url],
            env=python_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout.splitlines()[-1])
    assert turn["text"] == "ok"  # the turn went on to the model's answer
    error = json.loads(turn["error"])
    assert error["ok"] is False
    assert error["error"].startswith("Could not write MEMORY.md: File too large (EFBIG). MEMORY.md is unchanged")
    assert turn["seen"] == turn["error"]  # what the model read
    assert (directory / "MEMORY.md").read_bytes() == before
    assert not list(directory.glob("*.tmp"))
