"""A helper module (``from _aidaemon import …``): SQLite files as aidaemon writes them.

aidaemon is github.com/davo20019/aidaemon, the agent caderno's contract grew from. The
statements below are copied from its source, not invented, so the tests
that open these files check caderno against the agent's real layout:

- ``current_database``: commit 39a1955500cd618c2010580c873a7183b3f30d0c
  (2026-03-22). ``events`` and its indexes from ``src/db/migrations.rs``
  (``migrate_events``); ``facts`` with the columns its later ``ALTER TABLE``
  statements add, ``macros``, ``terminal_allowed_prefixes``, ``episodes``,
  ``people``, ``person_facts`` and ``settings`` from
  ``src/state/sqlite/migrations.rs`` (``migrate_state``). Event rows are
  written as ``EventStore::append`` writes them (``src/events/store.rs``:
  ``data`` is the payload's JSON, ``created_at`` RFC 3339, ``task_id`` and
  ``tool_name`` copied from the payload as ``Event::new`` in
  ``src/events/mod.rs`` does), with the payloads of
  ``src/events/payloads.rs`` (``UserMessageData``, ``AssistantResponseData``
  with ``ToolCallInfo``, ``ToolCallData``, ``ToolResultData``).
- ``messages_era_database``: commit 620a1367e9d55e192293817119b800d0ae58bb15
  (2026-02-01), ``src/state/sqlite.rs``: the ``messages`` table with the
  ``importance``, ``embedding`` and ``embedding_error`` columns it adds, and
  ``macros``. ``src/memory/manager.rs`` stores an embedding as the JSON of
  the vector (``serde_json::to_vec``) in the BLOB column.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

#: src/db/migrations.rs @ 39a1955, migrate_events.
EVENTS = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    consolidated_at TEXT,
    task_id TEXT,
    tool_name TEXT
);
CREATE INDEX IF NOT EXISTS idx_events_session_time ON events(session_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_events_type ON events(event_type);
CREATE INDEX IF NOT EXISTS idx_events_task ON events(task_id) WHERE task_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_events_consolidation ON events(consolidated_at) WHERE consolidated_at IS NULL;
CREATE INDEX IF NOT EXISTS idx_events_prune ON events(created_at) WHERE consolidated_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_events_tool_result_name_time ON events(tool_name, created_at DESC)
    WHERE event_type = 'tool_result' AND tool_name IS NOT NULL;
"""

#: src/state/sqlite/migrations.rs @ 39a1955, migrate_state (the tables used here).
STATE = """
CREATE TABLE IF NOT EXISTS facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    category TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
ALTER TABLE facts ADD COLUMN superseded_at TEXT;
ALTER TABLE facts ADD COLUMN recall_count INTEGER DEFAULT 0;
ALTER TABLE facts ADD COLUMN last_recalled_at TEXT;
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    summary TEXT NOT NULL,
    topics TEXT,
    emotional_tone TEXT,
    outcome TEXT,
    embedding BLOB,
    importance REAL DEFAULT 0.5,
    recall_count INTEGER DEFAULT 0,
    last_recalled_at TEXT,
    message_count INTEGER,
    start_time TEXT NOT NULL,
    end_time TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_episodes_session ON episodes(session_id);
CREATE TABLE IF NOT EXISTS terminal_allowed_prefixes (
    prefix TEXT PRIMARY KEY,
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS macros (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_tool TEXT NOT NULL,
    trigger_args_pattern TEXT,
    next_tool TEXT NOT NULL,
    next_args TEXT NOT NULL,
    confidence REAL DEFAULT 0.0,
    used_count INTEGER DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS people (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    aliases_json TEXT NOT NULL DEFAULT '[]',
    relationship TEXT,
    platform_ids_json TEXT NOT NULL DEFAULT '{}',
    notes TEXT,
    communication_style TEXT,
    language_preference TEXT,
    last_interaction_at TEXT,
    interaction_count INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (datetime('now')),
    updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS person_facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
    category TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'agent',
    confidence REAL NOT NULL DEFAULT 1.0,
    created_at TEXT NOT NULL DEFAULT (datetime('now')),
    updated_at TEXT NOT NULL DEFAULT (datetime('now')),
    UNIQUE(person_id, category, key)
);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
ALTER TABLE facts ADD COLUMN channel_id TEXT;
ALTER TABLE facts ADD COLUMN privacy TEXT DEFAULT 'global';
ALTER TABLE episodes ADD COLUMN channel_id TEXT;
ALTER TABLE facts ADD COLUMN embedding BLOB;
"""

