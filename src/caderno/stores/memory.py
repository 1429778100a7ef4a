"""``memory://``: plain dicts in this process.

A real adapter, not a mock: it implements the same port and passes the same
conformance suite. It keeps nothing after the process ends.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._dump import new_dump
from .._time import from_iso, to_iso, utcnow
from ..errors import Conflict, UsageError
from ..messages import Message, Thread, WorkingMemory
from .base import ResourceDump, WorkingMemoryUpdate


@dataclass
class _Thread:
    title: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: Any = None
    updated_at: Any = None
    messages: list[Message] = field(default_factory=list)


@dataclass
class _Resource:
    wm: dict[str, Any] | None = None
    version: int = 0
    wm_updated_at: Any = None
    log: list[dict[str, Any]] = field(default_factory=list)
    threads: dict[str, _Thread] = field(default_factory=dict)


class InMemoryStore:
    """Stores everything in dicts; one asyncio lock makes each call atomic."""

    def __init__(self) -> None:
        self._resources: dict[str, _Resource] = {}
        self._seq = 0
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
            thread.messages.extend(stored)
            thread.updated_at = stored[-1].created_at
            return list(stored)

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
            return bool(res and res.threads.pop(thread_id, None) is not None)

    async def erase_resource(self, resource_id: str) -> None:
        async with self._lock:
            self._resources.pop(resource_id, None)

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
            for t in dump["threads"]:
                msgs = []
                for m in t["_parsed"]:
                    self._seq += 1
                    msgs.append(m._stamped(seq=self._seq))
                res.threads[t["id"]] = _Thread(
                    title=t.get("title"),
                    metadata=t.get("metadata"),
                    created_at=from_iso(t["created_at"]) if t.get("created_at") else utcnow(),
                    updated_at=from_iso(t["updated_at"]) if t.get("updated_at") else utcnow(),
                    messages=msgs,
                )
            self._resources[resource_id] = res
