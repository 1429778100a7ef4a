"""aidaemon's own database is imported whole (``import_from="aidaemon"``): its event log is history, its macros all move.

The files are written by ``tests/_aidaemon.py`` from the agent's source
(the commits are named there), never by hand here.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from _aidaemon import (
    MESSAGES_ERA,
    append_event,
    assistant_response,
    at,
    current_database,
    forget_fact,
    messages_era_database,
    set_fact,
    two_sessions_database,
    user_message,
)
from _migrations import open_killed_during

import caderno
from caderno.core.errors import StorageError
from caderno.stores import ops


def _dump(path: Path, *tables: str) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables}
    finally:
        conn.close()


UNMODELLED = ("episodes", "people", "person_facts", "settings")


async def _check_history(path: Path) -> None:
    async with caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa") as memory:
        got = await memory.get_messages(resource_id="casa", thread_id="telegram:100")
        assert [(m.role, m.content) for m in got] == [
            ("user", "quanto gastamos?"),
            ("assistant", ""),
            ("tool", "total 8"),
            ("tool", '{"total": 10}'),
            ("assistant", "R$ 10"),
        ]
        assert [m.id for m in got][:1] == ["tg-1"]
        assert got[0].created_at == at(1)
        assert got[0].metadata == {"legacy": {"event_id": 2, "data": {"has_attachments": False}}}
        calls = got[1].tool_calls
        assert calls is not None
        assert [(c.id, c.name, c.arguments) for c in calls] == [
            ("call_a", "terminal", {"command": "ls"}),
            ("call_b", "budget_total", {"month": "2026-03"}),
        ]
        assert got[1].metadata == {
            "legacy": {
                "event_id": 4,
                "data": {
                    "model": "gpt-4o-mini",
                    "input_tokens": 120,
                    "output_tokens": 30,
                    "extra_content": {"call_b": {"sig": "x"}},
                },
            }
        }
        assert [(m.tool_call_id, m.name) for m in got[2:4]] == [("call_a", "terminal"), ("call_b", "budget_total")]
        assert got[3].metadata == {
            "legacy": {
                "event_id": 8,
                "task_id": "task-1",
                "data": {"success": True, "duration_ms": 42, "task_id": "task-1"},
            }
        }

        other = await memory.get_messages(resource_id="casa", thread_id="slack:C1")
        assert [(m.id, m.content) for m in other] == [("aidaemon-event-10", "oi"), ("11", "tudo bem?")]
        assert other[0].metadata is not None and other[0].metadata["legacy"]["message_id"] == "tg-1"

        macros = await memory.run(ops.ReadMacros(resource_id="casa"))
        assert [(m.trigger_pattern, m.next_tool, m.used_count) for m in macros] == [("{}", "git_diff", 2)]
        assert [f.value for f in await memory.facts.list(resource_id="casa")] == ["Ana"]
        assert await memory.run(ops.ListPrefixes(resource_id="casa")) == ["git status"]


async def test_the_agents_event_log_becomes_history_once(tmp_path: Path) -> None:
    path = tmp_path / "aidaemon.db"
    two_sessions_database(path)
    untouched = _dump(path, *UNMODELLED)
    await _check_history(path)
    await _check_history(path)  # a second open adds nothing
    assert _dump(path, *UNMODELLED) == untouched
    conn = sqlite3.connect(path)
    # What is not conversation stays in the renamed table, as it was.
    left = conn.execute("SELECT id, event_type, data FROM legacy_events ORDER BY id").fetchall()
    assert [(i, t) for i, t, _ in left] == [
        (1, "session_start"),
        (3, "task_start"),
        (5, "tool_call"),
        (7, "tool_call"),
        (12, "user_message"),
    ]
    assert json.loads(left[2][2])["tool_call_id"] == "call_a" and left[4][2] == "not json"
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 7
    legacy = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'legacy_%'")}
    assert legacy == {"legacy_events"}  # the agent's facts and macros moved whole; their old tables are gone
    conn.close()

    left_before = _dump(path, "legacy_events")
    async with caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa") as memory:
        await memory.erase_resource(resource_id="casa")
    async with caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa") as memory:
        # What stays behind is never read again: an erased resource does not come back.
        assert "casa" not in await memory.list_resources()
    assert _dump(path, "legacy_events") == left_before


async def test_a_process_killed_while_reading_the_event_log_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "aidaemon.db"
    two_sessions_database(path)
    tables = ("events", "facts", "macros", "terminal_allowed_prefixes", *UNMODELLED)
    before = _dump(path, *tables)
    open_killed_during(path, "_import_events")
    assert _dump(path, *tables) == before
    await _check_history(path)


def _messages_era_db(path: Path) -> None:
    conn = messages_era_database(path)
    vector = json.dumps([0.1] * 384).encode()  # all-MiniLM-L6-v2's size, as serde_json::to_vec wrote it
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, created_at, embedding, embedding_error) "
        "VALUES (?,?,?,?,?,?,?)",
        [
            ("m1", "s1", "user", "lembra do dentista", "1714557600", vector, None),  # epoch seconds, as text
            ("m2", "s1", "assistant", "anotado", "1714557601500", None, "rate limited"),  # milliseconds
            ("m3", "s1", "user", "e do médico?", "2024-05-01 10:00:05", None, None),
        ],
    )
    stamp = "2026-01-01T00:00:00+00:00"
    conn.executemany(
        "INSERT INTO macros (trigger_tool, trigger_args_pattern, next_tool, next_args, confidence, used_count, "
        "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?)",
        [
            ("terminal", '{"command":"str:git status"}', "git_diff", "{}", 0.9, 3, stamp, stamp),
            ("terminal", '{"command":"str:cargo build"}', "git_diff", "{}", 0.4, 1, stamp, stamp),
            ("terminal", None, "git_diff", "{}", 0.2, 0, stamp, stamp),
        ],
    )
    conn.commit()
    conn.close()


async def test_messages_era_rows_keep_their_times_patterns_and_embedding_intent(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    _messages_era_db(path)
    for _ in range(2):  # the second open adds nothing
        async with caderno.connect(
            str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa"
        ) as memory:
            got = await memory.get_messages(resource_id="casa", thread_id="s1")
            assert [(m.id, m.created_at.isoformat()) for m in got if m.created_at] == [
                ("m1", "2024-05-01T10:00:00+00:00"),
                ("m2", "2024-05-01T10:00:01.500000+00:00"),
                ("m3", "2024-05-01T10:00:05+00:00"),
            ]
            assert got[1].metadata == {"legacy": {"embedding_error": "rate limited"}}
            macros = await memory.run(ops.ReadMacros(resource_id="casa"))
            assert sorted((m.trigger_pattern, m.confidence, m.used_count) for m in macros) == [
                ('{"command":"str:cargo build"}', 0.4, 1),
                ('{"command":"str:git status"}', 0.9, 3),
                ("{}", 0.2, 0),
            ]
    conn = sqlite3.connect(path)
    # The two the agent embedded (or tried to) wait for a vector; m3 waits for reindex.
    queued = conn.execute("SELECT e.id FROM embedding_queue q JOIN events e ON e.seq = q.seq ORDER BY e.id").fetchall()
    assert queued == [("m1",), ("m2",)]
    assert not {"messages", "legacy_macros"} & {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()


def test_an_events_table_of_another_layout_beside_an_agents_tables_is_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    path = folder / "mixed.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE terminal_allowed_prefixes (prefix TEXT);
        CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, payload TEXT, at TEXT);
        INSERT INTO events (kind, payload, at) VALUES ('login', '{"user": "ana"}', '2026-01-01');
        """
    )
    conn.close()
    before = path.read_bytes()

    async def open_it() -> None:
        async with caderno.connect(str(path), embedder=None):
            pass

    with pytest.raises(StorageError, match="another application's SQLite database"):
        asyncio.run(open_it())
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["mixed.db"]  # no -wal, -shm or -journal


