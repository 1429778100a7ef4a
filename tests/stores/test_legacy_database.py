"""aidaemon's older database is imported (``import_from="aidaemon"``): every table of it moves into caderno's, once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _migrations import open_killed_during, sqlite_migrated_up_to

import caderno
from caderno.stores import _sqlite_legacy, ops

_CALLS = json.dumps(
    [
        {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "ls -la"}},
        {"type": "function", "function": {"name": "budget_total", "arguments": '{"month": "2026-06"}'}},
    ]
)


def _older_agent_db(path: Path) -> None:
    """All five older tables, with the awkward rows, written by SQL."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        PRAGMA user_version = 7;
        CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
            content TEXT, tool_call_id TEXT, tool_name TEXT, tool_calls_json TEXT, created_at TEXT NOT NULL,
            importance REAL DEFAULT 0.5, consolidated_at TEXT);
        CREATE TABLE facts (id INTEGER PRIMARY KEY, category TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            source TEXT DEFAULT '', created_at TEXT, updated_at TEXT, UNIQUE (category, key));
        CREATE INDEX facts_category ON facts (category);
        CREATE TABLE macros (id INTEGER PRIMARY KEY, trigger_tool TEXT, trigger_args_pattern TEXT, next_tool TEXT,
            next_args TEXT, confidence REAL, used_count INTEGER DEFAULT 0, created_at TEXT);
        CREATE TABLE scheduled_tasks (id INTEGER PRIMARY KEY, name TEXT UNIQUE, cron_expr TEXT,
            original_schedule TEXT, prompt TEXT, source TEXT, is_oneshot INTEGER, is_paused INTEGER,
            is_trusted INTEGER, next_run_at TEXT, last_run_at TEXT, created_at TEXT, updated_at TEXT);
        CREATE TABLE terminal_allowed_prefixes (prefix TEXT PRIMARY KEY, created_at TEXT);
        """
    )
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_name, tool_calls_json, created_at, "
        "importance) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            ("m1", "s1", "user", "quanto gastamos?", None, None, None, "2026-05-01 10:00:00", 0.9),
            ("m2", "s1", "assistant", "", None, None, _CALLS, "2026-05-01 10:00:01", 0.5),
            ("m3", "s1", "tool", "total 8", "call_1", "terminal", None, "2026-05-01 10:00:02", 0.3),
            # no call id: the one unanswered call of the same tool is m2's second
            ("m4", "s1", "tool", '{"total": 10}', None, "budget_total", None, "2026-05-01 10:00:03", 0.3),
            # no call id and nothing to answer: an id is synthesized
            ("m5", "s1", "tool", "órfão", None, None, None, "2026-05-01 10:00:04", 0.3),
            ("m6", "s1", "assistant", "R$ 10", None, None, "not json at all", "2026-05-01 10:00:05", 0.5),
            ("m7", "s1", "developer", "be brief", None, None, None, "someday", 7.0),
        ],
    )
    conn.executemany(
        "INSERT INTO facts (category, key, value, source, created_at, updated_at) VALUES (?,?,?,?,?,?)",
        [
            ("Finance", "budget", "R$ 3000", "", "2026-01-01 08:00:00", "2026-02-01 08:00:00"),
            ("finance", "budget", "R$ 4000", "user", "2026-03-01 08:00:00", "2026-03-02 08:00:00"),
            ("family", "daughter", "Ana", "", "2026-01-05 08:00:00", "2026-01-05 08:00:00"),
        ],
    )
    conn.executemany(
        "INSERT INTO macros (trigger_tool, trigger_args_pattern, next_tool, next_args, confidence, used_count) "
        "VALUES (?,?,?,?,?,?)",
        [
            ("git_status", '{"command":"str:git"}', "git_diff", '{"staged": true}', 0.9, 3),
            ("terminal", "{}", "terminal", "ls -la", 0.6, 0),
        ],
    )
    conn.executemany(
        "INSERT INTO scheduled_tasks (name, cron_expr, original_schedule, prompt, source, is_oneshot, is_paused, "
        "is_trusted, next_run_at, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            ("resumo", "0 9 * * *", "todo dia às 9h", "resuma o dia", "tool", 0, 0, 1, None, "2026-01-01 00:00:00"),
            ("lembrete", None, "amanhã 8h", "pague a conta", "", 1, 1, 0, "2026-06-01T08:00:00Z", None),
        ],
    )
    conn.executemany(
        "INSERT INTO terminal_allowed_prefixes VALUES (?, ?)",
        [("git  status", "2026-01-01 00:00:00"), ("ls", None), ("rm -rf / && echo", None)],
    )
    conn.commit()
    conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


async def _check_everything(path: Path) -> None:
    async with caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa") as memory:
        got = await memory.get_messages(resource_id="casa", thread_id="s1")
        assert [m.id for m in got] == ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]
        assert got[0].importance == 0.9
        calls = got[1].tool_calls
        assert calls is not None
        assert (calls[0].id, calls[0].name, calls[0].arguments) == ("call_1", "terminal", "ls -la")
        assert (calls[1].id, calls[1].arguments) == ("legacy-m2-1", {"month": "2026-06"})
        assert got[1].metadata == {"legacy": {"synthesized_tool_call_ids": ["legacy-m2-1"]}}
        assert got[2].tool_call_id == "call_1" and got[2].metadata is None
        assert got[3].tool_call_id == "legacy-m2-1"
        assert got[3].metadata == {"legacy": {"inferred_tool_call_id": True}}
        assert (got[4].role, got[4].content, got[4].tool_call_id) == ("tool", "órfão", "legacy-m5")
        assert got[4].metadata == {"legacy": {"synthesized_tool_call_id": True}}
        assert got[5].tool_calls is None and got[5].content == "R$ 10"
        assert got[5].metadata == {"legacy": {"tool_calls_json": "not json at all"}}
        assert (got[6].role, got[6].importance, got[6].created_at) == ("system", 1.0, got[5].created_at)
        assert got[6].metadata == {"legacy": {"role": "developer", "created_at": "someday"}}

        facts = {(f.category, f.key): f for f in await memory.facts.list(resource_id="casa")}
        assert sorted(facts) == [("family", "daughter"), ("finance", "budget")]
        assert (facts["finance", "budget"].value, facts["finance", "budget"].source) == ("R$ 4000", "user")
        assert facts["family", "daughter"].source == "agent"
        assert facts["family", "daughter"].created_at is not None
        assert facts["family", "daughter"].created_at.isoformat() == "2026-01-05T08:00:00+00:00"
        history = await memory.run(ops.ReadFactHistory(resource_id="casa", category="finance", key="budget"))
        assert [h["value"] for h in history] == ["R$ 3000"]

        tasks = {t.name: t for t in await memory.run(ops.ListTasks(resource_id="casa"))}
        assert sorted(tasks) == ["lembrete", "resumo"]
        daily = tasks["resumo"]
        assert (daily.cron_expr, daily.original_schedule, daily.is_trusted, daily.is_oneshot) == (
            "0 9 * * *",
            "todo dia às 9h",
            True,
            False,
        )
        assert daily.next_run_at is not None and daily.thread_id == "task:resumo" and daily.timezone == "UTC"
        once = tasks["lembrete"]
        assert (once.is_oneshot, once.is_paused, once.source, once.cron_expr) == (True, True, "tool", None)
        assert once.next_run_at is not None and once.next_run_at.isoformat() == "2026-06-01T08:00:00+00:00"

        macros = await memory.run(ops.ReadMacros(resource_id="casa"))
        assert [(m.trigger_pattern, m.next_tool, m.next_args, m.used_count) for m in macros] == [
            ('{"command":"str:git"}', "git_diff", {"staged": True}, 3),
            ("{}", "terminal", "ls -la", 0),
        ]
        assert await memory.run(ops.ListPrefixes(resource_id="casa")) == ["git status", "ls"]


async def test_every_older_table_moves_once(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    _older_agent_db(path)
    await _check_everything(path)
    await _check_everything(path)  # a second open duplicates nothing
    tables = _tables(path)
    assert not tables & {"messages", "legacy_facts", "legacy_macros", "legacy_scheduled_tasks"}
    conn = sqlite3.connect(path)
    # The prefix caderno refuses to approve stays behind, alone.
    assert conn.execute("SELECT prefix FROM terminal_allowed_prefixes").fetchall() == [("rm -rf / && echo",)]
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 7
    assert conn.execute("SELECT count(*) FROM facts_history").fetchone()[0] == 1
    conn.close()


async def test_a_failure_midway_leaves_the_old_tables_and_a_reopen_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "older.db"
    _older_agent_db(path)
    before = _tables(path)

    def poisoned(*args: object) -> bool:
        raise RuntimeError("poisoned row")

    monkeypatch.setattr(_sqlite_legacy, "_import_macros", poisoned)
    with pytest.raises(RuntimeError, match="poisoned"):
        await caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa")
    assert _tables(path) == before  # messages and facts had moved: all rolled back
    monkeypatch.undo()
    await _check_everything(path)


async def test_a_process_killed_midway_leaves_the_old_tables_and_a_reopen_completes(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    _older_agent_db(path)
    before = _tables(path)
    open_killed_during(path, "_import_tasks")
    assert _tables(path) == before
    await _check_everything(path)


async def test_a_caderno_database_with_older_tables_beside_it_takes_them_in(tmp_path: Path) -> None:
    # A file caderno migrated before 0005 existed, still holding the older
    # agent's macros: 0005 would otherwise fail on "table macros already exists".
    path = tmp_path / "half.db"
    conn = sqlite_migrated_up_to(path, "0004_batch_port")
    conn.executescript(
        """
        CREATE TABLE macros (trigger_tool TEXT, next_tool TEXT, next_args TEXT);
        INSERT INTO macros VALUES ('git_status', 'git_diff', NULL);
        """
    )
    conn.commit()
    conn.close()
    for _ in range(2):
        async with caderno.connect(str(path), embedder=None, import_from="aidaemon") as memory:
            macros = await memory.run(ops.ReadMacros(resource_id="default"))
            assert [(m.trigger_pattern, m.next_tool, m.next_args, m.confidence) for m in macros] == [
                ("{}", "git_diff", {}, 0.5)
            ]
    assert "legacy_macros" not in _tables(path)


async def test_the_older_agents_consolidated_at_is_kept_aside_and_caderno_summarises_the_history(
    tmp_path: Path,
) -> None:
    # For aidaemon, consolidated_at means "facts extracted"; for caderno, "covered by a
    # summary". Copied over, it would hide the history from caderno's summaries for good.
    path = tmp_path / "older.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
            content TEXT, created_at TEXT NOT NULL, consolidated_at TEXT);
        """
    )
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, created_at, consolidated_at) VALUES (?,?,?,?,?,?)",
        [
            ("m1", "s1", "user", "a meta é EUR 6.000 para Amsterdam", "2026-05-01 10:00:00", "2026-05-02 03:00:00"),
            ("m2", "s1", "assistant", "anotado", "2026-05-01 10:00:01", None),
        ],
    )
    conn.commit()
    conn.close()
    async with caderno.connect(str(path), embedder=None, import_from="aidaemon", legacy_resource_id="casa") as memory:
        got = await memory.get_messages(resource_id="casa", thread_id="s1")
        assert got[0].metadata == {"legacy": {"facts_extracted_at": "2026-05-02T03:00:00.000000+00:00"}}
        assert got[1].metadata is None
        free = await memory.run(ops.ReadUnconsolidated(resource_id="casa", thread_id="s1"))
        assert [m.id for m in free] == ["m1", "m2"]
