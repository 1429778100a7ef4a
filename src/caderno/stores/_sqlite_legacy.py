"""Importing aidaemon's SQLite database into caderno's tables, in place: an explicit step.

aidaemon (github.com/davo20019/aidaemon) is the agent caderno's contract grew
from; its files are laid out as ``tests/_aidaemon.py`` copies from its
source. The import runs only when asked for: ``caderno import-from aidaemon
FILE --resource NAME``, or opening the file with the store option
``import_from="aidaemon"`` (``caderno.connect(path, import_from="aidaemon",
legacy_resource_id=NAME)``). A normal open never runs it; a file that still
holds aidaemon's tables to import is refused (``waiting``: the tables the
import would take), with the command to run, before anything is written.

Everything here runs inside ``migrate``'s one ``BEGIN IMMEDIATE``
transaction, so a crash or an error at any point leaves the file exactly as
it was; the next import starts over. Every insert is keyed on the target's
natural key (``ON CONFLICT … DO NOTHING``, never ``INSERT OR IGNORE``, which
would also swallow NOT NULL failures), so a repeated run adds nothing twice.
aidaemon's rows go to the resource named by the store option
``legacy_resource_id`` (default ``"default"``).

Before caderno's migrations run, a table, index or trigger whose name a
pending migration is about to create, and that no applied migration created,
is aidaemon's: a table is renamed ``legacy_<name>`` (or ``legacy_<name>_2``…),
an index or trigger of that name is dropped (both are derived; the rows stay
in the renamed table).

Shapes accepted (columns beyond these are ignored; "optional" ones may be
missing; a table without its required columns is left untouched):

``messages``
    required ``id, session_id, role, content``; optional ``tool_call_id,
    tool_calls_json, tool_name, created_at, importance, consolidated_at,
    embedding, embedding_error``.
    ``tool_calls_json`` is a list (or one object) of OpenAI-style
    ``{id, function: {name, arguments}}`` or flat ``{id, name, arguments}``
    calls. Arguments that are not a JSON object stay as the raw text
    (``ToolCall.arguments`` may be a string); a call without an id gets
    ``legacy-<message id>-<n>``. A ``tool`` row without ``tool_call_id`` takes
    the id of the one unanswered call of the preceding assistant message
    that fits (same tool name) and records ``{"legacy":
    {"inferred_tool_call_id": true}}``; when no single call fits it gets
    ``legacy-<row id>`` and ``{"legacy": {"synthesized_tool_call_id": true}}``
    (the context window then treats it as an orphan result, and drops it).
    ``consolidated_at`` (aidaemon's "facts extracted") is kept as
    ``metadata["legacy"]["facts_extracted_at"]``, not as caderno's column (a
    summary covers the message), so caderno's consolidation summarises it.
    Whatever cannot be represented is kept in ``metadata["legacy"]``:
    tool-call JSON that is not a list of calls (``tool_calls_json``), an
    unknown role (``role``; stored as ``system``, ``developer`` as ``system``,
    ``function`` as ``tool``), an unreadable time (``created_at``),
    aidaemon's failure to embed it (``embedding_error``). A message aidaemon
    embedded, or tried to (``embedding`` or ``embedding_error`` set), is
    queued for embedding: the store does not know which model will read the
    vectors, so the old vector is not reused, and the worker embeds the text
    again. Other imported messages wait for ``caderno reindex``, which applies
    caderno's own rule of what is embedded.
``facts`` (renamed ``legacy_facts``)
    required ``category, key, value``; optional ``source, created_at,
    updated_at``. Categories are lowercased as ``Memory`` does; an empty
    source becomes ``agent`` (aidaemon wrote it through its tool).
    When two rows meet on one key (categories differing only in case, or a
    fact already there), the newest is current and the others go to
    ``facts_history``. aidaemon never deletes a fact: it sets
    ``superseded_at``, on a replaced value and on a forgotten one alike. A
    superseded row whose key has a live row goes to ``facts_history``
    (replaced at its ``superseded_at``) and is never current; one whose key
    has none was forgotten, and stays behind in the old table. So does a
    fact the agent showed only in one channel or in direct messages
    (``privacy`` ``channel`` or ``private``), with its key's older values:
    caderno's facts are seen by every thread of the resource.
``macros`` (renamed ``legacy_macros``)
    required ``trigger_tool, next_tool``; optional ``trigger_args_pattern``
    (aidaemon's column, kept as caderno's ``trigger_pattern``;
    default ``{}``), ``next_args`` (JSON text; text that is not JSON is kept
    as a JSON string), ``confidence`` (default 0.5), ``used_count,
    success_count, failure_count, created_at, updated_at``.
``scheduled_tasks`` (renamed ``legacy_scheduled_tasks``)
    required ``name, prompt``; optional ``id, cron_expr, original_schedule,
    source, is_oneshot, is_paused, is_trusted, timezone, thread_id,
    next_run_at, last_run_at, created_at, updated_at``. Defaults: ``source``
    ``tool`` (``config`` is kept), ``timezone`` UTC, ``thread_id``
    ``task:<name>``, a missing next run of a recurring task computed from its
    cron. A name held by another task becomes ``<name> (legacy <id>)``.
``terminal_allowed_prefixes``
    required ``prefix``; optional ``created_at``. Prefixes are normalised as
    ``Memory.prefixes`` does; one that is empty or holds a shell operator is
    never approved, and stays behind in the old table.
``events`` in aidaemon's layout (renamed ``legacy_events``)
    required ``id, session_id, event_type, data``; optional ``created_at,
    consolidated_at, task_id, tool_name``. The agent's conversation is the
    three event types its own history reads (``turn_from_event`` in
    aidaemon's ``src/events/conversation_turn.rs``): ``user_message``
    (``content``), ``assistant_response`` (``content``, ``tool_calls`` of
    ``{id, name, arguments}``) and ``tool_result`` (``tool_call_id``,
    ``name``, ``result``). Each session becomes a thread, in event-id order (the first event to
    carry a ``message_id`` keeps it as its id; the event id when
    there is none, ``aidaemon-event-<id>`` when another thread holds that
    id), and ``metadata["legacy"]`` holds ``event_id`` and, under ``data``,
    the payload fields caderno has no column for (``model``, token counts,
    ``success``, ``duration_ms``, ``error``, ``extra_content`` of the
    calls…). Every other event (``tool_call``, which repeats a call its
    ``assistant_response`` holds; ``session_start``, ``task_end``,
    ``error``…), and one whose ``data`` is not a JSON object, stays in
    ``legacy_events``, untouched. These messages are not queued for
    embedding (the agent kept no vectors for them); ``caderno reindex``
    does that.

An ``events`` table of any other layout is another application's, and the
file is refused before anything is written (``_sqlite_schema.check_foreign``).
aidaemon's other tables (``episodes``, ``people``, ``goals``…)
have names caderno does not use and stay as they are.

A table whose rows all moved is dropped at the end; one with rows that
could not move keeps exactly those rows.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..core.clock import from_iso, new_id, to_iso, utcnow
from ..core.messages import ROLES, canonical_json
from ._migrate import Migration

#: Default confidence of a legacy macro that does not say (the middle of [0, 1]).
_DEFAULT_CONFIDENCE = 0.5
#: Default importance of a legacy message without one (as aidaemon's column default).
_DEFAULT_IMPORTANCE = 0.5
#: Epoch numbers above this are milliseconds, not seconds (1e11 s is the year 5138).
_EPOCH_MILLIS = 1e11

_CREATED = re.compile(
    r"CREATE\s+(?:VIRTUAL\s+|UNIQUE\s+)?(TABLE|INDEX|TRIGGER)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE
)


# -- what an import would take -----------------------------------------------------------------


def waiting(conn: sqlite3.Connection, migrations: Sequence[Migration], applied: set[str]) -> list[str]:
    """The tables (and indexes, triggers) of aidaemon an import would take or move aside; empty when none.

    Read only, on any connection (``SQLiteStore`` asks it of a read-only look
    before a normal open, ``migrate`` under its write lock): a normal open
    refuses a file it names, since caderno's migrations would otherwise fail
    on a name aidaemon holds, or leave aidaemon's rows unread. What an import
    leaves behind (rows caderno has no place for) is not waiting: a file
    imported once opens normally.
    """
    found = sorted(_clashes(conn, migrations, applied))
    with _lenient_text(conn):
        for table, required, _ in _steps():
            columns = _columns(conn, table)
            if columns and columns >= required and _has_rows_to_move(conn, table, columns):
                found.append(table)
    return found


@contextmanager
def _lenient_text(conn: sqlite3.Connection) -> Iterator[None]:
    """Text that is not valid UTF-8 read with the bad bytes replaced: it must not stop an import."""
    factory = conn.text_factory
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        yield
    finally:
        conn.text_factory = factory


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


# -- before the migrations: move clashing tables aside ---------------------------------------


def _clashes(conn: sqlite3.Connection, migrations: Sequence[Migration], applied: set[str]) -> dict[str, str]:
    """``{name: type}`` of the objects that carry a name a pending migration creates and no applied one did.

    A name is foreign when it exists but no applied migration created it:
    caderno's own objects are never touched, and the check needs no column
    comparison.
    """
    ours: set[str] = set()
    pending: set[str] = set()
    for name, statements in migrations:
        for statement in statements:
            for _, created in _CREATED.findall(statement):
                (ours if name in applied else pending).add(created)
    existing = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall())
    return {created: existing[created] for created in sorted(pending - ours) if created in existing}


def rename_clashes(conn: sqlite3.Connection, migrations: Sequence[Migration], applied: set[str]) -> None:
    """Rename aidaemon's tables that carry a name a pending migration creates; drop such indexes and triggers."""
    for created, kind in _clashes(conn, migrations, applied).items():
        if kind == "table":
            conn.execute(f'ALTER TABLE "{created}" RENAME TO "{_free_name(conn, "legacy_" + created)}"')
        elif kind in ("index", "trigger"):
            conn.execute(f'DROP {kind.upper()} "{created}"')


