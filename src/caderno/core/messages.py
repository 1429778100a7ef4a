"""The data caderno stores and hands back: messages, tool calls, threads.

Messages are frozen, keyword-only dataclasses. Every field added after the
first release defaults to ``None`` so rows written by an older caderno still
load. A message is stored as plain JSON-able values, never pickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Literal

from .clock import from_iso, to_iso
from .errors import UsageError

__all__ = [
    "ROLES",
    "Message",
    "Role",
    "Thread",
    "ToolCall",
    "ToolSpec",
    "WorkingMemory",
    "canonical_json",
    "check_text",
]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


def check_text(value: str, what: str) -> None:
    """Refuse text that no backend can store faithfully.

    NUL bytes are refused because PostgreSQL ``text`` cannot hold them, and
    lone surrogates because they cannot be encoded as UTF-8; refusing both
    everywhere keeps every backend byte-for-byte identical.
    """
    if "\x00" in value:
        raise UsageError(f"{what} contains a NUL character (\\x00), which caderno does not store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid Unicode text (lone surrogate at index {exc.start})") from None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    """Identifier the tool result refers back to (``Message.tool_call_id``)."""
    name: str
    """Name of the tool to call."""
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """Arguments as a parsed JSON object; raw text only when the model sent
    something that is not JSON (the tool layer then reports the error)."""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        arguments = data.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:  # not JSON, or an integer past Python's digit limit
                pass  # keep the model's raw text
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=arguments)


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation."""

    role: Role
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str = ""
    """The text. Assistant messages that only call tools may leave it empty."""
    tool_calls: tuple[ToolCall, ...] | None = None
    """Tool calls requested by an assistant message."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the id of the call this result answers."""
    name: str | None = None
    """For ``tool`` messages: the tool's name; otherwise an optional author name."""
    id: str | None = None
    """Assigned by the store when absent (a time-ordered UUID)."""
    created_at: datetime | None = None
    """Assigned by the store when absent. Ordering never depends on it."""
    importance: float | None = None
    """Salience in [0, 1]; ``None`` lets caderno score it."""
    metadata: dict[str, Any] | None = None
    """Free-form JSON object kept with the message."""
    seq: int | None = None
    """The store's internal sequence number, set on messages read back from a store.

    One counter for the whole database: it orders change feeds, recall and
    summaries' coverage. It tells how much every resource writes, so it is
    never handed to a client (``to_dict`` leaves it out); ``position`` is
    the number to show."""
    position: int | None = None
    """This message's place in its thread: 1, 2, 3… in order, set by the store at append.

    Counted per thread, so it says nothing about other threads or
    resources; a deleted message's position is never given to another.
    ``None`` on summaries and on messages not yet stored."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise UsageError(f"unknown role {self.role!r}; use one of {', '.join(ROLES)}")
        if not isinstance(self.content, str):
            raise UsageError(f"message content must be a string, not {type(self.content).__name__}")
        if self.role == "tool" and not self.tool_call_id:
            raise UsageError("a tool message needs the tool_call_id of the call it answers")
        if self.tool_calls is not None:
            if self.role != "assistant":
                raise UsageError("only assistant messages carry tool_calls")
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls) or None)
        if self.importance is not None and (
            not isinstance(self.importance, int | float)
            or isinstance(self.importance, bool)
            or not 0.0 <= float(self.importance) <= 1.0
        ):
            raise UsageError(f"importance must be within [0, 1], got {self.importance}")

    @classmethod
    def user(cls, content: str, **kwargs: Any) -> Message:
        return cls(role="user", content=content, **kwargs)

    @classmethod
    def assistant(cls, content: str = "", *, tool_calls: list[ToolCall] | None = None, **kwargs: Any) -> Message:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls) if tool_calls else None, **kwargs)

    @classmethod
    def system(cls, content: str, **kwargs: Any) -> Message:
        return cls(role="system", content=content, **kwargs)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str | None = None, **kwargs: Any) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name, **kwargs)

    def with_(self, **changes: Any) -> Message:
        """A copy with some fields changed (messages are immutable)."""
        return replace(self, **changes)

    def _stamped(self, **changes: Any) -> Message:
        """A copy with store-assigned fields (id, created_at, seq, position) changed.

        Skips re-validation: those fields cannot make a valid message
        invalid, and this runs for every message on the append path.
        """
        new = object.__new__(Message)
        for name in _FIELDS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; ``Message.from_dict`` reverses it exactly."""
        return {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "tool_calls": [c.to_dict() for c in self.tool_calls] if self.tool_calls else None,
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "created_at": to_iso(self.created_at) if self.created_at else None,
            "importance": self.importance,
            "metadata": self.metadata,
            "position": self.position,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        calls = data.get("tool_calls")
        created = data.get("created_at")
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in calls) if calls else None,
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            id=data.get("id"),
            created_at=from_iso(created) if isinstance(created, str) else created,
            importance=data.get("importance"),
            metadata=data.get("metadata"),
            position=_position(data.get("position")),
        )


def _position(value: Any) -> int | None:
    """A position read from a dict (an export): a whole number from 1, or ``None``."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"a message position must be a whole number from 1, not {value!r}")
    return value


_FIELDS = tuple(f.name for f in fields(Message))


@dataclass(frozen=True, kw_only=True, slots=True)
class Thread:
    """A conversation of one resource, as listed by ``Memory.list_threads``."""

    id: str
    """The thread id; unique only together with the resource id."""
    resource_id: str
    """The owner."""
    title: str | None = None
    """Optional human title."""
    metadata: dict[str, Any] | None = None
    """Free-form JSON object."""
    created_at: datetime | None = None
    """When the first message arrived."""
    updated_at: datetime | None = None
    """When the last message arrived."""
    message_count: int = 0
    """Number of stored messages (summaries excluded)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkingMemory:
    """A resource's working memory after a patch."""

    resource_id: str
    """The owner."""
    data: dict[str, Any]
    """The whole JSON object."""
    version: int
    """Starts at 1 and grows by one with every applied patch."""
    updated_at: datetime | None = None
    """When the last patch was applied."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    """Unique tool name."""
    description: str
    """What the tool does and when to use it."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """JSON Schema of the arguments object."""

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def canonical_json(value: Any) -> str:
    """One text per JSON value (sorted keys, no spaces): for keys and comparisons."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
