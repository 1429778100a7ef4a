"""A wheel built from the repository installs in a fresh virtual environment: the README's quickstart runs from it with no extras, and ``caderno serve`` once its ``server`` extra is added.

The wheel is built from a copy of the sources (the working tree gets no
``build/`` or ``*.egg-info``), installed into a new venv (about 9 s on 2
cores with pip's cache warm), and then only that venv's
``caderno`` script is used, outside the repository and with no PYTHONPATH: the
entry point, the bundled tokenizer and the inspector's static files must all
come from the wheel. The venv is made without pip of its own, and this
interpreter's pip installs into it (``pip --python``): seeding the venv with
pip and resolving with that older copy took 8 s more, and pip is not what
the test is about.

Without the package index (offline), the venv is made with
``--system-site-packages`` from this interpreter and the wheel installed with
``--no-deps``: the dependencies are shared, but the wheel's own files and
entry point are still the ones under test.

One venv serves both checks, in order: the wheel with no extras (what
``pip install <checkout>`` gives) runs the README's first runnable ```python
block as a plain script, outside the repository; then the ``server`` extra is
added to the same venv and ``caderno serve`` runs from it. (Two venvs cost
the suite a second copy of every dependency, about 8 s of CPU.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402

from conftest import PROCESS_SECONDS, free_port, wait_healthy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 300


def _run(
    command: list[str | Path], *, env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _build_wheel(tmp: Path, env: dict[str, str]) -> Path:
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp / "dist"
    # Build isolation on: the build backend is the one pyproject.toml asks for,
    # not whatever setuptools this venv happens to hold.
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source],
        env=env,
        cwd=tmp,
        timeout=PIP_TIMEOUT,
    )
    # A failed build is a failure, never a skip: a broken pyproject.toml must show.
    assert built.returncode == 0, f"the wheel could not be built: {built.stderr[-1500:]}"
    (wheel,) = dist.glob("caderno-*.whl")
    return wheel


def _pip(venv: Path) -> list[str | Path]:
    """This interpreter's pip, installing into ``venv``."""
    return [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]


def _install(tmp: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A new venv at ``tmp/venv`` with ``wheel`` installed, no extras; offline, its dependencies are this interpreter's."""
    venv = tmp / "venv"
    pip = _pip(venv)
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env, cwd=tmp, timeout=120)
    assert made.returncode == 0, made.stderr
    full = _run(
        [*pip, "install", "--quiet", wheel],
        env=env,
        cwd=tmp,
        timeout=PIP_TIMEOUT,
    )
    if full.returncode == 0:
        return venv
    # Offline: share this interpreter's dependencies, install only the wheel.
    shutil.rmtree(venv)
    made = _run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv], env=env, cwd=tmp, timeout=120
    )
    assert made.returncode == 0, made.stderr
    alone = _run(
        [*pip, "install", "--quiet", "--no-deps", "--ignore-installed", wheel],
        env=env,
        cwd=tmp,
        timeout=PIP_TIMEOUT,
    )
    assert alone.returncode == 0, f"{full.stderr[-1000:]}\n{alone.stderr[-1000:]}"
    return venv


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CADERNO_DB", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _add_extra(venv: Path, wheel: Path, extra: str, env: dict[str, str]) -> None:
    """Install ``wheel[extra]`` into ``venv``: the extra's dependencies (offline the venv already shares them)."""
    if "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text():
        return
    added = _run([*_pip(venv), "install", "--quiet", f"{wheel}[{extra}]"], env=env, cwd=venv, timeout=PIP_TIMEOUT)
    assert added.returncode == 0, added.stderr[-1500:]


def test_the_wheel_runs_the_quickstart_with_no_extras_then_serves_with_its_server_extra(tmp_path: Path) -> None:
    from test_docs import README, blocks

    env = _env()
    env["CADERNO_HOME"] = str(tmp_path / "home")
    work = tmp_path / "outside"  # not the repository: nothing importable by accident
    work.mkdir()
    wheel = _build_wheel(tmp_path, env)
    venv = _install(tmp_path, wheel, env)
    python, cli = venv / "bin" / "python", venv / "bin" / "caderno"

    where = _run([python, "-c", "import caderno; print(caderno.__file__)"], env=env, cwd=work, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    quickstart = next(code for lang, code, runs in blocks(README) if lang == "python" and runs)
    (work / "quickstart.py").write_text(quickstart)
    done = _run([python, "quickstart.py"], env=env, cwd=work, timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "monthlyIncomeBRL" in done.stdout, done.stdout  # what the script wrote, read back

    _add_extra(venv, wheel, "server", env)
    db = work / "w.db"
    created = _run([cli, "--db", db, "keys", "create", "--resource", "casa", "--json"], env=env, cwd=work, timeout=120)
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(cli), "--db", str(db), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(server, base, seconds=PROCESS_SECONDS, what="the server from the wheel")
        headers = {"authorization": f"Bearer {token}"}
        threads = httpx.get(f"{base}/v1/resources/casa/threads", headers=headers, timeout=10)
        assert threads.status_code == 200 and threads.json() == [], threads.text
        assert httpx.get(f"{base}/v1/resources/casa/threads", timeout=10).status_code == 401
        page = httpx.get(f"{base}/", timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"], page.text[:200]
        assert "<html" in page.text.lower()
        script = httpx.get(f"{base}/inspector/app.js", timeout=10)
        assert script.status_code == 200 and len(script.content) > 1000
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=30)
        assert server.returncode == 0, out
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=10)
