"""Plans of the notebook (entries, conversation snapshots) and of the turn leases, shared by both SQL backends.

The notebook's rules (budgets, unique substrings, the scan) live above the
port in ``caderno.memory.notebook``; here a target's entries are one JSON
array with a version, written by compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..core.errors import Erased, ThreadBusy
from . import ops
from ._rows import dumps, loads
from ._sql import Dialect, Plan, Q, ensure_resource, later

TARGETS = ("memory", "user")


def read_notebook(d: Dialect, op: ops.ReadNotebook) -> Plan[dict[str, tuple[tuple[str, ...], int]]]:
    rows = yield Q("SELECT target, entries, version FROM notebooks WHERE resource_id = ?", (op.resource_id,))
    found = {target: (tuple(loads(entries)), version) for target, entries, version in rows}
    return {target: found.get(target, ((), 0)) for target in TARGETS}


def edit_notebook(d: Dialect, op: ops.EditNotebook) -> Plan[list[str]]:
    yield ensure_resource(d, op.resource_id, op.now)
    key = (op.resource_id, op.target)
    # The row exists (version 0: never written) before it is locked, so two first writers queue too.
    yield Q(
        "INSERT INTO notebooks (resource_id, target, entries, version, updated_at) VALUES (?,?,'[]',0,?) "
        "ON CONFLICT (resource_id, target) DO NOTHING",
        (*key, d.ts(op.now)),
        "none",
    )
    row = yield Q(
        f"SELECT entries, version FROM notebooks WHERE resource_id = ? AND target = ?{d.for_update}", key, "one"
    )
    entries, version = list(loads(row[0])), row[1]
    new = op.edit(list(entries), version)
    if new is None:
        return entries
    yield Q(
        "UPDATE notebooks SET entries = ?, version = ?, updated_at = ? WHERE resource_id = ? AND target = ?",
        (dumps(list(new)), version + 1, d.ts(op.now), *key),
        "none",
    )
    return list(new)


def read_notebook_snapshot(d: Dialect, op: ops.ReadNotebookSnapshot) -> Plan[dict[str, str | None] | None]:
    row = yield Q(
        "SELECT blocks FROM notebook_snapshots WHERE resource_id = ? AND thread_id = ?",
        (op.resource_id, op.thread_id),
        "one",
    )
    return None if row is None else {target: loads(row[0]).get(target) for target in TARGETS}


def freeze_notebook(d: Dialect, op: ops.FreezeNotebook) -> Plan[dict[str, str | None]]:
    yield Q(
        "INSERT INTO notebook_snapshots (resource_id, thread_id, blocks, taken_at) VALUES (?,?,?,?) "
        "ON CONFLICT (resource_id, thread_id) DO NOTHING",
        (op.resource_id, op.thread_id, dumps(dict(op.snapshot)), d.ts(op.now)),
        "none",
    )
    kept = yield from read_notebook_snapshot(
        d, ops.ReadNotebookSnapshot(resource_id=op.resource_id, thread_id=op.thread_id)
    )
    return dict(op.snapshot) if kept is None else kept


def export_notebook(d: Dialect, resource_id: str) -> Plan[dict[str, list[str]]]:
    """The resource's notebook as its export section (snapshots are derived: not exported)."""
    pages = yield from read_notebook(d, ops.ReadNotebook(resource_id=resource_id))
    return {target: list(entries) for target, (entries, _) in pages.items()}


def import_notebook(d: Dialect, resource_id: str, notebook: dict[str, list[str]], now: Any) -> Plan[None]:
    yield Q(
        "INSERT INTO notebooks (resource_id, target, entries, version, updated_at) VALUES (?,?,?,1,?)",
        [(resource_id, t, dumps(list(notebook[t])), d.ts(now)) for t in TARGETS if notebook.get(t)],
        "many",
    )


# -- turn leases ------------------------------------------------------------------------------


#: What a given-back lease expires at: before any ``now`` (``release_turn``).
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


def claim_turn(d: Dialect, op: ops.ClaimTurn) -> Plan[bool]:
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


def release_turn(d: Dialect, op: ops.ReleaseTurn) -> Plan[None]:
    yield Q(
        "UPDATE turn_leases SET expires_at = ? WHERE resource_id = ? AND thread_id = ? AND holder = ?",
        (d.ts(_RELEASED), op.resource_id, op.thread_id, op.holder),
        "none",
    )


SHARED_NOTEBOOK: dict[type[Any], Callable[[Dialect, Any], Plan[Any]]] = {
    ops.ReadNotebook: read_notebook,
    ops.EditNotebook: edit_notebook,
    ops.ReadNotebookSnapshot: read_notebook_snapshot,
    ops.FreezeNotebook: freeze_notebook,
    ops.ClaimTurn: claim_turn,
    ops.ReleaseTurn: release_turn,
}