async def test_the_agents_replaced_facts_are_history_its_forgotten_and_scoped_ones_stay_behind(tmp_path: Path) -> None:
    path = tmp_path / "aidaemon.db"
    conn = current_database(path)
    set_fact(conn, "family", "daughter", "Ana", "user", at(0))
    set_fact(conn, "family", "daughter", "Ana Clara", "user", at(60))
    set_fact(conn, "health", "allergy", "penicilina", "user", at(120))
    forget_fact(conn, "health", "allergy", at(180))  # the user asked the agent to forget it
    set_fact(conn, "work", "employer", "ACME", "consolidation", at(30))
    # Shown only in direct messages, and only in one channel: caderno has no such scope.
    set_fact(conn, "health", "diagnosis", "ansiedade", "user", at(40), privacy="private")
    set_fact(conn, "work", "salary", "R$ 9000", "user", at(50))
    set_fact(conn, "work", "salary", "R$ 9500", "user", at(55), privacy="channel", channel_id="slack:C1")
    conn.commit()
    conn.close()
    rows = _dump(path, "facts")["facts"]
    stay = [r for r in rows if r[3] in ("penicilina", "ansiedade", "R$ 9000", "R$ 9500")]
    assert len(stay) == 4
    for _ in range(2):  # the second open adds nothing
        async with caderno.connect(
            str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa"
        ) as memory:
            facts = {(f.category, f.key): f.value for f in await memory.facts.list(resource_id="casa")}
            assert facts == {("family", "daughter"): "Ana Clara", ("work", "employer"): "ACME"}
            history = await memory.run(ops.ReadFactHistory(resource_id="casa", category="family", key="daughter"))
            assert [(h["value"], datetime.fromisoformat(h["replaced_at"])) for h in history] == [("Ana", at(60))]
    # The forgotten value, and the scoped ones with their key's older value,
    # are neither current nor history: they stay, alone, in the agent's renamed table.
    assert _dump(path, "legacy_facts") == {"legacy_facts": stay}


async def test_a_message_in_both_the_old_table_and_the_event_log_moves_once(tmp_path: Path) -> None:
    # Between its two layouts the agent kept both, the messages table a
    # projection of the events with the same message ids; its own migration
    # dedupes on (session, type, message_id), and so does caderno's.
    path = tmp_path / "both.db"
    conn = current_database(path)
    conn.executescript(MESSAGES_ERA)
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, created_at) VALUES (?,?,?,?,?)",
        [("u-1", "s", "user", "oi", at(0).isoformat()), ("a-1", "s", "assistant", "olá", at(1).isoformat())],
    )
    append_event(conn, "s", "user_message", user_message("oi", "u-1"), at(0))
    append_event(conn, "s", "assistant_response", assistant_response("olá", message_id="a-1"), at(1))
    append_event(conn, "s", "user_message", user_message("e agora?", "u-2"), at(2))
    conn.commit()
    conn.close()
    for _ in range(2):
        async with caderno.connect(
            str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa"
        ) as memory:
            got = await memory.get_messages(resource_id="casa", thread_id="s")
            assert [(m.id, m.content) for m in got] == [("u-1", "oi"), ("a-1", "olá"), ("u-2", "e agora?")]
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"messages", "legacy_events"} & tables  # everything moved: both old tables are gone
    conn.close()
