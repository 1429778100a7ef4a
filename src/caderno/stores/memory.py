"""``memory://``: the SQLite store on a private database that disappears at close.

Not a second implementation of the port: the same SQL plans, schema and
full-text index as a SQLite file, so ``memory://`` cannot drift from the
durable backends (an earlier ``memory://`` was ~1,000 lines of dicts that
re-implemented every operation, and could). The database is a file in a
new directory of the system's temporary directory (``$TMPDIR``), readable
by this user alone (``mkdtemp`` makes it 0700), deleted by ``close`` — or
at exit when nobody closed the store. A process killed outright leaves it
behind, like any temporary file; a ``$TMPDIR`` on tmpfs keeps it off the
disk.

Why a file and not one of SQLite's in-memory databases: the store's writer
thread and its readers need WAL, where a reader keeps its snapshot while
the writer commits. A shared-cache ``mode=memory`` URI locks tables
instead (a read during a write fails at once with ``SQLITE_LOCKED``,
whatever the busy timeout), and the ``memdb`` VFS has no WAL (every read
waits for the write in flight); both measured on SQLite 3.40.

Two things keep its open and close cheap, since tests open many: each
store starts from a copy of a schema migrated once per process (the
migrations cost ~18 ms of DDL, the copy ~4 ms), and ``synchronous=OFF``
(nothing here outlives the process; it saves ~40 ms of fsyncs per store,
switching to WAL and the last checkpoint).
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from pathlib import Path

from ..core.files import create_private
from . import _sqlite_schema
from .sqlite import SQLiteStore

__all__ = ["InMemoryStore"]

_template: bytes | None = None
_template_lock = threading.Lock()


def _migrated_schema() -> bytes:
    """A database image with every migration applied and no data (made on first use)."""
    global _template
    with _template_lock:
        if _template is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            try:
                _sqlite_schema.migrate(conn)
                _template = conn.serialize()
            finally:
                conn.close()
        return _template


class InMemoryStore(SQLiteStore):
    """The store ``memory://`` names: a private SQLite database that lives until ``close``.

    A closed store opens again empty (on its next call or ``open``).
    """

    def __init__(self) -> None:
        super().__init__("memory://")  # the real path is made at open
        # Not an option of SQLiteStore: on a file meant to last, OFF lets a power cut corrupt it.
        self.synchronous = "OFF"
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def _open_sync(self) -> None:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="caderno-memory-")
            self.path = Path(self._dir.name) / "memory.db"
            create_private(self.path)
            self.path.write_bytes(_migrated_schema())
        super()._open_sync()

    async def close(self) -> None:
        await super().close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
