"""The database and its -wal/-shm files are readable by their owner only, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import caderno
from caderno import Message


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o000)  # the worst case: without caderno's care, files come out 0666
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_database_wal_and_shm_are_created_0600(tmp_path: Path, permissive_umask: None) -> None:
    path = tmp_path / "nested" / "caderno.db"
    async with caderno.connect(path, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
        await memory.get_messages(resource_id="r", thread_id="t")
        files = {p.name: mode(p) for p in path.parent.iterdir()}
    assert files == {"caderno.db": 0o600, "caderno.db-wal": 0o600, "caderno.db-shm": 0o600}


async def test_an_existing_files_mode_is_left_as_its_owner_chose(tmp_path: Path, permissive_umask: None) -> None:
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    async with caderno.connect(path, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
        assert mode(path) == 0o640
