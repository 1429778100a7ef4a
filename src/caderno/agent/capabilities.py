"""What an ``AgentChat`` can do on its memory, decided once, when it is made.

``wire`` looks at the memory once and chooses the parts every turn then
runs the same way:

- a full ``Memory``: the context providers its store handles (history and
  its summaries, working memory, facts, learned macros, automatic recall,
  the notebook), the memory tools of those features, approvals that can
  remember a prefix, the turn lease, one read batch and one commit per turn
  (``StoredTurns``), and consolidation after it;
- any object with the four methods of ``caderno.AgentMemory``: the history
  and the working memory (plus the notebook, when one is given), the
  ``update_working_memory`` tool, and ``PortTurns``. Recall, facts,
  summaries, consolidation, schedules and macros are off (one log line).

A feature the store lacks is switched off here, not checked during a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError
from ..memory.adapters.agent_memory import bind_agent_memory
from ..memory.adapters.notebook_files import Notebook
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.notebook import StoredNotebook
from ..stores import ops
from ..tools.base import ToolDef
from ..tools.catalog import offered
from ..tools.facts import REMEMBER_FACT
from ..tools.notebook import NOTEBOOK
from ..tools.recall import RECALL
from ..tools.working_memory import UPDATE_WORKING_MEMORY
from .approval import Approver
from .context import (
    ContextProvider,
    Facts,
    History,
    Instructions,
    Macros,
    NotebookSnapshot,
    PortHistory,
    PortWorkingMemory,
    Recall,
    Summaries,
    WorkingMemoryBlock,
)
from .function_tools import Tool
from .settings import ChatSettings, RecallSettings
from .task_tools import SCHEDULE
from .tool_calls import Approvals, MacroHints, ToolRunner
from .turn_memory import PortTurns, StoredTurns, TurnMemory

__all__ = ["Features", "Wiring", "memory_tools", "wire"]

log = logging.getLogger("caderno.agent")

NotebookOption = Notebook | Callable[[str], Notebook | StoredNotebook] | bool | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Features:
    """The features a chat was asked for (``AgentChat``'s arguments of the same names)."""

    instructions: str
    notebook: NotebookOption = None
    recall: RecallSettings | bool | None = None
    recall_tool: bool = True
    consolidate: bool = True
    schedule_tool: bool = False
    macros: bool = False
    approve: Approver | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Wiring:
    """The parts a chat's turns run on."""

    providers: tuple[ContextProvider[Any], ...]
    """Build each turn's context, in this order (``caderno.agent.context``)."""
    turns: TurnMemory
    """Holds the thread, runs the providers' reads, commits the turn."""
    runner: ToolRunner
    """Runs the model's tool calls."""


def memory_tools(*, recall: bool, facts: bool, notebook: bool, schedule: bool) -> dict[str, ToolDef[Any]]:
    """The memory tools a chat offers, by name, in the catalog's order: each one whose feature is on."""
    on = {
        UPDATE_WORKING_MEMORY.name: True,
        RECALL.name: recall,
        REMEMBER_FACT.name: facts,
        NOTEBOOK.name: notebook,
        SCHEDULE.name: schedule,
    }
    # A tool the catalog adds for AgentChat needs its switch here.
    return {t.name: t for t in (*offered("agent"), SCHEDULE) if on[t.name]}


def wire(memory: Memory | AgentMemory, tools: Mapping[str, Tool], asked: Features, settings: ChatSettings) -> Wiring:
    """The parts for ``memory``: a full ``Memory``'s, or the four-method port's.

    Raises:
        UsageError: ``notebook=True`` (the database notebook) without a ``Memory``.
    """
    if isinstance(memory, Memory):
        return _on_memory(memory, tools, asked, settings)
    return _on_port(memory, tools, asked, settings)


def _on_memory(memory: Memory, tools: Mapping[str, Tool], asked: Features, settings: ChatSettings) -> Wiring:
    state = memory.supports(*ops.AGENT_STATE)
    facts = settings.facts if memory.supports(*ops.FACTS) else 0
    can_recall = memory.supports(*ops.RECALL)
    recall = (RecallSettings() if asked.recall is True else (asked.recall or None)) if can_recall else None
    macros = asked.macros and state
    notebook = memory.notebook if asked.notebook is True else (asked.notebook or None)
    providers: list[ContextProvider[Any]] = [Instructions(asked.instructions)]
    if memory.supports(ops.ReadSummaries):
        providers.append(Summaries())
    providers += [History(settings.history_limit), WorkingMemoryBlock(memory.working_memory)]
    if facts and memory.supports(ops.ReadFacts):
        providers.append(Facts(memory.facts, facts))
    if macros and memory.supports(ops.ReadMacros):
        providers.append(Macros())
    if recall is not None:
        providers.append(Recall(memory, recall))
    if notebook is not None:
        providers.append(NotebookSnapshot(notebook, in_batch=True))
    offer = memory_tools(
        recall=asked.recall_tool and can_recall,
        facts=bool(facts),
        notebook=notebook is not None,
        schedule=asked.schedule_tool and state,
    )
    runner = ToolRunner(
        memory=memory,
        memory_tools=offer,
        tools=tools,
        approvals=Approvals(asked.approve, memory.prefixes if state else None),
        macros=MacroHints(memory.macros) if macros else None,
        clock=settings.clock,
        timezone=settings.timezone,
    )
    turns = StoredTurns(
        memory,
        leases=memory.supports(*ops.TURNS),
        consolidate=asked.consolidate and memory.supports(*ops.CONSOLIDATION),
    )
    return Wiring(providers=tuple(providers), turns=turns, runner=runner)


def _on_port(memory: AgentMemory, tools: Mapping[str, Tool], asked: Features, settings: ChatSettings) -> Wiring:
    log.info(
        "%s has only the four AgentMemory methods: recall, facts, summaries and consolidation are off",
        type(memory).__name__,
    )
    if asked.notebook is True:
        raise UsageError("notebook=True is the database notebook of a Memory; pass a Notebook here")
    # The four methods as this chat calls them: a foreign adapter's forms are read once, here.
    port = bind_agent_memory(memory)
    notebook = asked.notebook or None
    providers: list[ContextProvider[Any]] = [
        Instructions(asked.instructions),
        PortHistory(port, settings.history_limit),
        PortWorkingMemory(port),
    ]
    if notebook is not None:
        providers.append(NotebookSnapshot(notebook, in_batch=False))
    runner = ToolRunner(
        memory=port,
        memory_tools=memory_tools(recall=False, facts=False, notebook=notebook is not None, schedule=False),
        tools=tools,
        approvals=Approvals(asked.approve, None),
        macros=None,
        clock=settings.clock,
        timezone=settings.timezone,
    )
    return Wiring(providers=tuple(providers), turns=PortTurns(port), runner=runner)
