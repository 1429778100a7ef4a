"""The shared plans: one per operation that SQLite and PostgreSQL run alike.

Each function takes the dialect and the operation and returns a plan (see
``caderno.stores._sql``). ``SHARED`` maps operation types to them; a backend
adds its own handlers for the few operations that differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..core.clock import from_iso
from ..core.errors import Conflict, UsageError
from ..core.messages import Message, Thread, WorkingMemory
from ..core.records import Fact
from . import _plans_notebook, _plans_state, ops
from ._rows import EVENT_COLUMNS, dumps, event_params, loads, row_to_fact, row_to_message, row_to_thread
from ._sql import (
    PLACED_EVENT_INSERT,
    RESOURCE_TABLES,
    THREAD_COLUMNS,
    Dialect,
    Plan,
    Q,
    UniqueViolation,
    enqueue_embeddings,
    ensure_resource,
    iso,
    later,
    marks,
)
from .export import FACT_FIELDS, FACT_HISTORY_FIELDS, new_dump

_EVENTS_OF_THREAD = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? AND kind = 'message'"
_LOG_COLUMNS = "message_id, thread_id, action, role, old_content, actor, reason, created_at"


# -- history and thread records ------------------------------------------------------------


def read_thread(d: Dialect, op: ops.ReadThread) -> Plan[list[Message]]:
    sql, params = _EVENTS_OF_THREAD, list[Any]([op.resource_id, op.thread_id])
    if op.before is not None:
        sql += " AND position < ?"
        params.append(op.before)
    if op.limit is None:
        rows = yield Q(sql + " ORDER BY seq", params)
    else:
        rows = yield Q(sql + " ORDER BY seq DESC LIMIT ?", [*params, op.limit])
        rows = rows[::-1]
    return [row_to_message(r) for r in rows]


def list_threads(d: Dialect, op: ops.ListThreads) -> Plan[list[Thread]]:
    rows = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? ORDER BY updated_at DESC, t.thread_id DESC",
        (op.resource_id,),
    )
    return [row_to_thread(op.resource_id, r) for r in rows]


def get_thread(d: Dialect, op: ops.GetThread | ops.PutThread) -> Plan[Thread | None]:
    row = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? AND t.thread_id = ?",
        (op.resource_id, op.thread_id),
        "one",
    )
    return row_to_thread(op.resource_id, row) if row else None


def put_thread(d: Dialect, op: ops.PutThread) -> Plan[Thread | None]:
    if op.create:
        yield ensure_resource(d, op.resource_id, op.now)
        title = None if op.title is ops.UNSET else op.title
        metadata = None if op.metadata is ops.UNSET else op.metadata
        done = yield Q(
            "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (resource_id, thread_id) DO NOTHING",
            (op.resource_id, op.thread_id, title, dumps(metadata), d.ts(op.now)),
            "rowcount",
        )
    else:
        sets: list[tuple[str, Any]] = []
        if op.title is not ops.UNSET:
            sets.append(("title", op.title))
        if op.metadata is not ops.UNSET:
            sets.append(("metadata", dumps(op.metadata)))
        assignments = ", ".join(f"{col} = ?" for col, _ in sets) or "title = title"
        done = yield Q(
            f"UPDATE threads SET {assignments} WHERE resource_id = ? AND thread_id = ?",
            (*(v for _, v in sets), op.resource_id, op.thread_id),
            "rowcount",
        )
    if not done:
        return None
    return (yield from get_thread(d, op))


def delete_thread(d: Dialect, op: ops.DeleteThread) -> Plan[bool]:
    key = (op.resource_id, op.thread_id)
    # The lease first, as in ``erase_resource`` (``RESOURCE_TABLES``): a turn in flight on the thread stores nothing.
    yield Q("DELETE FROM turn_leases WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM notebook_snapshots WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM message_log WHERE resource_id = ? AND thread_id = ?", key, "none")
    yield Q("DELETE FROM events WHERE resource_id = ? AND thread_id = ?", key, "none")
    deleted = yield Q("DELETE FROM threads WHERE resource_id = ? AND thread_id = ?", key, "rowcount")
    return bool(deleted)


def _log_change(d: Dialect, resource_id: str, thread_id: str, m: Message, action: str, old: str | None, op: Any) -> Q:
    return Q(
        f"INSERT INTO message_log (resource_id, {_LOG_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
        (resource_id, m.id, thread_id, action, m.role, old, op.actor, op.reason, d.ts(op.now)),
        "none",
    )


def _message_by_id(resource_id: str, message_id: str) -> Plan[tuple[str, Message] | None]:
    row = yield Q(
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND id = ? AND kind = 'message'",
        (resource_id, message_id),
        "one",
    )
    return (row[0], row_to_message(row[1:])) if row else None


def pop_message(d: Dialect, op: ops.PopMessage) -> Plan[Message | None]:
    row = yield Q(_EVENTS_OF_THREAD + " ORDER BY seq DESC LIMIT 1", (op.resource_id, op.thread_id), "one")
    if row is None:
        return None
    m = row_to_message(row)
    yield Q("DELETE FROM events WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    yield _log_change(d, op.resource_id, op.thread_id, m, "pop", None, op)
    return m


def edit_message(d: Dialect, op: ops.EditMessage) -> Plan[Message | None]:
    found = yield from _message_by_id(op.resource_id, op.message_id)
    if found is None:
        return None
    thread_id, m = found
    importance, embed = op.rescore(m._stamped(content=op.content))
    yield Q(
        "UPDATE events SET content = ?, importance = ? WHERE resource_id = ? AND seq = ?",
        (op.content, importance, op.resource_id, m.seq),
        "none",
    )
    yield _log_change(d, op.resource_id, thread_id, m, "edit", m.content, op)
    # The old vector describes the old text: drop it, and queue the new text.
    yield Q("DELETE FROM embeddings WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    if embed:
        yield enqueue_embeddings(op.resource_id, [m.seq or 0])
    else:
        yield Q("DELETE FROM embedding_queue WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    return m._stamped(content=op.content, importance=importance)


def delete_message(d: Dialect, op: ops.DeleteMessage) -> Plan[Message | None]:
    found = yield from _message_by_id(op.resource_id, op.message_id)
    if found is None:
        return None
    thread_id, m = found
    yield Q("DELETE FROM events WHERE resource_id = ? AND seq = ?", (op.resource_id, m.seq), "none")
    yield _log_change(d, op.resource_id, thread_id, m, "delete", None, op)
    return m


def read_message_log(d: Dialect, op: ops.ReadMessageLog) -> Plan[list[dict[str, Any]]]:
    sql, params = f"SELECT {_LOG_COLUMNS} FROM message_log WHERE resource_id = ?", [op.resource_id]
    if op.message_id is not None:
        sql += " AND message_id = ?"
        params.append(op.message_id)
    rows = yield Q(sql + " ORDER BY id", params)
    keys = _LOG_COLUMNS.split(", ")
    return [{**dict(zip(keys, r, strict=True)), "created_at": iso(r[-1])} for r in rows]


def set_importance(d: Dialect, op: ops.SetImportance) -> Plan[bool]:
    done = yield Q(
        "UPDATE events SET importance = ? WHERE resource_id = ? AND id = ?",
        (op.value, op.resource_id, op.message_id),
        "rowcount",
    )
    return bool(done)


# -- working memory ----------------------------------------------------------------------


def read_working_memory(d: Dialect, op: ops.ReadWorkingMemory) -> Plan[WorkingMemory | None]:
    row = yield Q(
        "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = ?", (op.resource_id,), "one"
    )
    if row is None or row[0] is None:
        return None
    return WorkingMemory(resource_id=op.resource_id, data=loads(row[0]), version=row[1], updated_at=_when(row[2]))


def patch_working_memory(d: Dialect, op: ops.PatchWorkingMemory) -> Plan[WorkingMemory]:
    rid = op.resource_id
    yield ensure_resource(d, rid, op.now)
    row = yield Q(f"SELECT working_memory, version FROM resources WHERE resource_id = ?{d.for_update}", (rid,), "one")
    current, version = loads(row[0]), row[1]
    if op.expected_version is not None and op.expected_version != version:
        raise Conflict(
            f"working memory of {rid!r} is at version {version}, not {op.expected_version}",
            resource_id=rid,
            expected=op.expected_version,
            actual=version,
        )
    data = op.update(current)
    yield Q(
        "UPDATE resources SET working_memory = ?, version = ?, updated_at = ? WHERE resource_id = ?",
        (dumps(data), version + 1, d.ts(op.now), rid),
        "none",
    )
    yield Q(
        "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
        (rid, version + 1, dumps(op.patch), op.source, d.ts(op.now)),
        "none",
    )
    return WorkingMemory(resource_id=rid, data=data, version=version + 1, updated_at=op.now)


def read_working_memory_log(d: Dialect, op: ops.ReadWorkingMemoryLog) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT version, patch, source, created_at FROM working_memory_log WHERE resource_id = ? ORDER BY id",
        (op.resource_id,),
    )
    return [{"version": v, "patch": loads(p), "source": s, "created_at": iso(c)} for v, p, s, c in rows]


# -- whole resources -----------------------------------------------------------------------


def list_resources(d: Dialect, op: ops.ListResources) -> Plan[list[str]]:
    rows = yield Q(
        "SELECT resource_id FROM resources UNION SELECT resource_id FROM facts UNION "
        "SELECT resource_id FROM scheduled_tasks UNION SELECT resource_id FROM macros UNION "
        "SELECT resource_id FROM allowed_prefixes UNION SELECT resource_id FROM notebooks ORDER BY 1"
    )
    return [r[0] for r in rows]


def erase_resource(d: Dialect, op: ops.EraseResource) -> Plan[None]:
    for table in RESOURCE_TABLES:
        yield Q(f"DELETE FROM {table} WHERE resource_id = ?", (op.resource_id,), "none")


def export_resource(d: Dialect, op: ops.ExportResource) -> Plan[dict[str, Any]]:
    rid = op.resource_id
    dump = new_dump(rid)
    wm = yield from read_working_memory(d, ops.ReadWorkingMemory(resource_id=rid))
    if wm is not None:
        dump["working_memory"] = {"data": wm.data, "version": wm.version, "updated_at": iso(wm.updated_at)}
    dump["working_memory_log"] = yield from read_working_memory_log(d, ops.ReadWorkingMemoryLog(resource_id=rid))
    facts = yield Q(f"SELECT {', '.join(FACT_FIELDS)} FROM facts WHERE resource_id = ? ORDER BY category, key", (rid,))
    dump["facts"] = [dict(zip(FACT_FIELDS, (*r[:4], iso(r[4]), iso(r[5])), strict=True)) for r in facts]
    history = yield Q(
        f"SELECT {', '.join(FACT_HISTORY_FIELDS)} FROM facts_history WHERE resource_id = ? ORDER BY id", (rid,)
    )
    dump["fact_history"] = [
        dict(zip(FACT_HISTORY_FIELDS, (*r[:4], iso(r[4]), iso(r[5])), strict=True)) for r in history
    ]
    dump["message_log"] = yield from read_message_log(d, ops.ReadMessageLog(resource_id=rid))
    dump.update((yield from _plans_state.export_state(d, rid)))
    dump["notebook"] = yield from _plans_notebook.export_notebook(d, rid)
    threads = yield Q(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.resource_id = ? "
        "ORDER BY coalesce((SELECT min(seq) FROM events e WHERE e.resource_id = t.resource_id "
        "AND e.thread_id = t.thread_id), 0), t.thread_id",
        (rid,),
    )
    for row in threads:
        t = row_to_thread(rid, row)
        rows = yield Q(_EVENTS_OF_THREAD + " ORDER BY seq", (rid, t.id))
        dump["threads"].append(
            {
                "id": t.id,
                "title": t.title,
                "metadata": t.metadata,
                "created_at": iso(t.created_at),
                "updated_at": iso(t.updated_at),
                "messages": [row_to_message(r).to_dict() for r in rows],
            }
        )
    return dump


def import_resource(d: Dialect, op: ops.ImportResource) -> Plan[None]:
    dump, now = op.dump, op.now
    rid = dump["resource_id"]
    exists = yield Q(
        "SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM facts WHERE resource_id = ? UNION ALL SELECT 1 FROM scheduled_tasks "
        "WHERE resource_id = ? UNION ALL SELECT 1 FROM macros WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM allowed_prefixes WHERE resource_id = ? "
        "UNION ALL SELECT 1 FROM items WHERE resource_id = ? UNION ALL SELECT 1 FROM notebooks "
        "WHERE resource_id = ? LIMIT 1",
        (rid,) * 8,
        "one",
    )
    if exists:
        raise UsageError(f"resource {rid!r} already holds data; erase it before importing")
    wm = dump.get("working_memory")
    yield Q(
        "INSERT INTO resources (resource_id, working_memory, version, created_at, updated_at) VALUES (?,?,?,?,?)",
        (
            rid,
            dumps(wm["data"]) if wm else None,
            int(wm["version"]) if wm else 0,
            d.ts(now),
            d.ts(from_iso(wm["updated_at"])) if wm and wm.get("updated_at") else d.ts(now),
        ),
        "none",
    )
    yield Q(
        "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
        [(rid, e["version"], dumps(e["patch"]), e["source"], e["created_at"]) for e in dump["working_memory_log"]],
        "many",
    )
    yield Q(
        f"INSERT INTO facts (resource_id, {', '.join(FACT_FIELDS)}) VALUES (?,?,?,?,?,?,?)",
        [(rid, *(f[k] for k in FACT_FIELDS)) for f in dump["facts"]],
        "many",
    )
    yield Q(
        f"INSERT INTO facts_history (resource_id, {', '.join(FACT_HISTORY_FIELDS)}) VALUES (?,?,?,?,?,?,?)",
        [(rid, *(h[k] for k in FACT_HISTORY_FIELDS)) for h in dump["fact_history"]],
        "many",
    )
    yield Q(
        f"INSERT INTO message_log (resource_id, {_LOG_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
        [(rid, *(e[k] for k in _LOG_COLUMNS.split(", "))) for e in dump["message_log"]],
        "many",
    )
    for t in dump["threads"]:
        positions = ops.import_positions(t["_parsed"])
        yield Q(
            "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at, last_position) "
            "VALUES (?,?,?,?,?,?)",
            (
                rid,
                t["id"],
                t.get("title"),
                dumps(t.get("metadata")),
                t.get("created_at") or d.ts(now),
                max(positions, default=0),
            ),
            "none",
        )
        try:
            rows = [(rid, t["id"], *event_params(m), p) for m, p in zip(t["_parsed"], positions, strict=True)]
            yield Q(PLACED_EVENT_INSERT, rows, "many")
        except UniqueViolation:
            raise UsageError("the export holds a message id twice") from None
    yield from _plans_state.import_state(d, rid, dump, now)
    yield from _plans_notebook.import_notebook(d, rid, dump.get("notebook") or {}, now)
    rows = yield Q("SELECT seq, role, content FROM events WHERE resource_id = ?", (rid,))
    yield enqueue_embeddings(rid, [seq for seq, role, content in rows if role in op.embed_roles and content])


# -- facts ----------------------------------------------------------------------------------


def upsert_fact(d: Dialect, op: ops.UpsertFact) -> Plan[Fact]:
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


def read_facts(d: Dialect, op: ops.ReadFacts) -> Plan[list[Fact]]:
    sql, params = f"SELECT {', '.join(FACT_FIELDS)} FROM facts WHERE resource_id = ?", [op.resource_id]
    if op.category is not None:
        sql += " AND category = ?"
        params.append(op.category)
    rows = yield Q(sql + " ORDER BY updated_at DESC, category, key", params)
    return [row_to_fact(op.resource_id, r) for r in rows]


def read_fact_history(d: Dialect, op: ops.ReadFactHistory) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT value, source, valid_from, replaced_at FROM facts_history "
        "WHERE resource_id = ? AND category = ? AND key = ? ORDER BY id",
        (op.resource_id, op.category, op.key),
    )
    return [{"value": r[0], "source": r[1], "valid_from": iso(r[2]), "replaced_at": iso(r[3])} for r in rows]


def forget_fact(d: Dialect, op: ops.ForgetFact) -> Plan[bool]:
    done = yield Q(
        "DELETE FROM facts WHERE resource_id = ? AND category = ? AND key = ?",
        (op.resource_id, op.category, op.key),
        "rowcount",
    )
    return bool(done)


# -- recall ---------------------------------------------------------------------------------


def finish_embeddings(d: Dialect, op: ops.FinishEmbeddings, *, vec: bool = False) -> Plan[None]:
    """With ``vec`` (PostgreSQL with pgvector) each vector is stored as a pgvector value too."""
    done = [(rid, seq) for rid, seq, _ in op.done]
    live: set[tuple[str, int]] = set()
    for rid in sorted({rid for rid, _ in done}):
        seqs = sorted(seq for r, seq in done if r == rid)
        rows = yield Q(
            f"SELECT seq FROM events WHERE resource_id = ? AND seq IN ({marks(len(seqs))}) ORDER BY seq{d.key_share}",
            (rid, *seqs),
        )
        live.update((rid, r[0]) for r in rows)
    # A new row (new feed id) even when re-embedding, so vector caches reading
    # the change feed see it; a message deleted meanwhile gets no vector.
    yield Q(
        "DELETE FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?", [(*k, op.model) for k in done], "many"
    )
    rows = [(rid, seq, op.model, op.dim, vector) for rid, seq, vector in op.done if (rid, seq) in live]
    if vec:
        yield Q(
            "INSERT INTO embeddings (resource_id, seq, model, dim, vector, vec) VALUES (?, ?, ?, ?, ?, ?::vector)",
            [(*row, vector_text(row[4])) for row in rows],
            "many",
        )
    else:
        yield Q("INSERT INTO embeddings (resource_id, seq, model, dim, vector) VALUES (?, ?, ?, ?, ?)", rows, "many")
    if op.codes:  # beside each vector, under its change-feed id (read_vectors reads them in its place)
        yield Q(
            "INSERT INTO embedding_codes (resource_id, id, model, seq, codes) SELECT ?, id, model, seq, ? "
            "FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?",
            [
                (rid, codes, rid, seq, op.model)
                for (rid, seq, _), codes in zip(op.done, op.codes, strict=True)
                if (rid, seq) in live
            ],
            "many",
        )
    if op.sparse:  # as the codes: under the vector's id, deleted with it
        yield Q(
            "INSERT INTO sparse_terms (resource_id, id, model, seq, terms) SELECT ?, id, ?, seq, ? "
            "FROM embeddings WHERE resource_id = ? AND seq = ? AND model = ?",
            [
                (rid, op.sparse_model, terms, rid, seq, op.model)
                for (rid, seq, _), terms in zip(op.done, op.sparse, strict=True)
                if (rid, seq) in live and terms
            ],
            "many",
        )
    yield Q("DELETE FROM embedding_queue WHERE resource_id = ? AND seq = ?", done, "many")
    yield Q(
        "UPDATE embedding_queue SET attempts = attempts + 1, error = ?, not_before = ? WHERE resource_id = ? AND seq = ?",
        [(error, later(d, op.now, after), rid, seq) for rid, seq, error, after in op.failed],
        "many",
    )


def read_sparse(d: Dialect, op: ops.ReadSparse) -> Plan[dict[int, bytes]]:
    if not op.seqs:
        return {}
    rows = yield Q(
        f"SELECT seq, terms FROM sparse_terms WHERE resource_id = ? AND model = ? AND seq IN ({marks(len(op.seqs))})",
        (op.resource_id, op.model, *op.seqs),
    )
    return {int(seq): bytes(terms) for seq, terms in rows}


def vector_text(vector: bytes) -> str:
    """float32 bytes as pgvector's text form; ``repr`` of each float32 reads back exactly."""
    from array import array

    return "[" + ",".join(map(repr, array("f", vector))) + "]"


