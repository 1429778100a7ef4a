"""The HTTP API's bodies and responses, as pydantic models (the OpenAPI document is built from them).

Responses mirror the library's records: the ones that are a record as it
is (``ThreadOut``, ``FactOut``, ``TaskOut``, ``ApiKeyOut``) are built from
the record's own fields (``from_record``), so a field added to a record is
in the API's document too; the others (``Message.to_dict()`` with its
position, ``WorkingMemory`` with its ``null`` before the first patch…) are
written here. Request bodies validate shape here and leave policy (ids,
sizes, text rules) to ``Memory``, so the API refuses exactly what the
library refuses.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..core.messages import Thread
from ..core.records import ApiKey, Fact, ScheduledTask
from ..memory.engines import dump as _dump
from ..memory.engines.recall import MAX_LEG_LIMIT, MAX_MESSAGE_RANGE

__all__ = [
    "ApiKeyOut",
    "FactHistoryEntry",
    "FactIn",
    "FactOut",
    "KeyCreated",
    "KeyIn",
    "MAX_INT64",
    "MessageEdit",
    "MessageIn",
    "MessageLogEntry",
    "MessageOut",
    "MessagesIn",
    "NotebookEntries",
    "NotebookIn",
    "NotebookOut",
    "NotebookResult",
    "NotebookSnapshot",
    "Problem",
    "RecallHit",
    "RecallIn",
    "Status",
    "SummaryOut",
    "TaskIn",
    "TaskOut",
    "ThreadIn",
    "ThreadOut",
    "ThreadPatch",
    "ToolCallOut",
    "WorkingMemoryLogEntry",
    "WorkingMemoryOut",
    "from_record",
]

_strict = ConfigDict(extra="forbid")

#: Positions, versions and counters are 64-bit signed integers in SQLite and
#: PostgreSQL (``caderno.memory.engines.dump.MAX_INT64``, the one name of that bound): a
#: number past it is refused here (422) instead of overflowing in the driver.
MAX_INT64 = _dump.MAX_INT64

#: A leg's or ``top``'s count in a recall body (see ``caderno.memory.engines.recall.MAX_LEG_LIMIT``).
LegLimit = Annotated[int, Field(ge=0, le=MAX_LEG_LIMIT)]
#: Neighbours on one side of a recall hit (see ``caderno.memory.engines.recall.MAX_MESSAGE_RANGE``).
Around = Annotated[int, Field(ge=0, le=MAX_MESSAGE_RANGE)]


#: A response model class (``from_record``).
_M = TypeVar("_M", bound=BaseModel)


def from_record(record: type[Any]) -> Callable[[type[_M]], type[_M]]:
    """Build the response model it decorates from the fields of the dataclass ``record``: each one's
    name, type and default, in the record's order, so the record is the one place they are written.

    The model keeps its name and docstring (its description in the OpenAPI document); a field's
    docstring stays the library's.
    """

    def build(model: type[_M]) -> type[_M]:
        hints = typing.get_type_hints(record)
        fields: dict[str, Any] = {}
        for field in dataclasses.fields(record):
            if field.default is not dataclasses.MISSING:
                default: Any = field.default
            elif field.default_factory is not dataclasses.MISSING:
                default = Field(default_factory=field.default_factory)
            else:
                default = ...
            fields[field.name] = (hints[field.name], default)
        return cast(
            "type[_M]", create_model(model.__name__, __doc__=model.__doc__, __module__=model.__module__, **fields)
        )

    return build


class Problem(BaseModel):
    """An error, as ``application/problem+json`` (RFC 9457)."""

    type: str = Field(description="A stable URI per kind of error, e.g. https://caderno.dev/problems/not-found.")
    title: str
    status: int
    detail: str
    expected_version: int | None = Field(default=None, description="Conflicts only: the version asked for.")
    actual_version: int | None = Field(default=None, description="Conflicts only: the stored version.")


class Status(BaseModel):
    status: str


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] | str


class MessageOut(BaseModel):
    """A stored message: ``Message.to_dict()``, with its ``position`` in the thread."""

    id: str | None
    role: str
    content: str
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime | None = None
    importance: float | None = None
    metadata: dict[str, Any] | None = None
    position: int | None = None
    """Its place in the thread: 1, 2, 3…, never reused after a deletion."""


class MessageIn(BaseModel):
    """One message to append (id, time and importance are assigned when absent)."""

    model_config = _strict
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = None


class MessagesIn(BaseModel):
    """A turn: messages appended to the thread in one transaction, all or nothing."""

    model_config = _strict
    messages: list[MessageIn]


class MessageEdit(BaseModel):
    model_config = _strict
    content: str
    reason: str | None = None


class MessageLogEntry(BaseModel):
    """An edit, pop or deletion (the old text only for edits)."""

    message_id: str
    thread_id: str | None = None
    action: str
    role: str | None = None
    old_content: str | None = None
    actor: str | None = None
    reason: str | None = None
    created_at: datetime | None = None


class SummaryOut(BaseModel):
    message: MessageOut
    merged: bool = Field(description="Folded into a later summary.")


@from_record(Thread)
class ThreadOut(BaseModel):
    pass


class ThreadIn(BaseModel):
    model_config = _strict
    thread_id: str | None = Field(default=None, description="Made up when absent.")
    title: str | None = None
    metadata: dict[str, Any] | None = None


class ThreadPatch(BaseModel):
    """Fields left out are kept; ``null`` clears one."""

    model_config = _strict
    title: str | None = None
    metadata: dict[str, Any] | None = None


class WorkingMemoryOut(BaseModel):
    """The resource's working memory; ``data`` is ``null`` and ``version`` 0 when never set."""

    data: dict[str, Any] | None
    version: int
    updated_at: datetime | None = None


