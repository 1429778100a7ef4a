"""AgentChat: one turn = load its context, prompt, model <-> tools, commit.

``AgentChat`` keeps no per-conversation state in the database sense, so one
instance serves any number of concurrent conversations. Per turn it:

1. builds the turn's context with its **context providers**
   (``caderno.agent.context``): the thread's history and its summaries, the
   working memory, the facts that matter, what recall finds in earlier
   conversations, the notebook snapshot frozen for this conversation —
   each provider's store reads gathered into **one batch** (one snapshot,
   one round trip);
2. builds the prompt with ``caderno.memory.engines.context.build_prompt``:
   the blocks in priority order, then the newest history that fits the
   token budget, then the turn (rebuilt before every model call, as the
   turn grows);
3. runs the model <-> tool loop, at most ``max_steps`` model calls
   (``caderno.agent.tool_calls``); working memory patches and facts are
   validated at once (the model hears about a bad one) and held;
4. commits the turn in **one write batch**: its messages, its patches and
   its facts, in one transaction, stored once under its idempotency key
   (``caderno.memory.parts.appends.append_once``); then schedules the
   thread's consolidation in the background.

A turn that fails — model error, ``max_steps``, cancellation, a process
killed mid-commit — leaves all of it or none of it. Notebook writes are the
exception: they are file writes, made at once (off the event loop), like a
note taken on paper.

``AgentChat`` also runs on any object with just the four methods of
``caderno.AgentMemory`` — sync or async, with or without ``resource_id``,
an append that returns nothing (``caderno.memory.adapters.agent_memory`` says how
each is called); recall, facts, summaries and consolidation then switch off
(one log line), the history is shown in the order the object returns it,
and patches are applied after the append. Which parts a chat runs on is
chosen once, when it is made (``caderno.agent.capabilities``); the loop is
the same for both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..core.errors import CadernoError, ModelError, UsageError
from ..core.messages import Message, ToolCall, WorkingMemory
from ..core.validate import check_message, storable_reply
from ..memory.adapters.notebook_files import Notebook
from ..memory.engines.context import Prompt, TokenCounter, build_prompt
from ..memory.engines.idempotency import RETRY_WINDOW, check_key
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.appends import Replayed, append_once, repeated_turn, stored_turn
from ..memory.parts.notebook import StoredNotebook
from ..memory.parts.turns import Committed, TurnLease
from ..tools.base import Turn, as_text
from ..tools.catalog import offered
from .approval import Approver
from .capabilities import Features, wire
from .context import DEFAULT_INSTRUCTIONS, RECALL_HEADER, WM_HEADER, TurnContext, working_memory_block
from .function_tools import Tool, ToolSpec, collect_tools
from .models import Delta, Model, call_model, check_settings, stream_reply, turn_deadline
from .settings import TURN_TIMEOUT, ChatSettings, RecallSettings
from .task_tools import SCHEDULE
from .tool_calls import Held, ToolCallRecord

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "RECALL_HEADER",
    "TURN_TIMEOUT",
    "WM_HEADER",
    "AgentChat",
    "ChatResult",
    "ChatSettings",
    "DeltaSink",
    "RecallSettings",
    "ToolCallRecord",
    "working_memory_block",
]

#: Receives a streamed turn's pieces as the model produces them (``ask(on_delta=...)``).
DeltaSink = Callable[[Delta], Awaitable[None] | None]


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
        consolidate: after each turn, summarise the thread in the background
            when it has grown past the memory's threshold.
        schedule_tool: offer the ``schedule`` tool (create / list / pause /
            resume / delete scheduled tasks; see ``caderno.agent.scheduler``).
        macros: learn tool macros from each turn's calls and show the best
            suggestion to the model after a call that usually leads to another.
        approve: the callback asked before a tool made with
            ``needs_approval=True`` runs (see ``caderno.agent.approval``).
        settings: the tuning numbers — history shown, steps, the token
            budget, facts shown, the turn's deadline and its wait for a busy
            thread, the user's zone, the clock (``ChatSettings``; its
            defaults when None).
    """

    def __init__(
        self,
        *,
        model: Model,
        memory: Memory | AgentMemory | None = None,
        tools: Sequence[Any] = (),
        instructions: str | None = None,
        notebook: Notebook | Callable[[str], Notebook | StoredNotebook] | bool | None = None,
        recall: RecallSettings | bool | None = None,
        recall_tool: bool = True,
        consolidate: bool = True,
        schedule_tool: bool = False,
        macros: bool = False,
        approve: Approver | None = None,
        settings: ChatSettings | None = None,
    ) -> None:
        settings = ChatSettings() if settings is None else settings
        if not isinstance(settings, ChatSettings):
            raise UsageError(f"settings must be a caderno.ChatSettings, not {type(settings).__name__}")
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
        self.settings = settings
        self.tools: dict[str, Tool] = {t.name: t for t in collect_tools(tools)}
        for reserved in (*offered("agent"), SCHEDULE):
            if reserved.name in self.tools:
                raise UsageError(f"the tool name {reserved.name} is reserved")
        asked = Features(
            instructions=DEFAULT_INSTRUCTIONS if instructions is None else instructions,
            notebook=notebook,
            recall=recall,
            recall_tool=recall_tool,
            consolidate=consolidate,
            schedule_tool=schedule_tool,
            macros=macros,
            approve=approve,
        )
        wiring = wire(memory, self.tools, asked, settings)
        self._providers = wiring.providers
        self._turns = wiring.turns
        self._runner = wiring.runner
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """The tools the model is offered: caderno's memory tools this chat has on, then its own."""
        return self._runner.specs

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
        ``caderno.memory.engines.idempotency`` for how long a key holds). The turn's
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
        ``caderno.memory.engines.idempotency.find_repeat``).

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
        sent = list(messages)
        if idempotency_key is not None:
            check_key(idempotency_key)
            if any(m.id for m in sent):
                raise UsageError("with an idempotency_key the turn's ids come from the key: send messages without ids")
        theirs = self._client_tools(client_tools)
        model_settings = check_settings(settings)
        results = any(m.role == "tool" for m in sent)
        key = (resource_id, thread_id)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock, self._turns.hold(resource_id, thread_id, self.settings.turn_wait) as lease:
                reads = self._turns.reads
                if idempotency_key is not None:
                    stored = await stored_turn(
                        reads, resource_id=resource_id, thread_id=thread_id, key=idempotency_key, sent=sent
                    )
                    if stored is not None:
                        return _replayed(stored)
                elif retry or results:
                    since = self.settings.clock() - timedelta(seconds=RETRY_WINDOW)
                    repeated = await repeated_turn(
                        reads, resource_id=resource_id, thread_id=thread_id, sent=sent, since=since, after=retry_after
                    )
                    if repeated is not None:
                        return _replayed(repeated)
                request = TurnRequest(
                    new=sent,
                    resource_id=resource_id,
                    thread_id=thread_id,
                    trusted=trusted,
                    instructions=instructions,
                    key=idempotency_key,
                    lease=lease,
                    client_tools=theirs,
                    on_delta=on_delta,
                    settings=model_settings,
                )
                return await self._turn(request)
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def _client_tools(self, specs: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
        """The caller's tools by name; a name this chat's own tools use, or one given twice, is refused."""
        ours = {*self._runner.memory_tools, *self.tools, SCHEDULE.name}
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

    # -- one turn ----------------------------------------------------------------

    async def _turn(self, request: TurnRequest) -> ChatResult:
        """Converse within the deadline, then commit once (the commit is never cut short)."""
        timeout = self.settings.turn_timeout
        try:
            # turn_deadline: a model call's retries give up before the turn's deadline cuts them.
            async with asyncio.timeout(timeout):
                with turn_deadline(timeout):
                    run = await self._converse(request)
        except TimeoutError:
            raise ModelError(
                f"the turn did not finish within turn_timeout={timeout} seconds; nothing was stored"
            ) from None
        resource_id, thread_id = request.resource_id, request.thread_id

        async def commit(messages: list[Message]) -> Committed:
            return await self._turns.commit(
                resource_id=resource_id,
                thread_id=thread_id,
                messages=messages,
                held=run.held.turn,
                writes=self._runner.writes(run.held),
                state=run.state,
                lease=request.lease,
            )

        outcome = await append_once(
            self._turns.reads,
            resource_id=resource_id,
            thread_id=thread_id,
            key=request.key,
            sent=request.new,
            turn=run.messages,
            append=commit,
            looked=True,  # ask() looked for the key's turn under the lease, before the model ran
        )
        if isinstance(outcome, Replayed):
            return _replayed(outcome.messages)
        self._turns.finished(resource_id, thread_id)
        return ChatResult(
            reply=_last_reply(outcome.messages),
            tool_calls=run.records,
            messages=outcome.messages,
            working_memory=outcome.working_memory,
            usage=run.prompt.usage,
            cut=run.prompt.cut,
            pending=_pending(outcome.messages),
        )

    async def _context(self, request: TurnRequest) -> TurnContext:
        """The turn's context: every provider's reads in one batch, then each provider's part, in order."""
        context = TurnContext(
            resource_id=request.resource_id,
            thread_id=request.thread_id,
            new=list(request.new),
            instructions=request.instructions,
        )
        planned = [await provider.reads(context) for provider in self._providers]
        batch = [op for reads in planned for op in reads.ops]
        results = await self._turns.load(request.resource_id, request.thread_id, batch)
        at = 0
        for provider, reads in zip(self._providers, planned, strict=True):
            await provider.add(context, reads, results[at : at + len(reads.ops)])
            at += len(reads.ops)
        return context

    async def _converse(self, request: TurnRequest) -> Run:
        """The model/tool loop of one turn: the turn's messages, nothing stored yet."""
        context = await self._context(request)
        state = context.working_memory
        held = Held(
            turn=Turn(working_memory=state.data if state else None, version=state.version if state else 0),
            resource_id=request.resource_id,
            thread_id=request.thread_id,
            trusted=request.trusted,
            notebook=context.notebook,
            macros={m.key: m for m in context.macros},
        )
        theirs = request.client_tools
        specs = [*self._runner.specs, *theirs.values()]
        settings = self.settings
        turn: list[Message] = list(context.new)
        records: list[ToolCallRecord] = []
        usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for _ in range(settings.max_steps):
            prompt = build_prompt(
                blocks=context.blocks,
                history=context.history,
                turn=[*context.waiting, *turn],
                max_tokens=settings.max_context_tokens,
                reply_reserve=settings.reply_reserve,
                count=settings.token_counter,
            )
            step = await self._step(prompt, specs, request)
            _add_usage(usage, step.kept, prompt.messages, settings.token_counter)
            turn.append(step.kept)
            # Its calls run as the model sent them: a tool refuses what it cannot take.
            calls = step.reply.tool_calls or ()
            if not calls:
                break
            for call in calls:
                if call.name in theirs:
                    continue  # the caller's to run: the turn stops after this step
                record = await self._runner.call(call, held, specs)
                records.append(record)
                content = record.error if record.error else as_text(record.result)
                if record.hint:
                    content += "\n\n" + record.hint
                # A tool's output is no one's fault either: kept cleaned and cut, like the reply.
                turn.append(storable_reply(Message.tool(content, tool_call_id=call.id, name=call.name)))
            if any(call.name in theirs for call in calls):
                break
        else:
            raise ModelError(
                f"the turn did not finish within max_steps={settings.max_steps} model calls; nothing was stored"
            )
        # The turn's usage rides on its last assistant message (the answer, or the step that waits).
        last = max(i for i, m in enumerate(turn) if m.role == "assistant")
        turn[last] = turn[last].with_(metadata={**(turn[last].metadata or {}), "usage": usage})
        return Run(messages=turn, records=records, held=held, state=state, prompt=prompt)

    async def _step(self, prompt: Prompt, specs: list[ToolSpec], request: TurnRequest) -> Step:
        """One model call: its reply, checked, and the reply as it will be stored."""
        try:
            if request.on_delta is None:
                reply = await call_model(self.model, prompt.messages, specs, request.settings)
            else:
                reply = await _streamed(self.model, prompt.messages, specs, request)
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
        return Step(reply=reply, kept=kept)


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRequest:
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


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One model call's reply."""

    reply: Message
    """As the model sent it (its tool calls are run as sent)."""
    kept: Message
    """As it is stored: made storable where it was not (``storable_reply``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One turn's conversation, before it is stored."""

    messages: list[Message]
    """The turn's messages: the caller's, then each model step and its tools' results."""
    records: list[ToolCallRecord]
    """Every tool call of the turn, in order."""
    held: Held
    """What the turn's tools decided, written at commit."""
    state: WorkingMemory | None
    """The working memory the turn started from."""
    prompt: Prompt
    """The last model call's prompt (its usage per block, and what was cut)."""


def _replayed(stored: list[Message]) -> ChatResult:
    """A turn stored by an earlier ``ask`` (same idempotency key, or a retry), as that ask returned it."""
    return ChatResult(reply=_last_reply(stored), messages=stored, replayed=True, pending=_pending(stored))


def _last_reply(turn: Sequence[Message]) -> Message:
    """The turn's last assistant message (a step that waits for the caller's tools may end in tool results)."""
    return next((m for m in reversed(turn) if m.role == "assistant"), turn[-1])


def _pending(turn: Sequence[Message]) -> list[ToolCall]:
    """The calls of the turn's last assistant message that have no result in the turn: the caller's to run."""
    reply = _last_reply(turn)
    if reply.role != "assistant" or not reply.tool_calls:
        return []
    answered = {m.tool_call_id for m in turn if m.role == "tool"}
    return [c for c in reply.tool_calls if c.id not in answered]


async def _streamed(model: Model, messages: list[Message], specs: list[ToolSpec], turn: TurnRequest) -> Message:
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
