"""SQLite store: the embedded default.

Why these settings:

* WAL lets readers work while one writer commits, across processes too.
* ``busy_timeout`` makes concurrent writers from several processes wait
  instead of failing at once.
* ``synchronous=FULL`` (default) fsyncs every commit: a turn that returned is
  on disk even after a power cut. ``NORMAL`` skips the fsync of the WAL on
  each commit; it stays consistent after a crash but may lose the last
  transactions on power loss — choose it for throughput you can re-create.
* ``secure_delete=ON`` overwrites deleted content, so an erased resource's
  text does not linger in free pages of the file.

One writer connection, guarded by a lock, takes every write inside
``BEGIN IMMEDIATE`` (so a read-merge-write cannot interleave with another
process). A small pool of read-only connections serves reads. All SQLite work
runs off the event loop in worker threads; writes are shielded from
cancellation so a cancelled caller never leaves a half-applied transaction.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from .._dump import FACT_FIELDS, FACT_HISTORY_FIELDS
from .._time import from_iso, to_iso, utcnow
from ..errors import Conflict, StorageError, UsageError
from ..messages import Message, Thread, WorkingMemory
from . import _sqlite_schema
from ._cache import RecentCache
from ._rows import EVENT_COLUMNS, dumps, event_params, loads, row_to_message, row_to_thread
from ._sqlite_consolidation import _SQLiteConsolidation
from ._sqlite_recall import _SQLiteRecall
from .base import ResourceDump, WorkingMemoryUpdate

T = TypeVar("T")
_HEADER = b"SQLite format 3\x00"
#: Every table that holds a resource's rows, children first.
_RESOURCE_TABLES = (
    "events",
    "threads",
    "working_memory_log",
    "facts",
    "facts_history",
    "consolidation_log",
    "resources",
)
_LAST_EVENT_TIME = (
    "SELECT e.created_at FROM events e WHERE e.resource_id = t.resource_id AND e.thread_id = t.thread_id "
    "ORDER BY e.seq DESC LIMIT 1"
)


class SQLiteStore(_SQLiteRecall, _SQLiteConsolidation):
    """A store in one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_ms: int = 30_000,
        readers: int = 5,
        cache_messages: int = 50,
        cache_threads: int = 1024,
        legacy_resource_id: str = "default",
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise UsageError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        self.busy_timeout_ms = busy_timeout_ms
        self.cache = RecentCache(cache_messages, cache_threads)
        self._legacy_resource_id = legacy_resource_id
        self._max_readers = max(1, readers)
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._reader_slots = threading.Semaphore(self._max_readers)
        self._readers: list[sqlite3.Connection] = []
        self._writer: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        # Threads this store has written to: appends to them skip the two
        # "create if missing" statements (a concurrent delete is detected by
        # the foreign key and repaired).
        self._known_threads: set[tuple[str, str]] = set()
        # One long-lived thread runs every write: it stays warm (cheaper than
        # a pool hand-off) and writes are serial anyway.
        self._write_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="caderno-sqlite-writer")
        self._open_lock = asyncio.Lock()

    # -- connections ---------------------------------------------------------

    def _connect(self, *, readonly: bool) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            if readonly:
                conn.execute("PRAGMA query_only = ON")
            else:
                conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot open {self.path} as a SQLite database: {exc}") from exc
        return conn

    def _check_file(self) -> None:
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as fh:
                if fh.read(16) != _HEADER:
                    raise StorageError(f"{self.path} is not a SQLite database; refusing to touch it")

    def _open_sync(self) -> None:
        self._check_file()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(readonly=False)
        try:
            _sqlite_schema.migrate(conn, self._legacy_resource_id)
            self.cache.reset(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StorageError(f"cannot use {self.path}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self._writer = conn

    async def open(self) -> None:
        async with self._open_lock:
            if self._writer is None:
                await asyncio.to_thread(self._open_sync)

    async def close(self) -> None:
        def close_all() -> None:
            with self._write_lock:
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            while not self._idle.empty():
                self._idle.get_nowait()

        await asyncio.to_thread(close_all)
        self._write_executor.shutdown(wait=False)
        self._write_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="caderno-sqlite-writer")

    async def _write(self, fn: Callable[[sqlite3.Connection], T], after: Callable[[T], None] | None = None) -> T:
        """Run ``fn`` in one IMMEDIATE transaction on the writer, off the loop.

        ``after`` runs once the transaction committed, still under the write
        lock: the place to update the in-process cache.
        """
        if self._writer is None:
            await self.open()

        def run() -> T:
            with self._write_lock:
                conn = self._writer
                if conn is None:
                    raise StorageError("the store is closed")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if after is not None:
                    after(result)
                return result

        # No asyncio.shield needed: cancelling the awaiting task cancels the
        # executor future only if the job has not started (then nothing ran);
        # a job already running always finishes, commit or rollback. Either
        # way the transaction is all or nothing.
        try:
            return await asyncio.get_running_loop().run_in_executor(self._write_executor, run)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"SQLite error on {self.path}: {exc}") from exc

    async def _read(self, fn: Callable[[sqlite3.Connection], T], *, snapshot: bool = False) -> T:
        if self._writer is None:
            await self.open()

        def run() -> T:
            with self._reader_slots:
                try:
                    conn = self._idle.get_nowait()
                except queue.Empty:
                    conn = self._connect(readonly=True)
                    self._readers.append(conn)
                try:
                    if not snapshot:
                        return fn(conn)
                    conn.execute("BEGIN")
                    try:
                        return fn(conn)
                    finally:
                        conn.execute("COMMIT")
                finally:
                    self._idle.put(conn)

        try:
            return await asyncio.to_thread(run)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"SQLite error on {self.path}: {exc}") from exc

    def _cache_is_fresh(self) -> bool:
        """True when no other connection has committed since the cache was reset.

        Runs on the caller's thread. It waits at most 2 ms for the writer
        lock (held only while a transaction commits); past that, the read
        simply goes to the database this time.
        """
        if self._writer is None or not self._write_lock.acquire(timeout=0.002):
            return False
        try:
            version = self._writer.execute("PRAGMA data_version").fetchone()[0]
        finally:
            self._write_lock.release()
        if version != self.cache.data_version:
            self.cache.reset(version)
            return False
        return True

    # -- messages ------------------------------------------------------------

    async def append(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        key = (resource_id, thread_id)

        def run(conn: sqlite3.Connection) -> list[Message]:
            if key in self._known_threads:
                try:
                    return self._insert_events(conn, resource_id, thread_id, messages)
                except sqlite3.IntegrityError as exc:
                    if "FOREIGN KEY" not in str(exc):
                        raise
                    # Another connection deleted the thread since; recreate it.
            now = to_iso(utcnow())
            conn.execute(
                "INSERT INTO resources (resource_id, created_at, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (resource_id) DO NOTHING",
                (resource_id, now, now),
            )
            # The thread row is written once; its updated_at is derived from
            # the newest event, so an append does not rewrite it.
            conn.execute(
                "INSERT INTO threads (resource_id, thread_id, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (resource_id, thread_id) DO NOTHING",
                (resource_id, thread_id, to_iso(messages[0].created_at) if messages[0].created_at else now),
            )
            return self._insert_events(conn, resource_id, thread_id, messages)

        def after(stored: list[Message]) -> None:
            self._known_threads.add(key)
            self.cache.appended(key, stored)

        return await self._write(run, after)

    def _insert_events(
        self, conn: sqlite3.Connection, resource_id: str, thread_id: str, messages: Sequence[Message]
    ) -> list[Message]:
        stored = []
        for m in messages:
            try:
                cur = conn.execute(
                    "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, "
                    "name, importance, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (resource_id, thread_id, *event_params(m)),
                )
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" not in str(exc):
                    raise
                raise UsageError(f"message id {m.id!r} is already stored for resource {resource_id!r}") from exc
            stored.append(m._stamped(seq=cur.lastrowid))
        return stored

    async def read(self, resource_id: str, thread_id: str, limit: int | None) -> list[Message]:
        key = (resource_id, thread_id)
        if self.cache.enabled and self._cache_is_fresh():
            hit = self.cache.get(key, limit)
            if hit is not None:
                return hit
        epoch = self.cache.epoch()
        want = None if limit is None else max(limit, self.cache.per_thread)

        def run(conn: sqlite3.Connection) -> list[Message]:
            sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? AND kind = 'message'"
            if want is None:
                rows = conn.execute(sql + " ORDER BY seq", key).fetchall()
            else:
                rows = conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*key, want)).fetchall()
                rows.reverse()
            return [row_to_message(r) for r in rows]

        newest = await self._read(run)
        if self.cache.enabled and (want is None or want > 0):
            self.cache.fill(key, newest, want is None or len(newest) < want, epoch)
        return newest if limit is None else newest[-limit:] if limit else []

    async def list_threads(self, resource_id: str) -> list[Thread]:
        def run(conn: sqlite3.Connection) -> list[Thread]:
            rows = conn.execute(
                "SELECT t.thread_id, t.title, t.metadata, t.created_at, "
                f"coalesce(({_LAST_EVENT_TIME}), t.created_at) AS updated_at, "
                "(SELECT count(*) FROM events e WHERE e.resource_id = t.resource_id "
                " AND e.thread_id = t.thread_id AND e.kind = 'message') "
                "FROM threads t WHERE t.resource_id = ? ORDER BY updated_at DESC, t.thread_id DESC",
                (resource_id,),
            ).fetchall()
            return [row_to_thread(resource_id, r) for r in rows]

        return await self._read(run)

    async def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM events WHERE resource_id = ? AND thread_id = ?", (resource_id, thread_id))
            cur = conn.execute("DELETE FROM threads WHERE resource_id = ? AND thread_id = ?", (resource_id, thread_id))
            return cur.rowcount > 0

        def after(_: bool) -> None:
            self._known_threads.discard((resource_id, thread_id))
            self.cache.discard(resource_id, thread_id)

        return await self._write(run, after)

    async def erase_resource(self, resource_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            for table in _RESOURCE_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE resource_id = ?", (resource_id,))
            # FTS5 keeps deleted terms in its segments until they merge;
            # merging now means erased words leave the file (with secure_delete).
            # The cost grows with the whole index: erase is rare by design.
            conn.execute("INSERT INTO events_fts (events_fts) VALUES ('optimize')")

        await self._write(run, lambda _: self._forget(resource_id))

    def _forget(self, resource_id: str) -> None:
        self._known_threads = {k for k in self._known_threads if k[0] != resource_id}
        self.cache.discard(resource_id)

    # -- working memory --------------------------------------------------------

    async def get_working_memory(self, resource_id: str) -> WorkingMemory | None:
        def run(conn: sqlite3.Connection) -> WorkingMemory | None:
            row = conn.execute(
                "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = ?", (resource_id,)
            ).fetchone()
            if row is None or row[0] is None:
                return None
            return WorkingMemory(
                resource_id=resource_id, data=loads(row[0]), version=row[1], updated_at=from_iso(row[2])
            )

        return await self._read(run)

    async def update_working_memory(
        self,
        resource_id: str,
        update: WorkingMemoryUpdate,
        *,
        patch: dict[str, Any],
        expected_version: int | None,
        source: str,
    ) -> WorkingMemory:
        def run(conn: sqlite3.Connection) -> WorkingMemory:
            row = conn.execute(
                "SELECT working_memory, version FROM resources WHERE resource_id = ?", (resource_id,)
            ).fetchone()
            current, version = (loads(row[0]), row[1]) if row else (None, 0)
            if expected_version is not None and expected_version != version:
                raise Conflict(
                    f"working memory of {resource_id!r} is at version {version}, not {expected_version}",
                    resource_id=resource_id,
                    expected=expected_version,
                    actual=version,
                )
            data = update(current)
            now = utcnow()
            conn.execute(
                "INSERT INTO resources (resource_id, working_memory, version, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (resource_id) DO UPDATE SET "
                "working_memory = excluded.working_memory, version = excluded.version, updated_at = excluded.updated_at",
                (resource_id, dumps(data), version + 1, to_iso(now), to_iso(now)),
            )
            conn.execute(
                "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
                (resource_id, version + 1, dumps(patch), source, to_iso(now)),
            )
            return WorkingMemory(resource_id=resource_id, data=data, version=version + 1, updated_at=now)

        return await self._write(run)

    # -- export / import -------------------------------------------------------

    async def export_resource(self, resource_id: str) -> ResourceDump:
        from .._dump import new_dump

        def run(conn: sqlite3.Connection) -> ResourceDump:
            dump = new_dump(resource_id)
            row = conn.execute(
                "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = ?", (resource_id,)
            ).fetchone()
            if row and row[0] is not None:
                dump["working_memory"] = {"data": loads(row[0]), "version": row[1], "updated_at": row[2]}
            dump["working_memory_log"] = [
                {"version": v, "patch": loads(p), "source": s, "created_at": c}
                for v, p, s, c in conn.execute(
                    "SELECT version, patch, source, created_at FROM working_memory_log WHERE resource_id = ? ORDER BY id",
                    (resource_id,),
                )
            ]
            dump["facts"] = [
                dict(zip(FACT_FIELDS, r, strict=True))
                for r in conn.execute(
                    "SELECT category, key, value, source, created_at, updated_at FROM facts "
                    "WHERE resource_id = ? ORDER BY category, key",
                    (resource_id,),
                )
            ]
            dump["fact_history"] = [
                dict(zip(FACT_HISTORY_FIELDS, r, strict=True))
                for r in conn.execute(
                    "SELECT category, key, value, source, valid_from, replaced_at FROM facts_history "
                    "WHERE resource_id = ? ORDER BY id",
                    (resource_id,),
                )
            ]
            threads = conn.execute(
                "SELECT t.thread_id, t.title, t.metadata, t.created_at, "
                f"coalesce(({_LAST_EVENT_TIME}), t.created_at) FROM threads t "
                "WHERE t.resource_id = ? ORDER BY (SELECT min(seq) FROM events e "
                "WHERE e.resource_id = t.resource_id AND e.thread_id = t.thread_id), t.thread_id",
                (resource_id,),
            ).fetchall()
            for tid, title, metadata, created, updated in threads:
                rows = conn.execute(
                    f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? "
                    "AND kind = 'message' ORDER BY seq",
                    (resource_id, tid),
                ).fetchall()
                dump["threads"].append(
                    {
                        "id": tid,
                        "title": title,
                        "metadata": loads(metadata),
                        "created_at": created,
                        "updated_at": updated,
                        "messages": [row_to_message(r).to_dict() for r in rows],
                    }
                )
            return dump

        return await self._read(run, snapshot=True)

    async def import_resource(self, dump: ResourceDump) -> None:
        resource_id = dump["resource_id"]

        def run(conn: sqlite3.Connection) -> None:
            if conn.execute(
                "SELECT 1 FROM resources WHERE resource_id = ? UNION ALL SELECT 1 FROM threads WHERE resource_id = ?",
                (resource_id, resource_id),
            ).fetchone():
                raise UsageError(f"resource {resource_id!r} already holds data; erase it before importing")
            now = to_iso(utcnow())
            wm = dump.get("working_memory")
            conn.execute(
                "INSERT INTO resources (resource_id, working_memory, version, created_at, updated_at) VALUES (?,?,?,?,?)",
                (
                    resource_id,
                    dumps(wm["data"]) if wm else None,
                    int(wm["version"]) if wm else 0,
                    now,
                    (wm.get("updated_at") if wm else None) or now,
                ),
            )
            for e in dump.get("working_memory_log") or []:
                conn.execute(
                    "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) VALUES (?,?,?,?,?)",
                    (resource_id, e["version"], dumps(e["patch"]), e["source"], e["created_at"]),
                )
            conn.executemany(
                "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
                "VALUES (?,?,?,?,?,?,?)",
                [(resource_id, *(f[k] for k in FACT_FIELDS)) for f in dump.get("facts") or []],
            )
            conn.executemany(
                "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
                "VALUES (?,?,?,?,?,?,?)",
                [(resource_id, *(h[k] for k in FACT_HISTORY_FIELDS)) for h in dump.get("fact_history") or []],
            )
            for t in dump["threads"]:
                conn.execute(
                    "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at) VALUES (?,?,?,?,?)",
                    (resource_id, t["id"], t.get("title"), dumps(t.get("metadata")), t.get("created_at") or now),
                )
                for m in t["_parsed"]:
                    try:
                        conn.execute(
                            "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, "
                            "tool_call_id, name, importance, created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                            (resource_id, t["id"], *event_params(m)),
                        )
                    except sqlite3.IntegrityError as exc:
                        raise UsageError(f"export holds message id {m.id!r} twice") from exc

        await self._write(run, lambda _: self.cache.discard(resource_id))