class WorkingMemoryLogEntry(BaseModel):
    version: int
    patch: dict[str, Any]
    source: str
    created_at: datetime | None = None


class NotebookSnapshot(BaseModel):
    memory: str | None
    user: str | None


class NotebookEntries(BaseModel):
    """The live entries of each target."""

    memory: list[str] | None
    user: list[str] | None


class NotebookOut(BaseModel):
    """``snapshot``: a new conversation's blocks, or those ``thread_id`` froze; ``entries``: live."""

    snapshot: NotebookSnapshot
    entries: NotebookEntries


class NotebookIn(BaseModel):
    model_config = _strict
    action: Literal["add", "replace", "remove"]
    content: str | None = None
    old_text: str | None = None


class NotebookResult(BaseModel):
    """The notebook tool's JSON result."""

    success: bool
    target: str
    entries: list[str]
    entry_count: int
    usage: str
    message: str


class RecallIn(BaseModel):
    model_config = _strict
    query: str
    thread_id: str | None = None
    scope: Literal["resource", "thread"] = "resource"
    recent: LegLimit = 10
    salient: LegLimit = 5
    relevant: LegLimit = 5
    lexical: LegLimit = 5
    top: Annotated[int, Field(ge=1, le=MAX_LEG_LIMIT)] | None = None
    message_range: Around | tuple[Around, Around] | None = None


class RecallHit(BaseModel):
    message: MessageOut
    thread_id: str
    reasons: list[str]
    score: float
    scores: dict[str, float]


@from_record(Fact)
class FactOut(BaseModel):
    pass


class FactIn(BaseModel):
    model_config = _strict
    value: str


class FactHistoryEntry(BaseModel):
    category: str | None = None
    key: str | None = None
    value: str
    source: str | None = None
    valid_from: datetime | None = None
    replaced_at: datetime | None = None


class TaskIn(BaseModel):
    model_config = _strict
    name: str
    schedule: str = Field(description="'daily at 9am', 'todo dia às 9h', a cron line, or a one-shot moment.")
    prompt: str
    timezone: str = "UTC"
    thread_id: str | None = None
    trusted: bool = Field(
        default=False, description="Run tools that need approval without asking: an admin key only (403 otherwise)."
    )


@from_record(ScheduledTask)
class TaskOut(BaseModel):
    pass


@from_record(ApiKey)
class ApiKeyOut(BaseModel):
    """A key's record (never its token)."""


class KeyIn(BaseModel):
    model_config = _strict
    resources: list[str] = Field(default_factory=list)
    admin: bool = False
    name: str = ""


class KeyCreated(BaseModel):
    token: str = Field(description="Shown once; only its hash is stored.")
    key: ApiKeyOut