def _free_name(conn: sqlite3.Connection, base: str) -> str:
    name, n = base, 1
    while _exists(conn, name):
        n += 1
        name = f"{base}_{n}"
    return name


def _exists(conn: sqlite3.Connection, table: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return found is not None


# -- after the migrations: import ------------------------------------------------------------


@dataclass(frozen=True)
class Imported:
    """What one import did: rows taken from each of aidaemon's tables, and rows left in the file."""

    resource_id: str
    """The caderno resource that received them."""
    moved: dict[str, int] = field(default_factory=dict)
    """Rows taken, by the table's name in aidaemon's file (``events``, ``facts``, ``messages``…)."""
    left: dict[str, int] = field(default_factory=dict)
    """Rows caderno has no place for, by the table that keeps them (``legacy_events``…), untouched."""

    def to_dict(self) -> dict[str, Any]:
        return {"resource_id": self.resource_id, "moved": dict(self.moved), "left": dict(self.left)}


def import_legacy(conn: sqlite3.Connection, resource_id: str) -> Imported:
    """Move every recognised table of aidaemon into caderno's tables (see the module docstring)."""
    moved: dict[str, int] = {}
    left: dict[str, int] = {}
    with _lenient_text(conn):
        now = to_iso(utcnow())
        for table, required, run in _steps():
            columns = _columns(conn, table)
            if not columns or not columns >= required:
                continue
            before = _count_rows(conn, table)
            if _has_rows_to_move(conn, table, columns):
                if not moved:
                    conn.execute(
                        "INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, ?, ?) "
                        "ON CONFLICT (resource_id) DO NOTHING",
                        (resource_id, now, now),
                    )
                if run(conn, table, resource_id, now):
                    conn.execute(f'DROP TABLE "{table}"')
                moved[table.removeprefix("legacy_")] = before - (after := _count_rows(conn, table))
            else:
                after = before  # what is left stays as it is, and nothing is written
            if after:
                left[table] = after
    return Imported(resource_id=resource_id, moved=moved, left=left)


def _count_rows(conn: sqlite3.Connection, table: str) -> int:
    if not _exists(conn, table):
        return 0
    return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])


