"""SQLite store: the embedded default.

Why these settings:

* WAL lets readers work while one writer commits, across processes too.
* ``busy_timeout`` makes concurrent writers from several processes wait
  instead of failing at once.
* ``synchronous=FULL`` (default) fsyncs every commit: a turn that returned is
  on disk even after a power cut. ``NORMAL`` skips the fsync of the WAL on
  each commit; it stays consistent after a crash but may lose the last
  transactions on power loss — choose it for throughput you can re-create.
  A commit that holds only non-durable writes (``Op.durable``: the turn
  leases, whose loss only frees a thread early) runs at ``NORMAL`` either way.
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
import functools
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from ..core.clock import to_iso
from ..core.errors import StorageError, UsageError
from ..core.files import create_private
from . import _sqlite_legacy, _sqlite_plans, _sqlite_schema, ops
from ._cache import KeyCache, RecentCache
from ._sql import Dialect, ForeignKeyViolation, Handler, Q, UniqueViolation, run_plan_sync
from ._sqlite_fts import catch_up_fts
from ._sqlite_plans import SQLITE
from ._sqlite_writer import GroupWriter, Job
from .capabilities.history import read_thread

__all__ = ["FTS_BATCH", "SQLiteStore", "catch_up_fts"]

T = TypeVar("T")
_HEADER = b"SQLite format 3\x00"

DIALECT = Dialect(
    name="sqlite",
    ts=to_iso,
    for_update="",  # one writer: BEGIN IMMEDIATE already excludes every other writer
    feed_overlap=0,  # ids become visible in commit order
    key_share="",
    no_key_update="",
    json_field=lambda kind: {
        "kind": "json_type(doc, ?)",
        "string": "CASE WHEN json_type(doc, ?) = 'text' THEN json_extract(doc, ?) END",
        "number": "CASE WHEN json_type(doc, ?) IN ('integer', 'real', 'true', 'false') THEN json_extract(doc, ?) END",
    }[kind],
    json_path=lambda keys: "$" + "".join(f'."{k}"' for k in keys),
)

#: Messages appended before the writer indexes them for full text in one
#: transaction. Indexing each append in its own commit cost ~0.9 ms of the
#: ~1.2 ms an fsynced turn took (FTS5 writes a new index segment per commit);
#: in batches it costs a few µs a message. A search indexes the rest first.
FTS_BATCH = 512


#: Checkpoint attempts after a deletion while another connection reads (10 ms apart).
_CHECKPOINT_TRIES = 20


def _execute(conn: sqlite3.Connection, q: Q) -> Any:
    """Run one query of a plan; constraint errors become the plan's own exceptions (by error code)."""
    try:
        if q.fetch == "many":
            if q.params:
                conn.executemany(q.sql, q.params)
            return None
        cur = conn.execute(q.sql, q.params)
        if q.fetch == "all":
            return cur.fetchall()
        if q.fetch == "one":
            return cur.fetchone()
        if q.fetch == "rowcount":
            return cur.rowcount
        return None
    except sqlite3.IntegrityError as exc:
        name = getattr(exc, "sqlite_errorname", "")
        if name in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"):
            raise UniqueViolation(str(exc)) from exc
        if name == "SQLITE_CONSTRAINT_FOREIGNKEY":
            raise ForeignKeyViolation(str(exc)) from exc
        raise


