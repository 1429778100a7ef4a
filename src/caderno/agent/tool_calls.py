"""A turn's tool calls: caderno's memory tools, the chat's own tools, approvals and learned macros.

``ToolRunner`` runs one call the model made and returns what the model
reads back (``ToolCallRecord``); a failing tool never ends the turn, its
error becomes the text the model sees. What the memory tools write is held
in the turn (``Held.turn``) and stored with it, in its one commit.

What a runner can do is chosen when the chat is made
(``caderno.agent.capabilities``): the memory tools its memory handles,
prefixes remembered for approvals only where the store keeps them, macro
suggestions only when asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.errors import CadernoError, InvalidToolArguments
from ..core.messages import ToolCall, ToolSpec
from ..core.records import Macro, MacroKey
from ..memory.engines import macros as macro_rules
from ..memory.engines.notebook_rules import NotebookPort
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.state import Macros as MacrosPart
from ..memory.parts.state import Prefixes
from ..stores import ops
from ..tools.base import Scope, ToolDef, Turn
from .approval import Approval, ApprovalRequest, Approver, command_of, decide, default_prefix
from .function_tools import Tool

__all__ = ["Approvals", "Held", "MacroHints", "Suggestion", "ToolCallRecord", "ToolRunner"]

log = logging.getLogger("caderno.agent")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRecord:
    """One tool call made during a turn."""

    name: str
    """Tool name as the model called it."""
    args: Any
    """Arguments as the model sent them."""
    result: Any
    """What the tool returned (or the error text the model saw)."""
    error: str | None = None
    """The error text when the call failed, else ``None``."""
    hint: str | None = None
    """A learned macro's suggestion shown to the model after this call (``AgentChat(macros=True)``)."""


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The macro suggested after the last call: the call that would take it up."""

    key: MacroKey
    tool: str
    args: Any


@dataclass(kw_only=True, slots=True)
class Held:
    """What a turn's tools decided, held until the turn commits."""

    turn: Turn
    """The memory tools' transaction: patches, facts and tasks, written at commit."""
    resource_id: str
    thread_id: str
    trusted: bool = False
    """Tools that need approval run without asking (a trusted scheduled task)."""
    notebook: NotebookPort | None = None
    """The resource's notebook, for the ``memory`` tool."""
    macros: dict[MacroKey, Macro] = field(default_factory=dict)
    """The resource's macros, as the turn loaded them."""
    calls: list[macro_rules.ObservedCall] = field(default_factory=list)
    """The turn's calls so far, for the macros to learn from."""
    suggested: Suggestion | None = None
    used: list[MacroKey] = field(default_factory=list)
    """Suggestions the model took."""


class Approvals:
    """Asks before a tool made with ``needs_approval=True`` runs (see ``caderno.agent.approval``).

    ``prefixes``: where command prefixes approved for good are kept (``None``: nowhere; each call asks).
    """

    def __init__(self, approve: Approver | None, prefixes: Prefixes | None) -> None:
        self.approve = approve
        self.prefixes = prefixes

    async def refusal(self, tool: Tool, args: Any, held: Held) -> str | None:
        """``None`` when the tool may run; else the error the model reads."""
        if held.trusted:
            return None
        command = command_of(args)
        if self.prefixes is not None and await self.prefixes.is_allowed(resource_id=held.resource_id, command=command):
            return None
        if self.approve is None:
            return f"Error: {tool.name} needs the user's approval and no one can give it here; it was not run."
        request = ApprovalRequest(
            resource_id=held.resource_id, thread_id=held.thread_id, tool=tool.name, arguments=args, command=command
        )
        answer: Approval = await decide(self.approve, request)
        if answer.decision == "no":
            return f"Error: the user did not approve {tool.name}({command!r}); it was not run."
        if answer.decision == "always" and self.prefixes is not None:
            prefix = answer.prefix or default_prefix(command)
            if prefix:
                try:
                    await self.prefixes.allow_always(resource_id=held.resource_id, prefix=prefix)
                except CadernoError as exc:  # a prefix with operators: run this once, remember nothing
                    log.info("approval prefix %r not stored: %s", prefix, exc)
        return None


