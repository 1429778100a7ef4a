"""The storage port: a few primitives every backend implements.

All policy — id assignment, validation, merge rules, ownership, windowing —
lives above this line in ``caderno.memory``. A backend only persists and
reads back, and keeps every call inside one transaction.

The ownership rule is structural: every primitive takes the resource id, and
the resource id is part of every key, so no call can touch another
resource's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..messages import Message, Thread, WorkingMemory

__all__ = ["EmbeddingJob", "ResourceDump", "Store", "VectorRows", "WorkingMemoryUpdate"]

#: Called inside the store's transaction with the current data (``None`` when
#: the resource has none); returns the new data or raises ``InvalidPatch``.
WorkingMemoryUpdate = Callable[[dict[str, Any] | None], dict[str, Any]]

#: The JSON-able export of one resource (see ``caderno._dump``).
ResourceDump = dict[str, Any]


@dataclass(frozen=True, slots=True)
class EmbeddingJob:
    """A message waiting for its vector."""

    resource_id: str
    seq: int
    content: str
    attempts: int


@dataclass(frozen=True, slots=True)
class VectorRows:
    """New vectors of one resource since a change-feed position."""

    seqs: list[int]
    thread_ids: list[str]
    vectors: bytes  # float32, row-major, len(seqs) * dim * 4 bytes
    last_id: int


@runtime_checkable
class Store(Protocol):
    """Storage primitives. Every method is one transaction."""

    async def open(self) -> None:
        """Create or migrate the schema; idempotent."""

    async def close(self) -> None:
        """Release connections; idempotent."""

    async def append(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        """Store complete messages (ids and times set) in order, all or nothing.

        Returns them with ``seq`` set. Raises ``UsageError`` when a message id
        is already stored for this resource.
        """

    async def read(self, resource_id: str, thread_id: str, limit: int | None) -> list[Message]:
        """The newest ``limit`` messages (all when ``None``), oldest first."""

    async def list_threads(self, resource_id: str) -> list[Thread]:
        """The resource's threads, most recently updated first."""

    async def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        """Delete a thread and its messages; False when there was none."""

    async def erase_resource(self, resource_id: str) -> None:
        """Delete every row of the resource."""

    async def get_working_memory(self, resource_id: str) -> WorkingMemory | None:
        """The stored working memory, or ``None``."""

    async def update_working_memory(
        self,
        resource_id: str,
        update: WorkingMemoryUpdate,
        *,
        patch: dict[str, Any],
        expected_version: int | None,
        source: str,
    ) -> WorkingMemory:
        """Atomically read, ``update``, write, and log ``patch``.

        Raises ``Conflict`` when ``expected_version`` is given and differs
        from the stored version (0 when the resource has none).
        """

    async def export_resource(self, resource_id: str) -> ResourceDump:
        """Everything of the resource, read in one snapshot."""

    async def import_resource(self, dump: ResourceDump) -> None:
        """Restore an export into a resource that holds nothing yet."""

    # -- recall ---------------------------------------------------------------------------

    async def claim_embedding_jobs(self, limit: int, lease_seconds: float) -> list[EmbeddingJob]:
        """Take up to ``limit`` due messages off the queue for ``lease_seconds``.

        A claimed job is invisible to other workers until its lease ends, so
        workers in any number of processes share the queue without doubling
        work; a worker that dies just lets the lease expire.
        """

    async def finish_embedding_jobs(
        self,
        model: str,
        dim: int,
        done: list[tuple[str, int, bytes]],
        failed: list[tuple[str, int, str, float]],
    ) -> None:
        """Store vectors ``(resource_id, seq, float32 bytes)`` and drop their jobs;
        record failures ``(resource_id, seq, error, retry_after_seconds)``."""

    async def pending_embeddings(self) -> int:
        """How many messages wait for a vector (leased or not)."""

    async def load_vectors(self, resource_id: str, model: str, after_id: int) -> VectorRows:
        """The resource's vectors of ``model`` written after change-feed id ``after_id``."""

    async def lexical_search(
        self, resource_id: str, terms: list[str], limit: int, thread_id: str | None
    ) -> list[tuple[int, float]]:
        """``(seq, score)`` of messages matching any term, best first (higher is better)."""

    async def salient(
        self, resource_id: str, threshold: float, limit: int, thread_id: str | None
    ) -> list[tuple[str, Message]]:
        """``(thread_id, message)`` with importance >= threshold, newest first."""

    async def get_by_seq(self, resource_id: str, seqs: list[int]) -> list[tuple[str, Message]]:
        """``(thread_id, message)`` for the given sequence numbers of the resource."""

    async def neighbours(self, resource_id: str, thread_id: str, seq: int, before: int, after: int) -> list[Message]:
        """Up to ``before`` messages before ``seq`` and ``after`` after it, in its thread."""

    async def set_importance(self, resource_id: str, message_id: str, value: float) -> bool:
        """Change one message's importance; False when the resource has no such message."""

    async def reindex(self, resource_id: str | None) -> int:
        """Drop the vectors of a resource (or all) and queue its messages again."""
