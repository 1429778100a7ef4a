"""The PostgreSQL plans that differ from SQLite's: append, claims, full text, seq lookups, vector search,
the LangGraph store's items (filters on jsonb, a put in one statement).

Each is registered on ``POSTGRES`` (or, where it needs the vector extension,
``PGVECTOR``) beside its function; every other operation runs its shared
plan (``Op.plan``).
"""

from __future__ import annotations

import json
from operator import ge, gt, le, lt
from typing import Any

from ..core.errors import UsageError
from ..core.messages import Message
from ..core.records import Item, ScheduledTask
from ..core.text import CONTEXT_COLUMN_WEIGHT, DATE_COLUMN_WEIGHT
from . import ops
from ._op import DialectPlans
from ._rows import EVENT_COLUMNS, event_params, row_to_message
from ._sql import Dialect, Plan, Q, UniqueViolation, later
from .capabilities import item_vectors, items, resources
from .capabilities.agent_state import fair_claim
from .capabilities.consolidation import renew_consolidation
from .capabilities.recall import finish_embeddings

#: PostgreSQL's own plans; the PostgreSQL store looks each operation's plan up here.
POSTGRES = DialectPlans("PostgreSQL")
#: Those of a store that found the vector extension (``PostgresStore.pgvector_schema``); the rest are ``POSTGRES``'s.
PGVECTOR = DialectPlans("PostgreSQL with pgvector", under=POSTGRES)

#: Messages per append statement: 10 parameters each stays far below
#: PostgreSQL's 65,535 parameters per statement.
APPEND_CHUNK = 1000


@POSTGRES.plan_of(ops.Append)
def append(d: Dialect, op: ops.Append) -> Plan[list[Message]]:
    """One statement per ``APPEND_CHUNK`` messages: a turn is one round trip, atomic on its own.

    The thread row is upserted first, reserving the turn's positions
    (``last_position`` grows by the number of messages), and that upsert is
    joined into the insert's source rows: its row lock is held before any
    sequence value is drawn, so writers of one thread queue, each turn gets
    consecutive positions and consecutive places in the thread, and two
    turns never share a position. The lock is the transaction's, so a
    larger append (several statements, run in one transaction) keeps it
    from its first chunk to the commit. The same statement gives each new
    message its full text with its neighbours' words (``_CONTEXT``) and sets
    the 2 messages before them again, and fills the embedding queue for the
    ids policy chose.
    """
    stored: list[Message] = []
    for start in range(0, len(op.messages), APPEND_CHUNK):
        stored += yield from _append_chunk(op, op.messages[start : start + APPEND_CHUNK])
    return stored


#: A message's full text as migration 0013 defined it, for the new messages of a statement and the 2
#: before them in their thread (migration 0027): ``v`` holds the new ones (``ord`` 0, 1, 2… in
#: order, ``created_at``). ``line`` is the thread's last 4 messages but the new ones (their ids are
#: bound: ``k`` -1 for the newest… -4), then the new ones, each with its own words (weight A) read
#: or made once; ``near`` gives each its 2 neighbours on either side; ``again`` sets the 2 before the
#: new ones again (their later neighbours changed). Both read and write through VOLATILE functions,
#: whose queries see a turn committed after this statement began (before it held the thread's row);
#: ``again`` is a plain CTE, so the statement must read it (``_AGAIN_READ``). Four ``?``: the
#: resource, thread and new ids of the tail, then the resource of ``again``; ``{after}`` is a
#: CTE the tail is read after (the thread's row, locked), or nothing.
_CONTEXT = (
    "line AS (SELECT -p.n AS k, p.seq, p.own FROM caderno_thread_tail(?, ?, ?::text[]) p{after} "
    "  UNION ALL SELECT v.ord, NULL, setweight(caderno_terms(v.content), 'A') FROM v), "
    "near AS (SELECT k, seq, own, lag(own) OVER w AS b1, lag(own, 2) OVER w AS b2, lead(own) OVER w AS a1, "
    "  lead(own, 2) OVER w AS a2 FROM line WINDOW w AS (ORDER BY k)), "
    "again AS (SELECT caderno_set_context(?, n.seq, n.own, n.b1, n.b2, n.a1, n.a2) FROM near n WHERE n.k IN (-1, -2)), "
)
#: The condition that makes a statement run ``again`` (always true).
_AGAIN_READ = "(SELECT count(*) FROM again) >= 0"
#: The full text of a new message (``v`` joined to ``near`` as ``n``).
_NEW_TSV = "caderno_context_tsv(n.own, n.b1, n.b2, n.a1, n.a2, v.created_at)"
_MESSAGE_VALUES = "(?, ?, ?, ?, ?, ?, ?::double precision, ?::timestamptz, ?, ?::int)"
_MESSAGE_COLUMNS = "id, role, content, tool_calls, tool_call_id, name, importance, created_at, metadata, ord"


