"""The catalog: every memory tool, and which interface offers it.

``CATALOG`` lists the tools in the order a model is shown them. Each tool's
``offered`` field names the interfaces that bind it and its ``why`` says why
the others do not, so a tool found in one interface only is a decision
written here. The rule behind them: AgentChat and the Agents SDK adapter put
the working memory, the facts and the conversation in the model's prompt,
so they offer the tools that change memory and ``recall``; an MCP client
holds none of caderno's state, so MCP also offers the tools that read it.

One more tool is AgentChat's alone and lives beside the agent:
``schedule`` (``caderno.agent.task_tools``), because every run of a task is
an AgentChat turn. ``table`` renders the table of them all in docs/guides/agents.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import Interface, ToolDef, signature
from .facts import FORGET_FACT, GET_FACTS, REMEMBER_FACT
from .notebook import NOTEBOOK
from .recall import RECALL
from .threads import GET_MESSAGES, LIST_THREADS
from .working_memory import GET_WORKING_MEMORY, UPDATE_WORKING_MEMORY

__all__ = ["CATALOG", "offered", "table"]

CATALOG: tuple[ToolDef[Any], ...] = (
    UPDATE_WORKING_MEMORY,
    GET_WORKING_MEMORY,
    RECALL,
    REMEMBER_FACT,
    GET_FACTS,
    FORGET_FACT,
    NOTEBOOK,
    LIST_THREADS,
    GET_MESSAGES,
)


def offered(interface: Interface) -> tuple[ToolDef[Any], ...]:
    """The catalog's tools ``interface`` binds, in catalog order."""
    return tuple(t for t in CATALOG if interface in t.offered)


_COLUMNS: tuple[tuple[Interface, str], ...] = (
    ("agent", "AgentChat, proxy"),
    ("mcp", "MCP"),
    ("openai-agents", "Agents SDK"),
)


def table(tools: Iterable[ToolDef[Any]] = CATALOG) -> str:
    """A Markdown table of ``tools``: how to call each, what it answers, who offers it and why not the others."""
    head = ["Tool", 'Answers `{"ok": true, …}` with', *(label for _, label in _COLUMNS), "Why not everywhere"]
    rows = [head, ["---"] * len(head)]
    for t in tools:
        call = signature(t.name, t.parameters)
        fields = ", ".join(f"`{f}`" for f in t.result)
        marks = ["yes" if interface in t.offered else "—" for interface, _ in _COLUMNS]
        rows.append([f"`{call}`", fields, *marks, t.why])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)
