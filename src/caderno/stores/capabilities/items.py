"""Items (``ITEMS``): JSON documents under namespace paths, the LangGraph store.

A put queues the texts to embed for ``item_vectors`` in the same transaction.
A document is stored as the JSON text written (``value``, read back as is);
PostgreSQL also keeps it parsed (``doc``, jsonb, migration 0022), which its
filters read (``_postgres_plans.jsonb_condition``), where SQLite reads the
text with its JSON functions (``json_condition``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.errors import UsageError
from ...core.records import Item
from .._op import Op, operations_in, plan_of
from .._rows import dumps, loads
from .._sql import Dialect, Plan, Q
from ..export import item_dict

__all__ = ["DeleteItem", "GetItem", "ListItemNamespaces", "PutItem", "SearchItems"]


def path_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def item_from_row(resource_id: str, row: Any) -> Item:
    # Per row of every search: no import or closure per call.
    created, updated = row[3], row[4]
    return Item(
        resource_id=resource_id,
        namespace=tuple(row[0].split(".")),
        key=row[1],
        value=loads(row[2]),
        created_at=from_iso(created) if isinstance(created, str) else created,
        updated_at=from_iso(updated) if isinstance(updated, str) else updated,
    )


def document(value: Any) -> str:
    """The JSON text stored for an item's value: sorted keys, no spaces (as ``canonical_json``).

    Raises:
        UsageError: the value is not JSON both databases can read: a NaN or
            infinite number, or a NUL character (PostgreSQL's jsonb takes
            neither).
    """
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=False
        )
    except ValueError as exc:
        raise UsageError(f"an item's value must be JSON: {exc}") from None
    if "\\u0000" in text and _has_nul(value):
        raise UsageError("an item's value contains a NUL character (\\x00), which caderno does not store")
    return text


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


#: ``not_before`` of a job due at once: bound explicitly (the two databases
#: would need different column defaults), earlier than any real time.
DUE_AT_ONCE = datetime(1, 1, 1, tzinfo=UTC)
QUEUE_ITEM = (
    "INSERT INTO item_embeddings (resource_id, namespace, key, updated_at, texts, not_before) VALUES (?,?,?,?,?,?)"
)
ITEM_KEY = "resource_id = ? AND namespace = ? AND key = ?"


def job_params(
    d: Dialect, resource_id: str, namespace: tuple[str, ...], key: str, updated_at: datetime, texts: Any
) -> tuple[Any, ...]:
    return (resource_id, path_text(namespace), key, d.ts(updated_at), dumps(list(texts)), d.ts(DUE_AT_ONCE))


@dataclass(frozen=True, kw_only=True, slots=True)
class PutItem(Op[None]):
    """Create or replace the document at (resource, namespace, key); ``created_at`` is kept on replace.

    ``embed``: the texts of the item to embed (chosen above the port),
    queued in the same transaction for the embedding worker
    (``ClaimItemEmbeddings``). A put replaces the item's queued job or
    stored vectors, so a vector never describes an older value; with no
    texts the item has none.

    Raises:
        UsageError: the value is not JSON both databases read (``document``).
    """

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True  # on PostgreSQL (``_postgres_plans.put_item``)
    item: Item
    embed: tuple[str, ...] = ()

    @property
    def queues_work(self) -> bool:  # type: ignore[override]
        """Only a put with texts queues work: one without wakes no worker (on the class: it may)."""
        return bool(self.embed)


@plan_of(PutItem)
def put_item(d: Dialect, op: PutItem) -> Plan[None]:
    it = op.item
    assert it.updated_at is not None
    key = (it.resource_id, path_text(it.namespace), it.key)
    yield Q(
        "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT (resource_id, namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (*key, document(it.value), d.ts(it.updated_at), d.ts(it.updated_at)),
        "none",
    )
    # The old job or vectors describe the old value: the new value starts over.
    yield Q(f"DELETE FROM item_embeddings WHERE {ITEM_KEY}", key, "none")
    if op.embed:
        yield Q(QUEUE_ITEM, job_params(d, it.resource_id, it.namespace, it.key, it.updated_at, op.embed), "none")


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteItem(Op[bool]):
    """Delete a document, its queued job and its vectors; False when there was none."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    resource_id: str
    namespace: tuple[str, ...]
    key: str


