"""The storage port: ``batch(ops)``, one transaction per batch.

A backend is a small object: ``open``, ``close``, the set of operation types
it ``supports`` (see ``caderno.stores.ops``) and ``batch``. Every operation
value names what to do; the operation types are the complete list of what a
backend does, and nothing reaches a backend another way.

All policy — id assignment, validation, merge rules, thresholds, which
messages are embedded, ownership, windowing — lives above this line in
``caderno.memory``. A backend only persists and reads back.

The ownership rule is structural: every operation that touches a resource's
rows names the resource, and the resource id is part of every key, so no
operation can reach another resource's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from .ops import EmbeddingJob, Op, VectorRows, WorkingMemoryUpdate

__all__ = ["EmbeddingJob", "ResourceDump", "Runner", "Store", "VectorRows", "WorkingMemoryUpdate"]

T = TypeVar("T")

#: The JSON-able export of one resource (see ``caderno.memory.engines.dump``).
ResourceDump = dict[str, Any]


@runtime_checkable
class Store(Protocol):
    """A backend: a unit of work over typed operations."""

    supports: frozenset[type[Op[Any]]]
    """The operation types this backend handles (``ops.ALL`` for a full one)."""

    async def open(self) -> None:
        """Create or migrate the schema; idempotent."""

    async def close(self) -> None:
        """Release connections; idempotent."""

    async def batch(self, ops: Sequence[Op[Any]]) -> list[Any]:
        """Run ``ops`` in order, in one transaction; one result per operation.

        A batch in which no operation writes reads one consistent snapshot.
        When an operation raises, the whole batch is rolled back and the
        error propagates: a batch is stored whole or not at all.
        """


class Runner(Protocol):
    """Runs one operation in its own batch (``Memory.run``): what the memory layer's parts are given."""

    async def __call__(self, op: Op[T], /) -> T: ...
