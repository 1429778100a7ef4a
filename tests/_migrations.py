"""A helper module (``from _migrations import …``), beside ``_pg.py``: databases as an older caderno left them.

Both ``…_migrated_up_to`` run caderno's own migration runner
(``caderno.stores._migrate``) over the migrations up to one of them, as the
caderno that stopped there did; ``open_killed_during`` opens a file in a
process that dies in the middle of aidaemon's import.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from caderno.core.clock import to_iso, utcnow
from caderno.stores import _migrate, _postgres_schema, _sqlite_schema
from caderno.stores._sql import Q, run_plan_sync, to_pyformat
from conftest import python_env


def migration(name: str, *, dialect: str = "sqlite") -> list[str]:
    """The statements of one migration, by name."""
    migrations = _sqlite_schema.MIGRATIONS if dialect == "sqlite" else _postgres_schema.MIGRATIONS
    return list(dict(migrations)[name])


def _up_to(migrations: list[_migrate.Migration], last: str) -> list[_migrate.Migration]:
    names = [name for name, _ in migrations]
    return migrations[: names.index(last) + 1]


def sqlite_migrated_up_to(path: Path, last: str) -> sqlite3.Connection:
    """A SQLite file with caderno's migrations applied up to ``last`` (included), as that caderno left it.

    Returns an open autocommit connection, for the test to write rows in the
    old layout before a current caderno opens the file.
    """
    conn = sqlite3.connect(path, isolation_level=None)

    def execute(q: Q) -> list[Any]:
        return conn.execute(q.sql, q.params).fetchall()

    migrations = _up_to(_sqlite_schema.MIGRATIONS, last)
    done = run_plan_sync(_migrate.applied(migrations, _sqlite_schema.LEDGER), execute)
    run_plan_sync(_migrate.apply(migrations, done, to_iso(utcnow())), execute)
    conn.execute(f"PRAGMA user_version = {len(migrations)}")
    return conn


def postgres_migrated_up_to(conn: Any, last: str) -> None:
    """Apply caderno's PostgreSQL migrations up to ``last`` (included) on an autocommit psycopg connection."""

    def execute(q: Q) -> Any:
        cur = conn.execute(to_pyformat(q.sql), q.params) if q.params else conn.execute(q.sql)
        return cur.fetchall() if cur.description else None

    migrations = _up_to(_postgres_schema.MIGRATIONS, last)
    done = run_plan_sync(_migrate.applied(migrations, _postgres_schema.LEDGER), execute)
    run_plan_sync(_migrate.apply(migrations, done, utcnow()), execute)


def open_killed_during(path: Path, step: str) -> None:
    """Import aidaemon's ``path`` in a process that dies (no rollback, no close) when the import reaches ``step``.

    ``step`` names a function of ``caderno.stores._sqlite_legacy``; the
    process exits with status 9 the moment it is called, as if the power
    went out mid-migration.
    """
    code = f"""
        import asyncio, os
        import caderno
        from caderno.stores import _sqlite_legacy

        def die(*args):
            os._exit(9)

        _sqlite_legacy.{step} = die

        async def main():
            await caderno.connect({str(path)!r}, embedder=None, import_from="aidaemon", legacy_resource_id="casa")

        asyncio.run(main())
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=python_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr
