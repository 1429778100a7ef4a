"""The agent's other records: facts, learned macros, scheduled tasks, API keys, store items.

Frozen, keyword-only dataclasses like ``Message``; the rules that create and
change them live above (``caderno.memory``), the storage below
(``caderno.stores``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .messages import canonical_json

__all__ = ["ApiKey", "Fact", "Item", "Macro", "MacroKey", "ScheduledTask"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Fact:
    """A durable fact about a resource, keyed by (category, key)."""

    resource_id: str
    """The owner."""
    category: str
    """A grouping such as ``finance`` or ``family``."""
    key: str
    """What the fact is about, unique within its category."""
    value: str
    """The fact itself."""
    source: str
    """Who said so: ``agent``, ``user`` or ``consolidation``."""
    created_at: datetime | None = None
    """When the key was first recorded."""
    updated_at: datetime | None = None
    """When the value last changed."""



MacroKey = tuple[str, str, str, str]
"""``(trigger_tool, trigger_pattern, next_tool, canonical JSON of next_args)``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Macro:
    """A learned follow-up: after ``trigger_tool`` (shaped ``trigger_pattern``), call ``next_tool``.

    The learning rules are in ``caderno.memory.engines.macros``.
    """

    trigger_tool: str
    """The tool whose successful call triggers the suggestion."""
    trigger_pattern: str
    """``caderno.memory.engines.macros.arg_pattern`` of the trigger's arguments (JSON text)."""
    next_tool: str
    """The tool that followed."""
    next_args: Any
    """The exact arguments it was called with (JSON-serialisable)."""
    confidence: float
    """In [0, 1]; suggested at or above ``caderno.memory.engines.macros.SUGGEST_THRESHOLD``."""
    used_count: int = 0
    """How many times a suggestion of this macro was taken."""
    success_count: int = 0
    """Times the follow-up succeeded after the trigger."""
    failure_count: int = 0
    """Times the follow-up failed after the trigger."""

    @property
    def key(self) -> MacroKey:
        """This macro's key: trigger, pattern, next tool and its arguments."""
        return (self.trigger_tool, self.trigger_pattern, self.next_tool, canonical_json(self.next_args))


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduledTask:
    """A prompt the agent runs on a schedule, in its own thread (see ``caderno.agent.scheduler``)."""

    id: str
    """Time-ordered UUID."""
    resource_id: str
    """The owner; the task runs as this resource."""
    name: str
    """Unique within the resource; config tasks are matched by it."""
    cron_expr: str | None
    """5-field cron of a recurring task, else ``None`` (a one-shot)."""
    original_schedule: str
    """What the user typed ("todo dia às 9h")."""
    prompt: str
    """What the agent is asked when the task fires."""
    source: str
    """``tool`` (made by the model or the app) or ``config`` (from ``caderno.toml``)."""
    is_oneshot: bool
    """Fires once, then deletes itself."""
    is_paused: bool = False
    """A paused task never fires."""
    is_trusted: bool = False
    """Its runs skip the approval question for tools that need one."""
    timezone: str = "UTC"
    """IANA zone its cron is read in."""
    thread_id: str = ""
    """The thread its runs write to (``task:<name>`` by default)."""
    next_run_at: datetime | None = None
    """When it fires next (UTC). A paused task keeps it but never fires; a claimed one-shot keeps it until it is deleted."""
    last_run_at: datetime | None = None
    """When it last fired."""
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiKey:
    """An HTTP API key (``caderno serve``): only its hash is stored."""

    id: str
    """Time-ordered UUID; shown in listings and used to revoke."""
    name: str
    """What it is for ("inspector", "mobile app")."""
    resources: tuple[str, ...]
    """The resources it may read and change (ignored for an admin key)."""
    admin: bool = False
    """Manages keys and sees every resource."""
    created_at: datetime | None = None
    revoked_at: datetime | None = None
    """Set when revoked: the key stops working at once."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Item:
    """A JSON document under a namespace path of a resource (the LangGraph store's items)."""

    resource_id: str
    namespace: tuple[str, ...]
    """The path, e.g. ("memories", "user-1"); labels are non-empty and hold no '.'."""
    key: str
    value: dict[str, Any]
    created_at: datetime | None = None
    updated_at: datetime | None = None
