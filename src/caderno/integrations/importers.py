"""Bring another memory system's data into caderno.

Three sources, each read-only and idempotent (a second run adds nothing):

- ``import_openai_agents``: the OpenAI Agents SDK's ``SQLiteSession`` file
  (tables ``agent_sessions`` and ``agent_messages``, one Responses-API item
  as JSON per row). One session becomes one thread of the same id.
- ``import_mastra``: a Mastra LibSQL/SQLite database (``mastra_threads``,
  ``mastra_messages`` with content in Mastra's ``format: 2``,
  ``mastra_resources`` with the working memory).
- ``import_notes``: a folder with ``MEMORY.md`` / ``USER.md`` in the
  notebook's ``\\n§\\n`` format, entry by entry into a resource's notebook.

Every imported message carries its origin in
``metadata["imported_from"]`` and an id derived from the source's own
(``oa-<session>-<row>``, ``mastra-<id>``), so a rerun — or the rest of a run
that stopped part-way — only adds what is missing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import struct
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.clock import from_iso
from ..core.errors import NotebookError, NotFound, UsageError
from ..core.jsonvalue import MAX_MESSAGES_PER_APPEND
from ..core.messages import Message, Role, ToolCall
from ..core.validate import check_name
from ..memory.adapters.notebook_files import Notebook
from ..memory.engines.notebook_rules import FILES
from ..memory.facade import Memory
from ..memory.parts.notebook import StoredNotebook
from .openai_agents import item_to_message

__all__ = ["ImportReport", "import_mastra", "import_notes", "import_openai_agents"]


@dataclass(kw_only=True)
class ImportReport:
    """What one import brought over (``to_dict`` for ``--json``)."""

    system: str
    """``openai-agents``, ``mastra`` or ``notes``."""
    resource_id: str
    """The caderno resource written to."""
    threads: list[str] = field(default_factory=list)
    """Every thread the source held (created now or already there)."""
    threads_created: int = 0
    """Threads created by this run."""
    messages: int = 0
    """Messages added by this run."""
    skipped: int = 0
    """Messages or notebook entries already present (left as they were)."""
    working_memory: str | None = None
    """``updated``, ``unchanged``, or ``None`` when the source had none."""
    entries: int = 0
    """Notebook entries added."""
    refused: list[dict[str, str]] = field(default_factory=list)
    """Notebook entries the notebook's screening refused: ``{"target", "entry", "reason"}``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One human line."""
        line = f"{self.system} → {self.resource_id}: "
        if self.system == "notes":
            line += f"{self.entries} entries added"
        else:
            line += f"{len(self.threads)} threads ({self.threads_created} new), {self.messages} messages added"
        line += f", {self.skipped} already present"
        if self.working_memory:
            line += f"; working memory {self.working_memory}"
        if self.refused:
            line += f"; {len(self.refused)} refused"
        return line


# -- shared --------------------------------------------------------------------------


def _open_readonly(path: str | Path) -> sqlite3.Connection:
    """The source database, read-only: an import never changes what it reads."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no database file at {path}")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def _ensure_thread(
    memory: Memory, report: ImportReport, thread_id: str, title: str | None, metadata: dict[str, Any]
) -> None:
    report.threads.append(thread_id)
    try:
        await memory.threads.get(resource_id=report.resource_id, thread_id=thread_id)
    except NotFound:
        await memory.threads.create(resource_id=report.resource_id, thread_id=thread_id, title=title, metadata=metadata)
        report.threads_created += 1


async def _append_new(memory: Memory, report: ImportReport, thread_id: str, messages: list[Message]) -> None:
    """Append the messages whose ids the thread does not hold yet, in source order.

    Every message is validated before anything is written, so a bad one
    stops the import with nothing half-done in this thread. Appends go in
    atomic batches: a run that stopped part-way left a prefix, which the
    next run skips. A batch refused as a whole (one of its ids is stored in
    another thread of the resource) is retried message by message, and the
    ones refused alone are counted as already present.
    """
    rid = report.resource_id
    held = {m.id for m in await memory.get_messages(resource_id=rid, thread_id=thread_id)}
    fresh = [m for m in messages if m.id not in held]
    report.skipped += len(messages) - len(fresh)
    batches = [fresh[i : i + MAX_MESSAGES_PER_APPEND] for i in range(0, len(fresh), MAX_MESSAGES_PER_APPEND)]
    for batch in batches:
        memory.turns.prepare_messages(batch)
    for batch in batches:
        try:
            await memory.append_messages(resource_id=rid, thread_id=thread_id, messages=batch)
            report.messages += len(batch)
        except UsageError:
            for m in batch:
                try:
                    await memory.append_messages(resource_id=rid, thread_id=thread_id, messages=[m])
                    report.messages += 1
                except UsageError:  # validated above, so: the id is stored elsewhere
                    report.skipped += 1


def _check_plan(memory: Memory, resource_id: str, threads: dict[str, list[Message]]) -> None:
    """Every id and message of a whole import, checked before its first write.

    A source with one thread id that is a path (``../../bob``), or one
    message caderno would refuse, is refused whole: nothing is written.
    """
    check_name(resource_id, "resource_id")
    for thread_id, messages in threads.items():
        check_name(thread_id, "thread id")
        for start in range(0, len(messages), MAX_MESSAGES_PER_APPEND):
            memory.turns.prepare_messages(messages[start : start + MAX_MESSAGES_PER_APPEND])


def _text(value: Any) -> str:
    """A tool result or argument as text (JSON when it is not a string)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- OpenAI Agents SDK ---------------------------------------------------------------