def count_pending_embeddings(d: Dialect, op: ops.CountPendingEmbeddings) -> Plan[int]:
    where = ["resource_id = ?"] if op.resource_id is not None else []
    if not op.failed:
        where.append("attempts = 0")
    sql = "SELECT count(*) FROM embedding_queue" + (" WHERE " + " AND ".join(where) if where else "")
    row = yield Q(sql, () if op.resource_id is None else (op.resource_id,), "one")
    return int(row[0])


#: Vectors one statement of ``read_vectors`` hands back as one value (on
#: SQLite; see ``step`` there for PostgreSQL): 1,024 x 384 float32 is 1.5 MB,
#: a buffer that stays in cache. SQLite's ``group_concat`` grows its buffer by
#: doubling: 100k vectors read in ~170 ms a step of 1,024 rows, ~240 ms of
#: 4,096 and ~1.2 s in one statement here; and one value may not pass 1 GB.
VECTOR_READ_CHUNK = 1_024


def read_vectors(d: Dialect, op: ops.ReadVectors) -> Plan[ops.VectorRows]:
    """The vectors after ``op.after_id`` in a few large values: no Python object per vector.

    A vector stored with its codes (``embedding_codes``) comes as those
    codes, half the bytes and already quantized; one stored before them
    comes as float32, read only when the two tables' counts say some lack
    codes. Each statement joins up to ``VECTOR_READ_CHUNK`` vectors into one
    blob and their seqs into one text, in change-feed order; the threads
    come apart, one row per thread. A resource's first read takes them from
    ``events`` alone (its thread index holds them), not through a join per
    vector.
    """
    feed = (op.resource_id, op.model, max(0, op.after_id - d.feed_overlap) if op.after_id else 0)
    uncoded = yield Q(
        "SELECT (SELECT count(*) FROM embeddings WHERE resource_id = ? AND model = ? AND id > ?) "
        "- (SELECT count(*) FROM embedding_codes WHERE resource_id = ? AND model = ? AND id > ?)",
        (*feed, *feed),
        "one",
    )
    seqs: list[int] = []
    blocks: list[bytes] = []
    last_id = op.after_id
    if uncoded[0]:
        seqs, blocks, last_id = yield from _read_blocks(
            d,
            op,
            "SELECT id, seq, vector AS value FROM embeddings m WHERE resource_id = ? AND model = ? AND id > ? "
            "AND NOT EXISTS (SELECT 1 FROM embedding_codes c WHERE c.resource_id = m.resource_id AND c.id = m.id)",
        )
    coded_seqs, codes, coded_last = yield from _read_blocks(
        d, op, "SELECT id, seq, codes AS value FROM embedding_codes WHERE resource_id = ? AND model = ? AND id > ?"
    )
    last_id = max(last_id, coded_last)
    if not seqs and not coded_seqs:
        return ops.VectorRows(seqs=[], vectors=[], threads={}, last_id=last_id)
    concat = "group_concat" if d.name == "sqlite" else "string_agg"
    if op.after_id:  # a refresh: the threads of the new vectors alone
        rows = yield Q(
            f"SELECT e.thread_id, {concat}(CAST(e.seq AS TEXT), ',') FROM embeddings m "
            "JOIN events e ON e.resource_id = m.resource_id AND e.seq = m.seq "
            "WHERE m.resource_id = ? AND m.model = ? AND m.id > ? GROUP BY e.thread_id",
            (op.resource_id, op.model, max(0, op.after_id - d.feed_overlap)),
        )
    else:
        rows = yield Q(
            f"SELECT thread_id, {concat}(CAST(seq AS TEXT), ',') FROM events WHERE resource_id = ? GROUP BY thread_id",
            (op.resource_id,),
        )
    threads = {thread_id: json.loads(f"[{text}]") for thread_id, text in rows}
    return ops.VectorRows(
        seqs=seqs + coded_seqs, vectors=blocks, threads=threads, last_id=last_id, coded=len(coded_seqs), codes=codes
    )


