"""``memory://``: plain dicts in this process.

A real adapter, not a mock: it implements the same port and passes the same
conformance suite. It keeps nothing after the process ends.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._dump import new_dump
from .._text import tokenize
from .._time import from_iso, to_iso, utcnow
from ..errors import Conflict, UsageError
from ..messages import Fact, Message, Thread, WorkingMemory
from .base import EmbeddingJob, ResourceDump, VectorRows, WorkingMemoryUpdate


@dataclass
class _Thread:
    title: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: Any = None
    updated_at: Any = None
    messages: list[Message] = field(default_factory=list)
    summaries: list[tuple[Message, Any]] = field(default_factory=list)
    claimed_until: float = 0.0


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


class InMemoryStore:
    """Stores everything in dicts; one asyncio lock makes each call atomic."""

    def __init__(self) -> None:
        self._resources: dict[str, _Resource] = {}
        self._seq = 0
        # seq -> {resource_id, thread_id, message, attempts, not_before (monotonic), error}
        self._queue: dict[int, dict[str, Any]] = {}
        self._vectors: dict[tuple[int, str], tuple[int, str, bytes]] = {}  # (seq, model) -> (feed id, rid, vector)
        self._feed = 0
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def append(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        async with self._lock:
            res = self._resources.get(resource_id)
            known = {m.id for t in res.threads.values() for m in t.messages} if res else set()
            ids = [m.id for m in messages]
            if len(set(ids)) != len(ids) or known.intersection(ids):
                raise UsageError(f"a message id is already stored for resource {resource_id!r}")
            res = self._resources.setdefault(resource_id, _Resource())
            thread = res.threads.setdefault(thread_id, _Thread(created_at=messages[0].created_at))
            stored = []
            for m in messages:
                self._seq += 1
                stored.append(m._stamped(seq=self._seq))
                self._enqueue(resource_id, thread_id, stored[-1])
            thread.messages.extend(stored)
            thread.updated_at = stored[-1].created_at
            return list(stored)

    def _enqueue(self, resource_id: str, thread_id: str, m: Message) -> None:
        if m.role in ("user", "assistant") and m.content and m.seq not in self._queue:
            self._queue[m.seq] = {
                "resource_id": resource_id,
                "thread_id": thread_id,
                "message": m,
                "attempts": 0,
                "not_before": 0.0,
                "error": None,
            }

    def _forget(self, resource_id: str, thread_id: str | None = None) -> None:
        """Drop queued jobs and vectors of deleted messages (the SQL stores cascade)."""
        for seq in [
            s for s, j in self._queue.items() if j["resource_id"] == resource_id and thread_id in (None, j["thread_id"])
        ]:
            del self._queue[seq]
        res = self._resources.get(resource_id)
        live = {m.seq for t in res.threads.values() for m in t.messages} if res else set()
        for key in [k for k, v in self._vectors.items() if v[1] == resource_id and k[0] not in live]:
            del self._vectors[key]

    async def read(self, resource_id: str, thread_id: str, limit: int | None) -> list[Message]:
        res = self._resources.get(resource_id)
        thread = res.threads.get(thread_id) if res else None
        if thread is None:
            return []
        return list(thread.messages if limit is None else thread.messages[-limit:] if limit else [])

    async def list_threads(self, resource_id: str) -> list[Thread]:
        res = self._resources.get(resource_id)
        if res is None:
            return []
        threads = [
            Thread(
                id=tid,
                resource_id=resource_id,
                title=t.title,
                metadata=copy.deepcopy(t.metadata),
                created_at=t.created_at,
                updated_at=t.updated_at,
                message_count=len(t.messages),
            )
            for tid, t in res.threads.items()
        ]
        return sorted(threads, key=lambda t: (t.updated_at, t.id), reverse=True)

    async def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        async with self._lock:
            res = self._resources.get(resource_id)
            deleted = bool(res and res.threads.pop(thread_id, None) is not None)
            self._forget(resource_id, thread_id)
            return deleted

    async def erase_resource(self, resource_id: str) -> None:
        async with self._lock:
            self._resources.pop(resource_id, None)
            self._forget(resource_id)

    async def get_working_memory(self, resource_id: str) -> WorkingMemory | None:
        res = self._resources.get(resource_id)
        if res is None or res.wm is None:
            return None
        return WorkingMemory(
            resource_id=resource_id, data=copy.deepcopy(res.wm), version=res.version, updated_at=res.wm_updated_at
        )

    async def update_working_memory(
        self,
        resource_id: str,
        update: WorkingMemoryUpdate,
        *,
        patch: dict[str, Any],
        expected_version: int | None,
        source: str,
    ) -> WorkingMemory:
        async with self._lock:
            res = self._resources.get(resource_id) or _Resource()
            if expected_version is not None and expected_version != res.version:
                raise Conflict(
                    f"working memory of {resource_id!r} is at version {res.version}, not {expected_version}",
                    resource_id=resource_id,
                    expected=expected_version,
                    actual=res.version,
                )
            data = update(copy.deepcopy(res.wm))
            now = utcnow()
            self._resources[resource_id] = res
            res.wm, res.version, res.wm_updated_at = copy.deepcopy(data), res.version + 1, now
            res.log.append({"version": res.version, "patch": copy.deepcopy(patch), "source": source, "created_at": now})
            return WorkingMemory(resource_id=resource_id, data=data, version=res.version, updated_at=now)

    async def export_resource(self, resource_id: str) -> ResourceDump:
        dump = new_dump(resource_id)
        res = self._resources.get(resource_id)
        if res is None:
            return dump
        if res.wm is not None:
            dump["working_memory"] = {
                "data": copy.deepcopy(res.wm),
                "version": res.version,
                "updated_at": to_iso(res.wm_updated_at),
            }
        dump["working_memory_log"] = [{**e, "created_at": to_iso(e["created_at"])} for e in copy.deepcopy(res.log)]
        dump["facts"] = [
            {
                "category": f.category,
                "key": f.key,
                "value": f.value,
                "source": f.source,
                "created_at": to_iso(f.created_at),
                "updated_at": to_iso(f.updated_at),
            }
            for f in sorted(res.facts.values(), key=lambda f: (f.category, f.key))
        ]
        dump["fact_history"] = [
            {k: h[k] for k in ("category", "key", "value", "source", "valid_from", "replaced_at")}
            for h in res.fact_history
        ]
        for tid, t in sorted(res.threads.items(), key=lambda kv: kv[1].messages[0].seq if kv[1].messages else 0):
            dump["threads"].append(
                {
                    "id": tid,
                    "title": t.title,
                    "metadata": copy.deepcopy(t.metadata),
                    "created_at": to_iso(t.created_at),
                    "updated_at": to_iso(t.updated_at),
                    "messages": [m.to_dict() for m in t.messages],
                }
            )
        return dump

    async def import_resource(self, dump: ResourceDump) -> None:
        async with self._lock:
            resource_id = dump["resource_id"]
            if resource_id in self._resources:
                raise UsageError(f"resource {resource_id!r} already holds data; erase it before importing")
            res = _Resource()
            wm = dump.get("working_memory")
            if wm:
                res.wm, res.version = copy.deepcopy(wm["data"]), int(wm["version"])
                res.wm_updated_at = from_iso(wm["updated_at"]) if wm.get("updated_at") else utcnow()
            res.log = [{**e, "created_at": from_iso(e["created_at"])} for e in dump.get("working_memory_log") or []]
            for f in dump.get("facts") or []:
                res.facts[(f["category"], f["key"])] = Fact(
                    resource_id=resource_id,
                    category=f["category"],
                    key=f["key"],
                    value=f["value"],
                    source=f["source"],
                    created_at=from_iso(f["created_at"]),
                    updated_at=from_iso(f["updated_at"]),
                )
            res.fact_history = [dict(h) for h in dump.get("fact_history") or []]
            for t in dump["threads"]:
                msgs = []
                for m in t["_parsed"]:
                    self._seq += 1
                    msgs.append(m._stamped(seq=self._seq))
                    self._enqueue(resource_id, t["id"], msgs[-1])
                res.threads[t["id"]] = _Thread(
                    title=t.get("title"),
                    metadata=t.get("metadata"),
                    created_at=from_iso(t["created_at"]) if t.get("created_at") else utcnow(),
                    updated_at=from_iso(t["updated_at"]) if t.get("updated_at") else utcnow(),
                    messages=msgs,
                )
            self._resources[resource_id] = res

    # -- recall ----------------------------------------------------------------------
    #
    # The same semantics as the SQL stores, over the dicts above. Lexical
    # ranking is BM25 (k1=1.2, b=0.75) computed over the resource's messages.

    def _messages(self, resource_id: str, thread_id: str | None = None) -> list[tuple[str, Message]]:
        res = self._resources.get(resource_id)
        if res is None:
            return []
        return [(tid, m) for tid, t in res.threads.items() if thread_id in (None, tid) for m in t.messages]

    async def claim_embedding_jobs(self, limit: int, lease_seconds: float) -> list[EmbeddingJob]:
        async with self._lock:
            now = time.monotonic()
            due = sorted(
                (seq for seq, job in self._queue.items() if job["not_before"] <= now),
                key=lambda s: (self._queue[s]["not_before"], s),
            )[:limit]
            jobs = []
            for seq in due:
                job = self._queue[seq]
                job["not_before"] = now + lease_seconds
                jobs.append(
                    EmbeddingJob(
                        resource_id=job["resource_id"],
                        seq=seq,
                        content=job["message"].content,
                        attempts=job["attempts"],
                    )
                )
            return jobs

    async def finish_embedding_jobs(
        self,
        model: str,
        dim: int,
        done: list[tuple[str, int, bytes]],
        failed: list[tuple[str, int, str, float]],
    ) -> None:
        async with self._lock:
            for rid, seq, vector in done:
                if self._queue.pop(seq, None) is not None:  # gone means deleted meanwhile
                    self._feed += 1
                    self._vectors[(seq, model)] = (self._feed, rid, vector)
            now = time.monotonic()
            for _rid, seq, error, retry_after in failed:
                job = self._queue.get(seq)
                if job is not None:
                    job.update(attempts=job["attempts"] + 1, error=error, not_before=now + retry_after)

    async def pending_embeddings(self) -> int:
        return len(self._queue)

    async def load_vectors(self, resource_id: str, model: str, after_id: int) -> VectorRows:
        thread_of = {m.seq: tid for tid, m in self._messages(resource_id)}
        rows = sorted(
            (feed, seq, vec)
            for (seq, m), (feed, rid, vec) in self._vectors.items()
            if m == model and rid == resource_id and feed > after_id and seq in thread_of
        )
        return VectorRows(
            seqs=[r[1] for r in rows],
            thread_ids=[thread_of[r[1]] for r in rows],
            vectors=b"".join(r[2] for r in rows),
            last_id=rows[-1][0] if rows else after_id,
        )

    async def lexical_search(
        self, resource_id: str, terms: list[str], limit: int, thread_id: str | None
    ) -> list[tuple[int, float]]:
        docs = [(m.seq, tokenize(m.content)) for _, m in self._messages(resource_id)]
        if not docs or not terms:
            return []
        avg = sum(len(t) for _, t in docs) / len(docs)
        df = {term: sum(1 for _, t in docs if term in t) for term in terms}
        allowed = {m.seq for _, m in self._messages(resource_id, thread_id)}
        scored = []
        for seq, toks in docs:
            if seq not in allowed:
                continue
            score = 0.0
            for term in terms:
                tf = toks.count(term)
                if tf:
                    idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(toks) / avg))
            if score > 0:
                scored.append((seq, score))
        return sorted(scored, key=lambda x: -x[1])[:limit]

    async def salient(
        self, resource_id: str, threshold: float, limit: int, thread_id: str | None
    ) -> list[tuple[str, Message]]:
        hits = [(t, m) for t, m in self._messages(resource_id, thread_id) if (m.importance or 0) >= threshold]
        return sorted(hits, key=lambda x: -(x[1].seq or 0))[:limit]

    async def get_by_seq(self, resource_id: str, seqs: list[int]) -> list[tuple[str, Message]]:
        wanted = set(seqs)
        return [(t, m) for t, m in self._messages(resource_id) if m.seq in wanted]

    async def neighbours(self, resource_id: str, thread_id: str, seq: int, before: int, after: int) -> list[Message]:
        msgs = [m for _, m in self._messages(resource_id, thread_id)]
        older = [m for m in msgs if (m.seq or 0) < seq][-before:] if before else []
        newer = [m for m in msgs if (m.seq or 0) > seq][:after]
        return older + newer

    async def set_importance(self, resource_id: str, message_id: str, value: float) -> bool:
        async with self._lock:
            res = self._resources.get(resource_id)
            for t in res.threads.values() if res else ():
                for i, m in enumerate(t.messages):
                    if m.id == message_id:
                        t.messages[i] = m._stamped(importance=value)
                        return True
            return False

    async def reindex(self, resource_id: str | None) -> int:
        async with self._lock:
            rids = [resource_id] if resource_id is not None else list(self._resources)
            for rid in rids:
                for key in [k for k, v in self._vectors.items() if v[1] == rid]:
                    del self._vectors[key]
                for tid, m in self._messages(rid):
                    self._enqueue(rid, tid, m)
            return sum(1 for rid in rids for _, m in self._messages(rid) if m.seq in self._queue)

    # -- facts ------------------------------------------------------------------------

    async def upsert_fact(self, resource_id: str, category: str, key: str, value: str, source: str) -> Fact:
        async with self._lock:
            res = self._resources.setdefault(resource_id, _Resource())
            now = utcnow()
            old = res.facts.get((category, key))
            if old is not None and old.value != value:
                res.fact_history.append(
                    {
                        "category": category,
                        "key": key,
                        "value": old.value,
                        "source": old.source,
                        "valid_from": to_iso(old.updated_at),
                        "replaced_at": to_iso(now),
                    }
                )
            if old is not None and old.value == value and old.source == source:
                return old
            fact = Fact(
                resource_id=resource_id,
                category=category,
                key=key,
                value=value,
                source=source,
                created_at=old.created_at if old else now,
                updated_at=now,
            )
            res.facts[(category, key)] = fact
            return fact

    async def get_facts(self, resource_id: str, category: str | None) -> list[Fact]:
        res = self._resources.get(resource_id)
        facts = [f for f in (res.facts.values() if res else ()) if category in (None, f.category)]
        return sorted(facts, key=lambda f: (-f.updated_at.timestamp(), f.category, f.key))

    async def fact_history(self, resource_id: str, category: str, key: str) -> list[dict[str, Any]]:
        res = self._resources.get(resource_id)
        return [
            {k: v for k, v in h.items() if k not in ("category", "key")}
            for h in (res.fact_history if res else [])
            if h["category"] == category and h["key"] == key
        ]

    async def forget_fact(self, resource_id: str, category: str, key: str) -> bool:
        async with self._lock:
            res = self._resources.get(resource_id)
            return bool(res and res.facts.pop((category, key), None))

    # -- consolidation ------------------------------------------------------------------

    async def consolidation_candidates(self, resource_id: str | None, min_chars: int) -> list[tuple[str, str]]:
        out = []
        for rid, res in self._resources.items():
            if resource_id not in (None, rid):
                continue
            for tid, t in res.threads.items():
                free = [m for m in t.messages if m.seq not in res.consolidated]
                free += [s for s, _ in t.summaries if s.seq not in res.consolidated]
                if sum(len(m.content) for m in free) > min_chars:
                    out.append((rid, tid))
        return out

    async def claim_consolidation(self, resource_id: str, thread_id: str, lease_seconds: float) -> bool:
        async with self._lock:
            res = self._resources.get(resource_id)
            thread = res.threads.get(thread_id) if res else None
            now = time.monotonic()
            if thread is None or thread.claimed_until > now:
                return False
            thread.claimed_until = now + lease_seconds
            return True

    async def release_consolidation(self, resource_id: str, thread_id: str) -> None:
        res = self._resources.get(resource_id)
        thread = res.threads.get(thread_id) if res else None
        if thread is not None:
            thread.claimed_until = 0.0

    async def unconsolidated(self, resource_id: str, thread_id: str) -> list[Message]:
        res = self._resources.get(resource_id)
        thread = res.threads.get(thread_id) if res else None
        return [m for m in thread.messages if m.seq not in res.consolidated] if thread else []

    async def summaries(self, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        res = self._resources.get(resource_id)
        thread = res.threads.get(thread_id) if res else None
        return [(s, s.seq in res.consolidated) for s, _ in thread.summaries] if thread else []

    async def write_summary(self, resource_id: str, thread_id: str, summary: Message, covered: list[int]) -> bool:
        async with self._lock:
            res = self._resources.get(resource_id)
            thread = res.threads.get(thread_id) if res else None
            if thread is None:
                return False
            known = {m.seq for m in thread.messages} | {s.seq for s, _ in thread.summaries}
            if any(seq in res.consolidated or seq not in known for seq in covered):
                return False
            self._seq += 1
            thread.summaries.append((summary._stamped(seq=self._seq), utcnow()))
            res.consolidated.update(covered)
            return True

    async def fact_candidates(
        self, resource_id: str | None, min_importance: float, limit: int
    ) -> list[tuple[str, Message]]:
        out = [
            (rid, m)
            for rid, res in self._resources.items()
            if resource_id in (None, rid)
            for _, m in self._messages(rid)
            if m.role == "user" and (m.importance or 0) >= min_importance and m.seq not in res.facts_done
        ]
        return sorted(out, key=lambda x: x[1].seq or 0)[:limit]

    async def mark_facts_extracted(self, resource_id: str, seqs: list[int]) -> None:
        res = self._resources.get(resource_id)
        if res is not None:
            res.facts_done.update(seqs)

    async def log_consolidation(
        self, resource_id: str, thread_id: str | None, step: str, outcome: str, detail: str | None
    ) -> None:
        res = self._resources.setdefault(resource_id, _Resource())
        res.consolidation_log.append(
            {"thread_id": thread_id, "step": step, "outcome": outcome, "detail": detail, "created_at": to_iso(utcnow())}
        )

    async def consolidation_log(self, resource_id: str) -> list[dict[str, Any]]:
        res = self._resources.get(resource_id)
        return list(res.consolidation_log) if res else []
