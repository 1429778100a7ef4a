"""Context providers: the parts a turn's prompt is built from, each read in the turn's one read batch.

A turn's prompt is its blocks — instructions, working memory, notebook,
known facts, the summary of older turns, what recall found
(``caderno.memory.engines.context.BLOCK_ORDER`` says their order and which
a tight budget drops first) — then the thread's history, then the turn.
Each part comes from one provider, a small object with two methods:

- ``reads(turn)``: the store operations it adds to the turn's **one read
  batch** (``memory.turns.load``: one snapshot, one round trip), and what it
  keeps for later (``Reads.plan``: recall's plan). A provider over the
  four-method ``AgentMemory`` port adds none: the port has no batch, so it
  calls its memory itself in ``add``.
- ``add(turn, reads, results)``: fills its part of the ``TurnContext`` — a
  prompt block, the history, the working memory the turn starts from —
  from the results of its own operations.

``AgentChat`` asks every provider for its reads, runs them all in one batch,
then hands each provider its results, in the providers' order: a later one
may use what an earlier one added (the history is cut where the summaries
end; recall leaves out what the history shows).

Which providers a chat has is decided once, when it is made
(``caderno.agent.capabilities``): a full ``Memory`` gets those its store
handles; the four-method port gets the history and the working memory, plus
the notebook when one is given.

To add a provider: write a class with ``reads`` and ``add`` (subclass
``Provider``, which reads nothing by default), name the block it adds in
``BLOCK_ORDER`` (its place in the prompt), and choose it in
``caderno.agent.capabilities`` — in ``_on_memory`` under the capability its
reads need (``memory.supports(...)``), in ``_on_port`` too when it can work
through the four methods. Its reads ride in the same batch; the loop does
not change.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..core.errors import UsageError
from ..core.messages import Message, WorkingMemory
from ..core.records import Fact, Macro
from ..memory.adapters.notebook_files import Notebook
from ..memory.engines.notebook_rules import NotebookPort
from ..memory.engines.recall import DEFAULT_MIN_SIMILARITY, RecallPlan, RecallQuery, clip_query
from ..memory.facade import AgentMemory, Memory
from ..memory.parts.consolidation import summary_span
from ..memory.parts.facts import Facts as FactsPart
from ..memory.parts.notebook import StoredNotebook
from ..memory.parts.working_memory import WorkingMemoryPart
from ..stores import ops
from ..tools.recall import thread_titles
from .settings import RecallSettings

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "NOTEBOOK_CACHE",
    "RECALL_HEADER",
    "WM_HEADER",
    "ContextProvider",
    "Facts",
    "History",
    "Instructions",
    "Macros",
    "NotebookSnapshot",
    "PortHistory",
    "PortWorkingMemory",
    "Provider",
    "Reads",
    "Recall",
    "Summaries",
    "TurnContext",
    "WorkingMemoryBlock",
    "working_memory_block",
]

P = TypeVar("P")

DEFAULT_INSTRUCTIONS = (
    "You are a helpful assistant with durable memory. The working memory below is what you know about "
    "this user across conversations; keep it current with update_working_memory when they tell you "
    "something lasting (names, income, goals, preferences)."
)
WM_HEADER = "WORKING MEMORY"
RECALL_HEADER = "Remembered from earlier conversations"
#: Resources whose file notebook a chat keeps open, with its conversations' snapshots
#: (least recently used go first). A database notebook keeps nothing here.
NOTEBOOK_CACHE = 1024

Block = str | list[str] | None


@dataclass(kw_only=True, slots=True)
class TurnContext:
    """One turn's context as its providers build it (``AgentChat`` makes one per turn)."""

    resource_id: str
    thread_id: str
    new: list[Message]
    """The turn's new messages (``History`` names each tool result after its call)."""
    instructions: str | None = None
    """This turn's system prompt in place of the chat's (``ask(instructions=…)``); ``None``: the chat's."""
    history: list[Message] = field(default_factory=list)
    """The thread's stored messages the prompt shows, oldest first."""
    waiting: list[Message] = field(default_factory=list)
    """The stored step whose calls the turn's tool results answer: it opens the turn (stored already)."""
    covered_to: int = 0
    """The last position the thread's summaries cover: the history shows what comes after."""
    working_memory: WorkingMemory | None = None
    """The working memory the turn starts from."""
    notebook: NotebookPort | None = None
    """The resource's notebook (the ``memory`` tool edits it), if the chat has one."""
    macros: list[Macro] = field(default_factory=list)
    """The resource's learned tool macros (``AgentChat(macros=True)``)."""
    blocks: dict[str, Block] = field(default_factory=dict)
    """The prompt's blocks by name (``BLOCK_ORDER``); one missing is not shown."""

    @property
    def query(self) -> str:
        """The user's words of this turn."""
        return "\n".join(m.content for m in self.new if m.role == "user" and m.content)


