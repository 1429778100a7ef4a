"""Ready to shard by ``resource_id``: every statement the plans send, read for the resource it names.

A distributed PostgreSQL (Citus, distribution column ``resource_id``) sends
a statement to one shard when it pins one value of that column. This test
runs every operation's plan on a real PostgreSQL over the scene of
``_op_cases`` (a transaction rolled back per case), reads each statement
sent, and checks that each one that touches a tenant table (one with a
``resource_id`` column) pins one resource:

* ``resource_id = ?``, ``resource_id IN (?)`` and ``resource_id = ANY(?)``
  (qualified or not), read with the value bound to them;
* an INSERT whose column list holds ``resource_id``, read with the value
  of that column in each row of its VALUES or in its SELECT list;
* a table joined on ``a.resource_id = b.resource_id`` to a table pinned so.

Every reference to a tenant table must be pinned, through its alias (an
unqualified ``resource_id`` belongs to the nearest table named before it),
and all pins of one statement must bind the same value — one resource per
statement (per row of an ``executemany``, each row being a statement).
A statement that is not pinned must be listed in ``MULTI_SHARD`` with why
and how often it runs; a listed statement that no case sends any more
fails too. Tables without ``resource_id`` must be listed in ``GLOBAL_TABLES``
(reference tables, copied to every node).

The reading is a set of regular expressions over the SQL text, written for
the shapes the plans use (one scope per statement, CTEs, correlated
subqueries, UNION branches); the check that each value read is one of the
scene's resources catches a misread placeholder. Statements run by
triggers inside the database are not seen here (see docs/guides/scaling.md).

The schema is checked from the live catalog: every primary key and unique
index of a tenant table starts with ``resource_id``, and every foreign key
between tenant tables carries it on both sides. docs/guides/scaling.md must name
every table in its distribution commands and every multi-shard operation.

Run as a script, it prints the figures docs/guides/scaling.md quotes:
``PYTHONPATH=tests .venv/bin/python tests/stores/test_shard_ready.py``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import _op_cases
import pytest
from _op_cases import RESOURCES, Scene, cases, runnable, sent

from caderno.agent.scheduler import POLL_SECONDS
from caderno.memory.engines.indexer import Indexer
from caderno.stores import ops, postgres
from caderno.stores._sql import Q

pytestmark = pytest.mark.postgres

#: The fixture, under its name here (pytest finds fixtures by module attribute).
scene = _op_cases.scene

DOC = Path(__file__).resolve().parents[2] / "docs" / "guides" / "scaling.md"

#: Tables without ``resource_id``: Citus reference tables (a copy on every node).
GLOBAL_TABLES = {
    "api_keys": "an HTTP request's key is found by the hash of its token, before any resource is known",
    "schema_migrations": "the ledger of applied migrations",
}

_BATCH = inspect.signature(Indexer).parameters  # the embedding worker's defaults

# How often a statement runs, for the docs' table.
EMBEDDING_BATCH = (
    f"per embedding batch: after each commit (up to {_BATCH['batch_size'].default} jobs), "
    f"every {_BATCH['poll_seconds'].default:g} s when idle"
)
SCHEDULER_POLL = f"per scheduler poll: every {POLL_SECONDS:g} s in each `serve` / `worker` process"
CONSOLIDATION_PASS = "per consolidation pass: every `consolidation_interval_hours` (6 by default)"
STARTUP = "at the start of `serve` / `worker` with config tasks"
READINESS = "per admin `GET /v1/resources`, and once at `serve` / `mcp` start while old file notebooks remain"
ADMIN = "per admin call (CLI)"


@dataclasses.dataclass(frozen=True)
class MultiShard:
    """A statement that reads or writes several resources on purpose."""

    op: str
    """The operation type that sends it."""
    statement: str
    """Its verb and the tenant tables it touches, sorted (``Reading.key``)."""
    runs: str
    why: str
    locks: bool = False
    """It locks rows (``FOR UPDATE`` …): Citus refuses that across shards, so it must change before sharding."""


MULTI_SHARD = [
    MultiShard(
        "ClaimEmbeddings",
        "SELECT embedding_queue events",
        EMBEDDING_BATCH,
        "one queue for every resource: a worker takes the oldest due jobs wherever they are (SKIP LOCKED)",
        locks=True,
    ),
    MultiShard(
        "RenewEmbeddings",
        "UPDATE embedding_queue",
        "per embedding batch that takes over a third of its lease: every third of the lease (10 s by default)",
        "the claimed batch's lease, wherever its jobs are (SKIP LOCKED)",
        locks=True,
    ),
    MultiShard(
        "ClaimItemEmbeddings",
        "SELECT item_embeddings",
        EMBEDDING_BATCH + " (LangGraph store items)",
        "the items' embedding queue, claimed across resources like the messages'",
        locks=True,
    ),
    MultiShard(
        "ClaimDueTasks",
        "SELECT scheduled_tasks",
        SCHEDULER_POLL,
        "due tasks of every resource, by next_run_at (SKIP LOCKED)",
        locks=True,
    ),
    MultiShard(
        "RenewTaskClaims",
        "UPDATE scheduled_tasks",
        "per claimed task batch: every third of the claim's lease (20 s by default) while the batch runs",
        "the tasks of one claim, by their claim token, wherever their resources are",
    ),
    MultiShard(
        "FindConsolidationCandidates",
        "SELECT events",
        CONSOLIDATION_PASS,
        "the pass looks for long unconsolidated threads in every resource (resource_id=None)",
    ),
    MultiShard(
        "ReadFactCandidates",
        "SELECT events",
        CONSOLIDATION_PASS + ", with a fast model",
        "salient user messages not yet read for facts, in every resource (resource_id=None)",
    ),
    MultiShard(
        "ListResources",
        "SELECT allowed_prefixes facts macros notebooks resources scheduled_tasks",
        READINESS,
        "every resource id, for admin views (the readiness probe is a one-row key lookup)",
    ),
    MultiShard("ListTasks", "SELECT scheduled_tasks", ADMIN, "`caderno tasks list` without --resource"),
    MultiShard(
        "SyncConfigTasks",
        "SELECT scheduled_tasks",
        STARTUP,
        "config tasks name any resource: every task is read to find the config ones",
    ),
    MultiShard("CountPendingEmbeddings", "SELECT embedding_queue", ADMIN, "the queue's length (`recall`, `reindex`)"),
    MultiShard("Reindex", "DELETE embeddings", ADMIN, "`caderno reindex` without --resource: every vector dropped"),
    MultiShard("Reindex", "SELECT events", ADMIN, "… every message queued again"),
    MultiShard("Reindex", "UPDATE item_embeddings", ADMIN, "… every item queued again"),
    MultiShard("Reindex", "SELECT embedding_queue", ADMIN, "… and the queue counted"),
]


# -- reading a statement ---------------------------------------------------------------------

#: Words that follow a table name without being its alias.
_KEYWORDS = re.compile(
    r"(?i)where|set|on|join|left|right|inner|outer|cross|full|natural|lateral|order|group|union|except|"
    r"intersect|limit|offset|using|values|select|returning|for|having|window|default|as"
)
_REF = re.compile(r"\b(FROM|JOIN|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)
_NEXT_WORD = re.compile(r"\s*(?:AS\s+)?(\w+)", re.IGNORECASE)
_NEXT_IN_LIST = re.compile(r"\s*,\s*(\w+)")
_COL = r"(?:(\w+)\.)?resource_id"
_JOIN = re.compile(rf"{_COL}\s*=\s*{_COL}\b", re.IGNORECASE)
_EQ = re.compile(rf"{_COL}\s*=\s*(?:ANY\s*\(\s*)?(\?)", re.IGNORECASE)
_EQ_LEFT = re.compile(rf"(\?)\s*=\s*{_COL}\b", re.IGNORECASE)
_IN = re.compile(rf"{_COL}\s+IN\s*\(\s*(\?(?:\s*,\s*\?)*)\s*\)", re.IGNORECASE)
_INSERT = re.compile(r"\bINSERT\s+INTO\s+(\w+)\s*\(([^()]*)\)\s*(VALUES|SELECT)\b", re.IGNORECASE)
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_PARAM = re.compile(r"^\?(?:::[\w ]+)?$")
_LOCKS = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b", re.IGNORECASE)


@dataclasses.dataclass
class _Ref:
    at: int
    table: str
    alias: str


@dataclasses.dataclass(frozen=True)
class Reading:
    """What one statement touches, and the resource each of its rows pins."""

    verb: str
    tables: frozenset[str]
    """Every known table it names (tenant and global)."""
    tenant: frozenset[str]
    unpinned: frozenset[str]
    """Tenant tables no resource_id pin reaches."""
    values: tuple[frozenset[Any], ...]
    """Per row (one for a plain statement), the values bound at its pins."""
    locks: bool
    """It takes row locks (``FOR UPDATE``, ``FOR SHARE`` …)."""

    @property
    def key(self) -> str:
        return " ".join([self.verb, *sorted(self.tenant)])

    @property
    def pinned(self) -> bool:
        return bool(self.tenant) and not self.unpinned and all(len(v) == 1 for v in self.values)


def _top_level_split(text: str) -> list[tuple[int, str]]:
    """``text`` cut at commas outside parentheses: ``(offset, part)`` pairs."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:  # the end of an enclosing group (a CTE's body)
                parts.append((start, text[start:i]))
                return parts
        elif ch == "," and depth == 0:
            parts.append((start, text[start:i]))
            start = i + 1
    parts.append((start, text[start:]))
    return parts


