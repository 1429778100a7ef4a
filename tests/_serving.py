"""``caderno serve`` as a real subprocess on a loopback port, for tests of the server's edge.

A helper module (``from _serving import …``), beside ``_pg.py``: the process,
its captured log, and a key made with the real ``caderno keys create``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from conftest import PROCESS_SECONDS, free_port, python_env, wait_healthy


def cli(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``caderno --db DB ARGS`` as a subprocess."""
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(command, env=env or python_env(), capture_output=True, text=True, timeout=PROCESS_SECONDS)


def make_key(db: Path, *resources: str) -> str:
    """A new key's token for ``resources`` (an admin key when none), made by the CLI."""
    scope = [a for r in resources for a in ("--resource", r)] or ["--admin"]
    created = cli(db, "keys", "create", *scope, "--json")
    assert created.returncode == 0, created.stderr
    token: str = json.loads(created.stdout)["token"]
    return token


@dataclass
class Served:
    """A running ``caderno serve``."""

    base: str
    """``http://127.0.0.1:<port>``."""
    port: int
    process: subprocess.Popen[str]
    log: str = ""
    """Everything the process wrote (stdout and stderr), once it has stopped."""


@contextlib.contextmanager
def serving(db: Path, config: Path | None = None, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """Start ``caderno serve`` (SIGTERM at the end; ``Served.log`` then holds its output)."""
    port = free_port()
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), "serve", "--port", str(port), *args]
    if config is not None:
        command += ["--config", str(config)]
    process = subprocess.Popen(
        command, env=env or python_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    served = Served(base=f"http://127.0.0.1:{port}", port=port, process=process)
    try:
        wait_healthy(process, served.base, seconds=PROCESS_SECONDS, what="caderno serve")
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            served.log, _ = process.communicate(timeout=PROCESS_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            served.log, _ = process.communicate()


@contextlib.asynccontextmanager
async def serving_app(app: object) -> AsyncIterator[tuple[str, int]]:
    """Serve an ASGI ``app`` with uvicorn on a free loopback port in this event loop; yield (host, port)."""
    import asyncio
    import time

    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # the test runner keeps its own Ctrl-C
            yield

    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))  # type: ignore[arg-type]
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + PROCESS_SECONDS
    while not (server.started or task.done()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if not server.started:
        task.cancel()
        raise RuntimeError("the test server did not start")
    port: int = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        await task
