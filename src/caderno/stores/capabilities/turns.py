"""One turn at a time per thread, across processes (``TURNS``): the thread's turn lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from ...core.errors import Erased, ThreadBusy
from .._op import Op, operations_in, plan_of
from .._sql import Dialect, Plan, Q, later

__all__ = ["ClaimTurn", "ReleaseTurn"]


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
    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str
    lease_seconds: float
    now: datetime
    renew: bool = False
    required: bool = False


#: What a given-back lease expires at: before any ``now`` (``release_turn``).
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


@plan_of(ClaimTurn)
def claim_turn(d: Dialect, op: ClaimTurn) -> Plan[bool]:
    if op.renew:
        # Our own lease only, never re-created: an erase deletes the row and a
        # takeover rewrites its holder, and either must stay final.
        done = yield Q(
            "UPDATE turn_leases SET expires_at = ? WHERE resource_id = ? AND thread_id = ? AND holder = ?",
            (later(d, op.now, op.lease_seconds), op.resource_id, op.thread_id, op.holder),
            "rowcount",
        )
    else:
        # One statement: take a free, given-back or expired lease, or renew our own.
        done = yield Q(
            "INSERT INTO turn_leases (resource_id, thread_id, holder, expires_at) VALUES (?,?,?,?) "
            "ON CONFLICT (resource_id, thread_id) DO UPDATE SET holder = excluded.holder, "
            "expires_at = excluded.expires_at "
            "WHERE turn_leases.holder = excluded.holder OR turn_leases.expires_at < ?",
            (op.resource_id, op.thread_id, op.holder, later(d, op.now, op.lease_seconds), d.ts(op.now)),
            "rowcount",
        )
    if not done and op.required:
        row = yield Q(
            "SELECT holder FROM turn_leases WHERE resource_id = ? AND thread_id = ?",
            (op.resource_id, op.thread_id),
            "one",
        )
        if row is None:
            raise Erased(
                f"thread {op.thread_id!r} was erased (or its resource was) while this turn ran; "
                f"nothing of this turn was stored",
                resource_id=op.resource_id,
                thread_id=op.thread_id,
            )
        raise ThreadBusy(
            f"thread {op.thread_id!r}: this turn's lease ran out and another turn took the thread; "
            f"nothing of this turn was stored",
            resource_id=op.resource_id,
            thread_id=op.thread_id,
        )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReleaseTurn(Op[None]):
    """Give the thread's turn lease back (only ``holder``'s own).

    The row stays, expired, until the thread or its resource is erased: a
    missing row is how a stalled earlier holder tells an erase from a takeover.
    """

    writes: ClassVar[bool] = True
    durable: ClassVar[bool] = False
    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str
    holder: str


@plan_of(ReleaseTurn)
def release_turn(d: Dialect, op: ReleaseTurn) -> Plan[None]:
    yield Q(
        "UPDATE turn_leases SET expires_at = ? WHERE resource_id = ? AND thread_id = ? AND holder = ?",
        (d.ts(_RELEASED), op.resource_id, op.thread_id, op.holder),
        "none",
    )


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
