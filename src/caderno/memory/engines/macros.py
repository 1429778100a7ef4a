"""Tool macros: learn "after A like this, the agent calls B like that".

Pure logic, no storage: the caller loads the macros, passes each finished
turn's tool calls to ``observe``, stores the result, and asks
``suggest_next`` after a call to learn what usually follows it.

A macro says: after a *successful* call of ``trigger_tool`` whose arguments
have the shape ``trigger_pattern`` (see ``arg_pattern``), the agent called
``next_tool`` with exactly ``next_args``. Its ``confidence`` starts at
``START_CONFIDENCE``, rises by ``REWARD`` each time that follow-up succeeds
and falls by ``PENALTY`` each time it fails, clamped to [0, 1]. It is
suggested once it reaches ``SUGGEST_THRESHOLD``: two successes in a row
from a standing start, and one failure takes it below again.

Only adjacent calls count (A, then the very next call B, in the same turn),
and an identical repeat (B is A with the same arguments) teaches nothing:
a retry or a poll is not a macro.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...core.errors import UsageError
from ...core.messages import canonical_json
from ...core.records import Macro, MacroKey

__all__ = [
    "COMMAND_KEYS",
    "PENALTY",
    "REWARD",
    "START_CONFIDENCE",
    "SUGGEST_THRESHOLD",
    "Macro",
    "MacroKey",
    "ObservedCall",
    "arg_pattern",
    "mark_used",
    "observe",
    "suggest_next",
]

START_CONFIDENCE = 0.5
"""A pair seen once is a coin toss: neither trusted nor dismissed."""
REWARD = 0.1
"""Per successful follow-up: trust is earned slowly..."""
PENALTY = 0.2
"""...and lost twice as fast, since a wrong suggestion costs a wasted (maybe harmful) call."""
SUGGEST_THRESHOLD = 0.7
"""Two successes from the start (0.5 -> 0.7); one failure from there stops the suggestion."""

COMMAND_KEYS = frozenset({"command", "cmd"})
"""Argument names whose string value is a command line: the pattern keeps its first word."""

ObservedCall = tuple[str, Any, bool]
"""One tool call of a turn: ``(tool, args, ok)``; ``ok`` is False when it returned an error."""


def arg_pattern(tool: str, args: Any) -> str:
    """A stable generalisation of a call's arguments, as canonical JSON text.

    Objects keep their keys (sorted) and replace each value by its JSON type
    name (``"str"``, ``"int"``, ``"float"``, ``"bool"``, ``"null"``,
    ``"list"``), recursing into nested objects. A string under a command
    key (``COMMAND_KEYS``) keeps its first shell word, as ``"str:git"``, so
    ``git status`` and ``git log`` share a pattern while ``ls`` does not.

    ``{"command": "git status -s", "cwd": "/repo"}`` ->
    ``{"command":"str:git","cwd":"str"}``.

    Args:
        tool: the tool's name. Today the rules are the same for every tool;
            it is part of the signature so a per-tool rule can be added
            without changing callers.
        args: the call's arguments (usually an object; anything JSON-able).

    Raises:
        UsageError: ``tool`` is empty.
    """
    if not tool:
        raise UsageError("arg_pattern needs the tool's name")
    return _canonical(_shape(args, key=None))


def observe(macros: Mapping[MacroKey, Macro], turn_calls: Sequence[ObservedCall]) -> dict[MacroKey, Macro]:
    """Learn from one turn's tool calls, in order; returns the updated macros (input untouched).

    For each successful call A followed by call B, the macro (A's tool and
    pattern -> B's tool and arguments) gains ``REWARD`` when B succeeded and
    loses ``PENALTY`` when it failed; a pair seen for the first time starts
    at ``START_CONFIDENCE``.

    Args:
        macros: the macros known so far, by ``Macro.key``.
        turn_calls: the turn's tool calls as ``(tool, args, ok)``.
    """
    learned = dict(macros)
    for (tool_a, args_a, ok_a), (tool_b, args_b, ok_b) in zip(turn_calls, turn_calls[1:], strict=False):
        if not ok_a or (tool_a == tool_b and _canonical(args_a) == _canonical(args_b)):
            continue
        blank = Macro(
            trigger_tool=tool_a,
            trigger_pattern=arg_pattern(tool_a, args_a),
            next_tool=tool_b,
            next_args=args_b,
            confidence=START_CONFIDENCE,
        )
        macro = learned.get(blank.key, blank)
        if ok_b:
            macro = replace(macro, confidence=_clamp(macro.confidence + REWARD), success_count=macro.success_count + 1)
        else:
            macro = replace(macro, confidence=_clamp(macro.confidence - PENALTY), failure_count=macro.failure_count + 1)
        learned[macro.key] = macro
    return learned


def suggest_next(
    macros: Mapping[MacroKey, Macro], tool: str, args: Any, threshold: float = SUGGEST_THRESHOLD
) -> list[Macro]:
    """The follow-ups worth suggesting after a successful call of ``tool`` with ``args``, best first.

    Args:
        macros: the macros known so far.
        tool: the tool just called.
        args: its arguments.
        threshold: the least confidence suggested.

    Returns:
        Matching macros at or above ``threshold``, by confidence, then
        successes, then tool name and arguments (so the order is stable).
    """
    pattern = arg_pattern(tool, args)
    found = [
        m
        for m in macros.values()
        if m.trigger_tool == tool and m.trigger_pattern == pattern and m.confidence >= threshold
    ]
    return sorted(found, key=lambda m: (-m.confidence, -m.success_count, m.next_tool, _canonical(m.next_args)))


def mark_used(macros: Mapping[MacroKey, Macro], key: MacroKey) -> dict[MacroKey, Macro]:
    """Count that a suggestion was taken; returns the updated macros (input untouched).

    Whether it then worked is learned by ``observe`` from the turn's calls.

    Raises:
        UsageError: no macro has that key.
    """
    if key not in macros:
        raise UsageError(f"no macro with key {key!r}")
    updated = dict(macros)
    updated[key] = replace(macros[key], used_count=macros[key].used_count + 1)
    return updated


def _shape(value: Any, *, key: str | None) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _shape(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, str):
        if key in COMMAND_KEYS:
            try:
                words = shlex.split(value)
            except ValueError:  # unbalanced quotes: fall back to plain words
                words = value.split()
            return f"str:{words[0]}" if words else "str"
        return "str"
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


_canonical = canonical_json


def _clamp(confidence: float) -> float:
    # Rounded so that 0.5 + 0.1 + 0.1 is exactly 0.7 and meets the threshold.
    return round(min(1.0, max(0.0, confidence)), 6)
