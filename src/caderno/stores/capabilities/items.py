"""Items (``ITEMS``): JSON documents under namespace paths, the LangGraph store.

A put queues the texts to embed for ``item_vectors`` in the same transaction.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.errors import UsageError
from ...core.messages import canonical_json
from ...core.records import Item
from .._op import Op, operations_in, plan_of
from .._rows import dumps, loads
from .._sql import Dialect, Plan, Q
from ..export import item_dict

__all__ = ["DeleteItem", "GetItem", "ListItemNamespaces", "PutItem", "SearchItems"]


def path_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _item_from_row(resource_id: str, row: Any) -> Item:
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
    """

    writes: ClassVar[bool] = True
    queues_work: ClassVar[bool] = True
    item: Item
    embed: tuple[str, ...] = ()


@plan_of(PutItem)
def put_item(d: Dialect, op: PutItem) -> Plan[None]:
    it = op.item
    assert it.updated_at is not None
    key = (it.resource_id, path_text(it.namespace), it.key)
    yield Q(
        "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) VALUES (?,?,?,?,?,?) "
        "ON CONFLICT (resource_id, namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (*key, canonical_json(it.value), d.ts(it.updated_at), d.ts(it.updated_at)),
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
    return _item_from_row(op.resource_id, row) if row else None


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


#: A namespace under a prefix of whole labels: the path itself, or the path followed by '.'.
UNDER = "(? = '' OR namespace = ? OR substr(namespace, 1, ?) = ?)"


def under(prefix: tuple[str, ...]) -> tuple[Any, ...]:
    """The parameters of ``UNDER``."""
    path = path_text(prefix)
    return (path, path, len(path) + 1, path + ".")


#: LangGraph's comparison operators in SQL; ``$ne`` is ``$eq`` negated.
_COMPARE = {"$eq": "=", "$ne": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _field(d: Dialect, kind: str, path: tuple[str, ...]) -> tuple[str, list[Any]]:
    sql = d.json_field(kind)
    return sql, [d.json_path(path)] * sql.count("?")


def _condition(d: Dialect, path: tuple[str, ...], operator: str, operand: Any) -> tuple[str, list[Any]]:
    """One condition of ``SearchItems.where`` in SQL: the operand is a parameter, the path too."""
    if not SearchItems.takes(path, operator, operand):
        raise UsageError(f"unsupported item filter condition on {list(path)!r}: {operator} {type(operand).__name__}")
    if operand is None:
        kind, params = _field(d, "kind", path)
        sql = f"coalesce({kind}, 'null') {'=' if operator == '$eq' else '<>'} 'null'"
    else:
        field, params = _field(d, "string" if isinstance(operand, str) else "number", path)
        bound = operand if isinstance(operand, str | float) else int(operand)
        sql, params = f"coalesce({field} {_COMPARE[operator]} ?, FALSE)", [*params, bound]
        if operator == "$ne":
            sql = f"NOT {sql}"
    if len(path) > 1 and (operator == "$ne" or operand is None):
        # A missing field under a parent that is not an object meets neither $eq None nor $ne.
        parent, more = _field(d, "kind", path[:-1])
        sql, params = f"{parent} = 'object' AND {sql}", [*more, *params]
    return sql, params


def filtered(
    d: Dialect, resource_id: str, prefix: tuple[str, ...], where: Any
) -> tuple[str, str, list[Any], list[Any]]:
    """The items under ``prefix`` as the CTE ``i``, and ``where`` (``SearchItems.where``) on them.

    Returns the ``WITH`` clause, the conditions (SQL on ``i.doc``) and the parameters of each.
    """
    # The conditions read the document of each row under the prefix, parsed once (json_doc).
    conditions = [_condition(d, path, operator, operand) for path, operator, operand in where]
    cte = (
        f"WITH i AS {d.json_cte} (SELECT namespace, key, value, created_at, updated_at, {d.json_doc} AS doc "
        f"FROM items WHERE resource_id = ? AND {UNDER})"
    )
    return (
        cte,
        " AND ".join(c for c, _ in conditions),
        [resource_id, *under(prefix)],
        [p for _, more in conditions for p in more],
    )


@plan_of(SearchItems)
def search_items(d: Dialect, op: SearchItems) -> Plan[list[Item]]:
    if op.offset < 0 or (op.limit is not None and op.limit < 0):
        raise UsageError(f"limit and offset must not be negative: {op.limit}, {op.offset}")
    columns = "namespace, key, value, created_at, updated_at"
    sql = f"SELECT {columns} FROM items WHERE resource_id = ? AND {UNDER}"
    params = [op.resource_id, *under(op.prefix)]
    if op.where:
        cte, kept, at, of = filtered(d, op.resource_id, op.prefix, op.where)
        sql, params = f"{cte} SELECT {columns} FROM i WHERE {kept}", [*at, *of]
    if op.limit is not None:
        sql += " ORDER BY updated_at DESC, namespace, key LIMIT ? OFFSET ?"
        params += [op.limit, op.offset]
    else:
        sql += " ORDER BY updated_at DESC, namespace, key"
    rows = yield Q(sql, params)
    if op.limit is None and op.offset:
        rows = rows[op.offset :]
    return [_item_from_row(op.resource_id, r) for r in rows]


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
    yield Q(
        "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) VALUES (?,?,?,?,?,?)",
        [
            (
                resource_id,
                path_text(tuple(it["namespace"])),
                it["key"],
                canonical_json(it["value"]),
                d.ts(from_iso(it["created_at"])),
                d.ts(from_iso(it["updated_at"])),
            )
            for it in dump["items"]
        ],
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
