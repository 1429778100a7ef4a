"""Append-only JSONL journals: hermetic, git-diffable logs.

Five stores, one file each under the journal directory:
``episodic`` (what happened), ``semantic`` (what is true), ``procedural``
(how to do things), ``decision`` (what was decided and why) and
``transcript`` (raw exchanges). Each line is one JSON object:
``{"id", "timestamp", "agent", "record"}``.

Appends from several processes never interleave: each line is written with
one ``write`` under an exclusive lock. A torn last line (a crash mid-write)
is skipped on read with a warning, and the next append starts on a fresh
line, so the file stays valid JSONL. A new journal is its owner's alone
(0600, whatever the umask), and a journal that is a symbolic link is refused,
never written through.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path
from typing import Any

from ...core.clock import new_id, to_iso, utcnow
from ...core.errors import StorageError, UsageError
from ...core.files import caderno_home, locked, open_append

__all__ = ["STORES", "Journal"]

log = logging.getLogger("caderno.memory.adapters.journal")

STORES: tuple[str, ...] = ("episodic", "semantic", "procedural", "decision", "transcript")


def _cannot_write(path: Path, exc: OSError) -> str:
    """caderno's sentence for a journal (or its lock file) that cannot be written."""
    name = exc.filename or path
    if exc.errno == errno.ELOOP:
        return (
            f"cannot write the journal {name}: it is a symbolic link, and caderno never writes through one "
            "(replace it with a regular file)"
        )
    return f"cannot write the journal {name}: {exc.strerror or exc}"


class Journal:
    """The journals in one directory (default ``$CADERNO_HOME/journal``)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else caderno_home() / "journal"

    @staticmethod
    def check_store(store: str) -> str:
        """``store`` if it is one of :data:`STORES`.

        Raises:
            UsageError: naming the five stores.
        """
        if store not in STORES:
            raise UsageError(f"unknown journal store {store!r}; use one of: {', '.join(STORES)}")
        return store

    def path(self, store: str) -> Path:
        """The JSONL file of ``store``."""
        return self.directory / f"{self.check_store(store)}.jsonl"

    def append(self, store: str, record: dict[str, Any], agent: str = "cli") -> str:
        """Append one record; returns its time-ordered id."""
        path = self.path(store)
        if not isinstance(record, dict):
            raise UsageError(f"a journal record must be a JSON object, not {type(record).__name__}")
        entry: dict[str, Any] = {"id": new_id(), "timestamp": to_iso(utcnow()), "agent": agent, "record": record}
        try:
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        except (TypeError, ValueError) as exc:
            raise UsageError(f"journal record is not JSON-serialisable: {exc}") from None
        data = line.encode("utf-8")
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            with locked(path):
                fd = open_append(path)  # 0600 when new, never through a planted link
                try:
                    size = os.fstat(fd).st_size
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        data = b"\n" + data  # close a torn line left by a crash
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise StorageError(_cannot_write(path, exc)) from None
        return entry["id"]

    def list(self, store: str, agent: str | None = None) -> list[dict[str, Any]]:
        """Every record of a store, newest first (optionally one agent's)."""
        path = self.path(store)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or "id" not in entry:
                    raise ValueError("not a journal entry")
            except ValueError:
                log.warning("%s line %d is not a complete JSON record (torn write?); skipped", path, number)
                continue
            if agent is None or entry.get("agent") == agent:
                out.append(entry)
        out.reverse()
        return out
