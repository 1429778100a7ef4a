"""``caderno serve`` as a real process on a loopback port, with a key made by ``caderno keys create``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402

from conftest import PROCESS_SECONDS, free_port, python_env, wait_healthy  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(command, env=python_env(), capture_output=True, text=True, timeout=60)


def test_serve_answers_with_a_cli_key_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    created = _cli(db, "keys", "create", "--resource", "casa", "--name", "teste", "--json")
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    listed = _cli(db, "keys", "list", "--json")
    assert [k["name"] for k in json.loads(listed.stdout)] == ["teste"] and token not in listed.stdout

    config = tmp_path / "caderno.toml"
    config.write_text(
        '[[scheduled_tasks]]\nresource = "casa"\nname = "bom-dia"\nschedule = "daily at 9am"\nprompt = "Bom dia"\n'
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "caderno.cli", "--db", str(db), "serve", "--config", str(config), "--port", str(port)],
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(server, base, seconds=PROCESS_SECONDS, what="the server")
        headers = {"authorization": f"Bearer {token}"}
        made = httpx.post(f"{base}/v1/resources/casa/threads", json={"thread_id": "t", "title": "oi"}, headers=headers)
        assert made.status_code == 201, made.text
        assert [t["id"] for t in httpx.get(f"{base}/v1/resources/casa/threads", headers=headers).json()] == ["t"]
        assert httpx.get(f"{base}/v1/resources/outra/threads", headers=headers).status_code == 404
        assert httpx.get(f"{base}/readyz").json() == {"status": "ok"}
        # The config's tasks were synced at start.
        tasks = httpx.get(f"{base}/v1/resources/casa/tasks", headers=headers).json()
        assert [(t["name"], t["source"]) for t in tasks] == [("bom-dia", "config")]

        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=PROCESS_SECONDS)
        assert server.returncode == 0, output
        assert "Shutting down" in output or "shutdown" in output.lower()
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()

    revoked = _cli(db, "keys", "revoke", json.loads(listed.stdout)[0]["id"])
    assert revoked.returncode == 0, revoked.stderr
    again = _cli(db, "keys", "revoke", json.loads(listed.stdout)[0]["id"])
    assert again.returncode == 1 and again.stderr.startswith("caderno: error:")
    refused = _cli(db, "keys", "create")
    assert refused.returncode == 1 and "at least one resource" in refused.stderr


def test_serve_without_the_server_extra_prints_the_install_line(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    (blocked / "fastapi").mkdir(parents=True)
    (blocked / "fastapi" / "__init__.py").write_text("raise ImportError('blocked for this test')\n")
    env = python_env()
    env["PYTHONPATH"] = f"{blocked}{os.pathsep}{SRC}"
    command = [sys.executable, "-m", "caderno.cli", "--db", str(tmp_path / "x.db"), "serve"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install " in done.stderr and "[server]'" in done.stderr  # from where caderno came (install_line)


def test_serve_docs_flag_and_body_limit_option(tmp_path: Path) -> None:
    from _serving import make_key, serving

    db = tmp_path / "docs.db"
    token = make_key(db, "casa")
    headers = {"authorization": f"Bearer {token}"}
    with serving(db) as served:  # the defaults: no /docs, no /redoc
        assert httpx.get(f"{served.base}/docs").status_code == 404
        assert httpx.get(f"{served.base}/redoc").status_code == 404
        assert httpx.get(f"{served.base}/openapi.json").status_code == 200
    with serving(db, None, "--docs", "--max-body-bytes", "1000") as served:
        page = httpx.get(f"{served.base}/docs")
        assert page.status_code == 200 and "script-src" in page.headers["content-security-policy"]
        big = {"thread_id": "t", "title": "x" * 2000}
        refused = httpx.post(f"{served.base}/v1/resources/casa/threads", json=big, headers=headers)
        assert refused.status_code == 413, refused.text
        made = httpx.post(f"{served.base}/v1/resources/casa/threads", json={"thread_id": "t"}, headers=headers)
        assert made.status_code == 201, made.text