@plan_of(DeleteItem)
def delete_item(d: Dialect, op: DeleteItem) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM items WHERE resource_id = ? AND namespace = ? AND key = ?",
        (op.resource_id, path_text(op.namespace), op.key),
        "rowcount",
    )
    return bool(done)


@dataclass(frozen=True, kw_only=True, slots=True)
class GetItem(Op["Item | None"]):
    """One document, or ``None``."""

    one_statement: ClassVar[bool] = True
    resource_id: str
    namespace: tuple[str, ...]
    key: str


@plan_of(GetItem)
def get_item(d: Dialect, op: GetItem) -> Plan[Item | None]:
    row = yield Q(
        "SELECT namespace, key, value, created_at, updated_at FROM items WHERE resource_id = ? AND namespace = ? AND key = ?",
        (op.resource_id, path_text(op.namespace), op.key),
        "one",
    )
    return item_from_row(op.resource_id, row) if row else None


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

    one_statement: ClassVar[bool] = True
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


def under(prefix: tuple[str, ...]) -> tuple[str, list[Any]]:
    """The namespaces under a prefix of whole labels, as SQL and its parameters: the path itself, or
    the path followed by '.'.

    Written as a range of the primary key: the texts from the path up to
    the path followed by '/' (the character after '.'), then, among those,
    the path itself or those past "path." (which start with it). Namespaces
    compare byte by byte on both databases (PostgreSQL: collation "C",
    migration 0022).
    """
    if not prefix:
        return "TRUE", []
    path = path_text(prefix)
    return "namespace >= ? AND namespace < ? AND (namespace = ? OR namespace > ?)", [path, path + "/", path, path + "."]


#: One condition of ``SearchItems.where`` as SQL on the document ``doc`` of an items row:
#: ``(sql, params)`` of ``(path, operator, operand)``. Each dialect's plans pass theirs.
Condition = Callable[[Dialect, tuple[str, ...], str, Any], "tuple[str, list[Any]]"]

