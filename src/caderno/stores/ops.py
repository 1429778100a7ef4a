"""The operations of the storage port: the complete list of what a backend does.

A backend receives a batch of these frozen values and runs it in **one
transaction** (a read-only snapshot when every operation reads); see
``caderno.stores.base.Store``. Nothing reaches a backend another way.

Each operation is generic in the type of its result, so
``await memory.run(ReadThread(...))`` is typed ``list[Message]``. Operations
are grouped by capability; a backend states which it supports in
``Store.supports`` and the conformance suite runs each operation on each
backend that claims it:

* ``CORE`` — history, thread records, working memory, whole resources. What
  ``Memory``'s history and working-memory methods need.
* ``FACTS`` — the fact store.
* ``RECALL`` — the embedding queue, vectors, full text and salience.
* ``CONSOLIDATION`` — summaries and the fact-extraction queue.
* ``AGENT_STATE`` — scheduled tasks, learned tool macros, approved command prefixes.
* ``KEYS`` — HTTP API keys (hashes only).
* ``ITEMS`` — JSON documents under namespace paths (the LangGraph store).
* ``ITEM_VECTORS`` — the items' embedding queue and vectors (semantic search
  of the LangGraph store), kept like message vectors.
* ``NOTEBOOK`` — the notebook (``MEMORY.md`` / ``USER.md`` entries) and each
  conversation's frozen snapshot of it.
* ``TURNS`` — one turn at a time per thread, across processes (a lease).

All policy (ids, validation, merge rules, thresholds, which messages are
embedded) lives above the port: operations carry finished values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from ..core.messages import Message, Thread, WorkingMemory
from ..core.records import ApiKey, Fact, Item, Macro, MacroKey, ScheduledTask

__all__ = [
    "AGENT_STATE",
    "NOTEBOOK",
    "TURNS",
    "ClaimTurn",
    "FreezeNotebook",
    "ReadNotebook",
    "ReadNotebookSnapshot",
    "ReleaseTurn",
    "EditNotebook",
    "NotebookEdit",
    "ALL",
    "ITEMS",
    "ITEM_VECTORS",
    "KEYS",
    "ClaimItemEmbeddings",
    "DeleteItem",
    "FinishItemEmbeddings",
    "GetItem",
    "ItemEmbeddingJob",
    "ItemVectors",
    "ListItemNamespaces",
    "PutItem",
    "ReadItemVectors",
    "SearchItems",
    "CreateKey",
    "ListResources",
    "FindKey",
    "ListKeys",
    "RevokeKey",
    "AllowPrefix",
    "ClaimDueTasks",
    "DeleteTask",
    "FinishTask",
    "LearnMacros",
    "ListPrefixes",
    "ListTasks",
    "MarkMacroUsed",
    "PutTask",
    "ReadMacros",
    "RenewTaskClaims",
    "RevokePrefix",
    "SyncConfigTasks",
    "CONSOLIDATION",
    "CORE",
    "FACTS",
    "RECALL",
    "UNSET",
    "VECTOR_SEARCH",
    "Append",
    "ClaimConsolidation",
    "ClaimEmbeddings",
    "CountPendingEmbeddings",
    "DeleteMessage",
    "DeleteThread",
    "EditMessage",
    "EmbeddingJob",
    "EraseResource",
    "ExportResource",
    "FindConsolidationCandidates",
    "FinishEmbeddings",
    "ForgetFact",
    "GetThread",
    "ImportResource",
    "LexicalSearch",
    "ListThreads",
    "LogConsolidation",
    "MarkFactsExtracted",
    "Op",
    "PatchWorkingMemory",
    "PopMessage",
    "PutThread",
    "ReadBySeq",
    "ReadConsolidationLog",
    "ReadFactCandidates",
    "ReadFactHistory",
    "ReadFacts",
    "ReadMessageLog",
    "ReadNeighbours",
    "ReadSalient",
    "ReadSparse",
    "ReadSummaries",
    "ReadThread",
    "ReadUnconsolidated",
    "ReadVectors",
    "ReadWorkingMemory",
    "ReadWorkingMemoryLog",
    "Reindex",
    "ReleaseConsolidation",
    "RenewEmbeddings",
    "SearchVectors",
    "SetImportance",
    "UpsertFact",
    "VectorRows",
    "WorkingMemoryUpdate",
    "WriteSummary",
]

T = TypeVar("T")

#: Called inside the store's transaction with the current data (``None`` when
#: the resource has none); returns the new data or raises ``InvalidPatch``.
WorkingMemoryUpdate = Callable[[dict[str, Any] | None], dict[str, Any]]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave as it is" for optional fields where ``None`` is a real value.
UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class EmbeddingJob:
    """A message waiting for its vector."""

    resource_id: str
    seq: int
    content: str
    attempts: int


@dataclass(frozen=True, slots=True)
class VectorRows:
    """New vectors of one resource since a change-feed position, in a few large values.

    A resource's first read brings ~100k vectors; an object per vector cost
    more than the rest of the load together, so the vectors come as blocks
    and the threads as one list per thread.
    """

    seqs: list[int]
    """The vectors' seqs in change-feed order, those stored as float32 alone first, then those
    stored with their codes; a seq read twice (PostgreSQL's overlap window) is there twice, and
    its later vector is the current one."""
    vectors: list[bytes]
    """float32, row-major, in the order of ``seqs``: the blocks together hold the first
    ``len(seqs) - coded`` vectors, each block a whole number of them."""
    threads: dict[str, list[int]]
    """Each thread's seqs: every seq of ``seqs`` (unless deleted meanwhile), maybe others."""
    last_id: int
    """The change-feed position to read after next time."""
    coded: int = 0
    """How many of ``seqs``, the last ones, come as ``codes``."""
    codes: list[bytes] = field(default_factory=list)
    """The codes stored beside those vectors (``FinishEmbeddings.codes``), ``2 * dim + 8`` bytes a
    vector (the vector cache's ``code_dtype``), in the order of ``seqs``, each block a whole number."""


@dataclass(frozen=True, slots=True)
class ItemEmbeddingJob:
    """An item waiting for the vectors of its texts (the version written at ``updated_at``)."""

    resource_id: str
    namespace: tuple[str, ...]
    key: str
    updated_at: datetime
    texts: tuple[str, ...]
    attempts: int


@dataclass(frozen=True, slots=True)
class ItemVectors:
    """The vectors of one item's texts, one per text, in the order of its job's texts."""

    namespace: tuple[str, ...]
    key: str
    updated_at: datetime
    """The version of the item they describe."""
    dim: int
    vectors: bytes  # float32, row-major, len(texts) * dim * 4 bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class Op(Generic[T]):
    """One storage operation whose result is a ``T``."""

    writes: ClassVar[bool] = False
    """Whether the operation changes the database (a batch with none is a read snapshot)."""
    durable: ClassVar[bool] = True
    """Whether its write must survive a power cut. A batch of only non-durable writes (the turn
    leases: one lost only frees its thread early) may commit without waiting for the disk."""


# -- history and thread records (CORE) ------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Append(Op[list[Message]]):
    """Store complete messages (ids, times, importance set) in order, all or nothing.

    Result: the messages with ``seq`` set. Raises ``UsageError`` when a
    message id is already stored for the resource. ``embed`` holds the ids
    of the messages the embedding queue takes (decided above the port).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    messages: tuple[Message, ...]
    embed: frozenset[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadThread(Op[list[Message]]):
    """The newest ``limit`` messages (all when ``None``) with ``position < before``, oldest first.

    ``before`` is a ``Message.position`` (what a client sees and pages by), never a ``seq``.
    """

    resource_id: str
    thread_id: str
    limit: int | None = None
    before: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ListThreads(Op[list[Thread]]):
    """The resource's threads, most recently active first."""

    resource_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GetThread(Op["Thread | None"]):
    """One thread record, or ``None``."""

    resource_id: str
    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PutThread(Op["Thread | None"]):
    """Create a thread record, or change its title / metadata (``UNSET`` keeps a field).

    With ``create=True`` the thread must not exist (result ``None`` when it
    does); with ``create=False`` it must exist (``None`` when it does not).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    create: bool
    title: Any = UNSET
    metadata: Any = UNSET
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteThread(Op[bool]):
    """Delete a thread, its messages and their edit log; False when there was none."""

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PopMessage(Op["Message | None"]):
    """Remove and return the thread's newest message (``None`` when empty); logged."""

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    actor: str
    reason: str | None
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class EditMessage(Op["Message | None"]):
    """Replace one message's content; the old content goes to the message log.

    Result: the edited message, or ``None`` when the resource has no such
    message. ``rescore`` (policy, run inside the transaction) gives the edited
    message's importance and whether it is embedded again; full text follows
    at once.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    message_id: str
    content: str
    rescore: Callable[[Message], tuple[float, bool]]
    actor: str
    reason: str | None
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteMessage(Op["Message | None"]):
    """Delete one message (the log keeps who, when and why, not the text); ``None`` if absent."""

    writes: ClassVar[bool] = True
    resource_id: str
    message_id: str
    actor: str
    reason: str | None
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadMessageLog(Op[list[dict[str, Any]]]):
    """Edits, pops and deletions of the resource's messages (one message or all), oldest first."""

    resource_id: str
    message_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SetImportance(Op[bool]):
    """Change one message's importance; False when the resource has no such message."""

    writes: ClassVar[bool] = True
    resource_id: str
    message_id: str
    value: float


# -- working memory and whole resources (CORE) -------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadWorkingMemory(Op["WorkingMemory | None"]):
    """The stored working memory, or ``None``."""

    resource_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PatchWorkingMemory(Op[WorkingMemory]):
    """Atomically read, ``update``, write, and log ``patch``.

    Raises ``Conflict`` when ``expected_version`` is given and differs from
    the stored version (0 when the resource has none).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    update: WorkingMemoryUpdate
    patch: dict[str, Any]
    expected_version: int | None
    source: str
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadWorkingMemoryLog(Op[list[dict[str, Any]]]):
    """Every applied patch of the resource: version, patch, source, created_at; oldest first."""

    resource_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ListResources(Op[list[str]]):
    """Every resource that holds anything, sorted (for admin views)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EraseResource(Op[None]):
    """Delete every row of the resource, indexes included."""

    writes: ClassVar[bool] = True
    resource_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportResource(Op[dict[str, Any]]):
    """Everything of the resource (see ``caderno.memory.dump``), read in one snapshot."""

    resource_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportResource(Op[None]):
    """Restore a checked export into a resource that holds nothing yet (``UsageError`` otherwise)."""

    writes: ClassVar[bool] = True
    dump: Any  # caderno.memory.dump.Dump: validated, messages parsed
    now: datetime
    embed_roles: frozenset[str]
    """Messages of these roles with text are queued for embedding (the rule is the caller's)."""


# -- facts (FACTS) ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class UpsertFact(Op[Fact]):
    """Set a fact on (resource, category, key); a changed value moves the old one to history."""

    writes: ClassVar[bool] = True
    resource_id: str
    category: str
    key: str
    value: str
    source: str
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFacts(Op[list[Fact]]):
    """The resource's facts (of one category or all), most recently updated first."""

    resource_id: str
    category: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFactHistory(Op[list[dict[str, Any]]]):
    """Earlier values of one fact, oldest first."""

    resource_id: str
    category: str
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ForgetFact(Op[bool]):
    """Delete a fact (its history stays); False when there was none."""

    writes: ClassVar[bool] = True
    resource_id: str
    category: str
    key: str


# -- recall (RECALL) ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimEmbeddings(Op[list[EmbeddingJob]]):
    """Take up to ``limit`` due messages off the queue for ``lease_seconds``.

    A claimed job is invisible to other workers until its lease ends, so
    workers in any number of processes share the queue without doubling
    work; a worker that dies just lets the lease expire.

    ``resource_id``: only that resource's jobs, newest first (a recall
    embedding what was just written before it searches).
    """

    writes: ClassVar[bool] = True
    limit: int
    lease_seconds: float
    now: datetime
    resource_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishEmbeddings(Op[None]):
    """Store vectors ``(resource_id, seq, float32 bytes)`` and drop their jobs; record
    failures ``(resource_id, seq, error, retry_after_seconds)``.

    ``codes``: empty, or each vector's quantized form (the vector cache's
    ``quantize``), one per ``done`` in its order, stored beside it so a
    cache's first load reads these instead of quantizing the vectors.

    ``sparse``: empty, or each message's learned-sparse term weights
    (``caderno.embeddings.splade``'s packed form; ``b""`` for none), one per
    ``done``, stored under ``sparse_model`` beside its vector and deleted
    with it: an edit, a delete, an erase or a reindex leaves none stale.
    """

    writes: ClassVar[bool] = True
    model: str
    dim: int
    done: tuple[tuple[str, int, bytes], ...]
    failed: tuple[tuple[str, int, str, float], ...]
    now: datetime
    codes: tuple[bytes, ...] = ()
    sparse: tuple[bytes, ...] = ()
    sparse_model: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class RenewEmbeddings(Op[None]):
    """Extend the lease of claimed jobs ``(resource_id, seq)`` to ``now + lease_seconds`` while a batch embeds.

    Only a job still leased (``not_before`` after ``now``) is extended: one
    whose lease ran out is whoever claims it next's, and one finished (or
    queued again by an edit) is not taken back. No token: a renewal that
    extends a lease another worker took after this one's ran out only
    delays that batch should its worker die too, and two workers embedding
    one text store one vector (the finish replaces it, under a unique key).
    """

    writes: ClassVar[bool] = True
    jobs: tuple[tuple[str, int], ...]
    lease_seconds: float
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class CountPendingEmbeddings(Op[int]):
    """How many messages wait for a vector (leased or not); ``resource_id``: that resource's only.

    ``failed=False`` leaves out the jobs whose embedding failed before (they
    wait out a backoff, not a worker that is embedding them now).
    """

    resource_id: str | None = None
    failed: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadVectors(Op[VectorRows]):
    """The resource's vectors of ``model`` written after change-feed id ``after_id``."""

    resource_id: str
    model: str
    after_id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSparse(Op[dict[int, bytes]]):
    """The learned-sparse term weights of ``model`` stored for the resource's messages ``seqs``
    (``FinishEmbeddings.sparse``), by seq; a message without them is absent."""

    resource_id: str
    model: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchVectors(Op[list[tuple[int, float]]]):
    """``(seq, similarity)`` of the best ``k`` vectors of ``model`` at or above
    ``min_similarity``, best first: the dot product, as the in-process search
    computes it (embedders give unit vectors, so it is the cosine).

    Optional (``VECTOR_SEARCH``): only a backend that searches in the database
    handles it; the memory layer otherwise searches its own vector cache.
    """

    resource_id: str
    model: str
    query: tuple[float, ...]
    k: int
    min_similarity: float
    thread_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LexicalSearch(Op[list[tuple[int, float]]]):
    """``(seq, score)`` of messages matching any term, best first (higher is better)."""

    resource_id: str
    terms: tuple[str, ...]
    limit: int
    thread_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSalient(Op[list[tuple[str, Message]]]):
    """``(thread_id, message)`` with importance >= threshold, newest first."""

    resource_id: str
    threshold: float
    limit: int
    thread_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadBySeq(Op[list[tuple[str, Message]]]):
    """``(thread_id, message)`` for the given sequence numbers of the resource."""

    resource_id: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNeighbours(Op[list[Message]]):
    """Up to ``before`` messages before ``seq`` and ``after`` after it, in its thread."""

    resource_id: str
    thread_id: str
    seq: int
    before: int
    after: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Reindex(Op[int]):
    """Drop the vectors of a resource (or all) and queue its embeddable messages again.

    Result: how many messages wait for a vector. The vectors of the
    resource's items are dropped and their texts queued again too (not
    counted), so a new model re-embeds everything.
    """

    writes: ClassVar[bool] = True
    resource_id: str | None
    embed_roles: frozenset[str]
    """Messages of these roles with text are queued again (the rule is the caller's)."""


# -- consolidation (CONSOLIDATION) ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class FindConsolidationCandidates(Op[list[tuple[str, str]]]):
    """``(resource_id, thread_id)`` whose unconsolidated text passes ``min_chars``."""

    resource_id: str | None
    min_chars: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimConsolidation(Op[bool]):
    """Lease a thread for summarising to ``holder``; False when another worker holds it (or no thread).

    ``holder`` is the lease's fencing token (a fresh id per claim): renewing,
    writing a summary under the lease and giving it back touch only a thread
    whose lease still names it. ``renew``: only extend ``holder``'s own lease,
    never take the thread (False once another worker took it over).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str
    lease_seconds: float
    now: datetime
    renew: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseConsolidation(Op[None]):
    """Give a thread's lease back (only ``holder``'s own: a lease taken over stays the new holder's)."""

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadUnconsolidated(Op[list[Message]]):
    """The thread's messages not yet covered by a summary, oldest first."""

    resource_id: str
    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadSummaries(Op[list[tuple[Message, bool]]]):
    """The thread's summary events, oldest first, each with ``merged`` (folded into a later one)."""

    resource_id: str
    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteSummary(Op[bool]):
    """Store a summary covering ``covered`` seqs; False when any of them is covered already.

    ``holder``: the thread's consolidation lease (``ClaimConsolidation``)
    must still name it, else nothing is written (False). The covered-rows
    check alone already keeps two summaries off one range; the lease check
    makes a worker whose lease was taken over store nothing, as every lease
    in caderno does.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    summary: Message
    covered: tuple[int, ...]
    now: datetime
    holder: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFactCandidates(Op[list[tuple[str, Message]]]):
    """User messages at or above ``min_importance`` not yet read for facts, oldest first."""

    resource_id: str | None
    min_importance: float
    limit: int


@dataclass(frozen=True, kw_only=True, slots=True)
class MarkFactsExtracted(Op[None]):
    """Mark messages as read for facts."""

    writes: ClassVar[bool] = True
    resource_id: str
    seqs: tuple[int, ...]
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class LogConsolidation(Op[None]):
    """Record a consolidation outcome (failures, mostly)."""

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str | None
    step: str
    outcome: str
    detail: str | None
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadConsolidationLog(Op[list[dict[str, Any]]]):
    """The resource's consolidation log, oldest first."""

    resource_id: str


# -- the notebook (NOTEBOOK) ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNotebook(Op[dict[str, tuple[tuple[str, ...], int]]]):
    """The resource's notebook: ``{"memory": (entries, version), "user": (entries, version)}``.

    A target never written reads ``((), 0)``.
    """

    resource_id: str


#: Called inside the store's transaction, the target's row locked, with its entries and version
#: (0: never written); returns the new entries, or ``None`` to write nothing. May raise
#: ``NotebookError``: the transaction is then rolled back.
NotebookEdit = Callable[[list[str], int], "list[str] | None"]


@dataclass(frozen=True, kw_only=True, slots=True)
class EditNotebook(Op[list[str]]):
    """Read one target's entries under a lock, apply ``edit``, write what it returns.

    Result: the entries after the edit. The rules (budgets, unique
    substrings, the scan) are the edit's: ``caderno.memory.notebook``.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    target: str
    edit: NotebookEdit
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNotebookSnapshot(Op["dict[str, str | None] | None"]):
    """The notebook blocks frozen for a conversation (``{"memory": block, "user": block}``), or ``None`` before its first load."""

    resource_id: str
    thread_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FreezeNotebook(Op[dict[str, "str | None"]]):
    """Store a conversation's notebook blocks unless some are stored already; the stored ones win.

    Result: the blocks the conversation keeps (``snapshot``, or those another
    process froze first).
    """

    writes: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    snapshot: dict[str, str | None]
    now: datetime


# -- one turn at a time per thread (TURNS) ----------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimTurn(Op[bool]):
    """Take or renew the thread's turn lease for ``holder``; ``False`` while another holder's lease runs.

    ``renew``: only extend ``holder``'s own lease, never take the thread: a
    lease once lost stays lost, whether another turn took it over after it
    expired (and perhaps gave it back since) or an erase of the thread or its
    resource deleted it. A fencing check, not a claim: a held lease is never
    re-created by its old holder.

    ``required``: raise instead of answering ``False`` (a turn's commit carries
    it with ``renew``, so a turn whose lease was lost stores nothing):
    ``Erased`` when the thread's lease row is gone (only an erase deletes it),
    ``ThreadBusy`` when another holder has it.
    """

    writes: ClassVar[bool] = True
    durable: ClassVar[bool] = False
    resource_id: str
    thread_id: str
    holder: str
    lease_seconds: float
    now: datetime
    renew: bool = False
    required: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseTurn(Op[None]):
    """Give the thread's turn lease back (only ``holder``'s own).

    The row stays, expired, until the thread or its resource is erased: a
    missing row is how a stalled earlier holder tells an erase from a takeover.
    """

    writes: ClassVar[bool] = True
    durable: ClassVar[bool] = False
    resource_id: str
    thread_id: str
    holder: str


# -- agent state (AGENT_STATE) ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PutTask(Op["ScheduledTask | None"]):
    """Create a task (``create``: ``UsageError`` when its name is taken) or replace one by id.

    Result: the stored task, or ``None`` when replacing a task that is gone.
    """

    writes: ClassVar[bool] = True
    task: ScheduledTask
    create: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class ListTasks(Op[list[ScheduledTask]]):
    """The resource's tasks (every resource's when ``None``), by name."""

    resource_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteTask(Op[bool]):
    """Delete a task by name; False when there was none."""

    writes: ClassVar[bool] = True
    resource_id: str
    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimDueTasks(Op[list[ScheduledTask]]):
    """Take the tasks due at ``now`` (not paused, not claimed by a live worker) for ``lease_seconds``.

    A recurring task's ``next_run_at`` moves to ``advance(task, now)`` at
    once (so runs missed while nothing ran fire once, and no other worker
    fires the same slot); a one-shot keeps it until ``FinishTask`` deletes
    it, so a worker that dies lets another fire it after the lease. Result:
    the claimed tasks as they were before the claim.

    ``claimant``: the claim's fencing token (a fresh id per claim), written
    on each task it takes; ``RenewTaskClaims`` and ``FinishTask`` touch only
    a task that still carries it.
    """

    writes: ClassVar[bool] = True
    now: datetime
    limit: int
    lease_seconds: float
    advance: Callable[[ScheduledTask, datetime], datetime | None]
    claimant: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RenewTaskClaims(Op[set[tuple[str, str]]]):
    """Extend the lease of every task ``claimant`` still holds; result: their ``(resource_id, id)``.

    A fencing check as well as a renewal: a task another worker re-claimed
    (after this claim's lease ran out) carries that worker's token and is
    not in the result, so the first worker must not run it.
    """

    writes: ClassVar[bool] = True
    claimant: str
    lease_seconds: float
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishTask(Op[None]):
    """Record a run: a one-shot is deleted; a recurring task gets ``last_run_at`` and its claim back.

    Only while the task still carries ``claimant`` (its claim's token): a
    task another worker re-claimed is that worker's to finish.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    task_id: str
    ran_at: datetime
    delete: bool
    claimant: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncConfigTasks(Op[dict[str, int]]):
    """Make the ``config`` tasks exactly ``tasks`` (upserted by resource and name); tool tasks untouched.

    Result: counts ``added``, ``updated``, ``deleted``, ``skipped`` (a name
    a tool-made task already holds).
    """

    writes: ClassVar[bool] = True
    tasks: tuple[ScheduledTask, ...]
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadMacros(Op[list[Macro]]):
    """The resource's macros (of one trigger tool, or all), best first."""

    resource_id: str
    trigger_tool: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LearnMacros(Op[None]):
    """Read the resource's macros, ``learn`` (policy, run in the transaction), write what changed."""

    writes: ClassVar[bool] = True
    resource_id: str
    learn: Callable[[dict[MacroKey, Macro]], dict[MacroKey, Macro]]
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class MarkMacroUsed(Op[bool]):
    """Count one use of a macro's suggestion; False when there is no such macro."""

    writes: ClassVar[bool] = True
    resource_id: str
    key: MacroKey
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class AllowPrefix(Op[bool]):
    """Approve a command prefix for good; False when it was already approved."""

    writes: ClassVar[bool] = True
    resource_id: str
    prefix: str
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class RevokePrefix(Op[bool]):
    """Withdraw an approved prefix; False when there was none."""

    writes: ClassVar[bool] = True
    resource_id: str
    prefix: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ListPrefixes(Op[list[str]]):
    """The resource's approved prefixes, sorted."""

    resource_id: str


# -- API keys (KEYS) ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateKey(Op[None]):
    """Store a new key's record and the hash of its token."""

    writes: ClassVar[bool] = True
    key: ApiKey
    token_hash: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FindKey(Op["ApiKey | None"]):
    """The live (not revoked) key whose token hashes to ``token_hash``, or ``None``."""

    token_hash: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ListKeys(Op[list[ApiKey]]):
    """Every key, revoked ones included, oldest first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RevokeKey(Op[bool]):
    """Revoke a key by id; False when there is no live key with that id."""

    writes: ClassVar[bool] = True
    key_id: str
    now: datetime


# -- items (ITEMS) ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PutItem(Op[None]):
    """Create or replace the document at (resource, namespace, key); ``created_at`` is kept on replace.

    ``embed``: the texts of the item to embed (chosen above the port),
    queued in the same transaction for the embedding worker
    (``ClaimItemEmbeddings``). A put replaces the item's queued job or
    stored vectors, so a vector never describes an older value; with no
    texts the item has none.
    """

    writes: ClassVar[bool] = True
    item: Item
    embed: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteItem(Op[bool]):
    """Delete a document, its queued job and its vectors; False when there was none."""

    writes: ClassVar[bool] = True
    resource_id: str
    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GetItem(Op["Item | None"]):
    """One document, or ``None``."""

    resource_id: str
    namespace: tuple[str, ...]
    key: str


_NAME = re.compile(r'[^"\\\x00-\x1f]+')
"""A key ``SearchItems`` takes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchItems(Op[list[Item]]):
    """The documents whose namespace starts with ``prefix`` and that meet ``where``, most recently updated first.

    Each condition of ``where`` is ``(path, operator, operand)``: ``path``
    names a field of the document (a key, then keys inside nested objects),
    ``operator`` is one of ``OPERATORS`` and ``operand`` a string, number,
    boolean or ``None``, compared as Python compares the JSON value:

    * ``$eq`` / ``$ne``: a string equals only that string; a number or
      boolean equals a number or boolean of the same value (``True == 1``);
      ``None`` equals a null or missing field. ``$ne`` is the negation, and
      a field under a parent that is not an object meets neither.
    * ``$gt`` / ``$gte`` / ``$lt`` / ``$lte`` take a number: the field must
      be a number (or a boolean, as 1/0); other fields do not match.

    ``limit`` (``None``: all) and ``offset`` cut the ordered result.
    """

    resource_id: str
    prefix: tuple[str, ...]
    where: tuple[tuple[tuple[str, ...], str, Any], ...] = ()
    limit: int | None = None
    offset: int = 0

    OPERATORS: ClassVar[frozenset[str]] = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})

    @staticmethod
    def takes(path: tuple[str, ...], operator: str, operand: Any) -> bool:
        """Whether ``(path, operator, operand)`` is a condition ``where`` accepts.

        Keys are names: any string without ``"``, ``\\`` or a control
        character (those JSON writes escaped, which a JSON path on SQLite
        matches as written). Integers must fit 64 bits, floats be finite.
        """
        if not path or not all(isinstance(k, str) and _NAME.fullmatch(k) for k in path):
            return False
        if operator not in SearchItems.OPERATORS:
            return False
        if isinstance(operand, bool):
            return True
        if isinstance(operand, int):
            return -(2**63) <= operand < 2**63
        if isinstance(operand, float):
            return math.isfinite(operand)
        return operator in ("$eq", "$ne") and (operand is None or isinstance(operand, str))


