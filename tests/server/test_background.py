"""Where ``caderno serve`` runs its background work (``--background`` / ``[server] background``).

Real ``caderno serve`` processes on loopback, a real SQLite file, the real
embedding model:

- ``inline`` (the default): batches are embedded by the embedding service's
  background lane, threads of the server at a lower CPU priority
  (``EMBED_NICE``), so requests go first;
- ``process``: a ``caderno worker`` child at a lower priority embeds what the
  server appends (woken through a pipe), and stops when the server dies,
  even by SIGKILL;
- ``off``: the server embeds nothing (another ``caderno worker`` does).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _serving import Served, make_key, serving  # noqa: E402

import caderno  # noqa: E402
from caderno.cli.server_commands import WORKER_NICE  # noqa: E402
from caderno.embeddings.batcher import EMBED_NICE  # noqa: E402
from caderno.stores import ops  # noqa: E402
from conftest import PROCESS_SECONDS, python_env  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads priorities from Linux /proc")


def _append(served: Served, token: str, thread: str, texts: list[str]) -> None:
    body = {"messages": [{"role": "user", "content": t} for t in texts]}
    r = httpx.post(
        f"{served.base}/v1/resources/casa/threads/{thread}/messages",
        json=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 201, r.text


def _pending(db: Path) -> int:
    async def count() -> int:
        memory = await caderno.connect(str(db), embedder=None)
        try:
            return await memory.run(ops.CountPendingEmbeddings())
        finally:
            await memory.close()

    return asyncio.run(count())


def _wait_embedded(db: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while (left := _pending(db)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == 0, f"{left} message(s) still unembedded after {seconds} s"


def _nice(pid: int, tid: int | None = None) -> int:
    """A process's (or one of its threads') nice value, from /proc."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    return int(Path(path).read_text().rsplit(")", 1)[1].split()[16])


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def _child(pid: int) -> int:
    """The one child process of ``pid`` (a server's worker), waited for: the server may answer
    /healthz a moment before it has started it."""
    deadline = time.monotonic() + PROCESS_SECONDS
    while not (children := _children(pid)):
        assert time.monotonic() < deadline, f"no child of {pid} within {PROCESS_SECONDS} s"
        time.sleep(0.05)
    (child,) = children
    return child


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited, not yet reaped by its (killed) parent
            return True
        time.sleep(0.1)
    return False


def test_inline_embeds_in_a_thread_of_lower_priority(tmp_path: Path) -> None:
    db = tmp_path / "inline.db"
    token = make_key(db, "casa")
    with serving(db) as served:
        assert _children(served.process.pid) == []  # no worker process
        _append(served, token, "t1", ["a viagem a Amsterdam é em setembro", "a meta é EUR 6.000"])
        _wait_embedded(db)
        pid = served.process.pid
        niced = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if _nice(pid, int(t.name)) != _nice(pid)]
        # The background lanes of the embedding service (the embedder's and the sparse encoder's
        # thread), and the chunk pools they started (a thread inherits its creator's nice).
        assert 1 <= len(niced) <= 2 * (1 + (os.cpu_count() or 1)), niced
        assert {_nice(pid, tid) for tid in niced} == {_nice(pid) + EMBED_NICE}


def test_process_mode_embeds_in_a_niced_child_that_dies_with_the_server(tmp_path: Path) -> None:
    db = tmp_path / "child.db"
    token = make_key(db, "casa")
    with serving(db, None, "--background", "process") as served:
        child = _child(served.process.pid)
        # The worker lowers its own priority once it has started (after its imports): wait for that.
        wanted = _nice(served.process.pid) + WORKER_NICE
        deadline = time.monotonic() + PROCESS_SECONDS
        while _nice(child) != wanted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _nice(child) == wanted
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        assert b"worker" in cmdline and str(db).encode() not in cmdline  # the URL goes by environment, not argv
        for n in range(3):  # each append wakes the worker through the pipe
            _append(served, token, f"t{n}", [f"mensagem {n} sobre a viagem"])
            _wait_embedded(db, seconds=PROCESS_SECONDS)
        served.process.send_signal(signal.SIGKILL)
        assert _gone(child, PROCESS_SECONDS), "the worker outlived its server"
    assert "Traceback" not in served.log, served.log


def test_process_mode_stops_its_worker_on_a_graceful_stop(tmp_path: Path) -> None:
    db = tmp_path / "stop.db"
    make_key(db, "casa")
    with serving(db, None, "--background", "process") as served:
        child = _child(served.process.pid)
    assert served.process.returncode == 0, served.log
    assert _gone(child, PROCESS_SECONDS)


def test_off_embeds_nothing_until_a_worker_runs(tmp_path: Path) -> None:
    db = tmp_path / "off.db"
    token = make_key(db, "casa")
    with serving(db, None, "--background", "off") as served:
        assert _children(served.process.pid) == []
        _append(served, token, "t1", ["guardamos para Amsterdam"])
        time.sleep(2)
        assert _pending(db) == 1
    worker = subprocess.Popen(
        [sys.executable, "-m", "caderno.cli", "worker"],
        env={**python_env(), "CADERNO_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_embedded(db, seconds=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
