"""The port-purity test: a store of plain dicts that implements ``ops.CORE`` and nothing else.

``memory://`` is the SQLite store on a private database, so every backend
caderno ships speaks SQL. This one does not: it proves the port is what
``caderno.stores.base`` says — a small protocol that a backend can implement
from its operation values alone, with no SQL, no plans and no other part of
caderno's storage. The conformance tests marked ``core`` run on it beside
the four real backends (``tests/conftest.py``), and a ``Memory`` over it
turns off what needs the other groups (recall, facts, consolidation…) the
way it does for any partial store.

It lives with the tests, not in ``caderno.stores``: nobody should run it,
and keeping it out of the package keeps the package one implementation of
each operation. It keeps nothing after the process ends.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from caderno.core.clock import from_iso, to_iso
from caderno.core.errors import Conflict, UsageError
from caderno.core.messages import Message, Thread, WorkingMemory
from caderno.stores import ops
from caderno.stores.export import new_dump


def _json(value: Any) -> Any:
    """What a JSON column gives back: a fresh copy, tuples as lists (as the SQL stores do)."""
    return None if value is None else json.loads(json.dumps(value))


def _out(m: Message) -> Message:
    """A stored message as a read returns it: the caller's to change."""
    return m._stamped(metadata=_json(m.metadata))


@dataclass
class _Thread:
    created_at: Any
    title: str | None = None
    metadata: Any = None
    messages: list[Message] = field(default_factory=list)
    last_position: int = 0
    """The highest position ever given here: a deleted message's is never reused."""


@dataclass
class _Resource:
    threads: dict[str, _Thread] = field(default_factory=dict)
    working_memory: Any = None
    version: int = 0
    updated_at: Any = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    message_log: list[dict[str, Any]] = field(default_factory=list)


