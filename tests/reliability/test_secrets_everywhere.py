"""Passwords and keys never show: not in errors, their chain, tracebacks, logs, the CLI or HTTP answers.

The PostgreSQL part:

Every form of password (URL user-info, ``?password=``, ``PGPASSWORD``,
percent-encoded, raw ``@ : /`` and spaces inside) is tried against a port
where nothing listens and against the real server with a database that
does not exist (the test server may trust any password, so a missing
database is what makes it answer with an error that echoes the URL).

The upstream model's part: ``caderno serve`` in front of an upstream that
refuses its key (quoting it back, as OpenAI does) or that cannot be reached
at a URL holding a password — neither reaches a proxy client (JSON, SSE,
headers) nor the server's log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from _pg import require_postgres
from _serving import make_key, serving

import caderno
from caderno import CadernoError
from conftest import free_port, python_env

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
    runs = []
    for url, extra in urls(password, DEAD):  # one process per form, all at once: each is mostly interpreter start
        env = {**python_env(), **extra}
        env.pop("CADERNO_DB", None)
        command = [sys.executable, "-m", "caderno.cli", "--db", url, "threads", "list", "r"]
        runs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        for proc in runs:
            stdout, stderr = proc.communicate(timeout=60)
            out = stdout + stderr
            assert proc.returncode != 0
            assert not leaks(out, password), f"CLI output shows the password: {out}"
            assert len(out.strip().splitlines()) == 1, f"a connection error is not one line:\n{out}"
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


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


# -- the upstream model's key and URL password, through ``caderno serve``'s proxy ------------

#: The upstream key: OpenAI's shape, long enough that no normal text holds it.
UPSTREAM_KEY = "sk-proj-UpstreamLeakCanary0123456789abcdef"
#: The password in the upstream URL's user-info.
URL_PASSWORD = "Url-Passw0rd-Canary-77"


class _RefusingUpstream(BaseHTTPRequestHandler):
    """Answers every chat completion as OpenAI does for a wrong key: 401, quoting the key it was sent."""

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = json.dumps(
            {"error": {"message": f"Incorrect API key provided: {sent}.", "code": "invalid_api_key"}}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _upstream(kind: str) -> Iterator[str]:
    """The base URL of a refusing upstream, or of one with a password in its URL where nothing listens."""
    if kind == "unreachable":
        yield f"http://caderno:{URL_PASSWORD}@127.0.0.1:{free_port()}/v1"
        return
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingUpstream)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _secret_forms() -> list[str]:
    """The key and the password as written, percent-encoded, and the key's long tail."""
    return [UPSTREAM_KEY, UPSTREAM_KEY.removeprefix("sk-proj-"), URL_PASSWORD, quote(URL_PASSWORD, safe="")]


@pytest.mark.parametrize(
    "kind,said",
    [
        ("refusing", "the model call failed: HTTP 401 from the upstream"),
        ("unreachable", "the model call failed: the upstream could not be reached"),
    ],
)
def test_upstream_key_and_url_password_never_reach_a_client_or_the_log(tmp_path: Path, kind: str, said: str) -> None:
    db = tmp_path / "proxy.db"
    token = make_key(db, "casa")
    with _upstream(kind) as upstream:
        config = tmp_path / "caderno.toml"
        config.write_text(
            f'[model]\nbase_url = "{upstream}"\nmodel = "m"\napi_key_env = "CADERNO_TEST_UPSTREAM_KEY"\n'
        )
        env = {**python_env(), "CADERNO_TEST_UPSTREAM_KEY": UPSTREAM_KEY}
        with serving(db, config, env=env) as served:
            seen: list[str] = []
            headers = {"authorization": f"Bearer {token}", "x-caderno-thread": "t1"}
            for stream in (False, True):
                body = {"model": "m", "messages": [{"role": "user", "content": "oi"}], "stream": stream}
                with httpx.stream(
                    "POST", f"{served.base}/v1/chat/completions", json=body, headers=headers, timeout=30
                ) as answer:
                    raw = b"".join(answer.iter_raw()).decode()  # every byte: JSON or SSE chunks
                    seen += [raw, *(f"{k}: {v}" for k, v in answer.headers.items())]
                    assert answer.status_code == 502, raw
                    assert json.loads(raw)["detail"] == said
    shown = "\n".join(seen)
    for secret in _secret_forms():
        assert secret not in shown, f"a client saw {secret!r}:\n{shown}"
        assert secret not in served.log, f"the server log shows {secret!r}:\n{served.log}"
    # The detail went to the log, scrubbed: the operator can still tell what failed.
    assert ("HTTP 401" if kind == "refusing" else "ConnectError") in served.log, served.log


# -- other libraries' loggers: a real turn with a password in the upstream's URL ---------------

#: The password in the upstream URL of a turn that succeeds.
TURN_PASSWORD = "Turn-Url-Passw0rd-Canary-42"


async def test_a_turn_with_a_password_in_base_url_leaves_it_in_no_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx writes each request's whole URL at info, httpcore more at debug: every line, every logger, is masked."""
    from _upstream import Upstream, proxy_in_front, text

    from caderno.core.redact import LIBRARY_LOGGERS

    caplog.set_level(logging.DEBUG)
    for name in (*LIBRARY_LOGGERS, "httpcore", "caderno"):
        caplog.set_level(logging.DEBUG, logger=name)
    upstream = Upstream(script=[text(f"resposta {n}") for n in range(4)], piece=100)  # whole words in a stream
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["casa"], name="app")
    headers = {"authorization": f"Bearer {token}", "x-caderno-thread": "t1"}
    try:
        async with (
            proxy_in_front(memory, upstream, userinfo=f"caderno:{TURN_PASSWORD}") as base,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client,
        ):
            for stream in (False, True):
                chat = {"model": "m", "messages": [{"role": "user", "content": "oi"}], "stream": stream}
                answer = await client.post("/v1/chat/completions", json=chat)
                assert answer.status_code == 200 and "resposta" in answer.text, answer.text
                responses = {"model": "m", "input": "oi", "stream": stream}
                answer = await client.post("/v1/responses", json=responses)
                assert answer.status_code == 200 and "resposta" in answer.text, answer.text
    finally:
        await memory.close()
    assert len(upstream.requests) == 4
    lines = [
        f"{r.name}: {r.getMessage()}"
        + ("".join(traceback.format_exception(*r.exc_info)) if r.exc_info else "")
        + (r.exc_text or "")
        for r in caplog.records
    ]
    shown = "\n".join([*lines, caplog.text])
    # The lines that used to carry it were written, so the check below saw them.
    assert sum(line.startswith("httpx: HTTP Request: POST http://caderno:***@") for line in lines) == 4, shown
    assert any(line.startswith("httpcore.") for line in lines), shown
    for secret in (TURN_PASSWORD, quote(TURN_PASSWORD, safe="")):
        assert secret not in shown, f"a log line shows {secret!r}:\n{shown}"
