"""``memory://``: plain dicts in this process.

A real adapter, not a mock: it implements the same port and passes the same
conformance suite. It keeps nothing after the process ends.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from ..core.clock import from_iso, to_iso
from ..core.errors import Conflict, UsageError
from ..core.messages import Message, Thread, WorkingMemory
from ..core.records import ApiKey, Fact, Item, Macro, MacroKey, ScheduledTask
from ..core.text import CONTEXT_AFTER, CONTEXT_BEFORE, CONTEXT_COLUMN_WEIGHT, DATE_COLUMN_WEIGHT, date_words, stems
from . import ops
from ._sql import iso
from .export import item_dict, new_dump
from .ops import EmbeddingJob, ItemEmbeddingJob, ItemVectors, VectorRows


@dataclass
class _Thread:
    title: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: Any = None
    updated_at: Any = None
    messages: list[Message] = field(default_factory=list)
    summaries: list[tuple[Message, Any]] = field(default_factory=list)
    claimed_until: float = 0.0
    last_position: int = 0  # the highest position ever given in this thread (deletions keep it)


@dataclass
class _Resource:
    wm: dict[str, Any] | None = None
    version: int = 0
    wm_updated_at: Any = None
    log: list[dict[str, Any]] = field(default_factory=list)
    threads: dict[str, _Thread] = field(default_factory=dict)
    consolidated: set[int] = field(default_factory=set)  # seqs covered by a summary
    facts: dict[tuple[str, str], Fact] = field(default_factory=dict)
    fact_history: list[dict[str, Any]] = field(default_factory=list)
    facts_done: set[int] = field(default_factory=set)
    consolidation_log: list[dict[str, Any]] = field(default_factory=list)
    message_log: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, ScheduledTask] = field(default_factory=dict)  # by name
    task_claims: dict[str, Any] = field(default_factory=dict)  # task id -> claimed until
    macros: dict[MacroKey, Macro] = field(default_factory=dict)
    prefixes: dict[str, Any] = field(default_factory=dict)  # prefix -> approved at
    items: dict[tuple[tuple[str, ...], str], Item] = field(default_factory=dict)  # (namespace, key) -> item
    # (namespace, key) -> {updated_at, texts, model, dim, vectors, attempts, not_before (monotonic), error}
    item_jobs: dict[tuple[tuple[str, ...], str], dict[str, Any]] = field(default_factory=dict)

    def copy(self) -> _Resource:
        """A copy whose containers are new (messages are immutable, so they are shared)."""
        return _Resource(
            wm=self.wm,
            version=self.version,
            wm_updated_at=self.wm_updated_at,
            log=list(self.log),
            threads={tid: _Thread(**{**vars(t), "messages": list(t.messages), "summaries": list(t.summaries)})
                     for tid, t in self.threads.items()},
            consolidated=set(self.consolidated),
            facts=dict(self.facts),
            fact_history=list(self.fact_history),
            facts_done=set(self.facts_done),
            consolidation_log=list(self.consolidation_log),
            message_log=list(self.message_log),
            tasks=dict(self.tasks),
            task_claims=dict(self.task_claims),
            macros=dict(self.macros),
            prefixes=dict(self.prefixes),
            items=dict(self.items),
            item_jobs={k: dict(v) for k, v in self.item_jobs.items()},
        )


class InMemoryStore:
    """Stores everything in dicts; one asyncio lock makes each batch atomic.

    A write batch of several operations keeps a copy of the resources it
    touches and of the queues, and puts them back if an operation fails, so
    a batch is all or nothing here too.
    """

    supports = ops.ALL

    def __init__(self) -> None:
        self._resources: dict[str, _Resource] = {}
        self._seq = 0
        # seq -> {resource_id, thread_id, message, attempts, not_before (monotonic), error}
        self._queue: dict[int, dict[str, Any]] = {}
        self._vectors: dict[tuple[int, str], tuple[int, str, bytes]] = {}  # (seq, model) -> (feed id, rid, vector)
        self._feed = 0
        self._keys: dict[str, tuple[ApiKey, str]] = {}  # id -> (key, token hash)
        self._lock = asyncio.Lock()
        self._handlers: dict[type[Any], Callable[[Any], Any]] = {
            ops.Append: self._append,
            ops.ReadThread: self._read_thread,
            ops.ListThreads: self._list_threads,
            ops.GetThread: self._get_thread,
            ops.PutThread: self._put_thread,
            ops.DeleteThread: self._delete_thread,
            ops.PopMessage: self._pop_message,
            ops.EditMessage: self._edit_message,
            ops.DeleteMessage: self._delete_message,
            ops.ReadMessageLog: self._read_message_log,
            ops.SetImportance: self._set_importance,
            ops.ReadWorkingMemory: self._read_working_memory,
            ops.PatchWorkingMemory: self._patch_working_memory,
            ops.ReadWorkingMemoryLog: self._read_working_memory_log,
            ops.ListResources: lambda op: sorted(self._resources),
            ops.EraseResource: self._erase_resource,
            ops.ExportResource: self._export_resource,
            ops.ImportResource: self._import_resource,
            ops.UpsertFact: self._upsert_fact,
            ops.ReadFacts: self._read_facts,
            ops.ReadFactHistory: self._read_fact_history,
            ops.ForgetFact: self._forget_fact,
            ops.ClaimEmbeddings: self._claim_embeddings,
            ops.FinishEmbeddings: self._finish_embeddings,
            ops.CountPendingEmbeddings: lambda op: len(self._queue),
            ops.ReadVectors: self._read_vectors,
            ops.LexicalSearch: self._lexical_search,
            ops.ReadSalient: self._read_salient,
            ops.ReadBySeq: self._read_by_seq,
            ops.ReadNeighbours: self._read_neighbours,
            ops.Reindex: self._reindex,
            ops.FindConsolidationCandidates: self._find_consolidation_candidates,
            ops.ClaimConsolidation: self._claim_consolidation,
            ops.ReleaseConsolidation: self._release_consolidation,
            ops.ReadUnconsolidated: self._read_unconsolidated,
            ops.ReadSummaries: self._read_summaries,
            ops.WriteSummary: self._write_summary,
            ops.ReadFactCandidates: self._read_fact_candidates,
            ops.MarkFactsExtracted: self._mark_facts_extracted,
            ops.LogConsolidation: self._log_consolidation,
            ops.ReadConsolidationLog: self._read_consolidation_log,
            ops.PutTask: self._put_task,
            ops.ListTasks: self._list_tasks,
            ops.DeleteTask: self._delete_task,
            ops.ClaimDueTasks: self._claim_due_tasks,
            ops.FinishTask: self._finish_task,
            ops.SyncConfigTasks: self._sync_config_tasks,
            ops.ReadMacros: self._read_macros,
            ops.LearnMacros: self._learn_macros,
            ops.MarkMacroUsed: self._mark_macro_used,
            ops.AllowPrefix: self._allow_prefix,
            ops.RevokePrefix: self._revoke_prefix,
            ops.ListPrefixes: self._list_prefixes,
            ops.PutItem: self._put_item,
            ops.DeleteItem: self._delete_item,
            ops.GetItem: self._get_item,
            ops.SearchItems: self._search_items,
            ops.ListItemNamespaces: self._list_item_namespaces,
            ops.ClaimItemEmbeddings: self._claim_item_embeddings,
            ops.FinishItemEmbeddings: self._finish_item_embeddings,
            ops.ReadItemVectors: self._read_item_vectors,
            ops.CreateKey: self._create_key,
            ops.FindKey: self._find_key,
            ops.ListKeys: lambda op: [k for k, _ in sorted(self._keys.values(), key=lambda v: (v[0].created_at, v[0].id))],
            ops.RevokeKey: self._revoke_key,
        }

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        handlers = []
        for op in batch:
            handler = self._handlers.get(type(op))
            if handler is None:
                raise UsageError(f"InMemoryStore does not support {type(op).__name__}")
            handlers.append(handler)
        async with self._lock:
            if len(batch) < 2 or not any(op.writes for op in batch):
                # One operation checks everything before it changes anything.
                return [h(op) for h, op in zip(handlers, batch, strict=True)]
            saved = self._save(batch)
            try:
                return [h(op) for h, op in zip(handlers, batch, strict=True)]
            except BaseException:
                self._restore(saved)
                raise

    def _save(self, batch: Sequence[ops.Op[Any]]) -> tuple[Any, ...]:
        rids = {getattr(op, "resource_id", None) for op in batch} | {
            op.dump["resource_id"] for op in batch if isinstance(op, ops.ImportResource)
        }
        resources = {rid: (r.copy() if (r := self._resources.get(rid)) else None) for rid in rids if rid is not None}
        if None in rids or any(isinstance(op, ops.ClaimDueTasks | ops.SyncConfigTasks) for op in batch):
            resources = {rid: r.copy() for rid, r in self._resources.items()}
        queue = {seq: dict(job) for seq, job in self._queue.items()}
        return resources, queue, dict(self._vectors), self._feed

    def _restore(self, saved: tuple[Any, ...]) -> None:
        resources, self._queue, self._vectors, self._feed = saved
        for rid, res in resources.items():
            if res is None:
                self._resources.pop(rid, None)
            else:
                self._resources[rid] = res

    # -- history -------------------------------------------------------------------------

    def _thread(self, resource_id: str, thread_id: str) -> _Thread | None:
        res = self._resources.get(resource_id)
        return res.threads.get(thread_id) if res else None

    def _append(self, op: ops.Append) -> list[Message]:
        res = self._resources.get(op.resource_id)
        known = {m.id for t in res.threads.values() for m in t.messages} if res else set()
        ids = [m.id for m in op.messages]
        if len(set(ids)) != len(ids) or known.intersection(ids):
            raise UsageError(f"a message id is already stored for resource {op.resource_id!r}")
        res = self._resources.setdefault(op.resource_id, _Resource())
        thread = res.threads.setdefault(op.thread_id, _Thread(created_at=op.messages[0].created_at))
        stored = []
        for m in op.messages:
            self._seq += 1
            thread.last_position += 1
            stored.append(m._stamped(seq=self._seq, position=thread.last_position))
            if m.id in op.embed:
                self._enqueue(op.resource_id, op.thread_id, stored[-1])
        thread.messages.extend(stored)
        thread.updated_at = stored[-1].created_at
        return list(stored)

    def _enqueue(self, resource_id: str, thread_id: str, m: Message) -> None:
        if m.seq not in self._queue:
            self._queue[m.seq or 0] = {
                "resource_id": resource_id,
                "thread_id": thread_id,
                "message": m,
                "attempts": 0,
                "not_before": 0.0,
                "error": None,
            }

    def _forget(self, resource_id: str, thread_id: str | None = None) -> None:
        """Drop queued jobs and vectors of deleted messages (the SQL stores cascade)."""
        res = self._resources.get(resource_id)
        live = {m.seq for t in res.threads.values() for m in t.messages} if res else set()
        for seq in [s for s, j in self._queue.items() if j["resource_id"] == resource_id and s not in live]:
            del self._queue[seq]
        for key in [k for k, v in self._vectors.items() if v[1] == resource_id and k[0] not in live]:
            del self._vectors[key]

    def _read_thread(self, op: ops.ReadThread) -> list[Message]:
        thread = self._thread(op.resource_id, op.thread_id)
        if thread is None:
            return []
        msgs = [m for m in thread.messages if op.before is None or (m.position or 0) < op.before]
        return list(msgs if op.limit is None else msgs[-op.limit :] if op.limit else [])

    def _thread_record(self, resource_id: str, tid: str, t: _Thread) -> Thread:
        return Thread(
            id=tid,
            resource_id=resource_id,
            title=t.title,
            metadata=copy.deepcopy(t.metadata),
            created_at=t.created_at,
            updated_at=t.updated_at or t.created_at,
            message_count=len(t.messages),
        )

    def _list_threads(self, op: ops.ListThreads) -> list[Thread]:
        res = self._resources.get(op.resource_id)
        threads = [self._thread_record(op.resource_id, tid, t) for tid, t in (res.threads.items() if res else ())]
        return sorted(threads, key=lambda t: (t.updated_at, t.id), reverse=True)

    def _get_thread(self, op: ops.GetThread | ops.PutThread) -> Thread | None:
        thread = self._thread(op.resource_id, op.thread_id)
        return self._thread_record(op.resource_id, op.thread_id, thread) if thread else None

    def _put_thread(self, op: ops.PutThread) -> Thread | None:
        thread = self._thread(op.resource_id, op.thread_id)
        if op.create:
            if thread is not None:
                return None
            res = self._resources.setdefault(op.resource_id, _Resource())
            thread = res.threads[op.thread_id] = _Thread(created_at=op.now)
        elif thread is None:
            return None
        if op.title is not ops.UNSET:
            thread.title = op.title
        if op.metadata is not ops.UNSET:
            thread.metadata = copy.deepcopy(op.metadata)
        return self._get_thread(op)

    def _delete_thread(self, op: ops.DeleteThread) -> bool:
        res = self._resources.get(op.resource_id)
        deleted = bool(res and res.threads.pop(op.thread_id, None) is not None)
        if res is not None:
            res.message_log = [e for e in res.message_log if e["thread_id"] != op.thread_id]
        self._forget(op.resource_id, op.thread_id)
        return deleted

    def _find(self, resource_id: str, message_id: str) -> tuple[str, _Thread, int] | None:
        res = self._resources.get(resource_id)
        for tid, t in res.threads.items() if res else ():
            for i, m in enumerate(t.messages):
                if m.id == message_id:
                    return tid, t, i
        return None

    def _log_change(self, resource_id: str, tid: str, m: Message, action: str, old: str | None, op: Any) -> None:
        self._resources[resource_id].message_log.append(
            {
                "message_id": m.id,
                "thread_id": tid,
                "action": action,
                "role": m.role,
                "old_content": old,
                "actor": op.actor,
                "reason": op.reason,
                "created_at": to_iso(op.now),
            }
        )

    def _pop_message(self, op: ops.PopMessage) -> Message | None:
        thread = self._thread(op.resource_id, op.thread_id)
        if not thread or not thread.messages:
            return None
        m = thread.messages.pop()
        self._log_change(op.resource_id, op.thread_id, m, "pop", None, op)
        self._forget(op.resource_id)
        return m

    def _edit_message(self, op: ops.EditMessage) -> Message | None:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return None
        tid, thread, i = found
        old = thread.messages[i]
        importance, embed = op.rescore(old._stamped(content=op.content))
        new = thread.messages[i] = old._stamped(content=op.content, importance=importance)
        self._log_change(op.resource_id, tid, old, "edit", old.content, op)
        for key in [k for k in self._vectors if k[0] == old.seq]:
            del self._vectors[key]
        self._queue.pop(old.seq or 0, None)
        if embed:
            self._enqueue(op.resource_id, tid, new)
        return new

    def _delete_message(self, op: ops.DeleteMessage) -> Message | None:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return None
        tid, thread, i = found
        m = thread.messages.pop(i)
        self._log_change(op.resource_id, tid, m, "delete", None, op)
        self._forget(op.resource_id)
        return m

    def _read_message_log(self, op: ops.ReadMessageLog) -> list[dict[str, Any]]:
        res = self._resources.get(op.resource_id)
        log = res.message_log if res else []
        return [dict(e) for e in log if op.message_id in (None, e["message_id"])]

    def _set_importance(self, op: ops.SetImportance) -> bool:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return False
        _, thread, i = found
        thread.messages[i] = thread.messages[i]._stamped(importance=op.value)
        return True

    # -- working memory and whole resources ------------------------------------------------

    def _read_working_memory(self, op: ops.ReadWorkingMemory) -> WorkingMemory | None:
        res = self._resources.get(op.resource_id)
        if res is None or res.wm is None:
            return None
        return WorkingMemory(
            resource_id=op.resource_id, data=copy.deepcopy(res.wm), version=res.version, updated_at=res.wm_updated_at
        )

    def _patch_working_memory(self, op: ops.PatchWorkingMemory) -> WorkingMemory:
        res = self._resources.get(op.resource_id) or _Resource()
        if op.expected_version is not None and op.expected_version != res.version:
            raise Conflict(
                f"working memory of {op.resource_id!r} is at version {res.version}, not {op.expected_version}",
                resource_id=op.resource_id,
                expected=op.expected_version,
                actual=res.version,
            )
        data = op.update(copy.deepcopy(res.wm))
        self._resources[op.resource_id] = res
        res.wm, res.version, res.wm_updated_at = copy.deepcopy(data), res.version + 1, op.now
        res.log.append(
            {"version": res.version, "patch": copy.deepcopy(op.patch), "source": op.source, "created_at": op.now}
        )
        return WorkingMemory(resource_id=op.resource_id, data=data, version=res.version, updated_at=op.now)

    def _read_working_memory_log(self, op: ops.ReadWorkingMemoryLog) -> list[dict[str, Any]]:
        res = self._resources.get(op.resource_id)
        return [{**e, "created_at": to_iso(e["created_at"])} for e in copy.deepcopy(res.log if res else [])]

    def _erase_resource(self, op: ops.EraseResource) -> None:
        self._resources.pop(op.resource_id, None)
        self._forget(op.resource_id)

    def _export_resource(self, op: ops.ExportResource) -> dict[str, Any]:
        dump = new_dump(op.resource_id)
        res = self._resources.get(op.resource_id)
        if res is None:
            return dump
        if res.wm is not None:
            dump["working_memory"] = {
                "data": copy.deepcopy(res.wm),
                "version": res.version,
                "updated_at": iso(res.wm_updated_at),
            }
        dump["working_memory_log"] = self._read_working_memory_log(ops.ReadWorkingMemoryLog(resource_id=op.resource_id))
        dump["facts"] = [
            {
                "category": f.category,
                "key": f.key,
                "value": f.value,
                "source": f.source,
                "created_at": iso(f.created_at),
                "updated_at": iso(f.updated_at),
            }
            for f in sorted(res.facts.values(), key=lambda f: (f.category, f.key))
        ]
        dump["fact_history"] = [
            {k: h[k] for k in ("category", "key", "value", "source", "valid_from", "replaced_at")}
            for h in res.fact_history
        ]
        dump["message_log"] = [dict(e) for e in res.message_log]
        dump["scheduled_tasks"] = [_task_dict(t) for t in self._list_tasks(ops.ListTasks(resource_id=op.resource_id))]
        dump["macros"] = [_macro_dict(m) for m in sorted(res.macros.values(), key=lambda m: m.key)]
        dump["allowed_prefixes"] = sorted(res.prefixes)
        dump["items"] = [
            item_dict(
                replace(it, value=copy.deepcopy(it.value)),
                (res.item_jobs.get((it.namespace, it.key)) or {}).get("texts"),
            )
            for it in sorted(res.items.values(), key=lambda it: (it.namespace, it.key))
        ]
        threads = sorted(res.threads.items(), key=lambda kv: (kv[1].messages[0].seq if kv[1].messages else 0, kv[0]))
        for tid, t in threads:
            dump["threads"].append(
                {
                    "id": tid,
                    "title": t.title,
                    "metadata": copy.deepcopy(t.metadata),
                    "created_at": iso(t.created_at),
                    "updated_at": iso(t.updated_at or t.created_at),
                    "messages": [m.to_dict() for m in t.messages],
                }
            )
        return dump

    def _import_resource(self, op: ops.ImportResource) -> None:
        dump = op.dump
        resource_id = dump["resource_id"]
        if resource_id in self._resources:
            raise UsageError(f"resource {resource_id!r} already holds data; erase it before importing")
        ids = [m.id for t in dump["threads"] for m in t["_parsed"]]
        names = [t["name"] for t in dump["scheduled_tasks"]]
        if len(set(names)) != len(names):
            raise UsageError("the export holds a task name twice")
        if len(set(ids)) != len(ids):
            raise UsageError("the export holds a message id twice")
        res = _Resource()
        wm = dump.get("working_memory")
        if wm:
            res.wm, res.version = copy.deepcopy(wm["data"]), int(wm["version"])
            res.wm_updated_at = from_iso(wm["updated_at"]) if wm.get("updated_at") else op.now
        res.log = [{**e, "created_at": from_iso(e["created_at"])} for e in dump["working_memory_log"]]
        for f in dump["facts"]:
            res.facts[(f["category"], f["key"])] = Fact(
                resource_id=resource_id,
                category=f["category"],
                key=f["key"],
                value=f["value"],
                source=f["source"],
                created_at=from_iso(f["created_at"]),
                updated_at=from_iso(f["updated_at"]),
            )
        res.fact_history = [dict(h) for h in dump["fact_history"]]
        res.message_log = [dict(e) for e in dump["message_log"]]
        for t in dump["scheduled_tasks"]:
            res.tasks[t["name"]] = ScheduledTask(
                **{
                    **t,
                    "resource_id": resource_id,
                    **{k: from_iso(t[k]) if t[k] else None for k in _TASK_TIMES},
                }
            )
        for m in dump["macros"]:
            macro = Macro(**m)
            res.macros[macro.key] = macro
        res.prefixes = {p: op.now for p in dump["allowed_prefixes"]}
        for it in dump["items"]:
            item = Item(
                resource_id=resource_id,
                namespace=tuple(it["namespace"]),
                key=it["key"],
                value=copy.deepcopy(it["value"]),
                created_at=from_iso(it["created_at"]),
                updated_at=from_iso(it["updated_at"]),
            )
            res.items[(item.namespace, item.key)] = item
            if it.get("embed"):
                res.item_jobs[(item.namespace, item.key)] = _item_job(item, it["embed"])
        for t in dump["threads"]:
            msgs = []
            for m, position in zip(t["_parsed"], ops.import_positions(t["_parsed"]), strict=True):
                self._seq += 1
                msgs.append(m._stamped(seq=self._seq, position=position))
                if m.role in op.embed_roles and m.content:
                    self._enqueue(resource_id, t["id"], msgs[-1])
            res.threads[t["id"]] = _Thread(
                title=t.get("title"),
                metadata=t.get("metadata"),
                created_at=from_iso(t["created_at"]) if t.get("created_at") else op.now,
                updated_at=from_iso(t["updated_at"]) if t.get("updated_at") else op.now,
                messages=msgs,
                last_position=msgs[-1].position or 0 if msgs else 0,
            )
        self._resources[resource_id] = res

    # -- facts ------------------------------------------------------------------------

    def _upsert_fact(self, op: ops.UpsertFact) -> Fact:
        res = self._resources.setdefault(op.resource_id, _Resource())
        old = res.facts.get((op.category, op.key))
        if old is not None and old.value != op.value:
            res.fact_history.append(
                {
                    "category": op.category,
                    "key": op.key,
                    "value": old.value,
                    "source": old.source,
                    "valid_from": iso(old.updated_at),
                    "replaced_at": to_iso(op.now),
                }
            )
        if old is not None and old.value == op.value and old.source == op.source:
            return old
        fact = Fact(
            resource_id=op.resource_id,
            category=op.category,
            key=op.key,
            value=op.value,
            source=op.source,
            created_at=old.created_at if old else op.now,
            updated_at=op.now,
        )
        res.facts[(op.category, op.key)] = fact
        return fact

    def _read_facts(self, op: ops.ReadFacts) -> list[Fact]:
        res = self._resources.get(op.resource_id)
        facts = [f for f in (res.facts.values() if res else ()) if op.category in (None, f.category)]
        return sorted(facts, key=lambda f: (-(f.updated_at.timestamp() if f.updated_at else 0.0), f.category, f.key))

    def _read_fact_history(self, op: ops.ReadFactHistory) -> list[dict[str, Any]]:
        res = self._resources.get(op.resource_id)
        return [
            {k: v for k, v in h.items() if k not in ("category", "key")}
            for h in (res.fact_history if res else [])
            if h["category"] == op.category and h["key"] == op.key
        ]

    def _forget_fact(self, op: ops.ForgetFact) -> bool:
        res = self._resources.get(op.resource_id)
        return bool(res and res.facts.pop((op.category, op.key), None))

    # -- recall ----------------------------------------------------------------------
    #
    # The same semantics as the SQL stores, over the dicts above. Lexical
    # ranking is BM25 (k1=1.2, b=0.75) computed over the resource's messages.

    def _messages(self, resource_id: str, thread_id: str | None = None) -> list[tuple[str, Message]]:
        res = self._resources.get(resource_id)
        if res is None:
            return []
        return [(tid, m) for tid, t in res.threads.items() if thread_id in (None, tid) for m in t.messages]

    def _claim_embeddings(self, op: ops.ClaimEmbeddings) -> list[EmbeddingJob]:
        now = time.monotonic()
        due = sorted(
            (seq for seq, job in self._queue.items() if job["not_before"] <= now),
            key=lambda s: (self._queue[s]["not_before"], s),
        )[: op.limit]
        jobs = []
        for seq in due:
            job = self._queue[seq]
            job["not_before"] = now + op.lease_seconds
            jobs.append(
                EmbeddingJob(
                    resource_id=job["resource_id"], seq=seq, content=job["message"].content, attempts=job["attempts"]
                )
            )
        return jobs

    def _finish_embeddings(self, op: ops.FinishEmbeddings) -> None:
        for rid, seq, vector in op.done:
            if self._queue.pop(seq, None) is not None:  # gone means deleted meanwhile
                self._feed += 1
                self._vectors[(seq, op.model)] = (self._feed, rid, vector)
        now = time.monotonic()
        for _rid, seq, error, retry_after in op.failed:
            job = self._queue.get(seq)
            if job is not None:
                job.update(attempts=job["attempts"] + 1, error=error, not_before=now + retry_after)

    def _read_vectors(self, op: ops.ReadVectors) -> VectorRows:
        thread_of = {m.seq: tid for tid, m in self._messages(op.resource_id)}
        rows = sorted(
            (feed, seq, vec)
            for (seq, m), (feed, rid, vec) in self._vectors.items()
            if m == op.model and rid == op.resource_id and feed > op.after_id and seq in thread_of
        )
        return VectorRows(
            seqs=[r[1] for r in rows],
            thread_ids=[thread_of[r[1]] for r in rows],
            vectors=b"".join(r[2] for r in rows),
            last_id=rows[-1][0] if rows else op.after_id,
        )

    def _lexical_search(self, op: ops.LexicalSearch) -> list[tuple[int, float]]:
        """BM25 over three columns, as SQLite's FTS5 ranks them: own stems, neighbours' stems, the day's.

        Built from the threads as they are now, so an edit or a deletion
        changes its neighbours' context at once; a neighbour is always of
        the same thread (``caderno.core.text.CONTEXT_BEFORE`` / ``CONTEXT_AFTER``).
        """
        terms = list(dict.fromkeys(stems(" ".join(op.terms))))
        res = self._resources.get(op.resource_id)
        if res is None or not terms:
            return []
        docs: list[tuple[str, int, list[list[str]]]] = []  # (thread, seq, [own, context, day])
        for tid, thread in res.threads.items():
            own = [stems(m.content) for m in thread.messages]
            for i, m in enumerate(thread.messages):
                around = own[max(0, i - CONTEXT_BEFORE) : i] + own[i + 1 : i + 1 + CONTEXT_AFTER]
                near = [term for words in around for term in words]
                day = stems(date_words(m.created_at)) if m.created_at is not None else []
                docs.append((tid, m.seq or 0, [own[i], near, day]))
        if not docs:
            return []
        weights = (1.0, CONTEXT_COLUMN_WEIGHT, DATE_COLUMN_WEIGHT)
        avg = [max(sum(len(d[2][c]) for d in docs) / len(docs), 1e-9) for c in range(3)]
        n = len(docs)
        idf = {}
        for term in terms:
            df = sum(1 for d in docs if any(term in col for col in d[2]))
            idf[term] = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)  # FTS5's floor
        scored = []
        for tid, seq, cols in docs:
            if op.thread_id not in (None, tid):
                continue
            score = 0.0
            for term in terms:
                for c, col in enumerate(cols):
                    tf = col.count(term)
                    if tf:
                        norm = 1.2 * (0.25 + 0.75 * len(col) / avg[c])
                        score += weights[c] * idf[term] * tf * 2.2 / (tf + norm)
            if score > 0:
                scored.append((seq, score))
        return sorted(scored, key=lambda x: (-x[1], -x[0]))[: op.limit]

    def _read_salient(self, op: ops.ReadSalient) -> list[tuple[str, Message]]:
        hits = [(t, m) for t, m in self._messages(op.resource_id, op.thread_id) if (m.importance or 0) >= op.threshold]
        return sorted(hits, key=lambda x: -(x[1].seq or 0))[: op.limit]

    def _read_by_seq(self, op: ops.ReadBySeq) -> list[tuple[str, Message]]:
        wanted = set(op.seqs)
        return [(t, m) for t, m in self._messages(op.resource_id) if m.seq in wanted]

    def _read_neighbours(self, op: ops.ReadNeighbours) -> list[Message]:
        msgs = [m for _, m in self._messages(op.resource_id, op.thread_id)]
        older = [m for m in msgs if (m.seq or 0) < op.seq][-op.before :] if op.before else []
        newer = [m for m in msgs if (m.seq or 0) > op.seq][: op.after]
        return older + newer

    def _reindex(self, op: ops.Reindex) -> int:
        rids = [op.resource_id] if op.resource_id is not None else list(self._resources)
        for rid in rids:
            for key in [k for k, v in self._vectors.items() if v[1] == rid]:
                del self._vectors[key]
            for tid, m in self._messages(rid):
                if m.role in op.embed_roles and m.content:
                    self._enqueue(rid, tid, m)
            res = self._resources.get(rid)
            if res is not None:
                res.item_jobs = {key: _item_job(res.items[key], job["texts"]) for key, job in res.item_jobs.items()}
        return sum(1 for rid in rids for _, m in self._messages(rid) if m.seq in self._queue)

    # -- consolidation ------------------------------------------------------------------

    def _find_consolidation_candidates(self, op: ops.FindConsolidationCandidates) -> list[tuple[str, str]]:
        out = []
        for rid, res in self._resources.items():
            if op.resource_id not in (None, rid):
                continue
            for tid, t in res.threads.items():
                free = [m for m in t.messages if m.seq not in res.consolidated]
                free += [s for s, _ in t.summaries if s.seq not in res.consolidated]
                if sum(len(m.content) for m in free) > op.min_chars:
                    out.append((rid, tid))
        return out

    def _claim_consolidation(self, op: ops.ClaimConsolidation) -> bool:
        thread = self._thread(op.resource_id, op.thread_id)
        now = time.monotonic()
        if thread is None or thread.claimed_until > now:
            return False
        thread.claimed_until = now + op.lease_seconds
        return True

    def _release_consolidation(self, op: ops.ReleaseConsolidation) -> None:
        thread = self._thread(op.resource_id, op.thread_id)
        if thread is not None:
            thread.claimed_until = 0.0

    def _read_unconsolidated(self, op: ops.ReadUnconsolidated) -> list[Message]:
        res = self._resources.get(op.resource_id)
        thread = self._thread(op.resource_id, op.thread_id)
        return [m for m in thread.messages if m.seq not in res.consolidated] if thread and res else []

    def _read_summaries(self, op: ops.ReadSummaries) -> list[tuple[Message, bool]]:
        res = self._resources.get(op.resource_id)
        thread = self._thread(op.resource_id, op.thread_id)
        return [(s, s.seq in res.consolidated) for s, _ in thread.summaries] if thread and res else []

    def _write_summary(self, op: ops.WriteSummary) -> bool:
        res = self._resources.get(op.resource_id)
        thread = self._thread(op.resource_id, op.thread_id)
        if thread is None or res is None:
            return False
        known = {m.seq for m in thread.messages} | {s.seq for s, _ in thread.summaries}
        if any(seq in res.consolidated or seq not in known for seq in op.covered):
            return False
        self._seq += 1
        thread.summaries.append((op.summary._stamped(seq=self._seq), op.now))
        res.consolidated.update(op.covered)
        return True

    def _read_fact_candidates(self, op: ops.ReadFactCandidates) -> list[tuple[str, Message]]:
        out = [
            (rid, m)
            for rid, res in self._resources.items()
            if op.resource_id in (None, rid)
            for _, m in self._messages(rid)
            if m.role == "user" and (m.importance or 0) >= op.min_importance and m.seq not in res.facts_done
        ]
        return sorted(out, key=lambda x: x[1].seq or 0)[: op.limit]

    def _mark_facts_extracted(self, op: ops.MarkFactsExtracted) -> None:
        res = self._resources.get(op.resource_id)
        if res is not None:
            res.facts_done.update(op.seqs)

    def _log_consolidation(self, op: ops.LogConsolidation) -> None:
        res = self._resources.setdefault(op.resource_id, _Resource())
        res.consolidation_log.append(
            {
                "thread_id": op.thread_id,
                "step": op.step,
                "outcome": op.outcome,
                "detail": op.detail,
                "created_at": to_iso(op.now),
            }
        )

    def _read_consolidation_log(self, op: ops.ReadConsolidationLog) -> list[dict[str, Any]]:
        res = self._resources.get(op.resource_id)
        return list(res.consolidation_log) if res else []

    # -- agent state ----------------------------------------------------------------------

    def _put_task(self, op: ops.PutTask) -> ScheduledTask | None:
        t = op.task
        res = self._resources.get(t.resource_id)
        if op.create:
            if res is not None and t.name in res.tasks:
                raise UsageError(f"resource {t.resource_id!r} already has a task named {t.name!r}")
            self._resources.setdefault(t.resource_id, _Resource()).tasks[t.name] = t
            return t
        old = next((x for x in res.tasks.values() if x.id == t.id), None) if res else None
        if res is None or old is None:
            return None
        del res.tasks[old.name]
        res.tasks[t.name] = t
        return t

    def _list_tasks(self, op: ops.ListTasks) -> list[ScheduledTask]:
        found = [
            t for rid, res in sorted(self._resources.items()) if op.resource_id in (None, rid) for t in res.tasks.values()
        ]
        return sorted(found, key=lambda t: (t.resource_id, t.name))

    def _delete_task(self, op: ops.DeleteTask) -> bool:
        res = self._resources.get(op.resource_id)
        return bool(res and res.tasks.pop(op.name, None))

    def _claim_due_tasks(self, op: ops.ClaimDueTasks) -> list[ScheduledTask]:
        lease = op.now + timedelta(seconds=op.lease_seconds)
        due = []
        for res in self._resources.values():
            for t in res.tasks.values():
                claimed = res.task_claims.get(t.id)
                if t.is_paused or t.next_run_at is None or t.next_run_at > op.now:
                    continue
                if claimed is not None and claimed >= op.now:
                    continue
                due.append((res, t))
        due.sort(key=lambda pair: pair[1].next_run_at or op.now)
        claimed_tasks = []
        for res, t in due[: op.limit]:
            res.task_claims[t.id] = lease
            if not t.is_oneshot:
                res.tasks[t.name] = replace(t, next_run_at=op.advance(t, op.now))
            claimed_tasks.append(t)
        return claimed_tasks

    def _finish_task(self, op: ops.FinishTask) -> None:
        res = self._resources.get(op.resource_id)
        task = next((t for t in res.tasks.values() if t.id == op.task_id), None) if res else None
        if res is None or task is None:
            return
        res.task_claims.pop(task.id, None)
        if op.delete:
            del res.tasks[task.name]
        else:
            res.tasks[task.name] = replace(task, last_run_at=op.ran_at, updated_at=op.ran_at)

    def _sync_config_tasks(self, op: ops.SyncConfigTasks) -> dict[str, int]:
        report = {"added": 0, "updated": 0, "deleted": 0, "skipped": 0}
        wanted = {(t.resource_id, t.name) for t in op.tasks}
        for t in op.tasks:
            res = self._resources.setdefault(t.resource_id, _Resource())
            old = res.tasks.get(t.name)
            if old is None:
                res.tasks[t.name] = t
                report["added"] += 1
            elif old.source != "config":
                report["skipped"] += 1
            elif _schedule_of(old) != _schedule_of(t):
                res.tasks[t.name] = replace(
                    t, id=old.id, is_paused=old.is_paused, last_run_at=old.last_run_at, created_at=old.created_at
                )
                report["updated"] += 1
        for rid, res in self._resources.items():
            for name, t in list(res.tasks.items()):
                if t.source == "config" and (rid, name) not in wanted:
                    del res.tasks[name]
                    report["deleted"] += 1
        return report

    def _read_macros(self, op: ops.ReadMacros) -> list[Macro]:
        res = self._resources.get(op.resource_id)
        found = [m for m in (res.macros.values() if res else ()) if op.trigger_tool in (None, m.trigger_tool)]
        return sorted(found, key=lambda m: (-m.confidence, m.trigger_tool, m.next_tool, m.key[3]))

    def _learn_macros(self, op: ops.LearnMacros) -> None:
        res = self._resources.setdefault(op.resource_id, _Resource())
        res.macros = dict(op.learn(dict(res.macros)))

    def _mark_macro_used(self, op: ops.MarkMacroUsed) -> bool:
        res = self._resources.get(op.resource_id)
        macro = res.macros.get(op.key) if res else None
        if res is None or macro is None:
            return False
        res.macros[op.key] = replace(macro, used_count=macro.used_count + 1)
        return True

    def _allow_prefix(self, op: ops.AllowPrefix) -> bool:
        res = self._resources.setdefault(op.resource_id, _Resource())
        if op.prefix in res.prefixes:
            return False
        res.prefixes[op.prefix] = op.now
        return True

    def _revoke_prefix(self, op: ops.RevokePrefix) -> bool:
        res = self._resources.get(op.resource_id)
        return bool(res and res.prefixes.pop(op.prefix, None) is not None)

    def _list_prefixes(self, op: ops.ListPrefixes) -> list[str]:
        res = self._resources.get(op.resource_id)
        return sorted(res.prefixes) if res else []


    # -- API keys ----------------------------------------------------------------------------

    def _create_key(self, op: ops.CreateKey) -> None:
        if any(h == op.token_hash for _, h in self._keys.values()) or op.key.id in self._keys:
            raise UsageError("that key exists already")
        self._keys[op.key.id] = (op.key, op.token_hash)

    def _find_key(self, op: ops.FindKey) -> ApiKey | None:
        return next((k for k, h in self._keys.values() if h == op.token_hash and k.revoked_at is None), None)

    def _revoke_key(self, op: ops.RevokeKey) -> bool:
        found = self._keys.get(op.key_id)
        if found is None or found[0].revoked_at is not None:
            return False
        self._keys[op.key_id] = (replace(found[0], revoked_at=op.now), found[1])
        return True


    # -- items ---------------------------------------------------------------------------------

    def _put_item(self, op: ops.PutItem) -> None:
        it = op.item
        res = self._resources.setdefault(it.resource_id, _Resource())
        old = res.items.get((it.namespace, it.key))
        res.items[(it.namespace, it.key)] = replace(
            it, value=copy.deepcopy(it.value), created_at=old.created_at if old else it.updated_at
        )
        res.item_jobs.pop((it.namespace, it.key), None)  # the old value's job or vectors
        if op.embed:
            res.item_jobs[(it.namespace, it.key)] = _item_job(it, op.embed)

    def _delete_item(self, op: ops.DeleteItem) -> bool:
        res = self._resources.get(op.resource_id)
        if res is not None:
            res.item_jobs.pop((op.namespace, op.key), None)
        return bool(res and res.items.pop((op.namespace, op.key), None))

    def _get_item(self, op: ops.GetItem) -> Item | None:
        res = self._resources.get(op.resource_id)
        it = res.items.get((op.namespace, op.key)) if res else None
        return replace(it, value=copy.deepcopy(it.value)) if it else None

    def _search_items(self, op: ops.SearchItems) -> list[Item]:
        res = self._resources.get(op.resource_id)
        found = [
            replace(it, value=copy.deepcopy(it.value))
            for (ns, _), it in (res.items.items() if res else ())
            if ns[: len(op.prefix)] == op.prefix
        ]
        return sorted(found, key=lambda it: (-(it.updated_at.timestamp() if it.updated_at else 0), ".".join(it.namespace), it.key))

    def _list_item_namespaces(self, op: ops.ListItemNamespaces) -> list[tuple[str, ...]]:
        res = self._resources.get(op.resource_id)
        return sorted({ns for ns, _ in (res.items if res else ())}, key=".".join)

    # -- item vectors ----------------------------------------------------------------------------

    def _claim_item_embeddings(self, op: ops.ClaimItemEmbeddings) -> list[ItemEmbeddingJob]:
        now = time.monotonic()
        due = sorted(
            (job["not_before"], rid, ".".join(ns), key, ns)
            for rid, res in self._resources.items()
            for (ns, key), job in res.item_jobs.items()
            if job["vectors"] is None and job["not_before"] <= now
        )[: op.limit]
        jobs = []
        for _, rid, _, key, ns in due:
            job = self._resources[rid].item_jobs[(ns, key)]
            job["not_before"] = now + op.lease_seconds
            jobs.append(
                ItemEmbeddingJob(
                    resource_id=rid,
                    namespace=ns,
                    key=key,
                    updated_at=job["updated_at"],
                    texts=job["texts"],
                    attempts=job["attempts"],
                )
            )
        return jobs

    def _current_job(self, job: ItemEmbeddingJob) -> dict[str, Any] | None:
        """The queue entry of ``job``'s item while it is still at the job's version."""
        res = self._resources.get(job.resource_id)
        entry = res.item_jobs.get((job.namespace, job.key)) if res else None
        if entry is None or (entry["updated_at"], entry["texts"]) != (job.updated_at, job.texts):
            return None
        return entry

    def _finish_item_embeddings(self, op: ops.FinishItemEmbeddings) -> None:
        for job, vectors in op.done:
            if (entry := self._current_job(job)) is not None:
                entry.update(model=op.model, dim=op.dim, vectors=vectors, error=None)
        now = time.monotonic()
        for job, error, retry_after in op.failed:
            if (entry := self._current_job(job)) is not None:
                entry.update(attempts=entry["attempts"] + 1, error=error, not_before=now + retry_after)

    def _read_item_vectors(self, op: ops.ReadItemVectors) -> list[ItemVectors]:
        res = self._resources.get(op.resource_id)
        found = [
            ItemVectors(namespace=ns, key=key, updated_at=job["updated_at"], dim=job["dim"], vectors=job["vectors"])
            for (ns, key), job in (res.item_jobs.items() if res else ())
            if job["model"] == op.model and job["vectors"] is not None and ns[: len(op.prefix)] == op.prefix
        ]
        return sorted(found, key=lambda v: (".".join(v.namespace), v.key))


def _item_job(item: Item, texts: Any) -> dict[str, Any]:
    """A new queue entry for ``item``'s texts, due at once."""
    return {
        "updated_at": item.updated_at,
        "texts": tuple(texts),
        "model": None,
        "dim": None,
        "vectors": None,
        "attempts": 0,
        "not_before": 0.0,
        "error": None,
    }


_TASK_TIMES = ("next_run_at", "last_run_at", "created_at", "updated_at")


def _task_dict(t: ScheduledTask) -> dict[str, Any]:
    out = {f.name: getattr(t, f.name) for f in fields(t) if f.name != "resource_id"}
    return {k: iso(v) if k in _TASK_TIMES else v for k, v in out.items()}


def _macro_dict(m: Macro) -> dict[str, Any]:
    return {f.name: getattr(m, f.name) for f in fields(m)}


def _schedule_of(t: ScheduledTask) -> tuple[Any, ...]:
    return (t.cron_expr, t.original_schedule, t.prompt, t.is_oneshot, t.is_trusted, t.timezone, t.thread_id)

