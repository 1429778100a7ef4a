"""Shared fixtures: an isolated CADERNO_HOME and one ``memory`` per backend."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import caderno

BACKENDS = ["memory", "sqlite"]


@pytest.fixture(autouse=True)
def caderno_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test touches the real home directory or a stray CADERNO_DB."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CADERNO_HOME", str(home))
    monkeypatch.delenv("CADERNO_DB", raising=False)
    return home


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL of each backend."""
    if request.param == "memory":
        return "memory://"
    return f"sqlite:///{tmp_path / 'caderno.db'}"


@pytest.fixture
async def memory(db_url: str) -> AsyncIterator[caderno.Memory]:
    mem = await caderno.connect(db_url)
    try:
        yield mem
    finally:
        await mem.close()


def python_env() -> dict[str, str]:
    """Environment for subprocesses: same interpreter, src importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parent.parent / "src")
    return env
