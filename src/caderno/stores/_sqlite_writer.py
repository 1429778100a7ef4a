"""SQLite's writer thread: every write of a store runs here, and writes that wait together share a commit.

One long-lived thread owns the writer connection. A write is a job (a
function of the connection); the thread takes the next job and every job
queued behind it (up to ``MAX_GROUP``), and runs them in **one**
``BEGIN IMMEDIATE`` transaction, each inside its own ``SAVEPOINT``: a job
that fails — a duplicate message id, a compare-and-swap that lost — rolls
back to its savepoint and gets its error, while the others commit. One
commit means one fsync for all of them, which is where concurrent writers
spend their time with ``synchronous=FULL`` (group commit, as databases do
for their log). A single writer pays nothing for it: alone in the queue, a
job runs as before, without a savepoint.

A job cancelled before it started never runs; one that started always
finishes (commit or rollback), so a cancelled caller never leaves half a
transaction.

The outcome of a job goes back to its caller's event loop. A group's
outcomes go back together, one ``call_soon_threadsafe`` per loop, not one
per job: every wake-up of a loop from another thread is a system call, and
under 16 concurrent writers those wake-ups cost more writer-thread time than
the SQL did.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["MAX_GROUP", "GroupWriter", "Job"]

#: What a job came to: ``(result, None)`` or ``(None, error)``.
Outcome = tuple[Any, BaseException | None]

#: Most jobs that share one commit: enough to absorb a burst of writers,
#: small enough that one commit never holds the database for long.
MAX_GROUP = 64


@dataclass(eq=False)
class Job:
    """One write: ``fn`` in the transaction; ``after`` once committed (under the write lock)."""

    fn: Callable[[sqlite3.Connection], Any]
    after: Callable[[Any], None] | None = None
    durable: bool = True
    """False: the write may be lost to a power cut (a turn lease), so a group of only such
    jobs commits without the fsync (``synchronous=NORMAL`` for that commit)."""
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    """Made on the submitting loop (so a job is created inside a coroutine); settled there."""


class _Owner(Protocol):
    """What the writer needs of its store."""

    _write_lock: threading.Lock
    synchronous: str

    def writer_connection(self) -> sqlite3.Connection | None: ...

    def after_commit(self, conn: sqlite3.Connection) -> None: ...


class GroupWriter:
    """The writer thread of one store (started on first use, stopped by ``stop``)."""

    def __init__(self, owner: _Owner) -> None:
        self._owner = owner
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.largest_group = 0
        """The most jobs one commit has carried so far (observability, and tests)."""

    def submit(self, job: Job) -> asyncio.Future[Any]:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="caderno-sqlite-writer", daemon=True)
                self._thread.start()
        self._jobs.put(job)
        return job.future

    def stop(self) -> None:
        """Finish the queued jobs, then end the thread (a later ``submit`` starts a new one)."""
        with self._start_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            group = [job]
            while len(group) < MAX_GROUP:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # stop after this group
                    self._jobs.put(None)
                    break
                group.append(more)
            self.largest_group = max(self.largest_group, len(group))
            # A caller cancelled while queued: its job never runs. (Read from
            # this thread: the worst race is a job cancelled right now, which
            # runs and whose result is dropped, as for one already running.)
            self._run([j for j in group if not j.future.cancelled()])

    def _run(self, group: list[Job]) -> None:
        if not group:
            return
        owner = self._owner
        with owner._write_lock:
            conn = owner.writer_connection()
            if conn is None:
                from ..core.errors import StorageError

                _settle_all(group, [(None, StorageError("the store is closed"))] * len(group))
                return
            relaxed = owner.synchronous == "FULL" and not any(j.durable for j in group)
            if relaxed:  # WAL and NORMAL: atomic and consistent, the WAL not fsynced at this commit
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                outcomes = _transaction(conn, group)
            finally:
                if relaxed:
                    conn.execute("PRAGMA synchronous = FULL")
            for job, (result, error) in zip(group, outcomes, strict=True):
                if error is None and job.after is not None:
                    job.after(result)
            try:
                owner.after_commit(conn)
            finally:
                _settle_all(group, outcomes)


def _settle_all(group: list[Job], outcomes: list[Outcome]) -> None:
    """Hand each outcome to its job's loop: one wake-up per loop for the whole group."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
    for job, outcome in zip(group, outcomes, strict=True):
        by_loop.setdefault(job.future.get_loop(), []).append((job.future, outcome))
    for loop, settled in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, settled)
        except RuntimeError:  # that loop is closed: nobody is waiting any more
            pass


def _settle(settled: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    for future, (result, error) in settled:
        if future.done():  # cancelled by its caller while it ran
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


def _transaction(conn: sqlite3.Connection, group: list[Job]) -> list[Outcome]:
    """Run the group in one transaction: ``(result, None)`` or ``(None, error)`` per job."""
    conn.execute("BEGIN IMMEDIATE")
    outcomes: list[Outcome] = []
    try:
        if len(group) == 1:
            outcomes.append((group[0].fn(conn), None))
        else:
            for job in group:
                conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((job.fn(conn), None))
                    conn.execute("RELEASE job")
                except Exception as exc:  # this job only: the others still commit
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    outcomes.append((None, exc))
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return [(None, exc)] * len(group)
    return outcomes