#: LangGraph's comparison operators in SQL; ``$ne`` is ``$eq`` negated.
COMPARE = {"$eq": "=", "$ne": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def check_condition(path: tuple[str, ...], operator: str, operand: Any) -> None:
    """Raise ``UsageError`` for a condition ``SearchItems.where`` does not take (``SearchItems.takes``)."""
    if not SearchItems.takes(path, operator, operand):
        raise UsageError(f"unsupported item filter condition on {list(path)!r}: {operator} {type(operand).__name__}")


def _field(d: Dialect, kind: str, path: tuple[str, ...]) -> tuple[str, list[Any]]:
    sql = d.json_field(kind)
    return sql, [d.json_path(path)] * sql.count("?")


def json_condition(d: Dialect, path: tuple[str, ...], operator: str, operand: Any) -> tuple[str, list[Any]]:
    """One condition of ``SearchItems.where`` read with the dialect's JSON functions (``Dialect.json_field``).

    The operand is a parameter, the path too.
    """
    check_condition(path, operator, operand)
    if operand is None:
        kind, params = _field(d, "kind", path)
        sql = f"coalesce({kind}, 'null') {'=' if operator == '$eq' else '<>'} 'null'"
    else:
        field, params = _field(d, "string" if isinstance(operand, str) else "number", path)
        bound = operand if isinstance(operand, str | float) else int(operand)
        sql, params = f"coalesce({field} {COMPARE[operator]} ?, FALSE)", [*params, bound]
        if operator == "$ne":
            sql = f"NOT {sql}"
    if len(path) > 1 and (operator == "$ne" or operand is None):
        # A missing field under a parent that is not an object meets neither $eq None nor $ne.
        parent, more = _field(d, "kind", path[:-1])
        sql, params = f"{parent} = 'object' AND {sql}", [*more, *params]
    return sql, params


def filtered(
    d: Dialect, resource_id: str, prefix: tuple[str, ...], where: Any, condition: Condition = json_condition
) -> tuple[str, str, list[Any], list[Any]]:
    """The items under ``prefix`` as the CTE ``i``, and ``where`` (``SearchItems.where``) on them.

    Returns the ``WITH`` clause, the conditions (SQL on ``i.doc``: ``Dialect.json_doc``) and the
    parameters of each.
    """
    conditions = [condition(d, path, operator, operand) for path, operator, operand in where]
    within, params = under(prefix)
    cte = (
        f"WITH i AS {d.json_cte} (SELECT namespace, key, value, created_at, updated_at, {d.json_doc} AS doc "
        f"FROM items WHERE resource_id = ? AND {within})"
    )
    return (
        cte,
        " AND ".join(c for c, _ in conditions),
        [resource_id, *params],
        [p for _, more in conditions for p in more],
    )


#: The columns of an ``Item`` (``item_from_row``), and the order ``SearchItems`` gives.
ITEM_COLUMNS = "namespace, key, value, created_at, updated_at"
RECENT_FIRST = "ORDER BY updated_at DESC, namespace, key"

#: A page (``SearchItems`` with a ``limit``) of a prefix that holds many items is first looked for
#: among the resource's most recent items, read newest first off ``items_recent`` (migration
#: 0022): ``WALK_PER_ROW`` of them per row up to the page's end, at least ``WALK_MIN``. When they
#: hold the page (a broad filter) no other item is read. A prefix that holds fewer items than a
#: walk reads (``Page.probe``), or a walk that falls short, reads every item under the prefix off
#: its range of namespaces, and sorts those.
WALK_MIN = 256
WALK_PER_ROW = 8


def check_window(op: SearchItems) -> None:
    if op.offset < 0 or (op.limit is not None and op.limit < 0):
        raise UsageError(f"limit and offset must not be negative: {op.limit}, {op.offset}")


@dataclass(frozen=True, slots=True)
class Page:
    """The reads of a page of a search (``SearchItems`` with a ``limit``), each SQL and its parameters."""

    size: int
    """How many items the walk reads: when the prefix holds fewer, it reads them all instead."""
    probe: tuple[str, list[Any]]
    """How many items the prefix holds, counted up to ``size``."""
    walk: tuple[str, list[Any]]
    """The first ``offset + limit`` matches among the ``size`` newest items of the resource, in order."""
    every: tuple[str, list[Any]]
    """Every item under the prefix that meets ``where``, unordered (its caller orders and cuts it)."""


def page_of(d: Dialect, op: SearchItems, condition: Condition) -> Page:
    """The reads of a page of ``op`` (``limit`` given); ``condition`` writes each condition of ``where``."""
    assert op.limit is not None
    conditions = [condition(d, path, operator, operand) for path, operator, operand in op.where]
    within, prefix = under(op.prefix)
    kept = " AND ".join([within, *(c for c, _ in conditions)])
    kept_params = [*prefix, *(p for _, more in conditions for p in more)]
    rows = f"SELECT {ITEM_COLUMNS}, {d.json_doc} AS doc FROM items WHERE resource_id = ?"
    end = op.offset + op.limit
    size = max(WALK_MIN, WALK_PER_ROW * end)
    return Page(
        size,
        (
            f"SELECT count(*) FROM (SELECT 1 FROM items WHERE resource_id = ? AND {within} LIMIT ?) AS p",
            [op.resource_id, *prefix, size],
        ),
        (
            f"SELECT {ITEM_COLUMNS} FROM ({rows} {RECENT_FIRST} LIMIT ?) AS recent WHERE {kept} {RECENT_FIRST} LIMIT ?",
            [op.resource_id, size, *kept_params, end],
        ),
        (f"SELECT {ITEM_COLUMNS} FROM ({rows}) AS every WHERE {kept}", [op.resource_id, *kept_params]),
    )


@plan_of(SearchItems)
def search_items(d: Dialect, op: SearchItems, condition: Condition = json_condition) -> Plan[list[Item]]:
    """The shared plan, in one statement; ``condition`` writes each condition of ``where``.

    A page (``Page``) is the walk when the prefix holds at least a walk's
    items and the walk finds the page, else the read of every item: all in
    the statement, each part gated on the counts before it (one-time
    filters: PostgreSQL runs a part only when its gate lets it).
    """
    check_window(op)
    if op.limit is None:
        within, prefix = under(op.prefix)
        sql, params = f"SELECT {ITEM_COLUMNS} FROM items WHERE resource_id = ? AND {within}", [op.resource_id, *prefix]
        if op.where:
            cte, kept, at, of = filtered(d, op.resource_id, op.prefix, op.where, condition)
            sql, params = f"{cte} SELECT {ITEM_COLUMNS} FROM i WHERE {kept}", [*at, *of]
        rows = yield Q(f"{sql} {RECENT_FIRST}", params)
        return items_of(op.resource_id, rows[op.offset :])
    page = page_of(d, op, condition)
    end = op.offset + op.limit
    (probe, probed), (walk, walked), (every, everything) = page.probe, page.walk, page.every
    # A gate reads a count only when the one before it does not settle it (OR and AND stop early),
    # so the walk runs only for a prefix of many items.
    rows = yield Q(
        f"WITH probe AS ({probe}), walk AS ({walk}) "
        f"SELECT {ITEM_COLUMNS} FROM walk WHERE (SELECT * FROM probe) = ? AND (SELECT count(*) FROM walk) = ? "
        f"UNION ALL {every} AND ((SELECT * FROM probe) < ? OR (SELECT count(*) FROM walk) < ?) "
        f"{RECENT_FIRST} LIMIT ? OFFSET ?",
        [*probed, *walked, page.size, end, *everything, page.size, end, op.limit, op.offset],
    )
    return items_of(op.resource_id, rows)


def items_of(resource_id: str, rows: Any) -> list[Item]:
    return [item_from_row(resource_id, r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ListItemNamespaces(Op[list[tuple[str, ...]]]):
    """Every namespace of the resource that holds a document, sorted."""

    one_statement: ClassVar[bool] = True
    resource_id: str


@plan_of(ListItemNamespaces)
def list_item_namespaces(d: Dialect, op: ListItemNamespaces) -> Plan[list[tuple[str, ...]]]:
    rows = yield Q("SELECT DISTINCT namespace FROM items WHERE resource_id = ? ORDER BY namespace", (op.resource_id,))
    return [tuple(r[0].split(".")) for r in rows]


# -- in exports ------------------------------------------------------------------------------------


def export_items(d: Dialect, resource_id: str) -> Plan[dict[str, Any]]:
    """The resource's items, each with the texts queued for its vectors, as an export section."""
    items = yield from search_items(d, SearchItems(resource_id=resource_id, prefix=()))
    jobs = yield Q("SELECT namespace, key, texts FROM item_embeddings WHERE resource_id = ?", (resource_id,))
    texts = {(tuple(ns.split(".")), key): loads(t) for ns, key, t in jobs}
    return {
        "items": [
            item_dict(it, texts.get((it.namespace, it.key)))
            for it in sorted(items, key=lambda it: (it.namespace, it.key))
        ],
    }


def import_items(d: Dialect, resource_id: str, dump: dict[str, Any]) -> Plan[None]:
    """Restore the export section of ``export_items``; their texts are queued for new vectors."""
    # PostgreSQL keeps each document parsed as well (``doc``, migration 0022).
    parsed = d.name == "postgresql"
    rows = []
    for it in dump["items"]:
        text = document(it["value"])
        rows.append(
            (
                resource_id,
                path_text(tuple(it["namespace"])),
                it["key"],
                text,
                *((text,) if parsed else ()),
                d.ts(from_iso(it["created_at"])),
                d.ts(from_iso(it["updated_at"])),
            )
        )
    columns, values = ("value, doc", "?, ?::jsonb") if parsed else ("value", "?")
    yield Q(
        f"INSERT INTO items (resource_id, namespace, key, {columns}, created_at, updated_at) "
        f"VALUES (?, ?, ?, {values}, ?, ?)",
        rows,
        "many",
    )
    # Vectors are not exported (they are derived): the items' texts are queued again.
    yield Q(
        QUEUE_ITEM,
        [
            job_params(d, resource_id, tuple(it["namespace"]), it["key"], from_iso(it["updated_at"]), it["embed"])
            for it in dump["items"]
            if it.get("embed")
        ],
        "many",
    )


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