@dataclass(frozen=True, slots=True)
class Reads(Generic[P]):
    """What a provider reads in the turn's batch, and what it keeps for ``add``."""

    ops: tuple[ops.Op[Any], ...] = ()
    """Its operations, run in the turn's one read batch."""
    plan: P | None = None
    """What ``add`` needs beside their results (recall's plan)."""


class ContextProvider(Protocol[P]):
    """One part of a turn's context (see the module docstring)."""

    async def reads(self, turn: TurnContext) -> Reads[P]:
        """The operations it adds to the turn's one read batch."""
        ...

    async def add(self, turn: TurnContext, reads: Reads[P], results: Sequence[Any]) -> None:
        """Fill its part of ``turn`` from its operations' ``results``, in their order."""
        ...


class Provider(Generic[P]):
    """A provider that reads nothing in the batch; override ``reads`` when it does."""

    async def reads(self, turn: TurnContext) -> Reads[P]:
        return Reads()

    async def add(self, turn: TurnContext, reads: Reads[P], results: Sequence[Any]) -> None:
        raise NotImplementedError


class Instructions(Provider[None]):
    """The system prompt: the chat's, or the turn's own (``ask(instructions=…)``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        turn.blocks["instructions"] = (self.text if turn.instructions is None else turn.instructions) or None


class Summaries(Provider[None]):
    """The summary of older turns; the history then starts where the summaries end."""

    async def reads(self, turn: TurnContext) -> Reads[None]:
        return Reads((ops.ReadSummaries(resource_id=turn.resource_id, thread_id=turn.thread_id),))

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        summaries: list[tuple[Message, bool]] = results[0]
        turn.covered_to = max((span[1] for m, _ in summaries if (span := summary_span(m))), default=0)
        turn.blocks["summary"] = _summary_block([m for m, merged in summaries if not merged])


class History(Provider[None]):
    """The thread's newest stored messages (read in the batch)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def reads(self, turn: TurnContext) -> Reads[None]:
        return Reads((ops.ReadThread(resource_id=turn.resource_id, thread_id=turn.thread_id, limit=self.limit),))

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        _show(turn, results[0])


class PortHistory(Provider[None]):
    """The thread's newest messages from the four-method port, in the order it returns them."""

    def __init__(self, port: AgentMemory, limit: int) -> None:
        self.port = port
        self.limit = limit

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        found = await self.port.get_messages(resource_id=turn.resource_id, thread_id=turn.thread_id, limit=self.limit)
        _show(turn, found)


class WorkingMemoryBlock(Provider[None]):
    """The resource's working memory (and its JSON shape, when the memory has a schema)."""

    def __init__(self, part: WorkingMemoryPart) -> None:
        self.part = part

    async def reads(self, turn: TurnContext) -> Reads[None]:
        return Reads((ops.ReadWorkingMemory(resource_id=turn.resource_id),))

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        turn.working_memory = results[0]
        turn.blocks["working_memory"] = working_memory_block(turn.working_memory, self.part.json_schema)


class PortWorkingMemory(Provider[None]):
    """The working memory from the four-method port (it keeps no versions: shown as version 0)."""

    def __init__(self, port: AgentMemory) -> None:
        self.port = port

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        data = await self.port.get_working_memory(resource_id=turn.resource_id)
        state = None if data is None else WorkingMemory(resource_id=turn.resource_id, data=data, version=0)
        turn.working_memory = state
        turn.blocks["working_memory"] = working_memory_block(state, None)


class Facts(Provider[None]):
    """The known facts that matter most to this turn's words (at most ``limit``)."""

    def __init__(self, part: FactsPart, limit: int) -> None:
        self.part = part
        self.limit = limit

    async def reads(self, turn: TurnContext) -> Reads[None]:
        return Reads((ops.ReadFacts(resource_id=turn.resource_id),))

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        facts: list[Fact] = results[0]
        if not facts:
            return
        ranked = await self.part.rank(facts, turn.query, limit=self.limit)
        lines = [f"- {f.category}/{f.key}: {f.value}" for f in ranked]
        turn.blocks["facts"] = "KNOWN FACTS about this user (kept across conversations):\n" + "\n".join(lines)


class Macros(Provider[None]):
    """The resource's learned tool macros: no block; the suggestions after a tool call come from them."""

    async def reads(self, turn: TurnContext) -> Reads[None]:
        return Reads((ops.ReadMacros(resource_id=turn.resource_id),))

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        turn.macros = list(results[0])