def _append_chunk(op: ops.Append, messages: tuple[Message, ...]) -> Plan[list[Message]]:
    rows_sql = ", ".join([_MESSAGE_VALUES] * len(messages))
    sql = (
        "WITH r AS (INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, ?, ?) "
        "  ON CONFLICT (resource_id) DO NOTHING), "
        "t AS (INSERT INTO threads (resource_id, thread_id, created_at, last_position) VALUES (?, ?, ?, ?) "
        "  ON CONFLICT (resource_id, thread_id) DO UPDATE SET last_position = threads.last_position + ? "
        "  RETURNING last_position - ? AS after), "
        f"v AS (SELECT * FROM (VALUES {rows_sql}) AS v ({_MESSAGE_COLUMNS})), "
        + _CONTEXT.format(after=" WHERE EXISTS (SELECT FROM t)")
        + "ins AS (INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
        "importance, created_at, metadata, position, search_tsv) "
        "SELECT ?, ?, v.id, v.role, v.content, v.tool_calls, v.tool_call_id, v.name, v.importance, "
        f"v.created_at, v.metadata, t.after + v.ord + 1, {_NEW_TSV} "
        "FROM v JOIN near n ON n.k = v.ord CROSS JOIN t ORDER BY v.ord RETURNING id, seq, position), "
        "q AS (INSERT INTO embedding_queue (resource_id, seq) SELECT ?, seq FROM ins WHERE id = ANY(?::text[])) "
        f"SELECT id, seq, position FROM ins WHERE {_AGAIN_READ}"
    )
    now = messages[0].created_at
    rid, tid, n = op.resource_id, op.thread_id, len(messages)
    params: list[Any] = [rid, now, now, rid, tid, now, n, n, n]
    for i, m in enumerate(messages):
        params += [*event_params(m), i]
    params += [
        rid,
        tid,
        [m.id for m in messages],
        rid,
        rid,
        tid,
        rid,
        sorted(m.id for m in messages if m.id in op.embed),
    ]
    try:
        rows = yield Q(sql, params)
    except UniqueViolation:
        raise UsageError(f"a message id is already stored for resource {rid!r}") from None
    placed = {r[0]: (r[1], r[2]) for r in rows}
    return [m._stamped(seq=placed[m.id][0], position=placed[m.id][1]) for m in messages]


@POSTGRES.plan_of(ops.ImportResource)
def import_resource(d: Dialect, op: ops.ImportResource) -> Plan[None]:
    """The shared plan, each thread's messages inserted with their full text (``_import_messages``)."""
    return (yield from resources.import_resource(d, op, insert_messages=_import_messages))