def _read_blocks(d: Dialect, op: ops.ReadVectors, rows: str) -> Plan[tuple[list[int], list[bytes], int]]:
    """The seqs, glued ``value`` blocks and last id of ``rows`` (a SELECT of ``id, seq, value`` over the
    feed's resource, model and id, in that order of parameters) past ``op.after_id``."""
    # On PostgreSQL identity values are drawn at insert but become visible at
    # commit, so a row with a lower id can appear after a higher one was read:
    # each statement re-reads a window below the last id it saw (the caller
    # keeps the later copy of a seq read twice). SQLite's single writer needs
    # no window. A statement reads several times the window, so each moves on
    # and a re-read costs at most a fifth of it.
    concat, blob = (
        ("group_concat", "CAST(group_concat(value, '') AS BLOB)")
        if d.name == "sqlite"
        else ("string_agg", "string_agg(value, ''::bytea)")
    )
    step = VECTOR_READ_CHUNK + 4 * d.feed_overlap
    seqs: list[int] = []
    blocks: list[bytes] = []
    last_id = op.after_id
    start = max(0, op.after_id - d.feed_overlap) if op.after_id else 0
    while True:
        count, top, seq_text, values = yield Q(
            f"SELECT count(*), max(id), {concat}(CAST(seq AS TEXT), ','), {blob} FROM ("
            f"{rows} ORDER BY id LIMIT ?) AS chunk",
            (op.resource_id, op.model, start, step),
            "one",
        )
        if not count:
            break
        seqs += json.loads(f"[{seq_text}]")  # twice as fast as int() on each
        blocks.append(bytes(values))
        last_id = max(last_id, top)
        if count < step:
            break
        start = top - d.feed_overlap
    return seqs, blocks, last_id


