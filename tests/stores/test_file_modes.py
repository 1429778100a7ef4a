"""The database and its -wal/-shm files, journals and exports are readable by their owner only, whatever the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import caderno
from caderno import Journal, Message
from conftest import python_env


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


def test_a_new_journal_is_created_0600(tmp_path: Path, permissive_umask: None) -> None:
    journal = Journal(tmp_path / "journal")
    journal.append("decision", {"what": "usar SQLite"})
    assert mode(journal.path("decision")) == 0o600


async def test_an_export_file_is_written_0600(tmp_path: Path, permissive_umask: None) -> None:
    """The CLI in a subprocess inherits the umask of 000: the export is still its owner's alone."""
    db, dump = tmp_path / "c.db", tmp_path / "casa.json"
    async with caderno.connect(db, embedder=None) as memory:
        await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("oi")])
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), "export", "casa", "-o", str(dump)]
    done = subprocess.run(command, env=python_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert mode(dump) == 0o600
