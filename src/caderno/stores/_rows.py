"""Row <-> Message conversion shared by the SQL backends."""

from __future__ import annotations

import json
from typing import Any

from ..core.clock import from_iso, to_iso
from ..core.messages import Message, Thread, ToolCall
from ..core.records import Fact

#: Column order used by every SELECT that builds messages.
EVENT_COLUMNS = "seq, id, role, content, tool_calls, tool_call_id, name, importance, created_at, metadata, position"
#: A thread's messages (summaries left out), resource and thread bound; callers add conditions and the order.
EVENTS_OF_THREAD = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? AND kind = 'message'"


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(value: Any) -> Any:
    if value is None or not isinstance(value, str | bytes):
        return value
    return json.loads(value)


def event_params(m: Message) -> tuple[Any, ...]:
    """(id, role, content, tool_calls, tool_call_id, name, importance, created_at, metadata)."""
    calls = [c.to_dict() for c in m.tool_calls] if m.tool_calls else None
    created = to_iso(m.created_at) if m.created_at else None
    return (m.id, m.role, m.content, dumps(calls), m.tool_call_id, m.name, m.importance, created, dumps(m.metadata))


def row_to_message(row: Any) -> Message:
    seq, id_, role, content, calls, call_id, name, importance, created, metadata, position = row
    calls = loads(calls)
    return Message(
        role=role,
        content=content,
        tool_calls=tuple(ToolCall.from_dict(c) for c in calls) if calls else None,
        tool_call_id=call_id,
        name=name,
        id=id_,
        created_at=_when(created),
        importance=importance,
        metadata=loads(metadata),
        seq=seq,
        position=position,
    )


def _when(value: Any) -> Any:
    """SQLite hands back RFC 3339 text, PostgreSQL datetimes: both become datetimes."""
    return from_iso(value) if isinstance(value, str) else value


def row_to_thread(resource_id: str, row: Any) -> Thread:
    """(thread_id, title, metadata, created_at, updated_at, message_count) -> Thread."""
    thread_id, title, metadata, created, updated, count = row
    return Thread(
        id=thread_id,
        resource_id=resource_id,
        title=title,
        metadata=loads(metadata),
        created_at=_when(created),
        updated_at=_when(updated),
        message_count=count,
    )


def row_to_fact(resource_id: str, row: Any) -> Fact:
    """(category, key, value, source, created_at, updated_at) -> Fact."""
    category, key, value, source, created, updated = row
    return Fact(
        resource_id=resource_id,
        category=category,
        key=key,
        value=value,
        source=source,
        created_at=_when(created),
        updated_at=_when(updated),
    )