def _oa_messages(sid: str, rows: list[tuple[int, str, Any]]) -> list[Message]:
    """A session's rows as the messages ``CadernoSession`` itself would store, plus their origin."""
    tool_names: dict[str, str] = {}
    found = []
    for row_id, created, item in rows:
        m = item_to_message(item, tool_names=tool_names)
        for call in m.tool_calls or ():
            tool_names[call.id] = call.name
        origin = {"system": "openai-agents", "session_id": sid, "id": row_id}
        found.append(
            m.with_(
                id=f"oa-{sid}-{row_id}",
                created_at=_oa_time(created),
                metadata={**(m.metadata or {}), "imported_from": origin},
            )
        )
    return found


def _oa_time(value: Any) -> datetime | None:
    """``CURRENT_TIMESTAMP`` text (UTC, no zone) as an aware time."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        return None


def _oa_read(path: str | Path, session: str | None) -> dict[str, list[tuple[int, str, Any]]]:
    with _open_readonly(path) as conn:
        if not {"agent_sessions", "agent_messages"} <= _tables(conn):
            raise UsageError(f"{path} is not an OpenAI Agents SQLiteSession database (no agent_messages table)")
        sessions = [row[0] for row in conn.execute("SELECT session_id FROM agent_sessions ORDER BY created_at")]
        if session is not None:
            if session not in sessions:
                raise UsageError(f"{path} has no session {session!r} (it has: {', '.join(sessions) or 'none'})")
            sessions = [session]
        found: dict[str, list[tuple[int, str, Any]]] = {}
        for sid in sessions:
            rows = conn.execute(
                "SELECT id, created_at, message_data FROM agent_messages WHERE session_id = ? ORDER BY id", (sid,)
            )
            found[sid] = [(row_id, created, json.loads(data)) for row_id, created, data in rows]
    return found


async def import_openai_agents(
    memory: Memory, path: str | Path, *, resource_id: str, session: str | None = None
) -> ImportReport:
    """Import an OpenAI Agents SDK ``SQLiteSession`` file (every session, or one).

    Each session becomes the thread of the same id, its items stored
    exactly as ``CadernoSession`` stores them (``item_to_message``: text
    messages keep their role, ``function_call`` is an assistant tool call,
    ``function_call_output`` its tool result, other items a system message,
    the item itself in ``metadata["openai_agents"]``), so the imported thread
    can go on as that session.

    Raises:
        UsageError: the file is missing, not such a database, has no such
            session, or one of its ids is a path or a message is one caderno
            refuses (then nothing at all is written).
    """
    report = ImportReport(system="openai-agents", resource_id=resource_id)
    sessions = await asyncio.to_thread(_oa_read, path, session)
    check_name(resource_id, "resource_id")
    for sid in sessions:
        check_name(sid, "session id")  # before _oa_messages builds ids from it
    plan = {sid: _oa_messages(sid, rows) for sid, rows in sessions.items()}
    _check_plan(memory, resource_id, plan)
    for sid, messages in plan.items():
        origin = {"system": "openai-agents", "session_id": sid}
        await _ensure_thread(memory, report, sid, None, {"imported_from": origin})
        await _append_new(memory, report, sid, messages)
    return report


# -- Mastra --------------------------------------------------------------------------


def _jsonb(data: bytes) -> Any:
    """Decode SQLite's binary JSON (JSONB, SQLite 3.45+), which LibSQL writes for metadata.

    Decoded here because the ``sqlite3`` module may link an older SQLite
    without ``json()`` over JSONB. Layout: https://sqlite.org/jsonb.html.
    """

    def element(pos: int) -> tuple[Any, int]:
        head = data[pos]
        kind, size_code = head & 0x0F, head >> 4
        pos += 1
        if size_code >= 12:
            width = {12: 1, 13: 2, 14: 4, 15: 8}[size_code]
            size = int.from_bytes(data[pos : pos + width], "big")
            pos += width
        else:
            size = size_code
        payload, end = data[pos : pos + size], pos + size
        if kind in (0, 1, 2):
            return (None, True, False)[kind], end
        text = payload.decode("utf-8")
        if kind in (3, 4):
            return int(text, 0), end
        if kind in (5, 6):
            return float(text), end
        if kind in (7, 10):
            return text, end
        if kind in (8, 9):
            return json.loads(f'"{text}"'), end
        items, cursor = [], pos
        while cursor < end:
            value, cursor = element(cursor)
            items.append(value)
        if kind == 11:
            return items, end
        if kind == 12:
            return dict(zip(items[::2], items[1::2], strict=True)), end
        raise struct.error(f"reserved JSONB element type {kind}")

    value, _ = element(0)
    return value


def _mastra_json(value: Any) -> Any:
    """A JSON column as LibSQL stores it: text, JSONB, or NULL."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return _jsonb(value)
        except (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError):
            return json.loads(value.decode("utf-8"))
    try:
        return json.loads(value)
    except ValueError:  # not JSON, or an integer past Python's digit limit
        return value  # plain text (markdown working memory, a pre-v2 string content)


