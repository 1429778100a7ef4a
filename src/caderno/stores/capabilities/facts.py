"""The fact store (``FACTS``): one value per (resource, category, key), earlier values kept as history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.records import Fact
from .._op import Op, operations_in, plan_of
from .._rows import row_to_fact
from .._sql import Dialect, Plan, Q, iso
from ..export import FACT_FIELDS

__all__ = ["ForgetFact", "ReadFactHistory", "ReadFacts", "UpsertFact"]


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


@plan_of(UpsertFact)
def upsert_fact(d: Dialect, op: UpsertFact) -> Plan[Fact]:
    key = (op.resource_id, op.category, op.key)
    old = yield Q(
        f"SELECT value, source, updated_at, created_at FROM facts "
        f"WHERE resource_id = ? AND category = ? AND key = ?{d.for_update}",
        key,
        "one",
    )
    now = d.ts(op.now)
    if old is not None and old[0] != op.value:
        yield Q(
            "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
            "VALUES (?,?,?,?,?,?,?)",
            (*key, old[0], old[1], old[2], now),
            "none",
        )
    changed = old is None or old[0] != op.value or old[1] != op.source
    created = old[3] if old else now
    if changed:
        yield Q(
            "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?) ON CONFLICT (resource_id, category, key) DO UPDATE SET "
            "value = excluded.value, source = excluded.source, updated_at = excluded.updated_at",
            (*key, op.value, op.source, created, now),
            "none",
        )
    updated = now if changed else old[2]
    return row_to_fact(op.resource_id, (op.category, op.key, op.value, op.source, created, updated))


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFacts(Op[list[Fact]]):
    """The resource's facts (of one category or all), most recently updated first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    category: str | None = None


@plan_of(ReadFacts)
def read_facts(d: Dialect, op: ReadFacts) -> Plan[list[Fact]]:
    sql, params = f"SELECT {', '.join(FACT_FIELDS)} FROM facts WHERE resource_id = ?", [op.resource_id]
    if op.category is not None:
        sql += " AND category = ?"
        params.append(op.category)
    rows = yield Q(sql + " ORDER BY updated_at DESC, category, key", params)
    return [row_to_fact(op.resource_id, r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFactHistory(Op[list[dict[str, Any]]]):
    """Earlier values of one fact, oldest first."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    category: str
    key: str


@plan_of(ReadFactHistory)
def read_fact_history(d: Dialect, op: ReadFactHistory) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT value, source, valid_from, replaced_at FROM facts_history "
        "WHERE resource_id = ? AND category = ? AND key = ? ORDER BY id",
        (op.resource_id, op.category, op.key),
    )
    return [{"value": r[0], "source": r[1], "valid_from": iso(r[2]), "replaced_at": iso(r[3])} for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ForgetFact(Op[bool]):
    """Delete a fact (its history stays); False when there was none."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    category: str
    key: str


@plan_of(ForgetFact)
def forget_fact(d: Dialect, op: ForgetFact) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM facts WHERE resource_id = ? AND category = ? AND key = ?",
        (op.resource_id, op.category, op.key),
        "rowcount",
    )
    return bool(done)


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