class MacroHints:
    """Learns tool macros from each turn's calls and shows the best suggestion after a call."""

    def __init__(self, part: MacrosPart) -> None:
        self.part = part

    def after(self, record: ToolCallRecord, held: Held) -> ToolCallRecord:
        """Learn from the call and attach the best suggestion that follows it."""
        ok = record.error is None
        if held.calls and held.suggested is not None:
            took = (record.name, macro_rules.canonical_json(record.args))
            if took == (held.suggested.tool, macro_rules.canonical_json(held.suggested.args)):
                held.used.append(held.suggested.key)
        held.calls.append((record.name, record.args, ok))
        held.suggested = None
        if not ok:
            return record
        best = macro_rules.suggest_next(held.macros, record.name, record.args)
        if not best:
            return record
        macro = best[0]
        held.suggested = Suggestion(macro.key, macro.next_tool, macro.next_args)
        hint = (
            f"Hint: after {record.name} like this, {macro.next_tool} usually follows, with arguments "
            f"{macro_rules.canonical_json(macro.next_args)} (learned, confidence {macro.confidence:.1f}). "
            "Use it only if it fits what the user asked."
        )
        return ToolCallRecord(name=record.name, args=record.args, result=record.result, error=record.error, hint=hint)

    def learn(self, held: Held) -> list[ops.Op[Any]]:
        """The write that learns from the turn's calls (none when it made none)."""
        return [self.part.learn_op(held.resource_id, held.calls, held.used)] if held.calls else []


class ToolRunner:
    """Runs a turn's tool calls: the memory tools on ``memory``, then the chat's own ``tools``.

    Args:
        memory: what the memory tools act on (a ``Memory``, or the bound four-method port).
        memory_tools: the memory tools this chat offers, by name.
        tools: the chat's own tools, by name.
        approvals: asked before a tool that needs approval.
        macros: the learned macros' suggestions (``None``: off).
        clock: the moment of a call.
        timezone: the user's zone, for schedules.
    """

    def __init__(
        self,
        *,
        memory: Memory | AgentMemory,
        memory_tools: Mapping[str, ToolDef[Any]],
        tools: Mapping[str, Tool],
        approvals: Approvals,
        macros: MacroHints | None,
        clock: Callable[[], datetime],
        timezone: str,
    ) -> None:
        self.memory = memory
        self.memory_tools = dict(memory_tools)
        self.tools = dict(tools)
        self.approvals = approvals
        self.macros = macros
        self.clock = clock
        self.timezone = timezone

    @property
    def specs(self) -> list[ToolSpec]:
        """What the model is offered: the memory tools, then the chat's own."""
        return [*(t.spec for t in self.memory_tools.values()), *(t.spec for t in self.tools.values())]

    async def call(self, call: ToolCall, held: Held, offered: list[ToolSpec]) -> ToolCallRecord:
        """Run one call (errors become text for the model, never exceptions), then the macros' hint."""
        record = await self._run(call, held, offered)
        return record if self.macros is None else self.macros.after(record, held)

    def writes(self, held: Held) -> list[ops.Op[Any]]:
        """What the turn's commit stores beside its messages and patches: the tools' held writes, the macros."""
        return [*held.turn.writes, *(self.macros.learn(held) if self.macros is not None else ())]

    async def _run(self, call: ToolCall, held: Held, offered: list[ToolSpec]) -> ToolCallRecord:
        args = call.arguments
        memory_tool = self.memory_tools.get(call.name)
        if memory_tool is not None:
            notebook = held.notebook
            scope = Scope(
                memory=self.memory,
                resource_id=held.resource_id,
                thread_id=held.thread_id,
                notebook=None if notebook is None else (lambda: notebook),
                turn=held.turn,
                now=self.clock(),
                timezone=self.timezone,
            )
            outcome = await memory_tool.call(scope, args)
            if outcome.ok:
                return ToolCallRecord(name=call.name, args=args, result=outcome.payload)
            return ToolCallRecord(name=call.name, args=args, result=None, error=outcome.text)
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(spec.name for spec in offered))
            error = f"Error: unknown tool {call.name!r}. Available tools: {known}."
            return ToolCallRecord(name=call.name, args=args, result=None, error=error)
        if tool.needs_approval:
            refusal = await self.approvals.refusal(tool, args, held)
            if refusal is not None:
                return ToolCallRecord(name=call.name, args=args, result=None, error=refusal)
        try:
            result = await tool.run(args)
        except InvalidToolArguments as exc:
            return ToolCallRecord(name=call.name, args=args, result=None, error=f"Error: {exc}")
        except Exception as exc:  # a tool's own bug must not end the turn
            log.info("tool %s raised", call.name, exc_info=True)
            error = f"Error: tool {call.name} raised {type(exc).__name__}: {exc}"
            return ToolCallRecord(name=call.name, args=args, result=None, error=error)
        return ToolCallRecord(name=call.name, args=args, result=result)