def _mastra_read(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    with _open_readonly(path) as conn:
        conn.row_factory = sqlite3.Row
        tables = _tables(conn)
        if not {"mastra_threads", "mastra_messages"} <= tables:
            raise UsageError(f"{path} is not a Mastra database (no mastra_threads / mastra_messages tables)")
        threads = [dict(r) for r in conn.execute('SELECT * FROM mastra_threads ORDER BY "createdAt", id')]
        messages = [dict(r) for r in conn.execute('SELECT * FROM mastra_messages ORDER BY "createdAt", rowid')]
        resources = (
            [dict(r) for r in conn.execute("SELECT * FROM mastra_resources")] if "mastra_resources" in tables else []
        )
    return threads, messages, resources


_MASTRA_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


def _mastra_messages(row: dict[str, Any], origin: dict[str, Any]) -> list[Message]:
    """One Mastra message as caderno messages: the message, then one tool result per finished call."""
    raw = _mastra_json(row["content"])
    mid = row["id"]
    meta = {"imported_from": {**origin, "id": mid, "thread_id": row["thread_id"], "role": row["role"], "raw": raw}}
    created = from_iso(row["createdAt"]) if row.get("createdAt") else None
    parts = raw.get("parts", []) if isinstance(raw, dict) else raw if isinstance(raw, list) else []
    texts = [raw] if isinstance(raw, str) else []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
            inv = part["toolInvocation"]
            calls.append(
                ToolCall(id=str(inv["toolCallId"]), name=str(inv["toolName"]), arguments=inv.get("args") or {})
            )
            if inv.get("state") == "result":
                results.append(
                    Message.tool(
                        _text(inv.get("result")),
                        tool_call_id=str(inv["toolCallId"]),
                        name=str(inv["toolName"]),
                        id=f"mastra-{mid}-result-{inv['toolCallId']}",
                        created_at=created,
                        metadata={"imported_from": {**origin, "id": mid, "tool_call_id": inv["toolCallId"]}},
                    )
                )
    if isinstance(raw, dict) and not texts and isinstance(raw.get("content"), str):
        texts.append(raw["content"])
    # Mastra's other roles ("signal", a legacy "tool") have no caderno shape: system, raw kept.
    role: Role = _MASTRA_ROLES.get(row["role"], "system")
    main = Message(
        role=role,
        content="\n".join(texts),
        tool_calls=tuple(calls) if calls and role == "assistant" else None,
        id=f"mastra-{mid}",
        created_at=created,
        metadata=meta,
    )
    return [main, *results] if role == "assistant" else [main]


async def import_mastra(memory: Memory, path: str | Path, *, resource_id: str | None = None) -> list[ImportReport]:
    """Import a Mastra LibSQL/SQLite memory database: threads, messages, working memory.

    Each Mastra resource becomes the caderno resource of the same id (or
    every one goes to ``resource_id`` when given); one report per resource.
    Text parts become the message text; a ``tool-invocation`` part becomes a
    tool call on the assistant message and, once it has a result, a ``tool``
    message after it. The stored content is kept whole in
    ``metadata["imported_from"]["raw"]``. Working memory: a JSON object is
    merged into caderno's working memory; Mastra's markdown template text is
    set as ``{"mastra_working_memory": "<markdown>"}``.

    Raises:
        UsageError: the file is missing or not a Mastra database, or any of
            its ids is a path (``check_name``) or any message one caderno
            refuses: then nothing at all is written.
    """
    threads, messages, resources = await asyncio.to_thread(_mastra_read, path)
    origin = {"system": "mastra"}
    reports: dict[str, ImportReport] = {}

    def report_for(source_resource: str) -> ImportReport:
        rid = resource_id or source_resource
        return reports.setdefault(rid, ImportReport(system="mastra", resource_id=rid))

    by_thread: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        by_thread.setdefault(m["thread_id"], []).append(m)
    planned = [(t, [msg for row in by_thread.get(t["id"], []) for msg in _mastra_messages(row, origin)]) for t in threads]
    for t, found in planned:
        _check_plan(memory, resource_id or t["resourceId"], {t["id"]: found})
    for r in resources:
        if _mastra_json(r.get("workingMemory")) not in (None, "", {}):
            check_name(resource_id or r["id"], "resource_id")
    for t, found in planned:
        report = report_for(t["resourceId"])
        meta = _mastra_json(t.get("metadata"))
        thread_meta = {"imported_from": {**origin, "id": t["id"], "resource_id": t["resourceId"]}}
        if isinstance(meta, dict) and meta:
            thread_meta["mastra_metadata"] = meta
        await _ensure_thread(memory, report, t["id"], t.get("title") or None, thread_meta)
        await _append_new(memory, report, t["id"], found)
    for r in resources:
        wm = _mastra_json(r.get("workingMemory"))
        if wm in (None, "", {}):
            continue
        report = report_for(r["id"])
        patch = wm if isinstance(wm, dict) else {"mastra_working_memory": _text(wm)}
        current = await memory.get_working_memory(resource_id=report.resource_id)
        if memory.working_memory.preview(current, patch, resource_id=report.resource_id) == (current or {}):
            report.working_memory = "unchanged"
        else:
            await memory.update_working_memory(resource_id=report.resource_id, patch=patch, source="import:mastra")
            report.working_memory = "updated"
    return list(reports.values())


# -- notebook files ------------------------------------------------------------------


async def import_notes(
    directory: str | Path, notebook: Notebook | StoredNotebook, *, resource_id: str
) -> ImportReport:
    """Add the entries of ``directory``'s MEMORY.md / USER.md to ``notebook``, one by one.

    ``notebook``: a file ``Notebook`` or a database one (``memory.notebook(resource_id)``).
    Entries already in the notebook are skipped; entries the notebook
    refuses (its screening for hidden characters and injected instructions,
    or its size limit) are listed in ``refused`` and the rest still go in.

    Raises:
        UsageError: ``directory`` is not a folder or holds neither file.
        NotebookError: a source file cannot be read (a link, not UTF-8).
    """
    source = Notebook(directory)
    if not source.directory.is_dir():
        raise UsageError(f"no folder at {source.directory}")
    if not any((source.directory / name).exists() for name in FILES.values()):
        raise UsageError(f"{source.directory} holds neither {' nor '.join(FILES.values())}")
    report = ImportReport(system="notes", resource_id=resource_id)
    book = notebook.port()
    for target in FILES:
        found = await book.readable_entries(target)
        if found is None:
            raise NotebookError(f"{FILES[target]} of the receiving notebook cannot be read; nothing was added to it")
        present = set(found)
        for entry in source.entries(target):
            if entry in present:
                report.skipped += 1
                continue
            try:
                await book.apply("add", target, entry, None)
            except NotebookError as exc:
                report.refused.append({"target": target, "entry": entry, "reason": str(exc).split("\n", 1)[0]})
                continue
            present.add(entry)
            report.entries += 1
    return report
