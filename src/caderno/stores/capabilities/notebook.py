"""The notebook (``NOTEBOOK``): ``MEMORY.md`` / ``USER.md`` entries, and each conversation's frozen snapshot of them.

The notebook's rules (budgets, unique substrings, the scan) live above the
port in ``caderno.memory.engines.notebook_rules``; here a target's entries
are one JSON array with a version, written by compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from .._op import Op, operations_in, plan_of
from .._rows import dumps, loads
from .._sql import Dialect, Plan, Q, ensure_resource

__all__ = ["EditNotebook", "FreezeNotebook", "NotebookEdit", "ReadNotebook", "ReadNotebookSnapshot"]


TARGETS = ("memory", "user")


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNotebook(Op[dict[str, tuple[tuple[str, ...], int]]]):
    """The resource's notebook: ``{"memory": (entries, version), "user": (entries, version)}``.

    A target never written reads ``((), 0)``.
    """

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ReadNotebook)
def read_notebook(d: Dialect, op: ReadNotebook) -> Plan[dict[str, tuple[tuple[str, ...], int]]]:
    rows = yield Q("SELECT target, entries, version FROM notebooks WHERE resource_id = ?", (op.resource_id,))
    found = {target: (tuple(loads(entries)), version) for target, entries, version in rows}
    return {target: found.get(target, ((), 0)) for target in TARGETS}


#: Called inside the store's transaction, the target's row locked, with its entries and version
#: (0: never written); returns the new entries, or ``None`` to write nothing. May raise
#: ``NotebookError``: the transaction is then rolled back.
NotebookEdit = Callable[[list[str], int], "list[str] | None"]


@dataclass(frozen=True, kw_only=True, slots=True)
class EditNotebook(Op[list[str]]):
    """Read one target's entries under a lock, apply ``edit``, write what it returns.

    Result: the entries after the edit. The rules (budgets, unique
    substrings, the scan) are the edit's:
    ``caderno.memory.engines.notebook_rules``.
    """

    writes: ClassVar[bool] = True
    resource_id: str
    target: str
    edit: NotebookEdit
    now: datetime


@plan_of(EditNotebook)
def edit_notebook(d: Dialect, op: EditNotebook) -> Plan[list[str]]:
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


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadNotebookSnapshot(Op["dict[str, str | None] | None"]):
    """The notebook blocks frozen for a conversation (``{"memory": block, "user": block}``), or ``None`` before its first load."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    thread_id: str


@plan_of(ReadNotebookSnapshot)
def read_notebook_snapshot(d: Dialect, op: ReadNotebookSnapshot) -> Plan[dict[str, str | None] | None]:
    row = yield Q(
        "SELECT blocks FROM notebook_snapshots WHERE resource_id = ? AND thread_id = ?",
        (op.resource_id, op.thread_id),
        "one",
    )
    return None if row is None else {target: loads(row[0]).get(target) for target in TARGETS}


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


@plan_of(FreezeNotebook)
def freeze_notebook(d: Dialect, op: FreezeNotebook) -> Plan[dict[str, str | None]]:
    yield Q(
        "INSERT INTO notebook_snapshots (resource_id, thread_id, blocks, taken_at) VALUES (?,?,?,?) "
        "ON CONFLICT (resource_id, thread_id) DO NOTHING",
        (op.resource_id, op.thread_id, dumps(dict(op.snapshot)), d.ts(op.now)),
        "none",
    )
    kept = yield from read_notebook_snapshot(
        d, ReadNotebookSnapshot(resource_id=op.resource_id, thread_id=op.thread_id)
    )
    return dict(op.snapshot) if kept is None else kept


def export_notebook(d: Dialect, resource_id: str) -> Plan[dict[str, list[str]]]:
    """The resource's notebook as its export section (snapshots are derived: not exported)."""
    pages = yield from read_notebook(d, ReadNotebook(resource_id=resource_id))
    return {target: list(entries) for target, (entries, _) in pages.items()}


def import_notebook(d: Dialect, resource_id: str, notebook: dict[str, list[str]], now: Any) -> Plan[None]:
    yield Q(
        "INSERT INTO notebooks (resource_id, target, entries, version, updated_at) VALUES (?,?,?,1,?)",
        [(resource_id, t, dumps(list(notebook[t])), d.ts(now)) for t in TARGETS if notebook.get(t)],
        "many",
    )


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