#: src/state/sqlite.rs @ 620a136: the messages table, its added columns, and macros.
MESSAGES_ERA = """
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    tool_calls_json TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, created_at);
ALTER TABLE messages ADD COLUMN importance REAL DEFAULT 0.5;
ALTER TABLE messages ADD COLUMN embedding BLOB;
ALTER TABLE messages ADD COLUMN embedding_error TEXT;
CREATE TABLE IF NOT EXISTS macros (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_tool TEXT NOT NULL,
    trigger_args_pattern TEXT,
    next_tool TEXT NOT NULL,
    next_args TEXT NOT NULL,
    confidence REAL DEFAULT 0.0,
    used_count INTEGER DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""


def current_database(path: Path) -> sqlite3.Connection:
    """An empty database in the agent's current layout; the caller adds rows and closes it."""
    conn = sqlite3.connect(path)
    conn.executescript(EVENTS + STATE)
    return conn


def messages_era_database(path: Path) -> sqlite3.Connection:
    """An empty database in the agent's older ``messages`` layout; the caller adds rows and closes it."""
    conn = sqlite3.connect(path)
    conn.executescript(MESSAGES_ERA)
    return conn


def append_event(conn: sqlite3.Connection, session_id: str, event_type: str, data: dict[str, Any], at: datetime) -> int:
    """One row as ``EventStore::append`` writes it; returns the event id."""
    cursor = conn.execute(
        "INSERT INTO events (session_id, event_type, data, created_at, task_id, tool_name) VALUES (?, ?, ?, ?, ?, ?)",
        (
            session_id,
            event_type,
            json.dumps(data),
            at.astimezone(UTC).isoformat(),  # chrono's to_rfc3339: +00:00
            data.get("task_id") if isinstance(data.get("task_id"), str) else None,
            data.get("name") if isinstance(data.get("name"), str) else None,
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def user_message(content: str, message_id: str | None = None) -> dict[str, Any]:
    """``UserMessageData`` (``message_id`` skipped when absent, ``has_attachments`` always written)."""
    data: dict[str, Any] = {"content": content, "has_attachments": False}
    if message_id is not None:
        data["message_id"] = message_id
    return data


def assistant_response(
    content: str | None, *, calls: list[dict[str, Any]] | None = None, message_id: str | None = None
) -> dict[str, Any]:
    """``AssistantResponseData``; ``calls`` are ``ToolCallInfo`` objects (``arguments`` a JSON value)."""
    data: dict[str, Any] = {"model": "gpt-4o-mini", "input_tokens": 120, "output_tokens": 30}
    if message_id is not None:
        data["message_id"] = message_id
    if content is not None:
        data["content"] = content
    if calls is not None:
        data["tool_calls"] = calls
    return data


def tool_call(call_id: str, name: str, arguments: Any, task_id: str) -> dict[str, Any]:
    """``ToolCallData``: the tool's execution starting (the call itself is in the assistant's response)."""
    return {"tool_call_id": call_id, "name": name, "arguments": arguments, "summary": name, "task_id": task_id}


def tool_result(call_id: str, name: str, result: str, task_id: str, *, message_id: str | None = None) -> dict[str, Any]:
    """``ToolResultData``."""
    data: dict[str, Any] = {
        "tool_call_id": call_id,
        "name": name,
        "result": result,
        "success": True,
        "duration_ms": 42,
        "task_id": task_id,
    }
    if message_id is not None:
        data["message_id"] = message_id
    return data


def set_fact(
    conn: sqlite3.Connection,
    category: str,
    key: str,
    value: str,
    source: str,
    at: datetime,
    *,
    privacy: str = "global",
    channel_id: str | None = None,
) -> None:
    """As ``upsert_fact`` in ``src/state/sqlite/facts.rs``: a new value supersedes the live row, never updates it.

    ``privacy`` is ``FactPrivacy`` of ``src/types.rs``: ``global``, ``channel`` or ``private``.
    """
    now = at.astimezone(UTC).isoformat()
    live = conn.execute(
        "SELECT id, value FROM facts WHERE category = ? AND key = ? AND superseded_at IS NULL", (category, key)
    ).fetchone()
    if live is not None and live[1] == value:
        conn.execute("UPDATE facts SET updated_at = ? WHERE id = ?", (now, live[0]))
        return
    if live is not None:
        conn.execute("UPDATE facts SET superseded_at = ? WHERE id = ?", (now, live[0]))
    conn.execute(
        "INSERT INTO facts (category, key, value, source, created_at, updated_at, recall_count, channel_id, privacy) "
        "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)",
        (category, key, value, source, now, now, channel_id, privacy),
    )


def forget_fact(conn: sqlite3.Connection, category: str, key: str, at: datetime) -> None:
    """As ``delete_fact_by_key`` in ``src/state/sqlite/facts.rs``: the row stays, marked superseded."""
    conn.execute(
        "UPDATE facts SET superseded_at = ? WHERE category = ? AND key = ? AND superseded_at IS NULL",
        (at.astimezone(UTC).isoformat(), category, key),
    )


#: The sample's first moment.
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    """The sample's moment ``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


def two_sessions_database(path: Path) -> None:
    """A sample file: two sessions of the agent's event log (conversation, and the events around it, one
    not JSON), a macro, a fact, a prefix, and rows in the tables caderno does not model."""
    conn = current_database(path)
    s1, s2 = "telegram:100", "slack:C1"
    append_event(conn, s1, "session_start", {"channel": "telegram", "user_id": "100"}, at(0))
    append_event(conn, s1, "user_message", user_message("quanto gastamos?", "tg-1"), at(1))
    append_event(conn, s1, "task_start", {"task_id": "task-1", "description": "budget"}, at(2))
    calls = [
        {"id": "call_a", "name": "terminal", "arguments": {"command": "ls"}},
        {"id": "call_b", "name": "budget_total", "arguments": '{"month": "2026-03"}', "extra_content": {"sig": "x"}},
    ]
    append_event(conn, s1, "assistant_response", assistant_response(None, calls=calls), at(3))
    append_event(conn, s1, "tool_call", tool_call("call_a", "terminal", {"command": "ls"}, "task-1"), at(4))
    append_event(conn, s1, "tool_result", tool_result("call_a", "terminal", "total 8", "task-1"), at(5))
    append_event(conn, s1, "tool_call", tool_call("call_b", "budget_total", {"month": "2026-03"}, "task-1"), at(6))
    append_event(conn, s1, "tool_result", tool_result("call_b", "budget_total", '{"total": 10}', "task-1"), at(7))
    append_event(conn, s1, "assistant_response", assistant_response("R$ 10"), at(8))
    # the other session: a platform id the first already used, and no id at all
    append_event(conn, s2, "user_message", user_message("oi", "tg-1"), at(10))
    append_event(conn, s2, "user_message", user_message("tudo bem?"), at(11))
    conn.execute(
        "INSERT INTO events (session_id, event_type, data, created_at) VALUES (?, 'user_message', 'not json', ?)",
        (s2, at(12).isoformat()),
    )
    conn.execute(
        "INSERT INTO macros (trigger_tool, trigger_args_pattern, next_tool, next_args, confidence, used_count, "
        "created_at, updated_at) VALUES ('git_status', NULL, 'git_diff', '{}', 0.7, 2, ?, ?)",
        (T0.isoformat(), T0.isoformat()),
    )
    conn.execute(
        "INSERT INTO facts (category, key, value, source, created_at, updated_at) VALUES (?,?,?,?,?,?)",
        ("family", "daughter", "Ana", "", T0.isoformat(), T0.isoformat()),
    )
    conn.execute("INSERT INTO terminal_allowed_prefixes (prefix) VALUES ('git status')")
    conn.execute(
        "INSERT INTO episodes (session_id, summary, start_time, end_time, created_at) VALUES (?, ?, ?, ?, ?)",
        (s1, "talked about the budget", T0.isoformat(), at(8).isoformat(), at(9).isoformat()),
    )
    conn.execute("INSERT INTO people (name, relationship) VALUES ('Ana', 'daughter')")
    conn.execute("INSERT INTO person_facts (person_id, category, key, value) VALUES (1, 'school', 'grade', '5')")
    conn.execute("INSERT INTO settings (key, value) VALUES ('model', 'gpt-4o-mini')")
    conn.commit()
    conn.close()
