"""Long CLI commands: a bar that ends at 100 % with what was done on a terminal, one summary line when piped.

``reindex`` on a terminal used to stop at 15-49 %: the background worker its
notify started took every other batch, unseen by the bar. Run here under a
real pseudo-terminal (``pty``) and through a pipe, as real subprocesses.
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.stores import ops
from conftest import python_env

MESSAGES = 300
#: Seconds a command may take here (loading the embedding model included).
COMMAND_SECONDS = 180


def _in_terminal(*args: str) -> tuple[int, str]:
    """Run ``caderno ARGS`` on a pseudo-terminal (stdout and stderr); its exit code and everything it drew."""
    leader, follower = pty.openpty()
    env = python_env() | {"COLUMNS": "160", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "caderno.cli", *args], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], COMMAND_SECONDS)
            if not ready:
                raise AssertionError(f"no output for {COMMAND_SECONDS} s: {out[-2000:]!r}")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
        code = process.wait(timeout=COMMAND_SECONDS)
    return code, out.decode("utf-8", "replace")


def _last_frame(drawn: str) -> str:
    """The last line the bar drew (frames are redrawn in place; escape codes stripped)."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    frames = [f for f in re.split(r"[\r\n]+", plain) if "%" in f]
    assert frames, plain[-2000:]
    return frames[-1]


def _piped(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caderno.cli", *args],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
    )


def _fill(db: Path) -> None:
    async def fill() -> None:
        async with caderno.connect(str(db), embedder=HashingEmbedder(16)) as memory:
            await memory.append_messages(
                resource_id="r",
                thread_id="t",
                messages=[Message.user(f"note {i} about things") for i in range(MESSAGES)],
            )
            await memory.flush()

    asyncio.run(fill())


def test_reindex_on_a_terminal_ends_at_100_percent_with_what_it_did(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _fill(db)
    code, drawn = _in_terminal("--db", str(db), "reindex")
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and f"re-embedded {MESSAGES} message(s)" in last, last
    assert f"{MESSAGES}/{MESSAGES}" in last, last


def test_reindex_piped_prints_one_summary_line(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _fill(db)
    run = _piped("--db", str(db), "reindex")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"re-embedded {MESSAGES} message(s)"]


def _agents_db(path: Path) -> None:
    from agents import SQLiteSession

    async def write() -> None:
        session = SQLiteSession("s1", path)
        try:
            items = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"} for i in range(MESSAGES)]
            await session.add_items(items)  # type: ignore[arg-type]
        finally:
            session.close()

    asyncio.run(write())


def test_import_from_says_what_waits_for_embedding_on_a_terminal_and_piped(tmp_path: Path) -> None:
    source = tmp_path / "agents.sqlite"
    _agents_db(source)
    code, drawn = _in_terminal(
        "--db", str(tmp_path / "a.db"), "import-from", "openai-agents", str(source), "--resource", "ana"
    )
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and f"imported {MESSAGES} message(s), {MESSAGES} wait for embedding" in last, last
    assert f"{MESSAGES} message(s) wait for embedding: `caderno worker` embeds them" in drawn
    run = _piped("--db", str(tmp_path / "b.db"), "import-from", "openai-agents", str(source), "--resource", "ana")
    assert run.returncode == 0, run.stderr
    (line,) = run.stdout.splitlines()
    assert f"{MESSAGES} message(s) wait for embedding: `caderno worker` embeds them" in line, line

    async def pending() -> int:
        async with caderno.connect(str(tmp_path / "b.db"), embedder=None) as memory:
            return await memory.run(ops.CountPendingEmbeddings())

    assert asyncio.run(pending()) == MESSAGES
