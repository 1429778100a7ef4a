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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_URL = os.environ.get("CADERNO_TEST_PG", "postgresql://caderno@127.0.0.1:5432/caderno_test")
_INSTALLED = bool(shutil.which("pg_ctlcluster") or shutil.which("pg_ctl") or shutil.which("postgres"))
NOT_INSTALLED = "PostgreSQL is not installed on this machine (no pg_ctlcluster/pg_ctl/postgres on PATH)"


def require_postgres() -> None:
    if not _INSTALLED and "CADERNO_TEST_PG" not in os.environ:
        pytest.skip(NOT_INSTALLED)


@contextmanager
def pg_schema() -> Iterator[str]:
    """Create a fresh schema, yield a URL that uses it, drop it afterwards."""
    require_postgres()
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield f"{PG_URL}?schema={name}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