def _has_rows_to_move(conn: sqlite3.Connection, table: str, columns: set[str]) -> bool:
    """False for a table holding only rows that always stay (so a later import, and ``waiting``, read
    nothing there again): each test is the one its import step applies."""
    if table == "legacy_events":
        return any(isinstance(_json_object(data), dict) for (data,) in conn.execute(f"SELECT data {_TURNS}"))
    if table == "legacy_facts":
        live, _ = _fact_scope(columns)
        return conn.execute(f'SELECT 1 FROM "{table}" WHERE {live} LIMIT 1').fetchone() is not None
    if table == "terminal_allowed_prefixes":
        return any(_approvable(prefix) for (prefix,) in conn.execute(f'SELECT prefix FROM "{table}"'))
    return True


def _json_object(data: Any) -> Any:
    """``data`` parsed as Python reads it (``None`` when it does not): SQLite's JSON test accepts a little more."""
    try:
        return json.loads(data)
    except (TypeError, ValueError):
        return None


def _rows(conn: sqlite3.Connection, sql: str) -> Iterator[dict[str, Any]]:
    cursor = conn.execute(sql)
    names = [d[0] for d in cursor.description]
    for row in cursor.fetchall():
        yield dict(zip(names, row, strict=True))


#: A time written as a bare number (seconds or milliseconds since the epoch), in a TEXT column.
_EPOCH_TEXT = re.compile(r"\s*\d+(?:\.\d+)?\s*")