def _groups(text: str) -> Iterable[tuple[int, str]]:
    """The parenthesised groups of a VALUES list: ``(offset of the inside, inside)``."""
    i = 0
    while True:
        while i < len(text) and text[i] in " \n\t,":
            i += 1
        if i >= len(text) or text[i] != "(":
            return
        depth = 0
        for j in range(i, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                yield i + 1, text[i + 1 : j]
                i = j + 1
                break
        else:
            return


def read(q: Q, known: frozenset[str], tenant: frozenset[str]) -> Reading:
    """Read one statement: the known tables it touches, and which of them a resource_id pin reaches."""
    sql = _LITERAL.sub(lambda m: "'" + " " * (len(m.group()) - 2) + "'", q.sql)  # offsets kept
    marks = [m.start() for m in re.finditer(r"\?", sql)]
    index = {at: n for n, at in enumerate(marks)}

    refs: list[_Ref] = []
    for m in _REF.finditer(sql):
        table, end = m.group(2), m.end()
        while table in known:
            word = _NEXT_WORD.match(sql, end)
            alias = table
            if word and not _KEYWORDS.fullmatch(word.group(1)):
                alias, end = word.group(1), word.end()
            refs.append(_Ref(m.start(2), table, alias))
            more = _NEXT_IN_LIST.match(sql, end) if m.group(1).upper() == "FROM" else None
            if not more:
                break
            table, end = more.group(1), more.end()
    refs.sort(key=lambda r: r.at)

    def resolve(qualifier: str | None, at: int) -> list[int]:
        if qualifier is not None:
            return [i for i, r in enumerate(refs) if r.alias == qualifier]
        before = [i for i, r in enumerate(refs) if r.at < at]
        return before[-1:]

    # Pins: (the refs they reach, the placeholder indexes they bind).
    pins: list[tuple[list[int], list[int]]] = []
    parent = list(range(len(refs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for m in _JOIN.finditer(sql):
        for a in resolve(m.group(1), m.start()):
            for b in resolve(m.group(2), m.start()):
                parent[find(a)] = find(b)
    for m in _EQ.finditer(sql):
        pins.append((resolve(m.group(1), m.start()), [index[m.start(2)]]))
    for m in _EQ_LEFT.finditer(sql):
        pins.append((resolve(m.group(2), m.start()), [index[m.start(1)]]))
    for m in _IN.finditer(sql):
        inside = m.start(2)
        pins.append((resolve(m.group(1), m.start()), [index[at] for at in marks if inside <= at < m.end(2)]))
    for m in _INSERT.finditer(sql):
        columns = [c.strip().lower() for c in m.group(2).split(",")]
        target = [i for i, r in enumerate(refs) if r.at == m.start(1)]
        if "resource_id" not in columns:
            continue
        n = columns.index("resource_id")
        rest = m.end()
        rows = list(_groups(sql[rest:])) if m.group(3).upper() == "VALUES" else [(0, sql[rest:])]
        for offset, inside in rows:
            items = _top_level_split(inside)
            if m.group(3).upper() == "SELECT":  # the select list ends at its FROM
                cut = re.search(r"\bFROM\b", inside, re.IGNORECASE)
                items = _top_level_split(inside[: cut.start()] if cut else inside)
            if n < len(items) and _PARAM.match(items[n][1].strip()):
                at = rest + offset + items[n][0] + items[n][1].index("?")
                pins.append((target, [index[at]]))

    reached = {find(i) for refs_, _ in pins for i in refs_}
    unpinned = frozenset(r.table for i, r in enumerate(refs) if r.table in tenant and find(i) not in reached)
    rows: Sequence[Sequence[Any]] = q.params if q.fetch == "many" else [q.params]
    values = []
    for row in rows:
        bound: set[Any] = set()
        for _, slots in pins:
            for slot in slots:
                value = row[slot]
                bound.update(value if isinstance(value, list | tuple) else [value])
        values.append(frozenset(bound))
    verb = sql.split(None, 1)[0].upper()
    touched = frozenset(r.table for r in refs)
    locks = _LOCKS.search(sql) is not None
    return Reading(verb, touched, touched & tenant, unpinned, tuple(values), locks)


# -- the live schema ------------------------------------------------------------------------------


async def _fetch(store: postgres.PostgresStore, sql: str) -> list[Any]:
    """Rows of a catalog query; ``%(schema)s`` is the store's schema (named: behind a pooler a
    connection's search path is set per transaction, so ``current_schema()`` would not be it)."""
    assert store.schema is not None, "the scene's store has its own schema"
    async with store._pool.connection() as conn:
        return list(await (await conn.execute(sql, {"schema": store.schema})).fetchall())


async def tables(store: postgres.PostgresStore) -> tuple[frozenset[str], frozenset[str]]:
    """``(tenant, other)`` tables of the store's schema: with a resource_id column, and without."""
    rows = await _fetch(
        store,
        "SELECT t.table_name, bool_or(c.column_name = 'resource_id') FROM information_schema.tables t "
        "JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name "
        "WHERE t.table_schema = %(schema)s AND t.table_type = 'BASE TABLE' GROUP BY t.table_name",
    )
    return frozenset(r[0] for r in rows if r[1]), frozenset(r[0] for r in rows if not r[1])


async def readings(scene: Scene, tenant: frozenset[str], known: frozenset[str]) -> list[tuple[ops.Op[Any], Q, Reading]]:
    out = []
    for op in cases(scene):
        if type(op) in runnable(scene):
            out += [(op, q, read(q, known, tenant)) for q in await sent(scene.store, op)]
    return out


# -- the checks -------------------------------------------------------------------------------------

_TENANT = frozenset({"events", "threads", "resources", "facts", "embeddings"})


@pytest.mark.parametrize(
    ("sql", "params", "fetch", "pinned"),
    [
        ("SELECT seq FROM events WHERE resource_id = ? AND thread_id = ?", ("a", "t"), "all", True),
        ("SELECT seq FROM events WHERE thread_id = ?", ("t",), "all", False),
        (
            "SELECT 1 FROM events e JOIN threads t ON t.resource_id = e.resource_id WHERE e.resource_id = ?",
            ("a",),
            "all",
            True,
        ),
        (
            "SELECT 1 FROM events e JOIN threads t ON t.thread_id = e.thread_id WHERE e.resource_id = ?",
            ("a",),
            "all",
            False,
        ),
        ("SELECT 1 FROM events e, threads t WHERE e.resource_id = ?", ("a",), "all", False),
        ("SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads", ("a",), "all", False),
        (
            "SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads WHERE resource_id = ?",
            ("a", "a"),
            "all",
            True,
        ),
        (
            "SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads WHERE resource_id = ?",
            ("a", "b"),
            "all",
            False,
        ),
        ("SELECT seq FROM events WHERE resource_id IN (?, ?)", ("a", "b"), "all", False),
        ("SELECT seq FROM events WHERE resource_id IN (?, ?)", ("a", "a"), "all", True),
        ("SELECT seq FROM events WHERE resource_id = ANY(?)", (["a", "b"],), "all", False),
        ("SELECT seq FROM events WHERE resource_id = ANY(?)", (["a"],), "all", True),
        ("INSERT INTO facts (resource_id, key) VALUES (?, ?), (?, ?)", ("a", "k", "b", "k"), "none", False),
        ("INSERT INTO facts (resource_id, key) VALUES (?, ?), (?, ?)", ("a", "k", "a", "k"), "none", True),
        ("INSERT INTO facts (key, value) VALUES (?, ?)", ("k", "v"), "none", False),
        (
            "INSERT INTO facts (resource_id, key) SELECT ?, key FROM facts WHERE resource_id = ?",
            ("a", "a"),
            "none",
            True,
        ),
        ("INSERT INTO facts (resource_id, key) SELECT resource_id, key FROM facts", (), "none", False),
        ("DELETE FROM embeddings WHERE resource_id = ? AND seq = ?", [("a", 1), ("b", 2)], "many", True),
        ("DELETE FROM embeddings WHERE seq = ?", [(1,), (2,)], "many", False),
        ("UPDATE events SET content = 'FROM threads' WHERE resource_id = ?", ("a",), "none", True),
        ("SELECT id FROM api_keys WHERE token_hash = ?", ("h",), "one", False),
    ],
)
def test_the_reading_tells_a_pinned_statement_from_the_others(sql: str, params: Any, fetch: Any, pinned: bool) -> None:
    reading = read(Q(sql, params, fetch), _TENANT | {"api_keys"}, _TENANT)
    assert reading.pinned is pinned, reading


async def test_every_statement_on_a_tenant_table_pins_one_resource(scene: Scene) -> None:
    tenant, other = await tables(scene.store)
    seen = await readings(scene, tenant, tenant | other)
    assert {type(op) for op, _, _ in seen} == runnable(scene), "every operation needs a case in _op_cases.py"

    listed = {(m.op, m.statement) for m in MULTI_SHARD}
    multi = {(type(op).__name__, r.key) for op, _, r in seen if r.tenant and not r.pinned}
    unlisted = sorted(
        f"{type(op).__name__}: {r.key} (unpinned: {sorted(r.unpinned)}, values {list(r.values)}): {q.sql[:300]}"
        for op, q, r in seen
        if r.tenant and not r.pinned and (type(op).__name__, r.key) not in listed
    )
    assert unlisted == [], (
        "statements on tenant tables that pin no single resource "
        "(make each pin one, or list it in MULTI_SHARD with why and how often it runs):\n" + "\n".join(unlisted)
    )
    assert sorted(listed - multi) == [], "MULTI_SHARD names statements no operation sends any more"
    locking = {(type(op).__name__, r.key) for op, _, r in seen if r.tenant and not r.pinned and r.locks}
    said = {(m.op, m.statement) for m in MULTI_SHARD if m.locks}
    assert sorted(said ^ locking) == [], "MULTI_SHARD's locks must say which multi-shard statements lock rows"

    misread = sorted(
        f"{type(op).__name__}: {set(v)}: {q.sql[:200]}"
        for op, q, r in seen
        if r.pinned
        for v in r.values
        if not v <= RESOURCES
    )
    assert misread == [], (
        "a pin read a value that is not one of the scene's resources (_op_cases.RESOURCES): "
        "the reading is off, or a case names another resource\n" + "\n".join(misread)
    )


async def test_tables_without_resource_id_are_the_listed_global_ones(scene: Scene) -> None:
    tenant, other = await tables(scene.store)
    assert sorted(other) == sorted(GLOBAL_TABLES), "a table without resource_id is a reference table: list it"
    assert tenant and not tenant & set(GLOBAL_TABLES)


async def test_every_key_of_a_tenant_table_starts_with_resource_id(scene: Scene) -> None:
    tenant, _ = await tables(scene.store)
    keys = await _fetch(
        scene.store,
        "SELECT c.relname, i.indexrelid::regclass::text, a.attname FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indrelid "
        "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0] "
        "WHERE c.relnamespace = %(schema)s::regnamespace AND i.indisunique",
    )
    assert {table for table, _, _ in keys} >= tenant, "every tenant table has a primary key"
    wrong = sorted(
        f"{table}: {index} starts with {first}"
        for table, index, first in keys
        if table in tenant and first != "resource_id"
    )
    assert wrong == [], "unique keys of tenant tables must start with resource_id (Citus enforces them per shard)"

    foreign = await _fetch(
        scene.store,
        "SELECT con.conname, c.relname, f.relname, "
        "ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o) "
        "      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.o), "
        "ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o) "
        "      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.o) "
        "FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_class f ON f.oid = con.confrelid "
        "WHERE con.contype = 'f' AND c.relnamespace = %(schema)s::regnamespace",
    )
    assert foreign, "the schema has foreign keys between tenant tables (events -> threads at least)"
    bad = sorted(
        f"{name}: {table}{tuple(cols)} -> {ref}{tuple(ref_cols)}"
        for name, table, ref, cols, ref_cols in foreign
        if (ref in tenant and table not in tenant)
        or (
            ref in tenant
            and not any(c == "resource_id" and r == "resource_id" for c, r in zip(cols, ref_cols, strict=True))
        )
    )
    assert bad == [], "a foreign key to a distributed table must come from one and pair resource_id with resource_id"


async def test_the_scaling_doc_distributes_every_table_and_names_every_multi_shard_operation(scene: Scene) -> None:
    tenant, other = await tables(scene.store)
    text = DOC.read_text()
    distributed = set(re.findall(r"create_distributed_table\('(\w+)'", text))
    reference = set(re.findall(r"create_reference_table\('(\w+)'", text))
    assert sorted(tenant - distributed) == [], f"docs/guides/scaling.md: add create_distributed_table for these ({DOC})"
    assert sorted(other - reference) == [], f"docs/guides/scaling.md: add create_reference_table for these ({DOC})"
    assert sorted((distributed | reference) - tenant - other) == [], "docs/guides/scaling.md names tables that do not exist"
    unnamed = sorted({m.op for m in MULTI_SHARD if f"`{m.op}`" not in text})
    assert unnamed == [], f"docs/guides/scaling.md: name these multi-shard operations in its list: {unnamed}"


# -- the figures of docs/guides/scaling.md --------------------------------------------------------------------


def _shape(sql: str) -> str:
    """A statement's text with its lists of placeholders (VALUES rows, IN lists) folded to one."""
    text = " ".join(sql.split())
    text = re.sub(r"IN \(\?(?:,\s*\?)+\)", "IN (?)", text)
    return re.sub(r"(\([^()]*\?[^()]*\))(?:,\s*\([^()]*\?[^()]*\))+", r"\1", text)


def summary(seen: list[tuple[ops.Op[Any], Q, Reading]]) -> str:
    sends = len(seen)
    shapes: dict[str, str] = {}
    for _, q, r in seen:
        kind = "pinned" if r.pinned else "multi-shard" if r.tenant else "reference" if r.tables else "no table"
        shapes[_shape(q.sql)] = kind
    counts = {k: sum(1 for v in shapes.values() if v == k) for k in ("pinned", "multi-shard", "reference", "no table")}
    sent_counts = {
        "pinned": sum(1 for *_, r in seen if r.pinned),
        "multi-shard": sum(1 for *_, r in seen if r.tenant and not r.pinned),
        "reference": sum(1 for *_, r in seen if not r.tenant and r.tables),
    }
    lines = [
        f"operation types: {len({type(op) for op, _, _ in seen})}; cases: {len({id(op) for op, _, _ in seen})}",
        f"statements sent over the cases: {sends} ({sent_counts})",
        f"distinct statements: {len(shapes)} ({counts})",
        "",
        "| operation | statement | runs | why | locks rows |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| `{m.op}` | {m.statement} | {m.runs} | {m.why} | {'yes' if m.locks else ''} |" for m in MULTI_SHARD]
    return "\n".join(lines)


async def _main() -> None:
    from _pg import pg_schema

    with pg_schema() as url:
        async with _op_cases.open_scene(url) as opened:
            tenant, other = await tables(opened.store)
            print(f"tenant tables: {len(tenant)}; global tables: {sorted(other)}")
            print(summary(await readings(opened, tenant, tenant | other)))


if __name__ == "__main__":
    import asyncio

    asyncio.run(_main())
