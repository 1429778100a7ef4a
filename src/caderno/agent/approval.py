"""Tools that need approval: ask, remember "always", skip the question for trusted runs.

A tool made with ``needs_approval=True`` runs only when one of these holds:

1. the turn is trusted (a scheduled task marked ``is_trusted``);
2. its command (the ``command`` argument when it is text, else the
   arguments as JSON) is covered by a prefix the resource approved for good
   (``memory.prefixes``; whole words, never a command with shell operators);
3. the approval callback answers ``"yes"`` or ``"always"`` — ``"always"``
   also approves the prefix at once (the command's first word, or the
   ``prefix`` of an ``Approval``), so the next such command is not asked.

Otherwise the model gets an ``Error:`` result saying it was not run. An
approval is a person's decision, so it is stored when it is given, not with
the turn.
"""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core.prefixes import has_shell_operators

__all__ = ["Approval", "ApprovalRequest", "Approver", "command_of"]

Decision = Literal["yes", "no", "always"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What the approval callback is asked."""

    resource_id: str
    thread_id: str
    tool: str
    """The tool's name."""
    arguments: Any
    """The model's arguments."""
    command: str
    """The command to approve (``arguments["command"]``, or the arguments as JSON)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Approval:
    """A decision with a chosen prefix (for ``"always"``); a plain string works too."""

    decision: Decision
    prefix: str | None = None
    """With ``always``: the prefix to approve (default: the command's first word)."""


#: The callback: ``request -> "yes" | "no" | "always" | Approval`` (sync or async).
Approver = Callable[[ApprovalRequest], "Decision | Approval | Awaitable[Decision | Approval]"]


def command_of(arguments: Any) -> str:
    """The text a prefix is matched against."""
    if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
        return str(arguments["command"])
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def default_prefix(command: str) -> str | None:
    """The first word of a command, or ``None`` when it has none or carries shell operators."""
    if has_shell_operators(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[0] if words else None


async def decide(approve: Approver, request: ApprovalRequest) -> Approval:
    """Ask the callback; anything but yes / no / always counts as no."""
    answer = approve(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if isinstance(answer, Approval):
        return answer
    if answer in ("yes", "no", "always"):
        return Approval(decision=answer)
    return Approval(decision="no")
