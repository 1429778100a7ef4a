"""``AgentChat``'s settings: how much a turn shows, how long it may run, whose clock — each checked once, here.

``ChatSettings`` holds the tuning numbers (``AgentChat(settings=…)``);
``RecallSettings`` what automatic recall looks up (``AgentChat(recall=…)``).
Both are frozen: one value serves any number of chats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..core.clock import utcnow
from ..core.errors import UsageError
from ..core.validate import check_zone
from ..memory.engines.context import TokenCounter, estimate_tokens
from ..memory.parts.turns import TURN_WAIT

__all__ = ["TURN_TIMEOUT", "ChatSettings", "RecallSettings"]

#: Default deadline of a whole turn (every model call and tool call of one
#: ``ask``), in seconds. A healthy upstream answers a turn of a few steps in
#: seconds to tens of seconds and a slow local model in about a minute; two
#: minutes covers both, while a hung upstream holds the thread's lock for two
#: minutes instead of 60 s x ``max_steps`` (eight minutes by default).
TURN_TIMEOUT = 120.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatSettings:
    """How an ``AgentChat`` runs its turns (``AgentChat(settings=ChatSettings(…))``).

    Raises:
        UsageError: a value out of its range (checked when the settings are made).
    """

    history_limit: int = 40
    """How many stored messages of the thread to show (at least 2: one exchange)."""
    max_steps: int = 8
    """Most model calls in one turn."""
    max_context_tokens: int | None = None
    """The model's context size: the prompt is fitted into it minus ``reply_reserve`` (``None``: no budget)."""
    reply_reserve: int = 1024
    """Tokens kept free for the model's answer."""
    token_counter: TokenCounter = estimate_tokens
    """Counts tokens (default: ``caderno.memory.engines.context.estimate_tokens``)."""
    facts: int = 8
    """Most known facts shown per turn (0: none, and no ``remember_fact`` tool)."""
    turn_timeout: float | None = TURN_TIMEOUT
    """Seconds one whole turn (all its model and tool calls) may take before it fails with
    ``ModelError`` and stores nothing (``None``: no deadline). The commit itself is not cut short."""
    turn_wait: float = TURN_WAIT
    """Seconds a turn waits while another turn holds its thread (in this process or another one on
    the same database) before it is refused with ``ThreadBusy``."""
    timezone: str = "UTC"
    """The user's IANA zone, for schedules ("todo dia às 9h")."""
    clock: Callable[[], datetime] = utcnow
    """The current time (a scheduled "in 2 hours" counts from it; a retry's window too)."""

    def __post_init__(self) -> None:
        if self.history_limit < 2:
            raise UsageError("history_limit must be at least 2 (one exchange)")
        if self.max_steps < 1:
            raise UsageError("max_steps must be at least 1")
        timeout = self.turn_timeout
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0
        ):
            raise UsageError(f"turn_timeout must be a positive number of seconds or None, not {timeout!r}")
        check_zone(self.timezone)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallSettings:
    """Automatic recall: what ``AgentChat`` looks up before each turn."""

    salient: int = 3
    """Salient messages of the resource to consider."""
    relevant: int = 5
    """Semantically closest messages to consider."""
    lexical: int = 5
    """Best full-text matches to consider."""
    min_similarity: float | None = None
    """Cosine threshold (default: ``caderno.memory.engines.recall.DEFAULT_MIN_SIMILARITY``)."""
    top: int = 8
    """Most messages injected into the prompt."""