def _import_messages(rid: str, tid: str, messages: list[Message], positions: list[int]) -> Plan[None]:
    """A new thread's messages at their positions, ``APPEND_CHUNK`` a statement, each with its full
    text (``_CONTEXT``; a later chunk sets the last 2 of the one before again)."""
    for start in range(0, len(messages), APPEND_CHUNK):
        chunk = list(zip(messages[start : start + APPEND_CHUNK], positions[start : start + APPEND_CHUNK], strict=True))
        rows_sql = ", ".join([_MESSAGE_VALUES[:-1] + ", ?::bigint)"] * len(chunk))
        sql = (
            f"WITH v AS (SELECT * FROM (VALUES {rows_sql}) AS v ({_MESSAGE_COLUMNS}, position)), "
            + _CONTEXT.format(after="")
            + "ins AS (INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, "
            "name, importance, created_at, metadata, position, search_tsv) "
            "SELECT ?, ?, v.id, v.role, v.content, v.tool_calls, v.tool_call_id, v.name, v.importance, "
            f"v.created_at, v.metadata, v.position, {_NEW_TSV} FROM v JOIN near n ON n.k = v.ord "
            "ORDER BY v.ord RETURNING 1) "
            f"SELECT count(*) FROM ins WHERE {_AGAIN_READ}"
        )
        params: list[Any] = []
        for i, (m, position) in enumerate(chunk):
            params += [*event_params(m), i, position]
        params += [rid, tid, [m.id for m, _ in chunk], rid, rid, tid]
        yield Q(sql, params, "one")


@POSTGRES.plan_of(ops.ClaimEmbeddings)
def claim_embeddings(d: Dialect, op: ops.ClaimEmbeddings) -> Plan[list[ops.EmbeddingJob]]:
    # SKIP LOCKED: workers on any number of machines take disjoint batches
    # without waiting on each other; the lease (not_before) then keeps the
    # batch theirs after this transaction commits.
    # With resource_id: that resource's due jobs, newest first (a recall embedding what was just written).
    select = (
        "SELECT q.resource_id, q.seq, e.content, q.attempts FROM embedding_queue q "
        "JOIN events e ON e.resource_id = q.resource_id AND e.seq = q.seq WHERE q.not_before <= ? "
    )
    if op.resource_id is None:
        query = Q(select + "ORDER BY q.not_before, q.seq LIMIT ? FOR UPDATE OF q SKIP LOCKED", (d.ts(op.now), op.limit))
    else:
        query = Q(
            select + "AND q.resource_id = ? ORDER BY q.seq DESC LIMIT ? FOR UPDATE OF q SKIP LOCKED",
            (d.ts(op.now), op.resource_id, op.limit),
        )
    rows = yield query
    until = later(d, op.now, op.lease_seconds)
    yield Q(
        "UPDATE embedding_queue SET not_before = ? WHERE resource_id = ? AND seq = ?",
        [(until, r[0], r[1]) for r in rows],
        "many",
    )
    return [ops.EmbeddingJob(resource_id=r[0], seq=r[1], content=r[2], attempts=r[3]) for r in rows]


@POSTGRES.plan_of(ops.RenewEmbeddings)
def renew_embeddings(d: Dialect, op: ops.RenewEmbeddings) -> Plan[None]:
    """Each job's lease to ``now + lease_seconds``, while it is still leased (see ``ops.RenewEmbeddings``)."""
    # One statement. SKIP LOCKED: a row another transaction holds (a worker
    # finishing it after this lease ran out, an erase) is left to it, so a
    # renewal never waits and never deadlocks; it is tried again at the next one.
    jobs = sorted(op.jobs)
    yield Q(
        "UPDATE embedding_queue SET not_before = ? WHERE (resource_id, seq) IN ("
        "SELECT q.resource_id, q.seq FROM embedding_queue q "
        "JOIN unnest(?::text[], ?::bigint[]) AS j (resource_id, seq) USING (resource_id, seq) "
        "WHERE q.not_before > ? ORDER BY q.resource_id, q.seq FOR UPDATE OF q SKIP LOCKED)",
        (later(d, op.now, op.lease_seconds), [r for r, _ in jobs], [s for _, s in jobs], d.ts(op.now)),
        "none",
    )


