"""Files caderno must refuse are refused without changing a byte; the CLI says so in one line."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import caderno
from caderno import Message
from caderno.core.errors import SchemaTooNew, StorageError
from conftest import python_env


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def refuse(path: Path, error: type[Exception], match: str) -> None:
    before = snapshot(path.parent)
    with pytest.raises(error, match=match):
        asyncio.run(caderno.connect(path, embedder=None).__aenter__())
    assert snapshot(path.parent) == before  # not a byte changed, no -wal or -shm left behind


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    refuse(tmp_path / "db", StorageError, "is a directory")


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("just some text, not a database\n")
    refuse(tmp_path / "notes.db", StorageError, "not a SQLite database")


def test_another_applications_database_in_rollback_mode_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:  # journal_mode DELETE, as most applications leave it
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Ana')")
    conn.close()
    refuse(path, StorageError, "another application's SQLite database")


def newer_cadernos_database(path: Path, *, rollback: bool) -> None:
    """A caderno database with a migration this caderno does not know, in WAL or rollback mode."""

    async def make() -> None:
        async with caderno.connect(path, embedder=None) as memory:
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])

    asyncio.run(make())
    conn = sqlite3.connect(path)
    if rollback:
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', '2030-01-01')")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()  # the last connection: SQLite checkpoints and removes -wal and -shm


def test_a_newer_cadernos_database_is_refused_even_in_rollback_mode(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    newer_cadernos_database(path, rollback=True)
    refuse(path, SchemaTooNew, "newer caderno")


def cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caderno.cli", "--db", str(db), *args],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_refusals_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    out = cli("threads", "list", "r", db=tmp_path / "dir.db")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "directory" in out.stderr, out.stderr

    missing = tmp_path / "nested" / "new.db"
    for args in (("wm", "show", "r"), ("threads", "list", "r"), ("export", "r")):
        out = cli(*args, db=missing)
        assert out.returncode == 1 and "no database at" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not missing.parent.exists()  # a read never creates the file or its directories

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    malformed = tmp_path / "bad.json"
    malformed.write_text('{"format": "caderno.resource", "version": 1, "resource_id": 5, "threads": "x"}')
    nan = tmp_path / "nan.json"
    nan.write_text('{"format": "caderno.resource", "version": 1, "resource_id": "r", "threads": [], "x": NaN}')
    for file in (deep, malformed, nan):
        out = cli("import", str(file), db=tmp_path / "ok.db")
        assert out.returncode == 1 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr

    out = cli("wm", "patch", "r", '{"a": NaN}', db=tmp_path / "ok.db")
    assert out.returncode == 1 and "NaN" in out.stderr, out.stderr
    out = cli("wm", "show", "r", "--json", db=tmp_path / "ok.db")
    assert out.returncode == 0 and json.loads(out.stdout) is None


def test_another_applications_database_with_an_events_table_is_refused(tmp_path: Path) -> None:
    # A calendar application's file: one table happens to be called events,
    # but it is neither caderno's nor aidaemon's (no session_id,
    # event_type, data): caderno must not rename it or rewrite the header.
    for mode in ("DELETE", "WAL"):
        path = tmp_path / f"calendar-{mode}.db"
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA journal_mode = {mode}")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, title TEXT, starts_at TEXT)")
        conn.execute("INSERT INTO events (title, starts_at) VALUES ('dentist', '2030-01-01')")
        conn.commit()
        conn.close()
        refuse(path, StorageError, "another application's SQLite database")


def test_aidaemons_events_table_is_taken_by_its_import_and_refused_untouched_without_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT, event_type TEXT, data TEXT, created_at TEXT)"
        )
        conn.execute("INSERT INTO events (session_id, event_type, data, created_at) VALUES ('s', 'x', '{}', 'now')")
    conn.close()
    refuse(path, StorageError, "caderno import-from aidaemon")  # a normal open: the import is a step of its own

    async def use() -> list[Message]:
        async with caderno.connect(path, embedder=None, import_from="aidaemon") as memory:
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
            return await memory.get_messages(resource_id="r", thread_id="t")

    assert [m.content for m in asyncio.run(use())] == ["oi"]
    with sqlite3.connect(path) as conn:  # not conversation: kept, renamed aside, untouched
        assert conn.execute("SELECT session_id, data FROM legacy_events").fetchall() == [("s", "{}")]
    conn.close()

    async def reopen() -> list[Message]:  # imported: a normal open now takes it
        async with caderno.connect(path, embedder=None) as memory:
            return await memory.get_messages(resource_id="r", thread_id="t")

    assert [m.content for m in asyncio.run(reopen())] == ["oi"]


def test_a_newer_cadernos_database_in_wal_mode_gets_no_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    newer_cadernos_database(path, rollback=False)
    assert not any(tmp_path.glob("newer.db-*"))
    refuse(path, SchemaTooNew, "newer caderno")