def read_salient(d: Dialect, op: ops.ReadSalient) -> Plan[list[tuple[str, Message]]]:
    # The threshold is inlined (a float, never user text) so both databases
    # can use the partial index events_salient.
    sql = (
        f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? "
        f"AND importance >= {float(op.threshold)!r} AND kind = 'message'"
    )
    params: list[Any] = [op.resource_id]
    if op.thread_id is not None:
        sql += " AND thread_id = ?"
        params.append(op.thread_id)
    rows = yield Q(sql + " ORDER BY seq DESC LIMIT ?", (*params, op.limit))
    return [(r[0], row_to_message(r[1:])) for r in rows]


def read_neighbours(d: Dialect, op: ops.ReadNeighbours) -> Plan[list[Message]]:
    key = (op.resource_id, op.thread_id, op.seq)
    older = yield Q(_EVENTS_OF_THREAD + " AND seq < ? ORDER BY seq DESC LIMIT ?", (*key, op.before))
    newer = yield Q(_EVENTS_OF_THREAD + " AND seq > ? ORDER BY seq LIMIT ?", (*key, op.after))
    return [row_to_message(r) for r in [*reversed(older), *newer]]


def reindex(d: Dialect, op: ops.Reindex) -> Plan[int]:
    where, params = ("WHERE resource_id = ?", (op.resource_id,)) if op.resource_id is not None else ("", ())
    yield Q(f"DELETE FROM embeddings {where}", params, "none")
    rows = yield Q(
        f"SELECT resource_id, seq, role, content FROM events {where or 'WHERE 1 = 1'} AND kind = 'message'", params
    )
    by_resource: dict[str, list[int]] = {}
    for rid, seq, role, content in rows:
        if role in op.embed_roles and content:
            by_resource.setdefault(rid, []).append(seq)
    for rid, seqs in by_resource.items():
        yield enqueue_embeddings(rid, seqs)
    yield _plans_state.requeue_items(d, op.resource_id)
    row = yield Q(f"SELECT count(*) FROM embedding_queue {where}", params, "one")
    return int(row[0])


