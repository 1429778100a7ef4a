"""Long CLI commands: a bar that ends at 100 % with what was done on a terminal, one summary line when piped.

``reindex`` on a terminal used to stop at 15-49 %: the background worker its
notify started took every other batch, unseen by the bar. Run here under a
real pseudo-terminal (``pty``) and through a pipe, as real subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines.indexer import RECALL_EMBED_LIMIT
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


#: The first recall after an import embeds them all, not only a recall's own bound: four times it,
#: so many batches (a bulk import of 5,000 once sat 55 s behind one static line; 5,000 here cost
#: 20 s of CPU, the suite's most, for nothing more checked).
RECALL_MESSAGES = 4 * RECALL_EMBED_LIMIT


def _fill_pending(db: Path, count: int, threads: int = 1, words: int = 1) -> None:
    """``count`` messages per thread waiting for embedding (the default embedder, nothing embedded yet)."""

    async def fill() -> None:
        async with caderno.connect(str(db)) as memory:
            memory.indexer.elsewhere = lambda: None  # nothing embeds them in this process
            for t in range(threads):
                await memory.append_messages(
                    resource_id="r",
                    thread_id=f"t{t}",
                    messages=[
                        (Message.user if i % 2 == 0 else Message.assistant)(f"note {i} about the mountains " * words)
                        for i in range(count)
                    ],
                )

    asyncio.run(fill())


def _pending(db: Path) -> int:
    async def count() -> int:
        async with caderno.connect(str(db), embedder=None) as memory:
            return await memory.run(ops.CountPendingEmbeddings())

    return asyncio.run(count())


def test_the_first_recall_over_5000_pending_messages_shows_a_bar_that_reaches_100_percent(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _fill_pending(db, RECALL_MESSAGES)
    code, drawn = _in_terminal("--db", str(db), "recall", "r", "hiking", "--top", "1")
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and f"embedded {RECALL_MESSAGES} pending message(s)" in last, last
    assert f"{RECALL_MESSAGES}/{RECALL_MESSAGES}" in last, last
    assert _pending(db) == 0


def test_export_and_import_show_a_bar_on_a_terminal_and_one_line_piped(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _fill(db)
    dump = tmp_path / "r.json"
    code, drawn = _in_terminal("--db", str(db), "export", "r", "-o", str(dump))
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and f"exported r (1 thread, {MESSAGES} messages)" in last, last
    assert f"exported r to {dump}" in drawn
    # Piped to stdout: stdout is the export alone, nothing on stderr.
    run = _piped("--db", str(db), "export", "r")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert len(json.loads(run.stdout)["threads"][0]["messages"]) == MESSAGES
    # Written to a file: one line (on stderr, as before).
    run = _piped("--db", str(db), "export", "r", "-o", str(tmp_path / "again.json"))
    assert run.returncode == 0 and run.stdout == "", run.stdout
    assert run.stderr.splitlines() == [f"exported r to {tmp_path / 'again.json'}"]

    code, drawn = _in_terminal("--db", str(tmp_path / "a.db"), "import", str(dump))
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and f"imported r (1 thread, {MESSAGES} messages)" in last, last
    run = _piped("--db", str(tmp_path / "b.db"), "import", str(dump))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["imported r (1 thread)"]


def test_consolidate_counts_threads_to_100_percent_on_a_terminal_and_prints_one_line_piped(tmp_path: Path) -> None:
    for name in ("a.db", "b.db"):
        _fill_pending(tmp_path / name, MESSAGES, threads=3, words=5)  # long enough to be summarised
    code, drawn = _in_terminal("--db", str(tmp_path / "a.db"), "consolidate", "r")
    assert code == 0, drawn
    last = _last_frame(drawn)
    assert "100%" in last and "3/3" in last and "consolidated: 3 summaries" in last, last
    run = _piped("--db", str(tmp_path / "b.db"), "consolidate", "r")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["consolidated: 3 summaries, 0 merges, 0 facts, 0 failures"]


def _worker_until(db: Path, wanted: str, *, terminal: bool) -> str:
    """Start ``caderno worker`` (on a pseudo-terminal or piped), read until ``wanted`` shows, stop it; all it drew."""
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), "worker"]
    if terminal:
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            command,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env=python_env() | {"COLUMNS": "160", "TERM": "xterm"},
        )
        os.close(follower)
        source = leader
    else:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=python_env())
        assert process.stderr is not None
        source = process.stderr.fileno()
    out = b""
    try:
        while wanted not in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode("utf-8", "replace")):
            ready, _, _ = select.select([source], [], [], COMMAND_SECONDS)
            assert ready, f"no output for {COMMAND_SECONDS} s: {out[-2000:]!r}"
            chunk = os.read(source, 65536)
            assert chunk, out[-2000:]
            out += chunk
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=COMMAND_SECONDS)
        if terminal:
            os.close(leader)
    return out.decode("utf-8", "replace")


def test_the_worker_embeds_what_waits_at_start_behind_a_bar_to_100_percent(tmp_path: Path) -> None:
    for name in ("a.db", "b.db"):
        _fill_pending(tmp_path / name, MESSAGES)
    summary = f"embedded {MESSAGES} waiting message(s)"
    drawn = _worker_until(tmp_path / "a.db", summary + "\r\n", terminal=True)
    last = _last_frame(drawn.split(summary + "\r\n")[0] + summary)
    assert "100%" in last and f"{MESSAGES}/{MESSAGES}" in last, last
    assert _pending(tmp_path / "a.db") == 0
    lines = _worker_until(tmp_path / "b.db", summary + "\n", terminal=False).splitlines()
    # Piped: no bar, no line per batch of the backlog, one summary line after the start-up's.
    assert lines[-1] == summary and not [line for line in lines[:-1] if line.startswith("embedded")], lines
