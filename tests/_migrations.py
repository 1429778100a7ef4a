"""A helper module (``from _migrations import …``), beside ``_pg.py``: databases as an older caderno left them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from caderno.stores import _sqlite_schema


def sqlite_migrated_up_to(path: Path, last: str) -> sqlite3.Connection:
    """A SQLite file with caderno's migrations applied up to ``last`` (included), as that caderno left it.

    Returns an open autocommit connection, for the test to write rows in the
    old layout before a current caderno opens the file.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    names = [name for name, _ in _sqlite_schema.MIGRATIONS]
    for index, (name, statements) in enumerate(_sqlite_schema.MIGRATIONS[: names.index(last) + 1], start=1):
        for statement in statements:
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, '2026-01-01T00:00:00Z')", (name,))
        conn.execute(f"PRAGMA user_version = {index}")
    return conn
