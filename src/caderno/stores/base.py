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
from typing import Any, Protocol, runtime_checkable

from ..messages import Message, Thread, WorkingMemory

__all__ = ["ResourceDump", "Store", "WorkingMemoryUpdate"]

#: Called inside the store's transaction with the current data (``None`` when
#: the resource has none); returns the new data or raises ``InvalidPatch``.
WorkingMemoryUpdate = Callable[[dict[str, Any] | None], dict[str, Any]]

#: The JSON-able export of one resource (see ``caderno._dump``).
ResourceDump = dict[str, Any]


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
