"""``memory``: the notebook (MEMORY.md, USER.md), edited by add / replace / remove.

Notebook writes are made at once (files off the event loop, or the
database notebook's own transaction) even in an open turn, like a note taken
on paper: they stay if the turn fails.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import NotebookError, UsageError
from ..memory.engines.notebook_rules import MEMORY_TOOL_SPEC
from .base import Scope, ToolDef, done, refused

__all__ = ["NOTEBOOK"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Edit:
    """A ``memory`` call."""

    action: str
    target: str
    content: str | None
    old_text: str | None


async def _edit(scope: Scope, request: Edit) -> dict[str, Any]:
    book_of = scope.notebook
    if book_of is None:
        raise UsageError("there is no notebook here")

    book = book_of()
    try:
        outcome = await book.apply(request.action, request.target, request.content, request.old_text)
    except NotebookError as exc:
        usage = await book.usage(request.target)
        return refused(str(exc), **({"usage": usage} if usage is not None else {}))
    return done(**asdict(outcome))


NOTEBOOK: ToolDef[Edit] = ToolDef(
    name=MEMORY_TOOL_SPEC.name,
    # The notebook's own words: they describe its rules (bounded stores, no ids).
    description=MEMORY_TOOL_SPEC.description,
    parameters=MEMORY_TOOL_SPEC.parameters,
    request=Edit,
    handler=_edit,
    result=("target", "entries", "entry_count", "usage", "message"),
    effect="write",
    offered=frozenset({"agent", "mcp", "openai-agents"}),
)