# -- consolidation --------------------------------------------------------------------------


def find_consolidation_candidates(d: Dialect, op: ops.FindConsolidationCandidates) -> Plan[list[tuple[str, str]]]:
    where, params = ("AND resource_id = ?", [op.resource_id]) if op.resource_id is not None else ("", [])
    rows = yield Q(
        "SELECT resource_id, thread_id FROM events WHERE consolidated_at IS NULL "
        f"{where} GROUP BY resource_id, thread_id HAVING sum(length(content)) > ?",
        (*params, op.min_chars),
    )
    return [(r[0], r[1]) for r in rows]


def renew_consolidation(d: Dialect, op: ops.ClaimConsolidation) -> Plan[bool]:
    """Extend ``op.holder``'s own consolidation lease (the dialects' claims call it for ``renew``).

    Never takes the thread: a lease another worker took over stays theirs.
    """
    done = yield Q(
        "UPDATE threads SET consolidating_until = ? WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
        (later(d, op.now, op.lease_seconds), op.resource_id, op.thread_id, op.holder),
        "rowcount",
    )
    return bool(done)


def release_consolidation(d: Dialect, op: ops.ReleaseConsolidation) -> Plan[None]:
    # Our own lease only: a worker whose lease ran out must not free the
    # thread under the worker that took it over.
    yield Q(
        "UPDATE threads SET consolidating_until = NULL, consolidating_by = NULL "
        "WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
        (op.resource_id, op.thread_id, op.holder),
        "none",
    )


