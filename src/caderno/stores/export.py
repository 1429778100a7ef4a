"""The export format of one resource: what ``ExportResource`` returns on every backend.

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
     "items": [{"namespace": ["memories", "prefs"], "key", "value": {...}, "created_at", "updated_at",
                "embed": ["text", ...]}],
     "notebook": {"memory": ["entry", ...], "user": ["entry", ...]},
     "threads": [{"id": "...", "title": null, "metadata": null, "created_at": "...",
                  "updated_at": "...", "messages": [Message.to_dict(), ...]}]}

Messages keep their ids, times and order, so an import is an exact restore.
Vectors are not exported: they are derived, and the importing caderno embeds
again (messages by its own policy, items by their ``embed`` texts, present
only on items that had texts queued for semantic search).
``facts``, ``fact_history``, ``message_log`` and ``notebook`` may be absent
(exports made before they existed). A conversation's frozen notebook
snapshot is not exported: it is a copy, and the next conversation takes a
new one. Summaries are not exported: they are derived from the messages and
the next consolidation pass writes them again.

What an import must pass before ``ImportResource`` is ``caderno.memory.engines.dump``.
"""

from __future__ import annotations

from typing import Any

from ..core.clock import to_iso
from ..core.records import Item

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
        "items": [],
        "notebook": {"memory": [], "user": []},
        "threads": [],
    }


def item_dict(it: Item, embed: Any = None) -> dict[str, Any]:
    """An item as its export entry; ``embed`` (the texts queued for its vectors) only when it has some."""
    entry: dict[str, Any] = {
        "namespace": list(it.namespace),
        "key": it.key,
        "value": it.value,
        "created_at": to_iso(it.created_at) if it.created_at else None,
        "updated_at": to_iso(it.updated_at) if it.updated_at else None,
    }
    if embed:
        entry["embed"] = list(embed)
    return entry