#: ts_rank_cd's weights, in its order {D, C, B, A}: the message's own words
#: (A) 1, its neighbours' (B) ``CONTEXT_COLUMN_WEIGHT``, its day's (C)
#: ``DATE_COLUMN_WEIGHT`` (migration 0013_index_time_context labels them);
#: nothing is labelled D. Scaled so the largest is 1, the most ts_rank_cd takes.
_TOP = max(1.0, CONTEXT_COLUMN_WEIGHT, DATE_COLUMN_WEIGHT)
RANK_WEIGHTS = "{" + ", ".join(f"{w / _TOP:.4f}" for w in (0.0, DATE_COLUMN_WEIGHT, CONTEXT_COLUMN_WEIGHT, 1.0)) + "}"


@POSTGRES.plan_of(ops.LexicalSearch)
def lexical_search(d: Dialect, op: ops.LexicalSearch) -> Plan[list[tuple[int, float]]]:
    if not op.terms:
        return []
    # Terms are bound as one parameter and OR-ed by tsquery itself, stemmed
    # by both configurations the index uses (migration 0013_index_time_context);
    # ts_rank_cd (cover density) is PostgreSQL's lexical rank.
    sql = (
        f"SELECT seq, ts_rank_cd('{RANK_WEIGHTS}'::float4[], search_tsv, q) AS score FROM events, "
        "(SELECT to_tsquery('english', ?) || to_tsquery('portuguese', ?) AS q) tq "
        "WHERE resource_id = ? AND kind = 'message' AND search_tsv @@ q"
    )
    words = " | ".join(op.terms)
    params: list[Any] = [words, words, op.resource_id]
    if op.thread_id is not None:
        sql += " AND thread_id = ?"
        params.append(op.thread_id)
    rows = yield Q(sql + " ORDER BY score DESC, seq DESC LIMIT ?", (*params, op.limit))
    return [(r[0], float(r[1])) for r in rows]


@POSTGRES.plan_of(ops.ReadBySeq)
def read_by_seq(d: Dialect, op: ops.ReadBySeq) -> Plan[list[tuple[str, Message]]]:
    if not op.seqs:
        return []
    rows = yield Q(
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND seq = ANY(?)",
        (op.resource_id, list(op.seqs)),
    )
    return [(r[0], row_to_message(r[1:])) for r in rows]


@POSTGRES.plan_of(ops.ClaimConsolidation)
def claim_consolidation(d: Dialect, op: ops.ClaimConsolidation) -> Plan[bool]:
    if op.renew:
        return (yield from renew_consolidation(d, op))
    # SKIP LOCKED: a thread another worker is claiming right now is simply
    # not ours; the lease keeps it theirs afterwards.
    row = yield Q(
        "SELECT 1 FROM threads WHERE resource_id = ? AND thread_id = ? "
        "AND (consolidating_until IS NULL OR consolidating_until < ?) FOR UPDATE SKIP LOCKED",
        (op.resource_id, op.thread_id, d.ts(op.now)),
        "one",
    )
    if row is None:
        return False
    yield Q(
        "UPDATE threads SET consolidating_until = ?, consolidating_by = ? WHERE resource_id = ? AND thread_id = ?",
        (later(d, op.now, op.lease_seconds), op.holder, op.resource_id, op.thread_id),
        "none",
    )
    return True


@POSTGRES.plan_of(ops.ClaimDueTasks)
def claim_due_tasks(d: Dialect, op: ops.ClaimDueTasks) -> Plan[list[ScheduledTask]]:
    # SKIP LOCKED: workers on any number of machines take disjoint tasks; the
    # lease and the moved next run keep them theirs after the commit. OF: the
    # fair ranking's window function may not be locked, only the table. The
    # ranking picks its rows before locking, so a worker claiming in the same
    # milliseconds as another may find its picks locked and take nothing until
    # its next poll (measured: 4 concurrent claims of 40 due tasks took 10, 0,
    # 10, 0); no task is ever taken twice.
    return (yield from fair_claim(d, op, lock="FOR UPDATE OF scheduled_tasks SKIP LOCKED"))