class DictStore:
    """``ops.CORE`` over dicts. A batch runs without awaiting, so no other batch interleaves; a
    failing write batch puts back the copy taken before it (all or nothing)."""

    supports = ops.CORE

    def __init__(self) -> None:
        self._resources: dict[str, _Resource] = {}
        self._seq = 0
        self._run: dict[type[Any], Callable[[Any], Any]] = {
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
            ops.ReadWorkingMemoryLog: lambda op: copy.deepcopy(self._resource(op.resource_id).patches),
            ops.ListResources: lambda op: sorted(self._resources),
            ops.EraseResource: self._erase_resource,
            ops.ExportResource: self._export_resource,
            ops.ImportResource: self._import_resource,
        }

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        for op in batch:
            if type(op) not in self._run:
                raise UsageError(f"DictStore does not support {type(op).__name__}")
        saved = (copy.deepcopy(self._resources), self._seq) if any(op.writes for op in batch) else None
        try:
            return [self._run[type(op)](op) for op in batch]
        except BaseException:
            if saved is not None:
                self._resources, self._seq = saved
            raise

    def _resource(self, resource_id: str) -> _Resource:
        """The resource's rows (an empty record, not stored, when it has none)."""
        return self._resources.get(resource_id) or _Resource()

    def _find(self, resource_id: str, message_id: str) -> tuple[str, _Thread, int] | None:
        for tid, thread in self._resource(resource_id).threads.items():
            for i, m in enumerate(thread.messages):
                if m.id == message_id:
                    return tid, thread, i
        return None

    def _log(self, resource_id: str, thread_id: str, m: Message, action: str, old: str | None, op: Any) -> None:
        self._resources[resource_id].message_log.append(
            {
                "message_id": m.id,
                "thread_id": thread_id,
                "action": action,
                "role": m.role,
                "old_content": old,
                "actor": op.actor,
                "reason": op.reason,
                "created_at": to_iso(op.now),
            }
        )

    # -- history and thread records -----------------------------------------------------------

    def _append(self, op: ops.Append) -> list[Message]:
        taken = {m.id for t in self._resource(op.resource_id).threads.values() for m in t.messages}
        for m in op.messages:
            if m.id in taken:
                raise UsageError(f"message id {m.id!r} is already stored for resource {op.resource_id!r}")
            taken.add(m.id)
        resource = self._resources.setdefault(op.resource_id, _Resource())
        thread = resource.threads.setdefault(op.thread_id, _Thread(created_at=op.messages[0].created_at))
        stored = []
        for m in op.messages:
            self._seq += 1
            thread.last_position += 1
            stored.append(m._stamped(seq=self._seq, position=thread.last_position, metadata=_json(m.metadata)))
        thread.messages += stored
        return [_out(m) for m in stored]

    def _read_thread(self, op: ops.ReadThread) -> list[Message]:
        thread = self._resource(op.resource_id).threads.get(op.thread_id)
        found = [m for m in thread.messages if op.before is None or (m.position or 0) < op.before] if thread else []
        return [_out(m) for m in (found if op.limit is None else found[-op.limit :] if op.limit else [])]

    def _record(self, resource_id: str, thread_id: str) -> Thread | None:
        thread = self._resource(resource_id).threads.get(thread_id)
        if thread is None:
            return None
        return Thread(
            id=thread_id,
            resource_id=resource_id,
            title=thread.title,
            metadata=_json(thread.metadata),
            created_at=thread.created_at,
            updated_at=thread.messages[-1].created_at if thread.messages else thread.created_at,
            message_count=len(thread.messages),
        )

    def _list_threads(self, op: ops.ListThreads) -> list[Thread]:
        records = [self._record(op.resource_id, tid) for tid in self._resource(op.resource_id).threads]
        return sorted((r for r in records if r), key=lambda t: (t.updated_at, t.id), reverse=True)

    def _get_thread(self, op: ops.GetThread) -> Thread | None:
        return self._record(op.resource_id, op.thread_id)

    def _put_thread(self, op: ops.PutThread) -> Thread | None:
        exists = op.thread_id in self._resource(op.resource_id).threads
        if exists == op.create:
            return None
        resource = self._resources.setdefault(op.resource_id, _Resource())
        thread = resource.threads.setdefault(op.thread_id, _Thread(created_at=op.now))
        if op.title is not ops.UNSET:
            thread.title = op.title
        if op.metadata is not ops.UNSET:
            thread.metadata = _json(op.metadata)
        return self._record(op.resource_id, op.thread_id)

    def _delete_thread(self, op: ops.DeleteThread) -> bool:
        resource = self._resources.get(op.resource_id)
        if resource is None or resource.threads.pop(op.thread_id, None) is None:
            return False
        resource.message_log = [e for e in resource.message_log if e["thread_id"] != op.thread_id]
        return True

    def _pop_message(self, op: ops.PopMessage) -> Message | None:
        thread = self._resource(op.resource_id).threads.get(op.thread_id)
        if not thread or not thread.messages:
            return None
        m = thread.messages.pop()
        self._log(op.resource_id, op.thread_id, m, "pop", None, op)
        return _out(m)

    def _edit_message(self, op: ops.EditMessage) -> Message | None:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return None
        tid, thread, i = found
        old = thread.messages[i]
        importance, _embed = op.rescore(old._stamped(content=op.content))  # no vectors here
        thread.messages[i] = old._stamped(content=op.content, importance=importance)
        self._log(op.resource_id, tid, old, "edit", old.content, op)
        return _out(thread.messages[i])

    def _delete_message(self, op: ops.DeleteMessage) -> Message | None:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return None
        tid, thread, i = found
        m = thread.messages.pop(i)
        self._log(op.resource_id, tid, m, "delete", None, op)
        return _out(m)

    def _read_message_log(self, op: ops.ReadMessageLog) -> list[dict[str, Any]]:
        log = self._resource(op.resource_id).message_log
        return [dict(e) for e in log if op.message_id in (None, e["message_id"])]

    def _set_importance(self, op: ops.SetImportance) -> bool:
        found = self._find(op.resource_id, op.message_id)
        if found is None:
            return False
        _, thread, i = found
        thread.messages[i] = thread.messages[i]._stamped(importance=op.value)
        return True

    # -- working memory and whole resources -------------------------------------------------------

    def _read_working_memory(self, op: ops.ReadWorkingMemory) -> WorkingMemory | None:
        resource = self._resource(op.resource_id)
        if resource.working_memory is None:
            return None
        data = _json(resource.working_memory)
        return WorkingMemory(
            resource_id=op.resource_id, data=data, version=resource.version, updated_at=resource.updated_at
        )

    def _patch_working_memory(self, op: ops.PatchWorkingMemory) -> WorkingMemory:
        resource = self._resources.setdefault(op.resource_id, _Resource())
        if op.expected_version is not None and op.expected_version != resource.version:
            raise Conflict(
                f"working memory of {op.resource_id!r} is at version {resource.version}, not {op.expected_version}",
                resource_id=op.resource_id,
                expected=op.expected_version,
                actual=resource.version,
            )
        data = op.update(_json(resource.working_memory))
        resource.working_memory, resource.updated_at = _json(data), op.now
        resource.version += 1
        entry = {
            "version": resource.version,
            "patch": _json(op.patch),
            "source": op.source,
            "created_at": to_iso(op.now),
        }
        resource.patches.append(entry)
        return WorkingMemory(resource_id=op.resource_id, data=data, version=resource.version, updated_at=op.now)

    def _erase_resource(self, op: ops.EraseResource) -> None:
        self._resources.pop(op.resource_id, None)

    def _export_resource(self, op: ops.ExportResource) -> dict[str, Any]:
        dump = new_dump(op.resource_id)
        resource = self._resources.get(op.resource_id)
        if resource is None:
            return dump
        if resource.working_memory is not None:
            wm = {"data": _json(resource.working_memory), "version": resource.version}
            dump["working_memory"] = {**wm, "updated_at": to_iso(resource.updated_at)}
        dump["working_memory_log"] = copy.deepcopy(resource.patches)
        dump["message_log"] = copy.deepcopy(resource.message_log)
        by_first = sorted(
            resource.threads,
            key=lambda tid: (min((m.seq or 0 for m in resource.threads[tid].messages), default=0), tid),
        )
        for tid in by_first:
            record = self._record(op.resource_id, tid)
            assert record is not None
            dump["threads"].append(
                {
                    "id": tid,
                    "title": record.title,
                    "metadata": record.metadata,
                    "created_at": to_iso(record.created_at) if record.created_at else None,
                    "updated_at": to_iso(record.updated_at) if record.updated_at else None,
                    "messages": [m.to_dict() for m in resource.threads[tid].messages],
                }
            )
        return dump

    def _import_resource(self, op: ops.ImportResource) -> None:
        dump = op.dump
        rid = dump["resource_id"]
        if rid in self._resources:
            raise UsageError(f"resource {rid!r} already holds data; erase it before importing")
        beyond = [
            k
            for k in ("facts", "fact_history", "scheduled_tasks", "macros", "allowed_prefixes", "items")
            if dump.get(k)
        ]
        if beyond:
            raise UsageError(f"DictStore keeps only CORE; this export also holds {', '.join(beyond)}")
        ids = [m.id for t in dump["threads"] for m in t["_parsed"]]
        if len(set(ids)) != len(ids):
            raise UsageError("the export holds a message id twice")
        resource = self._resources[rid] = _Resource(message_log=copy.deepcopy(dump["message_log"]))
        if wm := dump.get("working_memory"):
            resource.working_memory, resource.version = _json(wm["data"]), int(wm["version"])
            resource.updated_at = from_iso(wm["updated_at"]) if wm.get("updated_at") else op.now
        resource.patches = copy.deepcopy(dump["working_memory_log"])
        for t in dump["threads"]:
            created = from_iso(t["created_at"]) if t.get("created_at") else op.now
            thread = resource.threads[t["id"]] = _Thread(
                created_at=created, title=t.get("title"), metadata=_json(t.get("metadata"))
            )
            for m, position in zip(t["_parsed"], ops.import_positions(t["_parsed"]), strict=True):
                self._seq += 1
                thread.messages.append(m._stamped(seq=self._seq, position=position))
            thread.last_position = max((m.position or 0 for m in thread.messages), default=0)