class Recall(Provider[RecallPlan]):
    """What automatic recall finds in earlier conversations that the history does not show.

    Its legs' reads ride in the batch (``memory.turns.recall_plan``); the
    hits are ranked once their results are in (``finish_recall``).
    """

    def __init__(self, memory: Memory, settings: RecallSettings) -> None:
        self.memory = memory
        self.settings = settings

    async def reads(self, turn: TurnContext) -> Reads[RecallPlan]:
        query = clip_query(turn.query)
        if not query:
            return Reads()
        s = self.settings
        plan = await self.memory.turns.recall_plan(
            RecallQuery(
                resource_id=turn.resource_id,
                query=query,
                thread_id=turn.thread_id,
                recent=0,
                salient=s.salient,
                relevant=s.relevant,
                lexical=s.lexical,
                min_similarity=DEFAULT_MIN_SIMILARITY if s.min_similarity is None else s.min_similarity,
            )
        )
        return Reads(tuple(plan.reads), plan)

    async def add(self, turn: TurnContext, reads: Reads[RecallPlan], results: Sequence[Any]) -> None:
        if reads.plan is None:
            return
        top = self.settings.top
        shown = {m.id for m in turn.history}
        found = await self.memory.turns.finish_recall(reads.plan, list(results), top=top + len(shown))
        hits = [h for h in found if h.message.id not in shown][:top]
        if not hits:
            return
        titles = await thread_titles(self.memory, turn.resource_id, hits)
        lines = [f"{RECALL_HEADER} (not in the messages below; use them if they help):"]
        for h in hits:
            when = f"{h.message.created_at:%Y-%m-%d}" if h.message.created_at else "?"
            title = titles.get(h.thread_id) or h.thread_id
            text = " ".join(h.message.content.split())
            lines.append(f"- [{when}, thread {title!r}] {h.message.role}: {text[:500]}")
        turn.blocks["recalled"] = "\n".join(lines)


NotebookSource = Notebook | Callable[[str], Notebook | StoredNotebook]


class NotebookSnapshot(Provider[None]):
    """The notebook's snapshot, frozen per conversation at its first turn, and the notebook the tools edit.

    A database notebook's snapshot is stored with the thread (any process
    resumes it) and, with ``in_batch``, read in the turn's batch; a file
    notebook's is kept in this process (``NOTEBOOK_CACHE`` resources). One
    ``Notebook`` instance asked for a second resource is refused.
    """

    def __init__(self, source: NotebookSource, *, in_batch: bool) -> None:
        self.source = source
        self.in_batch = in_batch
        self._open: OrderedDict[str, NotebookPort] = OrderedDict()
        self._owner: str | None = None

    def port_for(self, resource_id: str) -> NotebookPort:
        """The resource's notebook.

        Raises:
            UsageError: a single ``Notebook`` instance asked for a second resource.
        """
        if isinstance(self.source, Notebook):
            if self._owner is None:
                self._owner = resource_id
            elif self._owner != resource_id:
                raise UsageError(
                    f"one Notebook instance serves resource {self._owner!r}; it cannot also serve "
                    f"{resource_id!r} (notes would leak between them). Pass a factory such as "
                    "lambda r: Notebook.for_resource(home, r)"
                )
        port = self._open.get(resource_id)
        if port is None:
            book = self.source if isinstance(self.source, Notebook) else self.source(resource_id)
            port = book.port()
            if isinstance(book, StoredNotebook):
                return port  # holds nothing: every call reads the database
            self._open[resource_id] = port
            while len(self._open) > NOTEBOOK_CACHE:
                self._open.popitem(last=False)
        self._open.move_to_end(resource_id)
        return port

    async def reads(self, turn: TurnContext) -> Reads[None]:
        port = turn.notebook = self.port_for(turn.resource_id)
        if self.in_batch and isinstance(port, StoredNotebook):
            return Reads((port.snapshot_read(turn.thread_id),))
        return Reads()

    async def add(self, turn: TurnContext, reads: Reads[None], results: Sequence[Any]) -> None:
        port = turn.notebook
        assert port is not None  # reads() opened it
        if reads.ops and isinstance(port, StoredNotebook):
            frozen = await port.freeze_from(turn.thread_id, results[0])
            turn.blocks["notebook"] = [b for b in frozen.values() if b]
        else:
            # A file it cannot read (a planted link, a FIFO, a huge file) hides only itself.
            turn.blocks["notebook"] = await port.blocks(turn.thread_id)


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


def _show(turn: TurnContext, stored: Sequence[Message]) -> None:
    """The history the prompt shows: after the summaries, without the step the turn's tool results answer.

    Summarised turns show as their summary. A four-method adapter's messages may carry no
    position (and it has no summaries): they are shown whole, in the order it returned them.
    A turn continued with the caller's tool results: the step that waits for them leaves the
    history and opens the turn's prompt (it is stored already; it is not stored again).
    """
    history = [m for m in stored if m.position is None or m.position > turn.covered_to]
    waiting, turn.new = _continued(history, turn.new)
    turn.history = history[: len(history) - len(waiting)] if waiting else history
    turn.waiting = waiting


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
