"""A PostgreSQL password never shows: not in errors, their chain, tracebacks, logs, or the CLI.

Every form of password (URL user-info, ``?password=``, ``PGPASSWORD``,
percent-encoded, raw ``@ : /`` and spaces inside) is tried against a port
where nothing listens and against the real server with a database that
does not exist (the test server may trust any password, so a missing
database is what makes it answer with an error that echoes the URL).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from _pg import require_postgres

import caderno
from caderno import CadernoError
from conftest import python_env

#: Passwords long and odd enough that no part of a normal message holds them.
PASSWORDS = [
    "Hunter2Secret99",
    "s3cr3t@evil.host",
    "colon:in:the:middle",
    "slash/and/more/slashes",
    "with spaces inside it",
    "all@of:them/and more",
    "p%40ss%3Aword-encoded",
    "ümlaut-pässwörd-ß",
    "quote'and\"double",
    "amp&password=x&end",
]

DEAD = "127.0.0.1:5999"
LIVE = "127.0.0.1:5432"
NO_DB = "caderno_no_such_db_zz"


def urls(password: str, host: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Every way to hand ``password`` to caderno: (url, extra environment)."""
    db = "caderno_test" if host == DEAD else NO_DB
    yield f"postgresql://caderno:{password}@{host}/{db}", {}
    yield f"postgresql://caderno:{quote(password, safe='')}@{host}/{db}", {}
    yield f"postgresql://caderno@{host}/{db}?password={quote(password, safe='')}", {}
    yield f"postgresql://caderno@{host}/{db}?sslmode=disable&password={password}", {}
    yield f"postgresql://caderno@{host}/{db}", {"PGPASSWORD": password}


def forms(password: str) -> set[str]:
    """What must not appear: the password as written and percent-encoded."""
    return {password, quote(password, safe=""), quote(password)}


def leaks(text: str, password: str) -> list[str]:
    return [f for f in forms(password) if f in text]


def chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


#: stores/postgres.py keeps psycopg's ProgrammingError ("unexpected spaces found in
#: \"<password>\"") as the __cause__/__context__ of its StorageError: the
#: message caderno writes is scrubbed, the chained driver error is not.
CASES = [pytest.param(pw, host) for pw in PASSWORDS for host in (DEAD, LIVE)]


@pytest.mark.parametrize("password,host", CASES, ids=[f"{i}-{str(c.values[1])[-4:]}" for i, c in enumerate(CASES)])
async def test_password_nowhere_in_errors_or_logs(
    password: str, host: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_postgres()
    caplog.set_level(logging.DEBUG)
    for name in ("psycopg", "psycopg.pool", "caderno"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    for url, env in urls(password, host):
        monkeypatch.delenv("PGPASSWORD", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        caplog.clear()
        with pytest.raises(CadernoError) as info:
            mem = await caderno.connect(url, embedder=None)
            try:
                await mem.list_threads(resource_id="r")
            finally:
                await mem.close()
        for e in chain(info.value):
            assert not leaks(str(e), password), f"{type(e).__name__} shows the password: {e}"
            assert not leaks(repr(e.args), password), f"{type(e).__name__}.args hold the password"
        shown = "".join(traceback.format_exception(info.value))
        assert not leaks(shown, password), f"the traceback shows the password:\n{shown}"
        for record in caplog.records:
            text = record.getMessage() + (
                "".join(traceback.format_exception(*record.exc_info)) if record.exc_info else ""
            )
            assert not leaks(text, password), f"log record {record.name} shows the password: {text}"


@pytest.mark.parametrize("password", PASSWORDS[:6])
def test_cli_error_is_one_line_without_password(password: str) -> None:
    require_postgres()
    for url, extra in urls(password, DEAD):
        env = {**python_env(), **extra}
        env.pop("CADERNO_DB", None)
        proc = subprocess.run(
            [sys.executable, "-m", "caderno.cli", "--db", url, "threads", "list", "r"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0
        assert not leaks(out, password), f"CLI output shows the password: {out}"
        assert len(out.strip().splitlines()) == 1, f"a connection error is not one line:\n{out}"


def test_pgpassword_env_kept_out_of_cli_for_live_server_missing_db() -> None:
    require_postgres()
    password = "Env-Only-Secret-77"
    env = {**python_env(), "PGPASSWORD": password}
    proc = subprocess.run(
        [sys.executable, "-m", "caderno.cli", "--db", f"postgresql://caderno@{LIVE}/{NO_DB}", "threads", "list", "r"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and password not in out and len(out.strip().splitlines()) == 1, out
    assert os.environ.get("PGPASSWORD") != password