def _insert_message(
    conn: sqlite3.Connection,
    where: tuple[str, str, str],
    role: str,
    content: str,
    calls: list[dict[str, Any]] | None,
    call_id: str | None,
    name: str | None,
    importance: float,
    created: str | None,
    legacy: dict[str, Any],
) -> sqlite3.Cursor:
    """One moved message, and its thread when new; ``where`` is (resource, thread, message id).

    Never marked consolidated: no caderno summary covers it yet. Keyed on the
    message id, so a repeated run adds nothing (``rowcount`` 0).
    """
    resource_id, thread, msg_id = where
    conn.execute(
        "INSERT INTO threads (resource_id, thread_id, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (resource_id, thread_id) DO NOTHING",
        (resource_id, thread, created),
    )
    return conn.execute(
        "INSERT INTO events (id, resource_id, thread_id, kind, role, content, tool_calls, tool_call_id, name, "
        "importance, created_at, consolidated_at, metadata) VALUES (?,?,?,'message',?,?,?,?,?,?,?,NULL,?) "
        "ON CONFLICT (resource_id, id) DO NOTHING",
        (
            msg_id,
            resource_id,
            thread,
            role,
            content,
            json.dumps(calls, ensure_ascii=False) if calls else None,
            call_id,
            name,
            importance,
            created,
            json.dumps({"legacy": legacy}, ensure_ascii=False) if legacy else None,
        ),
    )