@dataclass(frozen=True, kw_only=True, slots=True)
class ListItemNamespaces(Op[list[tuple[str, ...]]]):
    """Every namespace of the resource that holds a document, sorted."""

    resource_id: str


# -- item vectors (ITEM_VECTORS) --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimItemEmbeddings(Op[list[ItemEmbeddingJob]]):
    """Take up to ``limit`` due item jobs (of every resource) off the queue for ``lease_seconds``.

    As ``ClaimEmbeddings``: a claimed job is invisible to other workers
    until its lease ends; the model is named when the vectors are stored.
    """

    writes: ClassVar[bool] = True
    limit: int
    lease_seconds: float
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class FinishItemEmbeddings(Op[None]):
    """Store the vectors of claimed jobs ``(job, float32 bytes)``; record failures
    ``(job, error, retry_after_seconds)``.

    Only where the item is still at the job's ``updated_at``: a job whose
    item was written again (or deleted) meanwhile is dropped, so the old
    value's vectors never reach the new value.
    """

    writes: ClassVar[bool] = True
    model: str
    dim: int
    done: tuple[tuple[ItemEmbeddingJob, bytes], ...]
    failed: tuple[tuple[ItemEmbeddingJob, str, float], ...]
    now: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadItemVectors(Op[list[ItemVectors]]):
    """The stored vectors of ``model`` of the items whose namespace starts with ``prefix``.

    Items still queued, or embedded by another model, have none. ``where``
    (as ``SearchItems.where``) keeps only the vectors of the items that meet it.
    """

    resource_id: str
    prefix: tuple[str, ...]
    model: str
    where: tuple[tuple[tuple[str, ...], str, Any], ...] = ()


