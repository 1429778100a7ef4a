"""The export format of one resource, shared by every backend.

::

    {"format": "caderno.resource", "version": 1, "resource_id": "...",
     "working_memory": {"data": {...}, "version": 3, "updated_at": "..."} | null,
     "working_memory_log": [{"version": 1, "patch": {...}, "source": "...", "created_at": "..."}],
     "facts": [{"category", "key", "value", "source", "created_at", "updated_at"}],
     "fact_history": [{"category", "key", "value", "source", "valid_from", "replaced_at"}],
     "message_log": [{"message_id", "thread_id", "action", "role", "old_content", "actor", "reason", "created_at"}],
     "scheduled_tasks": [{"id", "name", "cron_expr", "original_schedule", "prompt", "source", "is_oneshot", ...}],
     "macros": [{"trigger_tool", "trigger_pattern", "next_tool", "next_args", "confidence", ...}],
     "allowed_prefixes": ["git status", ...],
     "threads": [{"id": "...", "title": null, "metadata": null, "created_at": "...",
                  "updated_at": "...", "messages": [Message.to_dict(), ...]}]}

Messages keep their ids, times and order, so an import is an exact restore.
``facts``, ``fact_history`` and ``message_log`` may be absent (exports made
before they existed). Summaries are not exported: they are derived from the messages and
the next consolidation pass writes them again.
"""

from __future__ import annotations

from typing import Any

from .errors import UsageError
from .messages import Message

FORMAT = "caderno.resource"
FACT_FIELDS = ("category", "key", "value", "source", "created_at", "updated_at")
FACT_HISTORY_FIELDS = ("category", "key", "value", "source", "valid_from", "replaced_at")
MESSAGE_LOG_FIELDS = ("message_id", "thread_id", "action", "role", "old_content", "actor", "reason", "created_at")
VERSION = 1


def new_dump(resource_id: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "resource_id": resource_id,
        "working_memory": None,
        "working_memory_log": [],
        "facts": [],
        "fact_history": [],
        "message_log": [],
        "scheduled_tasks": [],
        "macros": [],
        "allowed_prefixes": [],
        "threads": [],
    }


def check_dump(data: Any) -> dict[str, Any]:
    """Validate an export before anything is written; returns it with parsed messages.

    Each thread's ``messages`` becomes a list of ``Message`` under ``_parsed``,
    in a copy: the caller's dict is left as it was (it may be imported again).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"not a caderno export (expected format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise UsageError(f"unsupported export version {data.get('version')!r}; this caderno reads {VERSION}")
    if not isinstance(data.get("resource_id"), str):
        raise UsageError("export has no resource_id")
    threads = data.get("threads")
    if not isinstance(threads, list):
        raise UsageError("export has no threads list")
    data = {**data, "threads": [dict(t) if isinstance(t, dict) else t for t in threads]}
    for thread in data["threads"]:
        if not isinstance(thread, dict) or not isinstance(thread.get("id"), str):
            raise UsageError("export holds a thread without an id")
        try:
            thread["_parsed"] = [Message.from_dict(m) for m in thread.get("messages") or []]
        except (KeyError, TypeError) as exc:
            raise UsageError(f"export thread {thread['id']!r} holds a malformed message: {exc}") from None
        if any(m.id is None or m.created_at is None for m in thread["_parsed"]):
            raise UsageError(f"export thread {thread['id']!r} holds a message without id or created_at")
    for name, fields in (("facts", FACT_FIELDS), ("fact_history", FACT_HISTORY_FIELDS)):
        items = data.get(name) or []
        if not isinstance(items, list) or any(
            not isinstance(i, dict) or any(not isinstance(i.get(f), str) for f in fields) for i in items
        ):
            raise UsageError(f"export {name} must be a list of objects with text fields {', '.join(fields)}")
    log = data.get("message_log") or []
    if not isinstance(log, list) or any(
        not isinstance(e, dict) or any(not isinstance(e.get(f), str | None) for f in MESSAGE_LOG_FIELDS) for e in log
    ):
        raise UsageError(f"export message_log must be a list of objects with fields {', '.join(MESSAGE_LOG_FIELDS)}")
    for name in ("scheduled_tasks", "macros"):
        items = data.get(name) or []
        if not isinstance(items, list) or any(not isinstance(i, dict) for i in items):
            raise UsageError(f"export {name} must be a list of objects")
    prefixes = data.get("allowed_prefixes") or []
    if not isinstance(prefixes, list) or any(not isinstance(p, str) for p in prefixes):
        raise UsageError("export allowed_prefixes must be a list of text")
    for name in ("working_memory_log", "facts", "fact_history", "message_log", "scheduled_tasks", "macros", "allowed_prefixes"):
        data[name] = data.get(name) or []
    wm = data.get("working_memory")
    if wm is not None and not (isinstance(wm, dict) and isinstance(wm.get("data"), dict)):
        raise UsageError("export working_memory must be an object with a data object")
    return data