class SQLiteStore:
    """A store in one SQLite file."""

    supports = ops.ALL
    plans = SQLITE
    """Where the store finds each operation's plan (``DialectPlans.handler``)."""

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
        import_from: str | None = None,
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise UsageError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        if import_from not in (None, "aidaemon"):
            raise UsageError(f"import_from takes 'aidaemon' (its database, imported in place), not {import_from!r}")
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        self.busy_timeout_ms = busy_timeout_ms
        self.cache = RecentCache(cache_messages, cache_threads)
        self.keys = KeyCache()
        self._legacy_resource_id = legacy_resource_id
        # import_from="aidaemon": its tables imported into legacy_resource_id at open (_sqlite_legacy);
        # otherwise a file still holding them is refused. ``imported``: what that open moved.
        self._import_aidaemon = import_from == "aidaemon"
        self.imported: _sqlite_legacy.Imported | None = None
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
        # One long-lived thread runs every write (warm, and writes are serial
        # anyway); writes that wait together share one commit.
        self._group_writer = GroupWriter(self)
        self._scrub_wanted = False
        # Messages appended by this store and not yet in the full-text index.
        self._fts_pending = 0
        # True while everything this store committed is in the full-text index
        # (set after a catch-up, cleared by any write batch): with no other
        # connection's commit since (``_cache_is_fresh``), a search needs no
        # catch-up, and so no trip through the writer.
        self._fts_clean = False
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
        """Refuse, without changing a byte, a file caderno must not open for writing.

        A directory, an unreadable file, a file that is not SQLite, another
        application's SQLite database (tables that are neither caderno's nor
        an older agent's), and a database migrated by a newer caderno. The
        look is taken through a read-only, *immutable* connection: opening
        for writing would switch a rollback-journal database to WAL (its
        header changes) before any migration could refuse it, and even a
        plain read-only open of a WAL database creates its ``-wal`` and
        ``-shm`` files. ``immutable=1`` makes SQLite read the main file alone,
        with no lock and no sidecar; what a live writer holds only in its WAL
        is not seen, which is enough here: caderno's migrations and another
        application's tables reach the main file at the first checkpoint.
        """
        path = self.path
        if path.is_dir():
            raise StorageError(f"{path} is a directory, not a database file")
        try:
            with open(path, "rb") as fh:
                head = fh.read(100)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not head:
            return  # an empty file: SQLite makes it a new database
        if head[:16] != _HEADER:
            raise StorageError(f"{path} is not a SQLite database; refusing to touch it")
        try:
            conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                events = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                applied = (
                    {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
                    if "schema_migrations" in tables
                    else None
                )
                # Asked here only of a rollback-journal file, whose main file is all there is; a WAL
                # file is asked by migrate, under its lock (and its open changes no header).
                waiting = None
                if head[18] == 1 and not self._import_aidaemon:
                    waiting = _sqlite_legacy.waiting(conn, _sqlite_schema.MIGRATIONS, applied or set())
            finally:
                conn.close()
        except sqlite3.Error as exc:
            if head[18] == 1:  # rollback journal: the writing open would change the header
                raise StorageError(f"cannot read {path} as a SQLite database: {exc}; refusing to change it") from None
            return  # already WAL: the writing open reports the problem and changes nothing first
        _sqlite_schema.check_foreign(path, tables, version, applied, events, waiting)

    def _open_sync(self) -> None:
        self._check_file()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            create_private(self.path)  # so the database and its -wal/-shm are 0600
        except OSError as exc:
            raise StorageError(f"cannot create {self.path}: {exc.strerror or exc}") from None
        conn = self._connect(readonly=False)
        try:
            self.imported = _sqlite_schema.migrate(
                conn, import_aidaemon_as=self._legacy_resource_id if self._import_aidaemon else None
            )
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
            # A read still running in a worker thread (a cancelled caller's,
            # say) keeps its connection: wait for every reader slot, so no
            # connection is closed under a thread that is using it.
            for _ in range(self._max_readers):
                self._reader_slots.acquire()
            try:
                for conn in self._readers:
                    conn.close()
                self._readers.clear()
                while not self._idle.empty():
                    self._idle.get_nowait()
            finally:
                for _ in range(self._max_readers):
                    self._reader_slots.release()

        await asyncio.to_thread(self._group_writer.stop)  # queued writes finish first
        await asyncio.to_thread(close_all)

    async def _write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        after: Callable[[T], None] | None = None,
        *,
        scrub: bool = False,
        durable: bool = True,
    ) -> T:
        """Run ``fn`` in an IMMEDIATE transaction on the writer thread, off the loop.

        The transaction may be shared with other writes that were waiting
        (``_sqlite_writer``), each in its own savepoint: ``fn`` is all or
        nothing on its own. ``after`` runs once the transaction committed,
        still under the write lock: the place to update the in-process cache.
        ``scrub``: the transaction deleted text that must leave the file
        (``_scrub``).
        """
        if self._writer is None:
            await self.open()

        def committed(result: T) -> None:
            if after is not None:
                after(result)
            if scrub:
                self._scrub_wanted = True

        job = Job(fn=fn, after=committed, durable=durable)
        try:
            return await self._group_writer.submit(job)
        except (sqlite3.DatabaseError, UniqueViolation, ForeignKeyViolation) as exc:
            raise StorageError(f"SQLite error on {self.path}: {exc}") from exc

    def writer_connection(self) -> sqlite3.Connection | None:
        return self._writer

    def after_commit(self, conn: sqlite3.Connection) -> None:
        """Work the writer thread does after a commit, in its own transactions: scrubbing, indexing."""
        if self._scrub_wanted:
            self._scrub_wanted = False
            self._scrub(conn)
        if self._fts_pending >= FTS_BATCH:
            self._fts_pending = 0
            conn.execute("BEGIN IMMEDIATE")
            try:
                catch_up_fts(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _scrub(self, conn: sqlite3.Connection) -> None:
        """Make deleted text leave the database files while the store stays open.

        ``secure_delete`` zeroes deleted rows in the pages it writes, but two
        copies remain: FTS5 keeps the deleted terms in its index segments
        until they merge (``optimize`` merges them now), and the WAL keeps
        the old page images until a checkpoint copies the new ones into the
        main file (``wal_checkpoint(TRUNCATE)`` does that and empties the
        WAL). Both cost time in proportion to the index and the WAL, which is
        why only deletions pay it. A reader of another process holding an old
        snapshot at this moment keeps the WAL from being emptied; its frames
        then go at that process's next checkpoint.
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO events_fts (events_fts) VALUES ('optimize')")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for _ in range(_CHECKPOINT_TRIES):
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                break
            time.sleep(0.01)

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
        except (sqlite3.DatabaseError, UniqueViolation, ForeignKeyViolation) as exc:
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
            if self._writer is None:  # closed while we waited
                return False
            version = self._writer.execute("PRAGMA data_version").fetchone()[0]
        finally:
            self._write_lock.release()
        if version != self.cache.data_version:
            # Another connection committed: every state derived from "nothing changed" goes,
            # whichever caller noticed first.
            self.cache.reset(version)
            self.keys.clear()
            self._fts_clean = False
            return False
        return True

    # -- the port -------------------------------------------------------------

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        batch = list(batch)
        plans = [self._handler(op) for op in batch]
        if not batch:
            return []

        def run(conn: sqlite3.Connection) -> list[Any]:
            execute = functools.partial(_execute, conn)
            return [run_plan_sync(plan(DIALECT, op), execute) for plan, op in zip(plans, batch, strict=True)]

        if any(isinstance(op, ops.LexicalSearch) for op in batch) and not (self._fts_clean and self._cache_is_fresh()):
            # Full text is indexed in batches after appends; a search first
            # indexes what is not yet, so it finds every committed message.
            await self._write(catch_up_fts, self._fts_caught_up)
        if any(op.writes for op in batch):
            erasing = any(op.erases for op in batch)
            durable = any(op.durable for op in batch if op.writes)
            return await self._write(
                run, lambda results: self._committed(batch, results), scrub=erasing, durable=durable
            )
        if len(batch) == 1 and isinstance(batch[0], ops.ReadThread):
            return [await self._read_thread(batch[0])]
        if len(batch) == 1 and isinstance(batch[0], ops.FindKey):
            return [await self._find_key(batch[0], run)]
        return await self._read(run, snapshot=len(batch) > 1)

    def _handler(self, op: ops.Op[Any]) -> Handler:
        kind = type(op)
        if kind is ops.Append:
            known = (op.resource_id, op.thread_id) in self._known_threads  # type: ignore[attr-defined]
            rows = _sqlite_plans.insert_rows(op)  # type: ignore[arg-type]  # here, not on the writer thread
            return functools.partial(_sqlite_plans.append, known=known, rows=rows)
        handler = self.plans.handler(kind)
        if handler is None:
            raise UsageError(f"{type(self).__name__} does not support {kind.__name__}")
        return handler

    def _fts_caught_up(self, _indexed: object) -> None:
        """After a catch-up commits (callbacks run in commit order: a write grouped after it clears this again)."""
        self._fts_clean = True

    def _committed(self, batch: list[ops.Op[Any]], results: list[Any]) -> None:
        """Keep the in-process caches in step with a committed write batch (under the write lock)."""
        self._fts_clean = False
        for op, result in zip(batch, results, strict=True):
            if isinstance(op, ops.Append):
                self._known_threads.add((op.resource_id, op.thread_id))
                self.cache.appended((op.resource_id, op.thread_id), result)
                self._fts_pending += len(result)
            elif isinstance(op, ops.DeleteThread):
                self._known_threads.discard((op.resource_id, op.thread_id))
                self.cache.discard(op.resource_id, op.thread_id)
            elif isinstance(op, ops.EraseResource | ops.ImportResource):
                rid = op.resource_id if isinstance(op, ops.EraseResource) else op.dump["resource_id"]
                self._known_threads = {k for k in self._known_threads if k[0] != rid}
                self.cache.discard(rid)
            elif isinstance(op, ops.PopMessage | ops.EditMessage | ops.DeleteMessage | ops.SetImportance):
                self.cache.discard(op.resource_id)
            elif isinstance(op, ops.WriteSummary):
                self.cache.discard(op.resource_id, op.thread_id)
            elif isinstance(op, ops.CreateKey | ops.RevokeKey):
                self.keys.clear()

    async def _find_key(self, op: ops.FindKey, run: Callable[[sqlite3.Connection], list[Any]]) -> Any:
        """A live key, from the key cache when it is fresh (``KeyCache``): every request asks."""
        if self._cache_is_fresh():
            hit = self.keys.get(op.token_hash)
            if hit is not None:
                return hit
        epoch = self.keys.epoch()
        (found,) = await self._read(run)
        if found is not None:
            self.keys.fill(op.token_hash, found, epoch)
        return found

    async def _read_thread(self, op: ops.ReadThread) -> list[Any]:
        """A thread's newest messages, from the recent-message cache when it is fresh."""
        key, limit = (op.resource_id, op.thread_id), op.limit
        if op.before is not None or not self.cache.enabled:
            return await self._read(
                lambda conn: run_plan_sync(read_thread(DIALECT, op), functools.partial(_execute, conn))
            )
        if self._cache_is_fresh():
            hit = self.cache.get(key, limit)
            if hit is not None:
                return hit
        epoch = self.cache.epoch()
        want = None if limit is None else max(limit, self.cache.per_thread)
        wide = ops.ReadThread(resource_id=op.resource_id, thread_id=op.thread_id, limit=want)
        newest = await self._read(
            lambda conn: run_plan_sync(read_thread(DIALECT, wide), functools.partial(_execute, conn))
        )
        if want is None or want > 0:
            self.cache.fill(key, newest, want is None or len(newest) < want, epoch)
        return newest if limit is None else newest[-limit:] if limit else []