CORE: frozenset[type[Op[Any]]] = frozenset(
    {
        Append,
        ReadThread,
        ListThreads,
        GetThread,
        PutThread,
        DeleteThread,
        PopMessage,
        EditMessage,
        DeleteMessage,
        ReadMessageLog,
        SetImportance,
        ReadWorkingMemory,
        PatchWorkingMemory,
        ReadWorkingMemoryLog,
        ListResources,
        EraseResource,
        ExportResource,
        ImportResource,
    }
)
FACTS: frozenset[type[Op[Any]]] = frozenset({UpsertFact, ReadFacts, ReadFactHistory, ForgetFact})
RECALL: frozenset[type[Op[Any]]] = frozenset(
    {
        ClaimEmbeddings,
        FinishEmbeddings,
        RenewEmbeddings,
        CountPendingEmbeddings,
        ReadVectors,
        ReadSparse,
        LexicalSearch,
        ReadSalient,
        ReadBySeq,
        ReadNeighbours,
        Reindex,
    }
)
CONSOLIDATION: frozenset[type[Op[Any]]] = frozenset(
    {
        FindConsolidationCandidates,
        ClaimConsolidation,
        ReleaseConsolidation,
        ReadUnconsolidated,
        ReadSummaries,
        WriteSummary,
        ReadFactCandidates,
        MarkFactsExtracted,
        LogConsolidation,
        ReadConsolidationLog,
    }
)
AGENT_STATE: frozenset[type[Op[Any]]] = frozenset(
    {
        PutTask,
        ListTasks,
        DeleteTask,
        ClaimDueTasks,
        RenewTaskClaims,
        FinishTask,
        SyncConfigTasks,
        ReadMacros,
        LearnMacros,
        MarkMacroUsed,
        AllowPrefix,
        RevokePrefix,
        ListPrefixes,
    }
)
KEYS: frozenset[type[Op[Any]]] = frozenset({CreateKey, FindKey, ListKeys, RevokeKey})
ITEMS: frozenset[type[Op[Any]]] = frozenset({PutItem, DeleteItem, GetItem, SearchItems, ListItemNamespaces})
ITEM_VECTORS: frozenset[type[Op[Any]]] = frozenset({ClaimItemEmbeddings, FinishItemEmbeddings, ReadItemVectors})
NOTEBOOK: frozenset[type[Op[Any]]] = frozenset({ReadNotebook, EditNotebook, ReadNotebookSnapshot, FreezeNotebook})
TURNS: frozenset[type[Op[Any]]] = frozenset({ClaimTurn, ReleaseTurn})
#: Optional: vector search inside the database (PostgreSQL with pgvector); not part of ``ALL``.
VECTOR_SEARCH: frozenset[type[Op[Any]]] = frozenset({SearchVectors})
#: Every operation a full backend handles.
ALL: frozenset[type[Op[Any]]] = (
    CORE | FACTS | RECALL | CONSOLIDATION | AGENT_STATE | KEYS | ITEMS | ITEM_VECTORS | NOTEBOOK | TURNS
)


def import_positions(messages: list[Message] | tuple[Message, ...]) -> list[int]:
    """The positions an imported thread's messages take, in order: every backend imports alike.

    An export carries each message's position; they are kept as long as they
    increase, so a thread keeps its numbers (gaps of deleted messages
    included) across export and import. A message without one (an older
    export) or out of order takes the next number after its predecessor.
    """
    out: list[int] = []
    for m in messages:
        last = out[-1] if out else 0
        out.append(m.position if m.position is not None and m.position > last else last + 1)
    return out
