"""``update_working_memory`` and ``get_working_memory``: the resource's current state of things."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.clock import to_iso
from ..core.errors import Conflict
from ..core.messages import WorkingMemory
from ..memory.facade import Memory
from ..memory.parts.working_memory import check_patch, merge_patch
from .base import NoArguments, Scope, ToolDef, done

__all__ = ["GET_WORKING_MEMORY", "UPDATE_WORKING_MEMORY", "WM_SOURCE", "state_payload"]

#: The ``source`` a tool's patch is logged with, whichever interface sent it.
WM_SOURCE = "tool:update_working_memory"


@dataclass(frozen=True, kw_only=True, slots=True)
class Patch:
    """An ``update_working_memory`` call."""

    patch: dict[str, Any]
    expected_version: int | None


def state_payload(state: WorkingMemory | None) -> dict[str, Any]:
    """The working memory as a model reads it (also MCP's ``working-memory`` resource)."""
    if state is None:
        return done(working_memory=None, version=0, updated_at=None)
    updated = to_iso(state.updated_at) if state.updated_at else None
    return done(working_memory=state.data, version=state.version, updated_at=updated)


async def _get(scope: Scope, request: NoArguments) -> dict[str, Any]:
    return state_payload(await scope.full.working_memory.state(resource_id=scope.resource_id))


async def _update(scope: Scope, request: Patch) -> dict[str, Any]:
    turn = scope.turn
    if turn is None:
        state = await scope.full.update_working_memory(
            resource_id=scope.resource_id,
            patch=request.patch,
            expected_version=request.expected_version,
            source=WM_SOURCE,
        )
        return done(working_memory=state.data, version=state.version)
    # In a turn the version is the turn's own view; the stores say a stale one in the same words.
    if request.expected_version is not None and request.expected_version != turn.version:
        raise Conflict(
            f"working memory of {scope.resource_id!r} is at version {turn.version}, not {request.expected_version}",
            resource_id=scope.resource_id,
            expected=request.expected_version,
            actual=turn.version,
        )
    if isinstance(scope.memory, Memory):
        merged = scope.memory.working_memory.preview(turn.working_memory, request.patch, resource_id=scope.resource_id)
    else:  # a four-method AgentMemory has no schema to check against
        merged = merge_patch(turn.working_memory or {}, check_patch(request.patch, scope.resource_id))
    turn.hold_patch(request.patch, merged)
    return done(working_memory=merged, version=turn.version)


UPDATE_WORKING_MEMORY: ToolDef[Patch] = ToolDef(
    name="update_working_memory",
    description=(
        "Update the user's working memory — the current state of things: tasks in progress, plans, open "
        "questions, what you know about them that changes — with a JSON merge patch. Send only what changes: "
        "keys you omit are kept; objects merge key by key; arrays and plain values replace the old value whole "
        "(send the full new array); null deletes a key. A version conflict means it changed meanwhile: read it "
        "again and retry. Returns the whole working memory and its new version."
    ),
    parameters={
        "type": "object",
        "properties": {
            "patch": {"type": "object", "description": "JSON merge patch (RFC 7396) applied to the working memory."},
            "expected_version": {
                "type": "integer",
                "minimum": 0,
                "description": "The version you read; the update is refused if it changed since. Omit to apply it anyway.",
            },
        },
        "required": ["patch"],
        "additionalProperties": False,
    },
    request=Patch,
    handler=_update,
    result=("working_memory", "version"),
    effect="write",
    offered=frozenset({"agent", "mcp", "openai-agents"}),
)

GET_WORKING_MEMORY: ToolDef[NoArguments] = ToolDef(
    name="get_working_memory",
    description=(
        "Read the user's working memory: one JSON object with the current state of things, its version and "
        "when it last changed. Pass the version as expected_version to update_working_memory so that a change "
        "made meanwhile is not overwritten."
    ),
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    request=NoArguments,
    handler=_get,
    result=("working_memory", "version", "updated_at"),
    effect="read",
    offered=frozenset({"mcp"}),
    why="AgentChat and the Agents SDK's memory_instructions put the working memory in every prompt; "
    "an MCP client has no prompt of caderno's to read it from.",
)
