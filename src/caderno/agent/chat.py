"""AgentChat: one turn = load memory, prompt, model <-> tools, persist.

``AgentChat`` keeps no per-conversation state in the database sense, so one
instance serves any number of concurrent conversations. Per turn it:

1. reads, in **one batch** (one snapshot, one round trip), the thread's
   recent history, its summaries, the resource's working memory and facts;
2. adds the notebook snapshot frozen for this conversation and, when
   enabled, what recall finds in earlier conversations;
3. builds the prompt with ``caderno.memory.engines.context.build_prompt``: the blocks in
   priority order, then the newest history that fits the token budget, then
   the turn (rebuilt before every model call, as the turn grows);
4. runs the model <-> tool loop, at most ``max_steps`` model calls; working
   memory patches and facts are validated at once (the model hears about a
   bad one) and held;
5. commits the turn in **one write batch**: its messages, its patches and
   its facts, in one transaction; then schedules the thread's consolidation
   in the background.

A turn that fails — model error, ``max_steps``, cancellation, a process
killed mid-commit — leaves all of it or none of it. Notebook writes are the
exception: they are file writes, made at once (off the event loop), like a
note taken on paper; see ``_notebook_call``.

``AgentChat`` also runs on any object with just the four methods of
``caderno.AgentMemory`` — sync or async, with or without ``resource_id``,
an append that returns nothing (``caderno.memory.adapters.agent_memory`` says how
each is called); recall, facts, summaries and consolidation then switch off
(one log line), the history is shown in the order the object returns it,
and patches are applied after the append.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..core.clock import utcnow
from ..core.errors import CadernoError, InvalidToolArguments, ModelError, UsageError
from ..core.messages import Message, ToolCall, WorkingMemory
from ..core.records import Macro, MacroKey
from ..core.validate import check_message, storable_reply
from ..memory.adapters.agent_memory import bind_agent_memory
from ..memory.adapters.notebook_files import Notebook
from ..memory.engines import macros as macro_rules
from ..memory.engines.context import TokenCounter, build_prompt, estimate_tokens
from ..memory.engines.notebook_rules import NotebookPort
from ..memory.engines.recall import RecallPlan
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.consolidation import summary_span
from ..memory.parts.notebook import StoredNotebook
from ..memory.parts.turns import TURN_WAIT, TurnContext, TurnLease
from ..stores import ops
from ..tools.base import Scope, ToolDef, Turn, as_text
from ..tools.catalog import offered
from ..tools.facts import REMEMBER_FACT
from ..tools.notebook import NOTEBOOK
from ..tools.recall import RECALL, thread_titles
from ..tools.working_memory import UPDATE_WORKING_MEMORY, WM_SOURCE
from .approval import Approval, ApprovalRequest, Approver, command_of, decide, default_prefix
from .function_tools import Tool, ToolSpec, collect_tools
from .idempotency import IDEMPOTENCY_WINDOW, RETRY_WINDOW, check_key, check_same, find_repeat, find_turn, turn_ids
from .models import Delta, Model, call_model, check_settings, stream_reply, turn_deadline
from .task_tools import SCHEDULE

__all__ = ["DEFAULT_INSTRUCTIONS", "AgentChat", "ChatResult", "DeltaSink", "RecallSettings", "ToolCallRecord"]

log = logging.getLogger("caderno.agent")

#: Resources whose file notebook this process keeps open, with its conversations' snapshots
#: (least recently used go first). A database notebook keeps nothing here.
NOTEBOOK_CACHE = 1024
#: Default deadline of a whole turn (every model call and tool call of one
#: ``ask``), in seconds. A healthy upstream answers a turn of a few steps in
#: seconds to tens of seconds and a slow local model in about a minute; two
#: minutes covers both, while a hung upstream holds the thread's lock for two
#: minutes instead of 60 s x ``max_steps`` (eight minutes by default).
TURN_TIMEOUT = 120.0

DEFAULT_INSTRUCTIONS = (
    "You are a helpful assistant with durable memory. The working memory below is what you know about "
    "this user across conversations; keep it current with update_working_memory when they tell you "
    "something lasting (names, income, goals, preferences)."
)

RECALL_HEADER = "Remembered from earlier conversations"

#: Receives a streamed turn's pieces as the model produces them (``ask(on_delta=...)``).
DeltaSink = Callable[[Delta], Awaitable[None] | None]


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


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatResult:
    """What one ``ask`` produced."""

    reply: Message
    """The turn's last assistant message, as stored: the answer, or the calls in ``pending``."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Every tool call of the turn, in order."""
    messages: list[Message] = field(default_factory=list)
    """The whole turn as stored: user message(s), tool calls, results, reply."""
    working_memory: WorkingMemory | None = None
    """Working memory after the turn's patches (``None`` if never set)."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens per prompt block in the last model call (see ``caderno.memory.engines.context.Prompt.usage``).

    The turn's token usage (model calls, prompt and completion tokens, summed
    over the turn) is stored in the reply's ``metadata["usage"]``."""
    cut: list[dict[str, Any]] = field(default_factory=list)
    """Blocks dropped or shortened to fit the budget in the last model call."""
    replayed: bool = False
    """The turn was stored by an earlier ``ask`` with the same idempotency key (or repeated by a
    retry, see ``ask(retry=...)``) and returned as stored (no model call; ``tool_calls`` and
    ``usage`` are then empty)."""
    pending: list[ToolCall] = field(default_factory=list)
    """Calls of the caller's own tools (``ask(client_tools=...)``) the turn stopped at: the caller
    runs them and continues the turn with their results (``Message.tool``). Empty when the reply
    is the answer."""