@PGVECTOR.plan_of(ops.SearchVectors)
def search_vectors(d: Dialect, op: ops.SearchVectors) -> Plan[list[tuple[int, float]]]:
    """The best ``k`` by inner product (``<#>`` is its negative), in the database.

    ``vec::vector(dim)`` with ``dim = N`` is the expression and predicate of
    the dimension's partial HNSW index (``hnsw_index``), so the planner can
    use it; for a small resource it may rather read the resource's rows and
    sort them, which is exact. The threshold is applied to the top ``k``
    afterwards: the best ``k`` above it are the best ``k`` cut at it.
    """
    dim = len(op.query)
    if not dim or op.k <= 0:
        return []
    query = "[" + ",".join(repr(float(x)) for x in op.query) + "]"
    distance = f"(m.vec::vector({dim:d})) <#> ?::vector({dim:d})"
    sql = f"SELECT m.seq, {distance} FROM embeddings m"
    params: list[Any] = [query]
    if op.thread_id is not None:
        sql += " JOIN events e ON e.resource_id = m.resource_id AND e.seq = m.seq AND e.thread_id = ?"
        params.append(op.thread_id)
    sql += f" WHERE m.resource_id = ? AND m.model = ? AND m.dim = {dim:d} AND m.vec IS NOT NULL ORDER BY {distance} LIMIT ?"
    rows = yield Q(sql, (*params, op.resource_id, op.model, query, op.k))
    return [(r[0], -float(r[1])) for r in rows if -float(r[1]) >= op.min_similarity]


@PGVECTOR.plan_of(ops.FinishEmbeddings)
def finish_embeddings_with_vec(d: Dialect, op: ops.FinishEmbeddings) -> Plan[None]:
    """The shared plan, each vector also stored as a pgvector value (what ``search_vectors`` reads)."""
    return (yield from finish_embeddings(d, op, vec=True))


# -- items: the parsed document (``doc``, migration 0022) --------------------------------------


def _nested(path: tuple[str, ...], leaf: Any) -> str:
    """``{"a": {"b": leaf}}`` for the path ``("a", "b")``, as JSON text (a ``jsonb`` parameter)."""
    for key in reversed(path):
        leaf = {key: leaf}
    return json.dumps(leaf, ensure_ascii=False)


def _arrow(path: tuple[str, ...]) -> tuple[str, list[Any]]:
    """The field at ``path`` read key by key with ``->`` (NULL past a missing key, a non-object, or into an array)."""
    return "doc" + " -> ?::text" * len(path), list(path)


def _parent_is_object(path: tuple[str, ...]) -> tuple[str, list[Any]]:
    """The field's parent is an object: the document itself for a top-level key (not NULL: migration 0022)."""
    if len(path) == 1:
        return "jsonb_typeof(doc) = 'object'", []
    return "doc @> ?::jsonb", [_nested(path[:-1], {})]


def jsonb_condition(d: Dialect, path: tuple[str, ...], operator: str, operand: Any) -> tuple[str, list[Any]]:
    """One condition of ``SearchItems.where`` on the parsed document, with the semantics it documents.

    Equality is containment, ``doc @> '{"a": {"b": 1}}'``: it needs every
    parent to be an object and never takes a key for an array index (as
    ``#>`` would). A number or boolean also matches its twin (``1`` and
    ``true``, ``0`` and ``false``: ``True == 1``). A comparison reads the
    field with ``->`` and takes numbers, and the booleans whose 1 or 0 meets
    it (decided here: the operand is known). Keys and operands are
    parameters, inside the JSON of a containment too.
    """
    items.check_condition(path, operator, operand)
    params: list[Any]
    if operand is None:
        field, params = _arrow(path)
        if operator == "$ne":
            return f"{field} <> 'null'::jsonb", params  # NULL where missing
        parent, more = _parent_is_object(path)
        return f"({parent} AND coalesce({field}, 'null'::jsonb) = 'null'::jsonb)", [*more, *params]
    if operator in ("$eq", "$ne"):
        equal = [operand]
        if isinstance(operand, bool):
            equal.append(int(operand))
        elif not isinstance(operand, str) and operand in (0, 1):
            equal.append(bool(operand))
        sql = " OR ".join(["doc @> ?::jsonb"] * len(equal))
        params = [_nested(path, value) for value in equal]
        if operator == "$eq":
            return f"({sql})", params
        parent, more = _parent_is_object(path)
        return f"({parent} AND NOT ({sql}))", [*more, *params]
    number = int(operand) if isinstance(operand, bool) else operand
    field, keys = _arrow(path)
    sql = f"jsonb_typeof({field}) = 'number' AND {field} {items.COMPARE[operator]} ?::jsonb"
    params = [*keys, *keys, json.dumps(number)]
    for flag, as_number in (("true", 1), ("false", 0)):
        if _COMPARISONS[operator](as_number, number):
            sql += f" OR {field} = '{flag}'::jsonb"
            params += keys
    return f"({sql})", params


