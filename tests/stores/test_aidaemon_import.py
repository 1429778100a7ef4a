"""aidaemon's import is a step of its own: asked for, it runs; a normal open never runs it.

A file that still holds aidaemon's tables to import is refused by a normal
open, unchanged, with the command that imports it (the decision: caderno's
migrations would otherwise fail on a name aidaemon holds, or leave its rows
unread, and which resource receives them is the user's to say). Once
imported, what stays behind (rows caderno has no place for) is not waiting:
the file opens normally. The files are ``tests/_aidaemon.py``'s layouts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _aidaemon import (
    T0,
    append_event,
    assistant_response,
    current_database,
    forget_fact,
    set_fact,
    two_sessions_database,
    user_message,
)
from _migrations import sqlite_migrated_up_to

import caderno
from caderno.core.errors import StorageError, UsageError
from caderno.stores import _sqlite_legacy


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        conn.close()


async def _open(path: Path, **options: Any) -> list[str]:
    async with caderno.connect(str(path), embedder=None, **options) as memory:
        return await memory.list_resources()


async def test_a_normal_open_refuses_aidaemons_file_unchanged_and_names_the_command(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    path = folder / "agent.db"
    two_sessions_database(path)  # rollback journal, as aidaemon leaves it
    before = _files(folder)
    with pytest.raises(StorageError, match=r"caderno import-from aidaemon .*agent\.db --resource NAME") as refused:
        await _open(path)
    assert "events, facts, macros, terminal_allowed_prefixes" in str(refused.value)
    assert _files(folder) == before  # not a byte, and no -wal, -shm or journal


async def test_a_normal_open_refuses_aidaemons_file_in_wal_mode_and_imports_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    two_sessions_database(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    before = _tables(path)
    with pytest.raises(StorageError, match="caderno import-from aidaemon"):
        await _open(path)
    assert _tables(path) == before


async def test_imported_once_the_file_opens_normally_and_the_store_says_what_moved(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    two_sessions_database(path)
    store = caderno.SQLiteStore(path, import_from="aidaemon", legacy_resource_id="casa")
    async with caderno.Memory(store, embedder=None):
        pass
    assert store.imported is not None
    assert store.imported.to_dict() == {
        "resource_id": "casa",
        "moved": {"facts": 1, "macros": 1, "terminal_allowed_prefixes": 1, "events": 7},
        "left": {"legacy_events": 5},  # not conversation (and one not JSON): caderno has no place for them
    }
    after = _tables(path)
    assert await _open(path) == ["casa"]  # what stays behind is not waiting
    assert _tables(path) == after
    again = caderno.SQLiteStore(path, import_from="aidaemon", legacy_resource_id="casa")
    async with caderno.Memory(again, embedder=None):
        pass
    assert again.imported is not None and again.imported.moved == {}  # nothing twice
    assert again.imported.left == {"legacy_events": 5}


async def test_what_an_import_leaves_behind_never_makes_the_file_wait(tmp_path: Path) -> None:
    # A forgotten fact and one scoped to a channel, and a prefix caderno refuses to approve, stay in the file.
    path = tmp_path / "agent.db"
    conn = current_database(path)
    set_fact(conn, "health", "allergy", "penicilina", "user", T0)
    forget_fact(conn, "health", "allergy", T0)
    set_fact(conn, "work", "salary", "R$ 9500", "user", T0, privacy="channel", channel_id="slack:C1")
    conn.execute("INSERT INTO terminal_allowed_prefixes (prefix) VALUES ('rm -rf / && echo'), ('ls')")
    append_event(conn, "s", "user_message", user_message("oi", "u-1"), T0)
    append_event(conn, "s", "assistant_response", assistant_response("olá"), T0)
    conn.commit()
    conn.close()
    assert await _open(path, import_from="aidaemon", legacy_resource_id="casa") == ["casa"]
    left = _tables(path)
    assert len(left["legacy_facts"]) == 2 and [r[0] for r in left["terminal_allowed_prefixes"]] == ["rm -rf / && echo"]
    for _ in range(2):
        assert await _open(path) == ["casa"]
    assert _tables(path) == left


async def test_a_caderno_database_with_aidaemons_table_beside_it_waits_for_the_import(tmp_path: Path) -> None:
    path = tmp_path / "half.db"
    conn = sqlite_migrated_up_to(path, "0004_batch_port")  # 0005 creates caderno's macros
    conn.executescript("CREATE TABLE macros (trigger_tool TEXT, next_tool TEXT, next_args TEXT);")
    conn.close()
    with pytest.raises(StorageError, match=r"not imported yet \(macros\)"):
        await _open(path)
    assert await _open(path, import_from="aidaemon") == ["default"]
    assert await _open(path) == ["default"]


async def test_a_normal_open_never_runs_the_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object) -> None:
        raise AssertionError("a normal open ran aidaemon's import")

    monkeypatch.setattr(_sqlite_legacy, "rename_clashes", never)
    monkeypatch.setattr(_sqlite_legacy, "import_legacy", never)
    path = tmp_path / "c.db"
    sqlite_migrated_up_to(path, "0010_item_vectors").close()  # a caderno file with migrations still to run
    for _ in range(2):
        assert await _open(path) == []
    assert await _open(tmp_path / "new.db") == []


def test_import_from_names_aidaemon_and_a_sqlite_file() -> None:
    with pytest.raises(UsageError, match="import_from takes 'aidaemon'"):
        caderno.SQLiteStore("x.db", import_from="mem0")
    for url in ("memory://", "postgresql://u@localhost/db"):
        with pytest.raises(UsageError, match="imports a SQLite file in place"):
            caderno.connect(url, import_from="aidaemon")


async def test_the_receiving_resource_is_a_name(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    two_sessions_database(path)
    with pytest.raises(UsageError, match="legacy_resource_id"):
        await _open(path, import_from="aidaemon", legacy_resource_id="../casa")