def read_unconsolidated(d: Dialect, op: ops.ReadUnconsolidated) -> Plan[list[Message]]:
    rows = yield Q(_EVENTS_OF_THREAD + " AND consolidated_at IS NULL ORDER BY seq", (op.resource_id, op.thread_id))
    return [row_to_message(r) for r in rows]


def read_summaries(d: Dialect, op: ops.ReadSummaries) -> Plan[list[tuple[Message, bool]]]:
    rows = yield Q(
        f"SELECT {EVENT_COLUMNS}, consolidated_at IS NOT NULL FROM events "
        "WHERE resource_id = ? AND thread_id = ? AND kind = 'summary' ORDER BY seq",
        (op.resource_id, op.thread_id),
    )
    return [(row_to_message(r[:-1]), bool(r[-1])) for r in rows]


def write_summary(d: Dialect, op: ops.WriteSummary) -> Plan[bool]:
    if op.holder is not None:
        # The lease check first, as a write on the thread's row: on PostgreSQL
        # it holds that row until the commit, so no other worker can take
        # the lease over between this check and the summary (an append
        # locks the same row first, too: one lock order).
        held = yield Q(
            "UPDATE threads SET consolidating_by = consolidating_by "
            "WHERE resource_id = ? AND thread_id = ? AND consolidating_by = ?",
            (op.resource_id, op.thread_id, op.holder),
            "rowcount",
        )
        if not held:
            return False  # our lease was taken over: the new holder summarises
    covered = list(op.covered)
    rows = yield Q(
        f"SELECT seq FROM events WHERE resource_id = ? AND thread_id = ? AND seq IN ({marks(len(covered))}) "
        f"AND consolidated_at IS NULL{d.for_update}",
        (op.resource_id, op.thread_id, *covered),
    )
    if len(rows) != len(covered):
        return False  # someone summarised (part of) this range already
    yield Q(
        "INSERT INTO events (resource_id, thread_id, id, kind, role, content, tool_calls, tool_call_id, "
        "name, importance, created_at, metadata) VALUES (?,?,?,'summary',?,?,?,?,?,?,?,?)",
        (op.resource_id, op.thread_id, *event_params(op.summary)),
        "none",
    )
    yield Q(
        f"UPDATE events SET consolidated_at = ? WHERE resource_id = ? AND seq IN ({marks(len(covered))})",
        (d.ts(op.now), op.resource_id, *covered),
        "none",
    )
    return True