_COMPARISONS = {"$gt": gt, "$gte": ge, "$lt": lt, "$lte": le}


@POSTGRES.plan_of(ops.SearchItems)
def search_items(d: Dialect, op: ops.SearchItems) -> Plan[list[Item]]:
    """The shared plan, its filter on ``doc`` (``jsonb_condition``)."""
    return (yield from items.search_items(d, op, jsonb_condition))


@POSTGRES.plan_of(ops.ReadItemVectors)
def read_item_vectors(d: Dialect, op: ops.ReadItemVectors) -> Plan[list[ops.ItemVectors]]:
    """The shared plan, its filter on ``doc`` (``jsonb_condition``)."""
    return (yield from item_vectors.read_item_vectors(d, op, jsonb_condition))


@POSTGRES.plan_of(ops.RankItems)
def rank_items(d: Dialect, op: ops.RankItems) -> Plan[list[tuple[Item, float]]]:
    """The shared plan, its filter on ``doc`` (``jsonb_condition``)."""
    return (yield from item_vectors.rank_items(d, op, jsonb_condition))


_ITEM_UPSERT = (
    "INSERT INTO items (resource_id, namespace, key, value, doc, created_at, updated_at) "
    "SELECT ?, ?, ?, v, v::jsonb, ?, ? FROM (SELECT ?::text AS v) AS written "
    "ON CONFLICT (resource_id, namespace, key) "
    "DO UPDATE SET value = excluded.value, doc = excluded.doc, updated_at = excluded.updated_at RETURNING 1"
)


@POSTGRES.plan_of(ops.PutItem)
def put_item(d: Dialect, op: ops.PutItem) -> Plan[None]:
    """One statement (run alone, no BEGIN/COMMIT): the upsert of the item, its text parsed into ``doc``
    once, and of its embedding job — replaced, so its old vectors go — or, without texts, the job's deletion.

    The item's row is written first (the job's statement reads the CTE that
    writes it), so a put locks the item and then its job, as a deletion's
    cascade does.
    """
    it = op.item
    assert it.updated_at is not None
    key = (it.resource_id, items.path_text(it.namespace), it.key)
    written = (*key, d.ts(it.updated_at), d.ts(it.updated_at), items.document(it.value))
    if not op.embed:
        yield Q(
            f"WITH written AS ({_ITEM_UPSERT}) DELETE FROM item_embeddings WHERE {items.ITEM_KEY} "
            "AND EXISTS (SELECT FROM written)",
            (*written, *key),
            "none",
        )
        return
    yield Q(
        f"WITH written AS ({_ITEM_UPSERT}) "
        "INSERT INTO item_embeddings (resource_id, namespace, key, updated_at, texts, not_before) "
        "SELECT ?, ?, ?, ?, ?, ? FROM written ON CONFLICT (resource_id, namespace, key) DO UPDATE SET "
        "updated_at = excluded.updated_at, texts = excluded.texts, model = NULL, dim = NULL, vectors = NULL, "
        "attempts = 0, error = NULL, not_before = excluded.not_before",
        (*written, *items.job_params(d, it.resource_id, it.namespace, it.key, it.updated_at, op.embed)),
        "none",
    )