class AgentChat:
    """The agent loop over a model, a memory and tools.

    Args:
        model: anything with ``async complete(messages, tools) -> Message``.
        memory: where history and working memory live (default: in-process):
            a ``Memory``, or any object with the four methods of
            ``caderno.AgentMemory``, sync or async, with or without
            ``resource_id`` (``caderno.memory.adapters.agent_memory``;
            ``caderno.InMemoryAgentMemory`` is one over two dicts).
        tools: functions, ``Tool`` objects, or instances with tool methods.
        instructions: the system prompt (``DEFAULT_INSTRUCTIONS`` when None).
        history_limit: how many stored messages of the thread to show (>= 2).
        max_steps: most model calls in one turn.
        notebook: ``True`` for the database notebook of each resource (a
            ``Memory`` only: ``memory.notebook(resource_id)``, shared by
            every process), a file ``Notebook`` for one resource, or a
            factory ``resource_id -> Notebook | StoredNotebook`` (e.g.
            ``Notebook.for_resource``). Its snapshot is frozen per
            conversation at the thread's first turn and opens every prompt
            of that conversation: stored with the thread for a database
            notebook (any process resumes it), kept in this process for a
            file one. The ``memory`` tool edits it. One ``Notebook``
            instance used for two resources is refused.
        recall: automatic recall before each turn (``True`` for the default
            ``RecallSettings``): hits from earlier conversations that are not
            in the history window are shown in a system block.
        recall_tool: offer the model the ``recall(query)`` tool.
        max_context_tokens: the model's context size; the prompt is fitted
            into it minus ``reply_reserve`` (``None``: no budget).
        reply_reserve: tokens kept free for the model's answer.
        token_counter: counts tokens (default: ``caderno.memory.engines.context.estimate_tokens``).
        facts: most known facts shown per turn (0: none, and no
            ``remember_fact`` tool).
        consolidate: after each turn, summarise the thread in the background
            when it has grown past the memory's threshold.
        schedule_tool: offer the ``schedule`` tool (create / list / pause /
            resume / delete scheduled tasks; see ``caderno.agent.scheduler``).
        timezone: the user's IANA zone, for schedules ("todo dia às 9h").
        clock: the current time (a scheduled "in 2 hours" counts from it).
        macros: learn tool macros from each turn's calls and show the best
            suggestion to the model after a call that usually leads to another.
        approve: the callback asked before a tool made with
            ``needs_approval=True`` runs (see ``caderno.agent.approval``).
        turn_timeout: seconds one whole turn (all its model and tool calls)
            may take before it fails with ``ModelError`` and stores nothing
            (default ``TURN_TIMEOUT``; ``None``: no deadline). The commit
            itself is not cut short.
        turn_wait: seconds a turn waits while another turn holds its thread
            (in this process or another one on the same database) before it
            is refused with ``ThreadBusy`` (default ``TURN_WAIT``).
    """

    def __init__(
        self,
        *,
        model: Model,
        memory: Memory | AgentMemory | None = None,
        tools: Sequence[Any] = (),
        instructions: str | None = None,
        history_limit: int = 40,
        max_steps: int = 8,
        notebook: Notebook | Callable[[str], Notebook | StoredNotebook] | bool | None = None,
        recall: RecallSettings | bool | None = None,
        recall_tool: bool = True,
        max_context_tokens: int | None = None,
        reply_reserve: int = 1024,
        token_counter: TokenCounter = estimate_tokens,
        facts: int = 8,
        consolidate: bool = True,
        schedule_tool: bool = False,
        timezone: str = "UTC",
        clock: Callable[[], datetime] = utcnow,
        macros: bool = False,
        approve: Approver | None = None,
        turn_timeout: float | None = TURN_TIMEOUT,
        turn_wait: float = TURN_WAIT,
    ) -> None:
        if history_limit < 2:
            raise UsageError("history_limit must be at least 2 (one exchange)")
        if max_steps < 1:
            raise UsageError("max_steps must be at least 1")
        if turn_timeout is not None and (
            not isinstance(turn_timeout, int | float) or isinstance(turn_timeout, bool) or not turn_timeout > 0
        ):
            raise UsageError(f"turn_timeout must be a positive number of seconds or None, not {turn_timeout!r}")
        self.turn_timeout = turn_timeout
        if memory is None:
            from ..stores.memory import InMemoryStore

            memory = Memory(InMemoryStore())
        if not isinstance(memory, Memory | AgentMemory):
            raise UsageError(
                "memory must be a caderno.Memory or implement caderno.AgentMemory "
                "(get_messages, append_messages, get_working_memory, update_working_memory)"
            )
        self.model = model
        self.memory = memory
        self.full: Memory | None = memory if isinstance(memory, Memory) else None
        # The four methods as this chat calls them: a foreign adapter's forms are read once, here.
        self.port: Memory | AgentMemory = memory if self.full is not None else bind_agent_memory(memory)
        if self.full is None:
            log.info(
                "%s has only the four AgentMemory methods: recall, facts, summaries and consolidation are off",
                type(memory).__name__,
            )
            recall, recall_tool, facts, consolidate = None, False, 0, False
            schedule_tool, macros = False, False
        else:
            if not self.full.supports(*ops.AGENT_STATE):
                schedule_tool, macros = False, False
            if not self.full.supports(*ops.FACTS):
                facts = 0
            if not self.full.supports(*ops.RECALL):
                recall, recall_tool = None, False
        self.tools: dict[str, Tool] = {t.name: t for t in collect_tools(tools)}
        self.max_context_tokens = max_context_tokens
        self.reply_reserve = reply_reserve
        self.token_counter = token_counter
        self.facts = facts
        self.consolidate = consolidate
        self.recall = RecallSettings() if recall is True else (recall or None)
        self.recall_tool = recall_tool
        from ..memory.engines.task_rules import _check_zone

        self.schedule_tool = schedule_tool
        self.timezone = _check_zone(timezone)
        self.clock = clock
        self.macros = macros
        self.approve = approve
        for reserved in (*offered("agent"), SCHEDULE):
            if reserved.name in self.tools:
                raise UsageError(f"the tool name {reserved.name} is reserved")
        if notebook is True:
            if self.full is None:
                raise UsageError("notebook=True is the database notebook of a Memory; pass a Notebook here")
            notebook = self.full.notebook
        self.notebook = notebook or None
        self._notebooks: OrderedDict[str, NotebookPort] = OrderedDict()
        self._notebook_owner: str | None = None
        self.turn_wait = turn_wait
        self.instructions = DEFAULT_INSTRUCTIONS if instructions is None else instructions
        self.history_limit = history_limit
        self.max_steps = max_steps
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @property
    def builtin_tools(self) -> dict[str, ToolDef[Any]]:
        """The memory tools this chat offers (``caderno.tools``), by name: each one when its feature is on."""
        on = {
            UPDATE_WORKING_MEMORY.name: True,
            RECALL.name: self.recall_tool,
            REMEMBER_FACT.name: bool(self.facts),
            NOTEBOOK.name: self.notebook is not None,
            SCHEDULE.name: self.schedule_tool,
        }
        # In the catalog's order; a tool the catalog adds for AgentChat needs its switch here.
        return {t.name: t for t in (*offered("agent"), SCHEDULE) if on[t.name]}

    @property
    def tool_specs(self) -> list[ToolSpec]:
        return [*(t.spec for t in self.builtin_tools.values()), *(t.spec for t in self.tools.values())]

    def notebook_for(self, resource_id: str) -> NotebookPort | None:
        """The resource's notebook (``None`` when there is none).

        Raises:
            UsageError: a single ``Notebook`` instance asked for a second resource.
        """
        if self.notebook is None:
            return None
        if isinstance(self.notebook, Notebook):
            if self._notebook_owner is None:
                self._notebook_owner = resource_id
            elif self._notebook_owner != resource_id:
                raise UsageError(
                    f"one Notebook instance serves resource {self._notebook_owner!r}; it cannot also serve "
                    f"{resource_id!r} (notes would leak between them). Pass a factory such as "
                    "lambda r: Notebook.for_resource(home, r)"
                )
        port = self._notebooks.get(resource_id)
        if port is None:
            book = self.notebook if isinstance(self.notebook, Notebook) else self.notebook(resource_id)
            port = book.port()
            if isinstance(book, StoredNotebook):
                return port  # holds nothing: every call reads the database
            self._notebooks[resource_id] = port
            while len(self._notebooks) > NOTEBOOK_CACHE:
                self._notebooks.popitem(last=False)
        self._notebooks.move_to_end(resource_id)
        return port

    async def notebook_snapshot(self, resource_id: str, thread_id: str) -> list[str]:
        """The notebook blocks of a conversation, frozen at its first turn (see ``notebook``)."""
        notebook = self.notebook_for(resource_id)
        if notebook is None:
            return []
        # A file it cannot read (a planted link, a FIFO, a huge file) hides only itself.
        return await notebook.blocks(thread_id)

    async def ask(
        self,
        *,
        messages: Sequence[Message] | str,
        resource_id: str = "default",
        thread_id: str = "default",
        trusted: bool = False,
        instructions: str | None = None,
        idempotency_key: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
        on_delta: DeltaSink | None = None,
        retry: bool = False,
        retry_after: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """Run one turn and store it.

        ``trusted``: tools that need approval run without asking (a trusted
        scheduled task).

        ``instructions``: this turn's system prompt, in place of the chat's
        own (the memory proxy passes the client's system messages here, so
        one ``AgentChat`` serves every prompt).

        ``idempotency_key``: a retry of a turn with the same key on the same
        thread returns the stored turn (``ChatResult.replayed``) and calls
        no model; with other messages it raises ``KeyReused`` (see
        ``caderno.agent.idempotency`` for how long a key holds). The turn's
        messages get ids derived from the key, so they may not carry their own.

        ``client_tools``: tools the caller runs itself (the memory proxy's
        client's tools), offered to the model beside this chat's. When the
        model calls one, the turn stops there: it is stored up to that step
        (the caller's messages, the model's calls, the results of this chat's
        own tools called in the same step) and ``ChatResult.pending`` holds
        the calls to run. The caller continues the turn with another ``ask``
        whose messages are their results (``Message.tool``, each answering a
        pending call; every pending call answered): the model then sees the
        step again with the results. A turn the caller never continues stays
        stored up to its last complete step; the prompt leaves out a step
        whose calls never got their results. A name that is one of this
        chat's tools is refused (``UsageError``).

        ``on_delta``: stream the turn: the model is asked to stream (models
        with a ``stream`` method, see ``caderno.agent.models.stream_reply``)
        and each piece of text, and each piece of a call of a
        ``client_tools`` tool, is handed to ``on_delta`` as it arrives (a
        call's ``call_index`` counted among the client's calls of that
        reply). Calls of this chat's own tools are run between model steps
        and not handed out. The turn is still stored once, at the end.

        ``settings``: model settings for every model call of this turn
        (``caderno.agent.models.SETTINGS``: temperature, max_tokens,
        response_format…), checked first (``UsageError``); a model takes them
        as the keyword ``settings``.

        ``retry``: the caller says this may repeat a request already
        answered (an HTTP client's automatic retry that sent no idempotency
        key): when the thread's newest turn began with the same messages,
        it is returned as stored (``replayed``) instead of being run again.
        Tool results for calls the thread already holds results of are
        always such a repeat. ``retry_after``: the text of the reply the
        caller saw before these messages, when it resends its conversation:
        the repeated turn must follow that reply (see
        ``caderno.agent.idempotency.find_repeat``).

        A turn that passes ``turn_timeout`` raises ``ModelError`` and stores
        nothing. A caller cancelled while the turn is committing does not
        undo it: the commit is one transaction, all or nothing.

        Two asks on the same thread run one after the other, in this
        process (a lock) and across processes on one database (a lease on
        the thread, renewed while the turn runs, with an expiry so that a
        killed process releases it; no database lock is held across a
        model call). A turn that waits past ``turn_wait`` is refused with
        ``ThreadBusy``; one whose lease was taken over after it expired
        stores nothing and raises ``ThreadBusy``.

        Raises:
            ModelError: the model failed, returned an empty message or a tool
                call whose id or name cannot be stored, or the loop passed
                ``max_steps``; nothing is stored.
        """
        if isinstance(messages, str):
            messages = [Message.user(messages)]
        if not messages:
            raise UsageError("ask needs at least one new message")
        if idempotency_key is not None:
            check_key(idempotency_key)
            if any(m.id for m in messages):
                raise UsageError("with an idempotency_key the turn's ids come from the key: send messages without ids")
        theirs = self._client_tools(client_tools)
        settings = check_settings(settings)
        results = any(m.role == "tool" for m in messages)
        key = (resource_id, thread_id)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock, self._hold(resource_id, thread_id) as lease:
                if idempotency_key is not None:
                    stored = await find_turn(self.port, resource_id, thread_id, idempotency_key)
                    if stored is not None:
                        return self._replayed(check_same(stored, list(messages), idempotency_key))
                elif retry or results:
                    window = await self.port.get_messages(
                        resource_id=resource_id, thread_id=thread_id, limit=IDEMPOTENCY_WINDOW
                    )
                    since = self.clock() - timedelta(seconds=RETRY_WINDOW)
                    repeated = find_repeat(window, list(messages), since, retry_after)
                    if repeated is not None:
                        return self._replayed(repeated)
                turn = _Turn(
                    new=list(messages),
                    resource_id=resource_id,
                    thread_id=thread_id,
                    trusted=trusted,
                    instructions=instructions,
                    key=idempotency_key,
                    lease=lease,
                    client_tools=theirs,
                    on_delta=on_delta,
                    settings=settings,
                )
                return await self._turn(turn)
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def _hold(self, resource_id: str, thread_id: str) -> AbstractAsyncContextManager[TurnLease | None]:
        """The thread's turn lease across processes (a ``Memory`` whose store keeps leases); else nothing."""
        if self.full is not None and self.full.supports(*ops.TURNS):
            return self.full.turns.hold(resource_id=resource_id, thread_id=thread_id, wait=self.turn_wait)
        return contextlib.nullcontext(None)

    # -- one turn ----------------------------------------------------------------

    async def _load(self, resource_id: str, thread_id: str, extra: Sequence[Any] = ()) -> TurnContext:
        """The turn's reads: one batch on a ``Memory`` (with ``extra``, the recall's legs), two calls on a
        four-method memory."""
        if self.full is not None:
            return await self.full.turns.load(
                resource_id=resource_id,
                thread_id=thread_id,
                history_limit=self.history_limit,
                facts=bool(self.facts),
                macros=self.macros,
                extra=extra,
            )
        history = await self.port.get_messages(resource_id=resource_id, thread_id=thread_id, limit=self.history_limit)
        data = await self.port.get_working_memory(resource_id=resource_id)
        state = None if data is None else WorkingMemory(resource_id=resource_id, data=data, version=0)
        return TurnContext(history=history, summaries=[], working_memory=state, facts=[])

    def _replayed(self, stored: list[Message]) -> ChatResult:
        """A turn stored by an earlier ``ask`` with the same idempotency key, as that ask returned it."""
        return ChatResult(reply=_last_reply(stored), messages=stored, replayed=True, pending=_pending(stored))

    def _client_tools(self, specs: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
        """The caller's tools by name; a name this chat's own tools use, or one given twice, is refused."""
        ours = {*self.builtin_tools, *self.tools, SCHEDULE.name}
        theirs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in ours:
                raise UsageError(
                    f"the tool name {spec.name!r} is one of caderno's own tools (which run on the server); rename yours"
                )
            if spec.name in theirs:
                raise UsageError(f"the tool name {spec.name!r} is declared twice")
            theirs[spec.name] = spec
        return theirs

    async def _turn(self, spec: _Turn) -> ChatResult:
        """Converse within the deadline, then commit (the commit is never cut short)."""
        try:
            # turn_deadline: a model call's retries give up before the turn's deadline cuts them.
            async with asyncio.timeout(self.turn_timeout):
                with turn_deadline(self.turn_timeout):
                    turn, records, held, state, prompt = await self._converse(spec)
        except TimeoutError:
            raise ModelError(
                f"the turn did not finish within turn_timeout={self.turn_timeout} seconds; nothing was stored"
            ) from None
        resource_id, thread_id = spec.resource_id, spec.thread_id
        if spec.key is not None:
            ids = turn_ids(resource_id, thread_id, spec.key, len(turn))
            turn = [m.with_(id=i) for m, i in zip(turn, ids, strict=True)]
        try:
            stored, final_state = await self._commit(resource_id, thread_id, turn, held, state, spec.lease)
        except UsageError:
            # Another process stored this key's turn while this one ran: return that one.
            again = await find_turn(self.port, resource_id, thread_id, spec.key) if spec.key else None
            if again is None or spec.key is None:
                raise
            return self._replayed(check_same(again, spec.new, spec.key))
        if self.consolidate and self.full is not None and self.full.supports(*ops.CONSOLIDATION):
            self.full.consolidation.schedule(resource_id=resource_id, thread_id=thread_id)
        return ChatResult(
            reply=_last_reply(stored),
            tool_calls=records,
            messages=stored,
            working_memory=final_state,
            usage=prompt.usage,
            cut=prompt.cut,
            pending=_pending(stored),
        )

    async def _converse(self, spec: _Turn) -> tuple[list[Message], list[ToolCallRecord], _Held, Any, Any]:
        """The model/tool loop of one turn: the turn's messages, nothing stored yet."""
        new, resource_id, thread_id, trusted = spec.new, spec.resource_id, spec.thread_id, spec.trusted
        plan = await self._recall_plan(new, resource_id, thread_id)
        notebook = self.notebook_for(resource_id)
        # A stored notebook's snapshot and the recall's legs ride in the turn's load: one batch.
        stored = notebook.snapshot_read(thread_id) if isinstance(notebook, StoredNotebook) else None
        extra = [*(plan.reads if plan is not None else ()), *([stored] if stored is not None else [])]
        ctx = await self._load(resource_id, thread_id, extra)
        legs = ctx.extra[: len(extra) - (stored is not None)]
        covered_to = max((span[1] for m, _ in ctx.summaries if (span := summary_span(m))), default=0)
        # Summarised turns show as their summary. A four-method adapter's messages may carry no
        # position (and it has no summaries): they are shown whole, in the order it returned them.
        history = [m for m in ctx.history if m.position is None or m.position > covered_to]
        # A turn continued with the caller's tool results: the step that waits for them leaves the
        # history and opens the turn's prompt (it is stored already; it is not stored again).
        waiting, new = _continued(history, new)
        if waiting:
            history = history[: len(history) - len(waiting)]
        state = ctx.working_memory
        query = "\n".join(m.content for m in new if m.role == "user" and m.content)
        blocks = self.blocks(state)
        if spec.instructions is not None:
            blocks["instructions"] = spec.instructions or None
        if isinstance(notebook, StoredNotebook):
            blocks["notebook"] = [b for b in (await notebook.freeze_from(thread_id, ctx.extra[-1])).values() if b]
        else:
            blocks["notebook"] = await self.notebook_snapshot(resource_id, thread_id)
        blocks["facts"] = await self._facts_block(ctx.facts, query)
        blocks["summary"] = _summary_block([m for m, merged in ctx.summaries if not merged])
        if self.recall is not None:
            remembered = await self._auto_recall(plan, legs, history, resource_id) if plan else None
            blocks["recalled"] = remembered.content if remembered else None
        turn: list[Message] = list(new)
        records: list[ToolCallRecord] = []
        held = _Held(
            turn=Turn(working_memory=state.data if state else None, version=state.version if state else 0),
            resource_id=resource_id,
            thread_id=thread_id,
            trusted=trusted,
            macros={m.key: m for m in ctx.macros},
        )
        builtin = self.builtin_tools
        specs = [*self.tool_specs, *spec.client_tools.values()]
        usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for _ in range(self.max_steps):
            prompt = build_prompt(
                blocks=blocks,
                history=history,
                turn=[*waiting, *turn],
                max_tokens=self.max_context_tokens,
                reply_reserve=self.reply_reserve,
                count=self.token_counter,
            )
            try:
                if spec.on_delta is None:
                    reply = await call_model(self.model, prompt.messages, specs, spec.settings)
                else:
                    reply = await _streamed(self.model, prompt.messages, specs, spec)
            except CadernoError:
                raise
            except Exception as exc:
                raise ModelError(f"the model failed: {type(exc).__name__}: {exc}") from exc
            if not isinstance(reply, Message) or reply.role != "assistant":
                raise ModelError(f"the model must return an assistant Message, got {reply!r:.200}")
            if not reply.tool_calls and not reply.content.strip():
                raise ModelError("the model returned an empty message (no text and no tool calls)")
            # Stored as the model sent it, made storable where it is not (its
            # tools still get, and refuse, what it sent): the model's output
            # never costs the turn.
            kept = storable_reply(reply)
            try:
                # What cannot be kept even as text (a tool call's id or name that is
                # empty, too long or holds a NUL) is the model's failure, never the caller's.
                check_message(kept)
            except UsageError as exc:
                raise ModelError(f"the model's reply cannot be stored ({exc}); nothing was stored") from None
            _add_usage(usage, kept, prompt.messages, self.token_counter)
            turn.append(kept)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                if call.name in spec.client_tools:
                    continue  # the caller's to run: the turn stops after this step
                record = await self._call(call, held, notebook, builtin, specs)
                record = self._after_call(record, held, records)
                records.append(record)
                content = record.error if record.error else as_text(record.result)
                if record.hint:
                    content += "\n\n" + record.hint
                # A tool's output is no one's fault either: kept cleaned and cut, like the reply.
                turn.append(storable_reply(Message.tool(content, tool_call_id=call.id, name=call.name)))
            if any(call.name in spec.client_tools for call in reply.tool_calls):
                break
        else:
            raise ModelError(
                f"the turn did not finish within max_steps={self.max_steps} model calls; nothing was stored"
            )
        # The turn's usage rides on its last assistant message (the answer, or the step that waits).
        last = max(i for i, m in enumerate(turn) if m.role == "assistant")
        turn[last] = turn[last].with_(metadata={**(turn[last].metadata or {}), "usage": usage})
        return turn, records, held, state, prompt

    async def _commit(
        self,
        resource_id: str,
        thread_id: str,
        turn: list[Message],
        held: _Held,
        state: WorkingMemory | None,
        lease: TurnLease | None,
    ) -> tuple[list[Message], WorkingMemory | None]:
        """Store the turn: one transaction on a ``Memory`` (messages, patches, facts)."""
        if self.full is not None:
            extra = list(held.turn.writes)
            if self.macros and held.calls:
                extra.append(self.full.macros.learn_op(resource_id, held.calls, held.used))
            stored, patched = await self.full.turns.commit(
                resource_id=resource_id,
                thread_id=thread_id,
                messages=turn,
                patches=[(p, WM_SOURCE) for p in held.turn.patches],
                extra=extra,
                lease=lease,
            )
            return stored, patched or state
        # A four-method memory has no transaction spanning calls: append first,
        # so a failed append stores nothing; a patch that fails afterwards is logged.
        # It stores the turn as the household design counts it (docs/architecture.md):
        # the caller's messages and the final answer; the tool steps stay in the turn.
        kept = _design_turn(turn)
        appended = await self.port.append_messages(
            resource_id=resource_id, thread_id=thread_id, messages=[turn[i] for i in kept]
        )
        stored = list(turn)
        for i, message in zip(kept, appended, strict=True):
            stored[i] = message
        for patch in held.turn.patches:
            try:
                await self.port.update_working_memory(resource_id=resource_id, patch=patch)
            except CadernoError as exc:
                log.warning("working-memory patch for %s not applied after the turn: %s", resource_id, exc)
        if held.turn.patches:
            data = await self.port.get_working_memory(resource_id=resource_id)
            state = None if data is None else WorkingMemory(resource_id=resource_id, data=data, version=0)
        return stored, state

    async def _facts_block(self, facts: list[Any], query: str) -> str | None:
        if not self.facts or not facts or self.full is None:
            return None
        facts = await self.full.facts.rank(facts, query, limit=self.facts)
        lines = [f"- {f.category}/{f.key}: {f.value}" for f in facts]
        return "KNOWN FACTS about this user (kept across conversations):\n" + "\n".join(lines)

    async def _call(
        self,
        call: ToolCall,
        held: _Held,
        notebook: NotebookPort | None,
        builtin: dict[str, ToolDef[Any]],
        specs: list[ToolSpec],
    ) -> ToolCallRecord:
        """Run one tool call; errors become text for the model, never exceptions."""
        args = call.arguments
        memory_tool = builtin.get(call.name)
        if memory_tool is not None:
            scope = Scope(
                memory=self.port,
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
            known = ", ".join(sorted(spec.name for spec in specs))
            error = f"Error: unknown tool {call.name!r}. Available tools: {known}."
            return ToolCallRecord(name=call.name, args=args, result=None, error=error)
        if tool.needs_approval:
            refusal = await self._approval(tool, args, held)
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

    async def _approval(self, tool: Tool, args: Any, held: _Held) -> str | None:
        """``None`` when the tool may run; else the error the model reads (see ``caderno.agent.approval``)."""
        if held.trusted:
            return None
        command = command_of(args)
        state = self.full is not None and self.full.supports(*ops.AGENT_STATE)
        if (
            state
            and self.full is not None
            and await self.full.prefixes.is_allowed(resource_id=held.resource_id, command=command)
        ):
            return None
        if self.approve is None:
            return f"Error: {tool.name} needs the user's approval and no one can give it here; it was not run."
        request = ApprovalRequest(
            resource_id=held.resource_id, thread_id=held.thread_id, tool=tool.name, arguments=args, command=command
        )
        answer: Approval = await decide(self.approve, request)
        if answer.decision == "no":
            return f"Error: the user did not approve {tool.name}({command!r}); it was not run."
        if answer.decision == "always" and state and self.full is not None:
            prefix = answer.prefix or default_prefix(command)
            if prefix:
                try:
                    await self.full.prefixes.allow_always(resource_id=held.resource_id, prefix=prefix)
                except CadernoError as exc:  # a prefix with operators: run this once, remember nothing
                    log.info("approval prefix %r not stored: %s", prefix, exc)
        return None

    def _after_call(self, record: ToolCallRecord, held: _Held, records: list[ToolCallRecord]) -> ToolCallRecord:
        """Learn from the call (macros) and attach the best suggestion that follows it."""
        if not self.macros:
            return record
        ok = record.error is None
        if held.calls and held.suggested is not None:
            key, next_tool, next_args = held.suggested
            if (record.name, macro_rules.canonical_json(record.args)) == (
                next_tool,
                macro_rules.canonical_json(next_args),
            ):
                held.used.append(key)
        held.calls.append((record.name, record.args, ok))
        held.suggested = None
        if not ok:
            return record
        best = macro_rules.suggest_next(held.macros, record.name, record.args)
        if not best:
            return record
        macro = best[0]
        held.suggested = (macro.key, macro.next_tool, macro.next_args)
        hint = (
            f"Hint: after {record.name} like this, {macro.next_tool} usually follows, with arguments "
            f"{macro_rules.canonical_json(macro.next_args)} (learned, confidence {macro.confidence:.1f}). "
            "Use it only if it fits what the user asked."
        )
        return ToolCallRecord(name=record.name, args=record.args, result=record.result, error=record.error, hint=hint)

    async def _recall_plan(self, new: list[Message], resource_id: str, thread_id: str) -> RecallPlan | None:
        """Automatic recall's first half: the legs' reads, which ride in the turn's load (None: recall is off)."""
        from ..memory.engines.recall import DEFAULT_MIN_SIMILARITY, clip_query

        settings = self.recall
        query = clip_query("\n".join(m.content for m in new if m.role == "user" and m.content))
        if settings is None or not query:
            return None
        assert self.full is not None  # automatic recall is on only on a Memory
        return await self.full.turns.recall_plan(
            resource_id=resource_id,
            query=query,
            thread_id=thread_id,
            recent=0,
            salient=settings.salient,
            relevant=settings.relevant,
            lexical=settings.lexical,
            min_similarity=DEFAULT_MIN_SIMILARITY if settings.min_similarity is None else settings.min_similarity,
        )

    async def _auto_recall(
        self, plan: RecallPlan, results: list[Any], history: list[Message], resource_id: str
    ) -> Message | None:
        """The "Remembered from earlier conversations" block, or None."""
        settings = self.recall
        assert settings is not None and self.full is not None
        shown = {m.id for m in history}
        hits = await self.full.turns.finish_recall(plan, results, top=settings.top + len(shown))
        hits = [h for h in hits if h.message.id not in shown][: settings.top]
        if not hits:
            return None
        titles = await thread_titles(self.full, resource_id, hits)
        lines = [f"{RECALL_HEADER} (not in the messages below; use them if they help):"]
        for h in hits:
            when = f"{h.message.created_at:%Y-%m-%d}" if h.message.created_at else "?"
            title = titles.get(h.thread_id) or h.thread_id
            text = " ".join(h.message.content.split())
            lines.append(f"- [{when}, thread {title!r}] {h.message.role}: {text[:500]}")
        return Message.system("\n".join(lines))

    def blocks(self, state: WorkingMemory | None) -> dict[str, Any]:
        """The fixed prompt blocks that do not depend on the query or the conversation."""
        schema = self.full.working_memory.json_schema if self.full is not None else None
        return {
            "instructions": self.instructions or None,
            "working_memory": working_memory_block(state, schema),
            "notebook": [],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Turn:
    """What one ``ask`` was asked: its new messages, where they go, and its per-turn options."""

    new: list[Message]
    resource_id: str
    thread_id: str
    trusted: bool
    instructions: str | None
    key: str | None
    lease: TurnLease | None = None
    """The thread's turn lease this turn holds (its commit checks it), if the store keeps leases."""
    client_tools: dict[str, ToolSpec] = field(default_factory=dict)
    """The caller's tools: offered to the model, run by the caller (the turn stops at a call of one)."""
    on_delta: DeltaSink | None = None
    """Where the streamed pieces go (``None``: the model is not streamed)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Model settings for each model call of the turn (checked)."""


@dataclass(kw_only=True, slots=True)
class _Held:
    """What a turn's tools decided, held until the turn commits."""

    turn: Turn
    """The memory tools' transaction: patches, facts and tasks, written at commit."""
    resource_id: str = ""
    thread_id: str = ""
    trusted: bool = False
    macros: dict[MacroKey, Macro] = field(default_factory=dict)
    calls: list[macro_rules.ObservedCall] = field(default_factory=list)
    suggested: tuple[MacroKey, str, Any] | None = None
    used: list[MacroKey] = field(default_factory=list)


def _last_reply(turn: Sequence[Message]) -> Message:
    """The turn's last assistant message (a step that waits for the caller's tools may end in tool results)."""
    return next((m for m in reversed(turn) if m.role == "assistant"), turn[-1])


def _design_turn(turn: Sequence[Message]) -> list[int]:
    """The indices of what a four-method adapter stores of a turn: the caller's messages and the final answer.

    The household design counts a turn as ``[user, final assistant]``: the model's tool steps
    between them inform the answer but are not conversation history. A turn that ends waiting
    for the caller's tools is stored whole, since the caller's results must follow its calls.
    """
    last = turn[-1]
    if last.role != "assistant" or last.tool_calls:
        return list(range(len(turn)))
    first_step = next((i for i, m in enumerate(turn) if m.role == "assistant"), len(turn) - 1)
    return [*range(first_step), len(turn) - 1]


def _pending(turn: Sequence[Message]) -> list[ToolCall]:
    """The calls of the turn's last assistant message that have no result in the turn: the caller's to run."""
    reply = _last_reply(turn)
    if reply.role != "assistant" or not reply.tool_calls:
        return []
    answered = {m.tool_call_id for m in turn if m.role == "tool"}
    return [c for c in reply.tool_calls if c.id not in answered]


def _continued(history: Sequence[Message], new: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """The stored step that the turn's tool results answer (``[]`` when there are none), and the new
    messages with each result's tool name filled in from its call.

    Raises:
        UsageError: a result for a call the thread is not waiting for, a call left without its result,
            or a result after a user message.
    """
    results = [m for m in new if m.role == "tool"]
    if not results:
        return [], list(new)
    first_other = next((i for i, m in enumerate(new) if m.role != "tool"), len(new))
    if any(m.role == "tool" for m in new[first_other:]):
        raise UsageError("tool results come first in a turn, before any new user message")
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i].role != "tool"), -1)
    step = history[at] if at >= 0 else None
    if step is None or step.role != "assistant" or not step.tool_calls:
        raise UsageError(
            f"tool result for call {results[0].tool_call_id!r}, but the conversation is not waiting for tool results"
        )
    answered = {m.tool_call_id for m in history[at + 1 :]}
    calls = {c.id: c for c in step.tool_calls if c.id not in answered}
    sent = [m.tool_call_id or "" for m in results]
    for call_id in sent:
        if call_id not in calls:
            raise UsageError(f"tool result for call {call_id!r}, which the conversation is not waiting for")
    if len(set(sent)) != len(sent):
        raise UsageError("two tool results answer the same call")
    missing = sorted(set(calls) - set(sent))
    if missing:
        raise UsageError(f"the conversation waits for the results of every call; missing: {', '.join(missing)}")
    named = [m.with_(name=calls[m.tool_call_id or ""].name) if m.role == "tool" and m.name is None else m for m in new]
    return list(history[at:]), named


async def _streamed(model: Model, messages: list[Message], specs: list[ToolSpec], turn: _Turn) -> Message:
    """One model call, streamed: text and the caller's calls go to ``turn.on_delta`` as they come; the whole
    reply back.

    A call's pieces are held until its name is known, then handed out only for the caller's tools,
    numbered among the caller's calls of this reply (the caller never sees caderno's own calls).
    """
    names: dict[int, str] = {}
    held: dict[int, list[Delta]] = {}
    index: dict[int, int] = {}
    reply: Message | None = None
    theirs, sink = turn.client_tools, turn.on_delta
    assert sink is not None  # a turn is streamed only when it has somewhere to send the pieces
    async for item in stream_reply(model, messages, specs, turn.settings):
        if isinstance(item, Message):
            reply = item
            continue
        if item.call_index is None:
            if item.content:
                await _give(sink, item)
            continue
        at = item.call_index
        if item.call_name and at not in names:
            names[at] = item.call_name
        if at not in names:
            held.setdefault(at, []).append(item)
            continue
        if names[at] not in theirs:
            held.pop(at, None)
            continue
        first = at not in index
        index.setdefault(at, len(index))
        pieces = [*held.pop(at, []), item]  # what came before the name, joined into the first piece
        await _give(
            sink,
            Delta(
                call_index=index[at],
                call_id=next((p.call_id for p in pieces if p.call_id), None),
                call_name=names[at] if first else None,
                arguments="".join(p.arguments for p in pieces),
            ),
        )
    if reply is None:
        raise ModelError("the model's stream ended without a reply")
    return reply


async def _give(sink: DeltaSink, delta: Delta) -> None:
    """Hand one piece to the sink (sync or async)."""
    done = sink(delta)
    if done is not None:
        await done


def _add_usage(usage: dict[str, int], reply: Message, prompt: list[Message], count: TokenCounter) -> None:
    """Sum one model call's tokens: the model's own figures when it reports them, else estimates."""
    reported = (reply.metadata or {}).get("usage") if reply.metadata else None
    usage["model_calls"] += 1
    if isinstance(reported, dict) and isinstance(reported.get("prompt_tokens"), int):
        usage["prompt_tokens"] += reported["prompt_tokens"]
        usage["completion_tokens"] += int(reported.get("completion_tokens") or 0)
        return
    usage["prompt_tokens"] += sum(count(m.content) for m in prompt)
    usage["completion_tokens"] += count(reply.content) + sum(
        count(json.dumps(c.to_dict())) for c in reply.tool_calls or ()
    )
    usage["estimated"] = 1


WM_HEADER = "WORKING MEMORY"


def working_memory_block(state: WorkingMemory | None, schema: dict[str, Any] | None) -> str:
    """The prompt block that shows the working memory (and its shape)."""
    if state is None:
        body = f"{WM_HEADER} (empty: nothing is known about this user yet)"
    else:
        data = json.dumps(state.data, ensure_ascii=False, indent=2, sort_keys=True)
        body = f"{WM_HEADER} (version {state.version}):\n```json\n{data}\n```"
    if schema is not None:
        body += "\nIts JSON shape:\n```json\n" + json.dumps(schema, ensure_ascii=False) + "\n```"
    return body


def _summary_block(summaries: list[Message]) -> str | None:
    if not summaries:
        return None
    parts = []
    for m in summaries:
        span = summary_span(m)
        how = (m.metadata or {}).get("summarizer", "?")
        where = f"messages {span[0]}–{span[1]}, " if span else ""
        parts.append(f"({where}{how} summary)\n{m.content}")
    return "SUMMARY OF EARLIER TURNS in this conversation (the originals are stored):\n" + "\n\n".join(parts)