def read_fact_candidates(d: Dialect, op: ops.ReadFactCandidates) -> Plan[list[tuple[str, Message]]]:
    where, params = ("AND resource_id = ?", [op.resource_id]) if op.resource_id is not None else ("", [])
    rows = yield Q(
        f"SELECT resource_id, {EVENT_COLUMNS} FROM events WHERE facts_extracted_at IS NULL "
        f"AND role = 'user' AND kind = 'message' AND importance >= ? {where} ORDER BY seq LIMIT ?",
        (op.min_importance, *params, op.limit),
    )
    return [(r[0], row_to_message(r[1:])) for r in rows]


def mark_facts_extracted(d: Dialect, op: ops.MarkFactsExtracted) -> Plan[None]:
    if op.seqs:
        yield Q(
            f"UPDATE events SET facts_extracted_at = ? WHERE resource_id = ? AND seq IN ({marks(len(op.seqs))})",
            (d.ts(op.now), op.resource_id, *op.seqs),
            "none",
        )


def log_consolidation(d: Dialect, op: ops.LogConsolidation) -> Plan[None]:
    yield Q(
        "INSERT INTO consolidation_log (resource_id, thread_id, step, outcome, detail, created_at) VALUES (?,?,?,?,?,?)",
        (op.resource_id, op.thread_id, op.step, op.outcome, op.detail, d.ts(op.now)),
        "none",
    )