def _when(value: Any) -> str | None:
    """RFC 3339 text of a legacy time (text, or an epoch number or its text), or ``None`` when unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and _EPOCH_TEXT.fullmatch(value):
        value = float(value)
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if value > _EPOCH_MILLIS else value
            return to_iso(datetime.fromtimestamp(seconds, UTC))
        return to_iso(from_iso(str(value)))
    except (ValueError, OverflowError, OSError):
        return None


def _text(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "t", "yes", "y")
    return bool(value)


# -- messages ---------------------------------------------------------------------------------


def _import_messages(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    has_time = any(r[1] == "created_at" for r in conn.execute(f'PRAGMA table_info("{table}")'))
    order = "session_id, created_at, id" if has_time else "session_id, rowid"
    rows = list(_rows(conn, f'SELECT * FROM "{table}" ORDER BY {order}'))
    last_time: dict[str, str] = {}
    # Per thread: the calls of the latest assistant message not yet answered.
    pending: dict[str, list[tuple[str, str]]] = {}
    for n, rec in enumerate(rows):
        thread = _text(rec["session_id"], "default")
        msg_id = _text(rec["id"]) or f"legacy-{thread}-{n}"
        legacy: dict[str, Any] = {}
        role = _text(rec["role"])
        if role not in ROLES:
            legacy["role"] = rec["role"]
            role = {"function": "tool", "developer": "system"}.get(role, "system")
        created = _when(rec.get("created_at"))
        if created is None:
            if rec.get("created_at") is not None:
                legacy["created_at"] = rec["created_at"]
            created = last_time.get(thread, now)
        last_time[thread] = created

        calls, raw_kept = _tool_calls(rec.get("tool_calls_json"), msg_id)
        if raw_kept is not None or (calls and role != "assistant"):
            # Only assistant messages carry calls; anything else keeps its raw text.
            legacy["tool_calls_json"] = _text(rec.get("tool_calls_json"))
            calls = None
        if calls:
            pending[thread] = [(c["id"], c["name"]) for c in calls]
            synthesized = [c["id"] for c in calls if c.pop("synthesized", False)]
            if synthesized:
                legacy["synthesized_tool_call_ids"] = synthesized
        call_id = _text(rec.get("tool_call_id")) or None
        name = _text(rec.get("tool_name")) or None
        if role == "tool":
            waiting = pending.get(thread, [])
            if call_id is None:
                fits = [c for c in waiting if name is None or c[1] == name]
                if len(fits) == 1:
                    call_id = fits[0][0]
                    legacy["inferred_tool_call_id"] = True
                else:
                    call_id = f"legacy-{msg_id}"
                    legacy["synthesized_tool_call_id"] = True
            pending[thread] = [c for c in waiting if c[0] != call_id]

        # aidaemon's consolidated_at says its facts were extracted, not that a summary
        # covers the message (caderno's meaning): kept aside, so caderno summarises the history.
        if rec.get("consolidated_at") is not None:
            legacy["facts_extracted_at"] = _when(rec["consolidated_at"])
        # Queued only when aidaemon meant the text to be found by meaning.
        embed = rec.get("embedding") is not None or rec.get("embedding_error") is not None
        if rec.get("embedding_error") is not None:
            legacy["embedding_error"] = _text(rec["embedding_error"])
        importance = rec.get("importance")
        try:
            importance = _DEFAULT_IMPORTANCE if importance is None else min(1.0, max(0.0, float(importance)))
        except (TypeError, ValueError):
            importance = _DEFAULT_IMPORTANCE
        inserted = _insert_message(
            conn,
            (resource_id, thread, msg_id),
            role,
            _text(rec["content"]),
            calls,
            call_id,
            name,
            importance,
            created,
            legacy,
        )
        if embed and inserted.rowcount == 1:
            conn.execute(
                "INSERT INTO embedding_queue (seq, resource_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (inserted.lastrowid, resource_id),
            )
    for statement in _PLACE_IMPORTED:
        conn.execute(statement)
    return True


#: Imported messages take the next positions of their threads, in the order
#: they were inserted (aidaemon's order), after any a thread holds.
_PLACE_IMPORTED = (
    "UPDATE events SET position = p.n FROM (SELECT e.seq, t.last_position + row_number() OVER "
    "(PARTITION BY e.resource_id, e.thread_id ORDER BY e.seq) AS n FROM events e JOIN threads t "
    "ON t.resource_id = e.resource_id AND t.thread_id = e.thread_id "
    "WHERE e.kind = 'message' AND e.position IS NULL) AS p WHERE events.seq = p.seq",
    "UPDATE threads SET last_position = max(last_position, coalesce((SELECT max(e.position) FROM events e "
    "WHERE e.resource_id = threads.resource_id AND e.thread_id = threads.thread_id), 0))",
)


def _tool_calls(raw: Any, msg_id: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """``([{id, name, arguments}], None)``, or ``(None, raw)`` when the JSON is not a list of calls."""
    if raw is None or _text(raw).strip() == "":
        return None, None
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return None, _text(raw)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list) or not all(isinstance(c, dict) for c in parsed):
        return None, _text(raw)
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(parsed):
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        args = fn.get("arguments")
        if args is None or (isinstance(args, str) and not args.strip()):
            args = {}
        elif isinstance(args, str):
            try:
                decoded = json.loads(args)
            except ValueError:
                decoded = None
            # Only a JSON object becomes parsed arguments; anything else keeps the model's text.
            args = decoded if isinstance(decoded, dict) else args
        out = {"id": _text(call.get("id") or fn.get("id")), "name": _text(fn.get("name")), "arguments": args}
        if not out["id"]:
            out["id"], out["synthesized"] = f"legacy-{msg_id}-{i}", True
        calls.append(out)
    return calls or None, None


# -- aidaemon's event log -------------------------------------------------------------

#: The event types that are conversation (the payload fields each maps to a column).
_TURN_FIELDS = {
    "user_message": ("user", {"content", "message_id"}),
    "assistant_response": ("assistant", {"content", "message_id", "tool_calls"}),
    "tool_result": ("tool", {"result", "message_id", "tool_call_id", "name"}),
}


#: The rows of the renamed event log that move: conversation whose payload is a JSON object.
_TURNS = (
    "FROM legacy_events WHERE event_type IN ({}) ".format(", ".join(f"'{t}'" for t in _TURN_FIELDS))
    + "AND json_type(CASE WHEN json_valid(data) THEN data END) = 'object'"
)


def _import_events(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    columns = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
    last_time: dict[str, str] = {}
    for rec in _rows(conn, f"SELECT * {_TURNS} ORDER BY id"):
        data = _json_object(rec["data"])
        if not isinstance(data, dict):
            continue  # JSON SQLite reads and Python does not: it stays in the old table
        role, mapped = _TURN_FIELDS[rec["event_type"]]
        thread = _text(rec["session_id"], "default")
        created = _when(rec.get("created_at")) or last_time.get(thread, now)
        last_time[thread] = created
        legacy: dict[str, Any] = {"event_id": rec["id"]}
        extra = {k: v for k, v in data.items() if k not in mapped}
        msg_id = _text(data.get("message_id")).strip() or _text(rec["id"])
        held = conn.execute(
            "SELECT thread_id, role FROM events WHERE resource_id = ? AND id = ?", (resource_id, msg_id)
        ).fetchone()
        if held == (thread, role):
            # The same message already moved (from aidaemon's older ``messages`` table, as the agent
            # itself dedupes them): the event is not a second copy of it.
            conn.execute(f'DELETE FROM "{table}" WHERE id = ?', (rec["id"],))
            continue
        if held is not None:
            legacy["message_id"] = msg_id
            msg_id = f"aidaemon-event-{rec['id']}"
        calls = None
        if role == "assistant" and data.get("tool_calls") is not None:
            calls, raw_kept = _tool_calls(json.dumps(data["tool_calls"]), msg_id)
            if raw_kept is not None:
                extra["tool_calls"] = data["tool_calls"]
            else:
                kept = {c["id"]: c["extra_content"] for c in data["tool_calls"] if c.get("extra_content") is not None}
                if kept:
                    extra["extra_content"] = kept
                synthesized = [c["id"] for c in calls or () if c.pop("synthesized", False)]
                if synthesized:
                    legacy["synthesized_tool_call_ids"] = synthesized
        if role == "tool":
            content = _text(data.get("result"))
            call_id = _text(data.get("tool_call_id")) or f"event-tool-{rec['id']}"  # the agent's own fallback
            name = _text(data.get("name")) or _text(rec.get("tool_name")) or None
        else:
            content, call_id, name = _text(data.get("content")), None, None
        if extra:
            legacy["data"] = extra
        if "task_id" in columns and rec.get("task_id") is not None:
            legacy["task_id"] = rec["task_id"]
        if rec.get("consolidated_at") is not None:  # facts extracted, in the agent's meaning (see above)
            legacy["facts_extracted_at"] = _when(rec["consolidated_at"])
        _insert_message(
            conn,
            (resource_id, thread, msg_id),
            role,
            content,
            calls,
            call_id,
            name,
            _DEFAULT_IMPORTANCE,
            created,
            legacy,
        )
        conn.execute(f'DELETE FROM "{table}" WHERE id = ?', (rec["id"],))
    for statement in _PLACE_IMPORTED:
        conn.execute(statement)
    return conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is None


# -- facts, macros, tasks, prefixes -----------------------------------------------------------


def _fact_scope(columns: set[str]) -> tuple[str, str]:
    """SQL for "a live fact that moves" and "a fact scoped to a channel or to DMs" in the agent's layout.

    aidaemon marks a replaced or forgotten fact ``superseded_at``
    and scopes one with ``privacy`` (``global``, ``channel``, ``private``);
    caderno's facts have neither, and every thread of the resource sees them.
    """
    scoped = "coalesce(lower(trim(privacy)), '') NOT IN ('', 'global')" if "privacy" in columns else "0"
    live = f"superseded_at IS NULL AND NOT ({scoped})" if "superseded_at" in columns else f"NOT ({scoped})"
    return live, scoped


def _import_facts(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    columns = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
    live_sql, scoped_sql = _fact_scope(columns)
    # Only the agent's layout leaves rows behind, and its table has a rowid to name them by.
    rowid = "rowid" if columns & {"superseded_at", "privacy"} else "NULL"
    flags = f"{rowid} AS legacy_rowid, ({live_sql}) AS legacy_live, ({scoped_sql}) AS legacy_scoped"
    rows = list(_rows(conn, f'SELECT {flags}, * FROM "{table}"'))

    def named(n: int) -> tuple[str, str]:
        rec = rows[n]
        category = _text(rec["category"]).strip().lower() or "general"
        return category, _text(rec["key"]).strip() or f"legacy-{rec.get('id', n)}"

    live = {named(n) for n, rec in enumerate(rows) if rec["legacy_live"]}
    kept: list[int] = []
    # (superseded, category, key, value, source, created, updated, replaced_at)
    facts: list[tuple[bool, str, str, str, str, str, str, str | None]] = []
    for n, rec in enumerate(rows):
        category, key = named(n)
        superseded = rec.get("superseded_at") is not None
        if rec["legacy_scoped"] or (category, key) not in live:
            # A fact the agent forgot, or showed only in some conversations: it stays in the old table.
            kept.append(rec["legacy_rowid"])
            continue
        created = _when(rec.get("created_at")) or _when(rec.get("updated_at")) or now
        source = _text(rec.get("source")).strip() or "agent"
        updated = _when(rec.get("updated_at")) or created
        replaced_at = _when(rec.get("superseded_at")) if superseded else None
        facts.append((superseded, category, key, _text(rec["value"]), source, created, updated, replaced_at))
    # The agent's live rows first, newest first: the first to land on a key is its current value.
    facts.sort(key=lambda f: (not f[0], f[6]), reverse=True)
    replaced = []
    for _, category, key, value, source, created, updated, replaced_at in facts:
        done = conn.execute(
            "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?) ON CONFLICT (resource_id, category, key) DO NOTHING",
            (resource_id, category, key, value, source, created, updated),
        ).rowcount
        if not done:
            replaced.append((category, key, value, source, updated, replaced_at))
    for category, key, value, source, updated, replaced_at in reversed(replaced):  # history reads oldest first
        current = conn.execute(
            "SELECT value, updated_at FROM facts WHERE resource_id = ? AND category = ? AND key = ?",
            (resource_id, category, key),
        ).fetchone()
        if current[0] == value and replaced_at is None:
            continue
        entry = (resource_id, category, key, value, updated)
        conn.execute(
            "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
            "SELECT ?,?,?,?,?,?,? WHERE NOT EXISTS (SELECT 1 FROM facts_history WHERE resource_id = ? "
            "AND category = ? AND key = ? AND value = ? AND valid_from = ?)",
            (*entry[:4], source, updated, replaced_at or current[1], *entry),
        )
    if not kept:
        return True
    conn.execute(f'DELETE FROM "{table}" WHERE rowid NOT IN ({", ".join("?" * len(kept))})', kept)
    return False


def _import_macros(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    for rec in _rows(conn, f'SELECT * FROM "{table}"'):
        raw_args = rec.get("next_args")
        try:
            args = {} if raw_args is None else json.loads(raw_args)
        except (TypeError, ValueError):
            args = _text(raw_args)  # not JSON: kept as a JSON string
        try:
            confidence = min(1.0, max(0.0, float(rec.get("confidence", _DEFAULT_CONFIDENCE))))
        except (TypeError, ValueError):
            confidence = _DEFAULT_CONFIDENCE
        created = _when(rec.get("created_at")) or now
        conn.execute(
            "INSERT INTO macros (resource_id, trigger_tool, trigger_pattern, next_tool, next_args, confidence, "
            "used_count, success_count, failure_count, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (resource_id, trigger_tool, trigger_pattern, next_tool, next_args) DO NOTHING",
            (
                resource_id,
                _text(rec["trigger_tool"]),
                _text(rec.get("trigger_args_pattern"), "{}"),
                _text(rec["next_tool"]),
                canonical_json(args),
                confidence,
                _count(rec.get("used_count")),
                _count(rec.get("success_count")),
                _count(rec.get("failure_count")),
                created,
                _when(rec.get("updated_at")) or created,
            ),
        )
    return True


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _import_tasks(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    order = "id" if any(r[1] == "id" for r in conn.execute(f'PRAGMA table_info("{table}")')) else "name"
    for rec in _rows(conn, f'SELECT * FROM "{table}" ORDER BY {order}'):
        task_id = _text(rec.get("id")) or new_id()
        name = _text(rec["name"]) or f"legacy-{task_id}"
        holder = conn.execute(
            "SELECT id FROM scheduled_tasks WHERE resource_id = ? AND name = ?", (resource_id, name)
        ).fetchone()
        if holder is not None and holder[0] != task_id:
            name = f"{name} (legacy {task_id})"
        cron = _text(rec.get("cron_expr")).strip() or None
        oneshot = _flag(rec["is_oneshot"]) if rec.get("is_oneshot") is not None else cron is None
        paused = _flag(rec.get("is_paused"))
        timezone = _text(rec.get("timezone")) or "UTC"
        next_run = _when(rec.get("next_run_at"))
        if next_run is None and cron and not oneshot and not paused:
            next_run = _next_run(cron, timezone)
        created = _when(rec.get("created_at")) or now
        source = _text(rec.get("source"))
        conn.execute(
            "INSERT INTO scheduled_tasks (resource_id, id, name, cron_expr, original_schedule, prompt, source, "
            "is_oneshot, is_paused, is_trusted, timezone, thread_id, next_run_at, last_run_at, created_at, "
            "updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            (
                resource_id,
                task_id,
                name,
                cron,
                _text(rec.get("original_schedule")) or cron or "",
                _text(rec["prompt"]),
                source if source in ("tool", "config") else "tool",
                oneshot,
                paused,
                _flag(rec.get("is_trusted")),
                timezone,
                _text(rec.get("thread_id")) or f"task:{name}",
                next_run,
                _when(rec.get("last_run_at")),
                created,
                _when(rec.get("updated_at")) or created,
            ),
        )
    return True


def _next_run(cron: str, timezone: str) -> str | None:
    from ..core.cron import next_run
    from ..core.errors import UsageError

    try:
        return to_iso(next_run(cron, after=utcnow(), tz=timezone))
    except UsageError:
        return None  # an unreadable cron: kept as it is, it never fires


def _approvable(prefix: Any) -> str | None:
    """The prefix as ``Memory.prefixes`` keeps it, or ``None`` when caderno would refuse to approve it."""
    from ..core.errors import UsageError
    from ..core.prefixes import normalize_prefix

    try:
        return normalize_prefix(_text(prefix))
    except UsageError:
        return None


def _import_prefixes(conn: sqlite3.Connection, table: str, resource_id: str, now: str) -> bool:
    kept = False
    for rec in _rows(conn, f'SELECT * FROM "{table}"'):
        prefix = _approvable(rec["prefix"])
        if prefix is None:
            kept = True  # never approve what caderno would refuse; it stays in the old table
            continue
        conn.execute(
            "INSERT INTO allowed_prefixes (resource_id, prefix, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (resource_id, prefix) DO NOTHING",
            (resource_id, prefix, _when(rec.get("created_at")) or now),
        )
        conn.execute(f'DELETE FROM "{table}" WHERE prefix IS ?', (rec["prefix"],))
    return not kept


def _steps() -> tuple[tuple[str, set[str], Callable[[sqlite3.Connection, str, str, str], bool]], ...]:
    """Each table an import reads (by its name after ``rename_clashes``), the columns it needs, its step
    (looked up at each call, as a test that stops an import midway replaces one)."""
    return (
        ("messages", {"id", "session_id", "role", "content"}, _import_messages),
        ("legacy_facts", {"category", "key", "value"}, _import_facts),
        ("legacy_macros", {"trigger_tool", "next_tool"}, _import_macros),
        ("legacy_scheduled_tasks", {"name", "prompt"}, _import_tasks),
        ("terminal_allowed_prefixes", {"prefix"}, _import_prefixes),
        ("legacy_events", {"id", "session_id", "event_type", "data"}, _import_events),
    )
