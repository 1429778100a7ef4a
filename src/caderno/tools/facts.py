"""``remember_fact``, ``get_facts`` and ``forget_fact``: durable facts keyed by (category, key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.clock import to_iso
from ..memory.parts.facts import fact_op
from .base import Scope, ToolDef, done

__all__ = ["FORGET_FACT", "GET_FACTS", "REMEMBER_FACT"]


@dataclass(frozen=True, kw_only=True, slots=True)
class NewFact:
    """A ``remember_fact`` call."""

    category: str
    key: str
    value: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FactKey:
    """A ``forget_fact`` call."""

    category: str
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Category:
    """A ``get_facts`` call."""

    category: str | None


async def _remember(scope: Scope, request: NewFact) -> dict[str, Any]:
    op = fact_op(scope.resource_id, request.category, request.key, request.value, "agent")
    await scope.write(op)  # in a turn it is stored with the turn: a failed turn keeps no fact
    return done(fact=f"{op.category}/{op.key}")


async def _get(scope: Scope, request: Category) -> dict[str, Any]:
    facts = await scope.full.facts.list(resource_id=scope.resource_id, category=request.category)
    return done(
        facts=[
            {
                "category": f.category,
                "key": f.key,
                "value": f.value,
                "updated_at": to_iso(f.updated_at) if f.updated_at else None,
            }
            for f in facts
        ]
    )


async def _forget(scope: Scope, request: FactKey) -> dict[str, Any]:
    # At once, never held: only MCP offers it, where no turn is open.
    await scope.full.facts.forget(resource_id=scope.resource_id, category=request.category, key=request.key)
    return done(forgotten=f"{request.category.lower()}/{request.key}")


REMEMBER_FACT: ToolDef[NewFact] = ToolDef(
    name="remember_fact",
    description=(
        "Record a durable fact about the user (it is shown to you in later conversations). Use a short "
        "lowercase category (finance, family, health, travel, preferences, work, home) and a key naming "
        "what it is about; saving the same category and key again replaces the value (the old one is kept "
        "in history)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "category": {"type": "string", "description": "A short grouping, e.g. finance."},
            "key": {
                "type": "string",
                "description": "What the fact is about, unique in its category, e.g. monthly_income.",
            },
            "value": {"type": "string", "description": "The fact itself, e.g. R$ 14,000."},
        },
        "required": ["category", "key", "value"],
        "additionalProperties": False,
    },
    request=NewFact,
    handler=_remember,
    result=("fact",),
    effect="write",
    offered=frozenset({"agent", "mcp"}),
    why="The Agents SDK adapter's memory_instructions show no facts, so a fact saved there would never "
    "reach the model again.",
)

GET_FACTS: ToolDef[Category] = ToolDef(
    name="get_facts",
    description="List the facts recorded about the user, most recently updated first.",
    parameters={
        "type": "object",
        "properties": {"category": {"type": "string", "description": "Only this category; omit for all."}},
        "additionalProperties": False,
    },
    request=Category,
    handler=_get,
    result=("facts",),
    effect="read",
    offered=frozenset({"mcp"}),
    why="AgentChat shows the facts that matter to each turn in its prompt; an MCP client has no prompt of "
    "caderno's to read them from.",
)

FORGET_FACT: ToolDef[FactKey] = ToolDef(
    name="forget_fact",
    description=(
        "Delete a fact that is wrong or no longer true (only when the user asks, or it is clearly outdated). "
        "Its history stays."
    ),
    parameters={
        "type": "object",
        "properties": {
            "category": {"type": "string", "description": "The fact's category."},
            "key": {"type": "string", "description": "The fact's key."},
        },
        "required": ["category", "key"],
        "additionalProperties": False,
    },
    request=FactKey,
    handler=_forget,
    result=("forgotten",),
    effect="delete",
    offered=frozenset({"mcp"}),
    why="A deletion is offered where the client shows the user each tool call and may ask first (MCP marks "
    "it destructive); AgentChat's model corrects a fact by saving it again.",
)
