"""What the model sees each turn: blocks and history fitted into a token budget.

``build_prompt`` fills ``max_tokens - reply_reserve`` in this order of
priority: instructions; working memory; notebook snapshot; known facts; the
latest summary of older turns; recalled context; then the newest history
messages that fit, oldest first. The new messages of the turn always go in.

History is cut in *units*: an assistant message with tool calls together
with all its tool results, or one plain message. So a tool call is never
kept without its results, a result never without its call, and the window
never starts with a tool result. If even the fixed blocks do not fit, the
lowest-priority blocks are dropped first (the last one to go is shortened
instead, when that suffices), and the result says what was cut.

Token counts come from a pluggable counter (``TokenCounter``). The default,
``estimate_tokens``, works offline: one token per four characters, rounded
up, plus four per message for the chat format. On caderno's evaluation
corpus it is within a few percent of a real WordPiece tokenizer overall
(see the README); pass ``wordpiece_counter()`` for the real thing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.messages import Message

__all__ = [
    "BLOCK_ORDER",
    "MESSAGE_OVERHEAD",
    "Prompt",
    "TokenCounter",
    "build_prompt",
    "estimate_tokens",
    "history_units",
    "wordpiece_counter",
]

TokenCounter = Callable[[str], int]

#: Blocks from highest to lowest priority.
BLOCK_ORDER = ("instructions", "working_memory", "notebook", "facts", "summary", "recalled")
#: Tokens a chat message costs beyond its text (role, separators).
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """Offline token estimate: ceil(characters / 4)."""
    return (len(text) + 3) // 4


def wordpiece_counter() -> TokenCounter:
    """A real tokenizer, offline: the WordPiece vocabulary that ships with caderno."""
    from tokenizers import Tokenizer

    from ...embeddings.minilm import TOKENIZER

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return count


@dataclass(frozen=True, kw_only=True, slots=True)
class Prompt:
    """The fitted prompt and what it cost."""

    messages: list[Message]
    """System blocks, then the history window, then the turn."""
    usage: dict[str, int]
    """Tokens per block ("instructions", …, "history", "turn"), plus "total" and "budget"."""
    cut: list[dict[str, Any]] = field(default_factory=list)
    """Blocks dropped or shortened to fit: ``{"block", "action", "tokens"}``."""
    history_dropped: int = 0
    """Stored history messages left out of the window."""


def message_tokens(m: Message, count: TokenCounter) -> int:
    n = count(m.content) + MESSAGE_OVERHEAD
    for call in m.tool_calls or ():
        n += count(call.name) + count(str(call.arguments)) + MESSAGE_OVERHEAD
    return n


def history_units(history: Sequence[Message]) -> list[list[Message]]:
    """Group history into units; drop tool results without their call, and calls without all results."""
    units: list[list[Message]] = []
    open_unit: list[Message] | None = None
    waiting: set[str] = set()
    for m in history:
        if m.role == "tool":
            if open_unit is not None and m.tool_call_id in waiting:
                open_unit.append(m)
                waiting.discard(m.tool_call_id)
                if not waiting:
                    units.append(open_unit)
                    open_unit = None
            continue  # an orphan result: its call is not in the window
        if open_unit is not None:  # the previous call never got all its results
            open_unit = None
        if m.role == "assistant" and m.tool_calls:
            open_unit, waiting = [m], {c.id for c in m.tool_calls}
        else:
            units.append([m])
    return units


def build_prompt(
    *,
    blocks: dict[str, str | list[str] | None],
    history: Sequence[Message],
    turn: Sequence[Message],
    max_tokens: int | None,
    reply_reserve: int = 0,
    count: TokenCounter = estimate_tokens,
) -> Prompt:
    """Fit blocks, history and the turn into ``max_tokens - reply_reserve``.

    Args:
        blocks: text of each block by name (see ``BLOCK_ORDER``); a list
            becomes several system messages (the two notebook files).
        history: stored messages of the thread, oldest first.
        turn: the messages of this turn so far (always included).
        max_tokens: the model's context size; ``None`` means no limit.
        reply_reserve: tokens kept free for the model's answer.
        count: the token counter.
    """
    system: list[tuple[str, Message, int]] = []
    for name in BLOCK_ORDER:
        value = blocks.get(name)
        texts = [value] if isinstance(value, str) else list(value or [])
        for text in texts:
            if text:
                m = Message.system(text)
                system.append((name, m, message_tokens(m, count)))
    turn_tokens = sum(message_tokens(m, count) for m in turn)
    units = history_units(history)
    unit_tokens = [sum(message_tokens(m, count) for m in u) for u in units]
    budget = None if max_tokens is None else max(0, max_tokens - reply_reserve)
    cut: list[dict[str, Any]] = []

    if budget is not None:
        room = budget - turn_tokens
        fixed = sum(t for _, _, t in system)
        # Drop (or shorten) the lowest-priority blocks until the fixed part fits.
        while system and fixed > room:
            name, m, tokens = system[-1]
            over = fixed - room
            keep = tokens - over - MESSAGE_OVERHEAD
            if keep >= 32 and name != "instructions":
                text = _shorten(m.content, keep, count)
                short = Message.system(text)
                new_tokens = message_tokens(short, count)
                system[-1] = (name, short, new_tokens)
                cut.append({"block": name, "action": "shortened", "tokens": tokens - new_tokens})
                fixed += new_tokens - tokens
                if fixed <= room:
                    break
                continue
            system.pop()
            fixed -= tokens
            cut.append({"block": name, "action": "dropped", "tokens": tokens})
        room -= fixed
        chosen: list[list[Message]] = []
        for unit, tokens in zip(reversed(units), reversed(unit_tokens), strict=True):
            if tokens > room:
                break
            chosen.append(unit)
            room -= tokens
        window = [m for u in reversed(chosen) for m in u]
    else:
        window = [m for u in units for m in u]

    usage: dict[str, int] = {}
    for name, _, tokens in system:
        usage[name] = usage.get(name, 0) + tokens
    usage["history"] = sum(message_tokens(m, count) for m in window)
    usage["turn"] = turn_tokens
    usage["total"] = sum(usage.values())
    if budget is not None:
        usage["budget"] = budget
    return Prompt(
        messages=[m for _, m, _ in system] + window + list(turn),
        usage=usage,
        cut=cut,
        history_dropped=len(history) - len(window),
    )


def _shorten(text: str, tokens: int, count: TokenCounter) -> str:
    """The longest prefix of ``text`` (cut at a line or word) within ``tokens``."""
    marker = "\n[…]"
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + marker) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    prefix = text[:lo]
    for sep in ("\n", " "):
        at = prefix.rfind(sep)
        if at > lo // 2:
            prefix = prefix[:at]
            break
    return prefix + marker