def read_consolidation_log(d: Dialect, op: ops.ReadConsolidationLog) -> Plan[list[dict[str, Any]]]:
    rows = yield Q(
        "SELECT thread_id, step, outcome, detail, created_at FROM consolidation_log WHERE resource_id = ? ORDER BY id",
        (op.resource_id,),
    )
    keys = ("thread_id", "step", "outcome", "detail", "created_at")
    return [dict(zip(keys, (*r[:4], iso(r[4])), strict=True)) for r in rows]


def _when(value: Any) -> Any:
    return from_iso(value) if isinstance(value, str) else value


#: Operation type -> plan, for every operation the two SQL backends share.
SHARED: dict[type[Any], Callable[[Dialect, Any], Plan[Any]]] = {
    ops.ReadThread: read_thread,
    ops.ListThreads: list_threads,
    ops.GetThread: get_thread,
    ops.PutThread: put_thread,
    ops.DeleteThread: delete_thread,
    ops.PopMessage: pop_message,
    ops.EditMessage: edit_message,
    ops.DeleteMessage: delete_message,
    ops.ReadMessageLog: read_message_log,
    ops.SetImportance: set_importance,
    ops.ReadWorkingMemory: read_working_memory,
    ops.PatchWorkingMemory: patch_working_memory,
    ops.ReadWorkingMemoryLog: read_working_memory_log,
    ops.ListResources: list_resources,
    ops.EraseResource: erase_resource,
    ops.ExportResource: export_resource,
    ops.ImportResource: import_resource,
    ops.UpsertFact: upsert_fact,
    ops.ReadFacts: read_facts,
    ops.ReadFactHistory: read_fact_history,
    ops.ForgetFact: forget_fact,
    ops.FinishEmbeddings: finish_embeddings,
    ops.CountPendingEmbeddings: count_pending_embeddings,
    ops.ReadVectors: read_vectors,
    ops.ReadSparse: read_sparse,
    ops.ReadSalient: read_salient,
    ops.ReadNeighbours: read_neighbours,
    ops.Reindex: reindex,
    ops.FindConsolidationCandidates: find_consolidation_candidates,
    ops.ReleaseConsolidation: release_consolidation,
    ops.ReadUnconsolidated: read_unconsolidated,
    ops.ReadSummaries: read_summaries,
    ops.WriteSummary: write_summary,
    ops.ReadFactCandidates: read_fact_candidates,
    ops.MarkFactsExtracted: mark_facts_extracted,
    ops.LogConsolidation: log_consolidation,
    ops.ReadConsolidationLog: read_consolidation_log,
    **_plans_state.SHARED_STATE,
    **_plans_notebook.SHARED_NOTEBOOK,
}
