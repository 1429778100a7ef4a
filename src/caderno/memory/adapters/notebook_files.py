"""The notebook in files: MEMORY.md and USER.md in one directory, for a local agent.

The rules are ``caderno.memory.engines.notebook_rules``; the notebook in the
database is ``caderno.memory.parts.notebook``.

Every mutation locks ``<file>.lock``, re-reads the file (so concurrent
writers merge instead of overwriting), mutates, and writes atomically.

Both files end up in the model's instructions, so they are treated as
hostile input. Written content is screened (:func:`scan`: hidden characters,
injection phrasings after folding look-alikes). ``MEMORY.md``, ``USER.md``
and their ``.lock`` files are never followed when they are symbolic links:
the notebook refuses them (a planted link could feed another file into the
prompt, or make a write land elsewhere). The directory itself may be a link,
because users point it at a synced folder and only they can place that
link.

Reads and writes fail in opposite ways. A read for the prompt fails soft,
per file: ``load()`` shows a file it cannot read (a link, a FIFO, an
oversized file, bytes that are not UTF-8, a permission error) as a one-line
note without its path, logs the detail, and still shows the other file. A
write fails closed: any OS failure (disk full, size limit, permissions) or a
file it cannot read becomes a :class:`~caderno.core.errors.NotebookError`,
which ``tool()`` hands the model as its failure JSON, and the file is left as
it was. Neither ever puts a directory into the model's text: the files are
named by their names only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.errors import NotebookError
from ...core.files import atomic_write, locked, read_regular
from ..engines.notebook_rules import (
    DELIMITER,
    FILES,
    HEADERS,
    MEMORY_CHAR_LIMIT,
    USER_CHAR_LIMIT,
    NotebookOutcome,
    NotebookPort,
    check_target,
    dedupe,
    outcome,
    parse_entries,
    plan_edit,
    render,
    tool_json,
    usage_line,
)

log = logging.getLogger("caderno.memory.adapters.notebook_files")


#: Most bytes read from a notebook file (at least; a larger char limit raises
#: it to 4 bytes per allowed character). A hand-edited or planted file of
#: gigabytes would otherwise be read whole into memory and into the prompt.
MAX_FILE_BYTES = 1024 * 1024


def _os_problem(exc: OSError, about: str) -> str:
    """What the OS said, in one line for the model; names the file when it is not ``about``."""
    name = Path(exc.filename).name if exc.filename else about
    if exc.errno == errno.ELOOP:
        return (
            f"{name} is a symbolic link, and caderno never follows links inside a notebook directory "
            f"(replace it with a regular file)"
        )
    code = errno.errorcode.get(exc.errno or 0)
    reason = (exc.strerror or str(exc)) + (f" ({code})" if code else "")
    return reason if name == about else f"{name}: {reason}"


#: Conversations whose frozen snapshot a file notebook keeps in this process (least recently used go first).
SNAPSHOT_CACHE = 1024


class Notebook:
    """MEMORY.md and USER.md in one directory, with a snapshot frozen at load.

    Args:
        directory: where the two files live (created on first write).
        memory_char_limit: most characters of MEMORY.md, delimiters included.
        user_char_limit: most characters of USER.md, delimiters included.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        memory_char_limit: int = MEMORY_CHAR_LIMIT,
        user_char_limit: int = USER_CHAR_LIMIT,
    ) -> None:
        self.directory = Path(directory)
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self._snapshot: dict[str, str | None] | None = None

    @classmethod
    def for_resource(cls, home: str | Path, resource_id: str, **limits: int) -> Notebook:
        """A notebook per resource under ``home``; any id maps to a safe directory.

        The directory name is a readable slug plus a hash of the id, so ids
        such as ``../../etc``, absolute paths, NUL bytes or very long ids can
        never leave ``home``, and two ids never share a directory.
        """
        return cls(resource_directory(home, resource_id), **limits)

    def path(self, target: str) -> Path:
        return self.directory / FILES[check_target(target)]

    def port(self) -> NotebookPort:
        """This notebook as the agent and the servers use it (off the event loop; snapshots kept per conversation)."""
        return _FilePort(self)

    # -- reading ---------------------------------------------------------------------------

    def _read(self, target: str) -> list[str]:
        path = self.path(target)
        try:
            raw = read_regular(path, max_bytes=max(MAX_FILE_BYTES, 4 * self.limits[target]))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise NotebookError(
                f"Could not read {path.name}: {_os_problem(exc, path.name)}. It was not changed."
            ) from None
        try:
            return parse_entries(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise NotebookError(
                f"{path.name} is not valid UTF-8 (byte {exc.start}); refusing to read or overwrite it. "
                f"Fix the file by hand."
            ) from None

    def load(self) -> Notebook:
        """Read both files (duplicates dropped, first kept) and freeze the snapshot.

        Never raises for a file it cannot read: that file's block becomes a
        short note (its name, no path; the model then knows its notes exist
        but are hidden, and a write to it will be refused) and the detail,
        with the path, goes to the log. The other file is shown as usual.
        """
        self._snapshot = self.snapshot_now()
        return self

    def snapshot_now(self) -> dict[str, str | None]:
        """Both blocks as a conversation starting now would freeze them (a file it cannot read: its note)."""
        blocks: dict[str, str | None] = {}
        for target in FILES:
            entries = self.readable_entries(target)
            if entries is None:
                blocks[target] = f"{HEADERS[target]}: not shown, {FILES[target]} could not be read."
            else:
                blocks[target] = render(target, entries, self.limits[target])
        return blocks

    def snapshot(self, target: str) -> str | None:
        """The block frozen at ``load()``, or ``None`` when that file was empty.

        A file ``load()`` could not read gives its one-line note instead.
        Nothing done after ``load()`` changes it.
        """
        check_target(target)
        if self._snapshot is None:
            raise NotebookError("call load() before snapshot()")
        return self._snapshot[target]

    def entries(self, target: str) -> list[str]:
        """The live entries, read from disk now.

        Raises:
            NotebookError: the file cannot be read. Every write reads through
                here first, so a write never replaces a file it could not read.
        """
        return dedupe(self._read(target))

    def readable_entries(self, target: str) -> list[str] | None:
        """The live entries, or ``None`` when the file cannot be read: a read that hides only that file.

        For readers that show both files (the CLI's ``notes show --json``, the
        HTTP API); the reason goes to the log, never to the caller, since it
        holds the file's path.
        """
        try:
            return self.entries(target)
        except NotebookError as exc:
            log.warning("notebook file %s not shown: %s", self.path(target), exc)
            return None

    # -- writing -----------------------------------------------------------------------------

    def add(self, target: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Add an entry. Raises ``NotebookError`` with a message for the model."""
        return self.apply("add", target, content, None, dry_run=dry_run)

    def replace(self, target: str, old_text: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Replace the one entry containing ``old_text`` with ``content``."""
        return self.apply("replace", target, content, old_text, dry_run=dry_run)

    def remove(self, target: str, old_text: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Remove the one entry containing ``old_text``."""
        return self.apply("remove", target, None, old_text, dry_run=dry_run)

    def apply(self, action: Any, target: Any, content: Any, old_text: Any, *, dry_run: bool = False) -> NotebookOutcome:
        """Dispatch one action under the file's lock; raises ``NotebookError`` with the model's message."""
        edit = plan_edit(action, target, content, old_text)
        limit = self.limits[target]
        with self._locked(target):
            entries = self.entries(target)
            new, message, changed = edit(entries, limit)
            if changed and not dry_run:
                self._write(target, new)
            return outcome(target, new, limit, message)

    @contextlib.contextmanager
    def _locked(self, target: str) -> Iterator[None]:
        """The file's lock, with a failure to take it reported as a ``NotebookError``."""
        path = self.path(target)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(locked(path))
            except OSError as exc:
                raise NotebookError(
                    f"Could not lock {path.name}: {_os_problem(exc, path.name)}. Nothing was changed."
                ) from None
            yield

    def _write(self, target: str, entries: list[str]) -> None:
        path = self.path(target)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(path, DELIMITER.join(entries) + ("\n" if entries else ""))
        except OSError as exc:
            # The write is atomic, so a full disk or a size limit leaves
            # the old file whole; the model gets a reason, not a crash.
            raise NotebookError(
                f"Could not write {path.name}: {_os_problem(exc, path.name)}. {path.name} is unchanged; "
                f"this is a problem with the disk, not with the entry, so do not retry now."
            ) from None

    def replace_all(self, target: str, entries: list[str]) -> None:
        """Write ``target``'s entries as given (already checked), under its lock: ``caderno notes export``."""
        with self._locked(check_target(target)):
            self._write(target, entries)

    # -- the model's tool ----------------------------------------------------------------------

    def tool(
        self,
        action: str,
        target: str,
        content: str | None = None,
        old_text: str | None = None,
        *,
        dry_run: bool = False,
    ) -> str:
        """Run one action and answer in the notebook's own JSON (``{"success": …}``), for direct callers.

        A model reads the tool catalog's ``memory`` tool instead
        (``caderno.tools.notebook``: the one result shape of every memory
        tool); both show ``usage`` beside a refusal.
        """
        try:
            return tool_json(self.apply(action, target, content, old_text, dry_run=dry_run), None)
        except NotebookError as exc:
            return tool_json(exc, self.usage(target))

    def usage(self, target: Any) -> str | None:
        """How full ``target`` is now (``P% — used/limit chars``), read from disk; ``None`` when unknown.

        A refused write shows it beside its error, so a model told the store
        is full sees how full.
        """
        if not isinstance(target, str) or target not in FILES:
            return None
        try:
            live = self.entries(target)
        except NotebookError:
            return None
        return usage_line(len(DELIMITER.join(live)), self.limits[target])


def resource_directory(home: str | Path, resource_id: str) -> Path:
    """The directory of a resource's file notebook under ``home`` (a slug plus a hash: never a path)."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "_", resource_id)[:48] or "_"
    digest = hashlib.sha256(resource_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Path(home) / "notebooks" / f"{slug}-{digest}"


class _FilePort:
    """A file ``Notebook`` as a ``NotebookPort``: file work off the event loop, snapshots kept in this process.

    A file notebook belongs to one machine, so its conversations' snapshots
    live here, bounded (``SNAPSHOT_CACHE``; a conversation pushed out takes a
    new snapshot at its next turn).
    """

    def __init__(self, book: Notebook) -> None:
        self.book = book
        self._snapshots: OrderedDict[str, list[str]] = OrderedDict()

    async def blocks(self, thread_id: str) -> list[str]:
        found = self._snapshots.get(thread_id)
        if found is None:
            now = await self.snapshot_now()
            found = self._snapshots[thread_id] = [b for b in now.values() if b]
            while len(self._snapshots) > SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
        self._snapshots.move_to_end(thread_id)
        return found

    async def apply(
        self, action: Any, target: Any, content: Any, old_text: Any, *, dry_run: bool = False
    ) -> NotebookOutcome:
        return await asyncio.to_thread(self.book.apply, action, target, content, old_text, dry_run=dry_run)

    async def usage(self, target: Any) -> str | None:
        return await asyncio.to_thread(self.book.usage, target)

    async def readable_entries(self, target: str) -> list[str] | None:
        return await asyncio.to_thread(self.book.readable_entries, target)

    async def snapshot_now(self) -> dict[str, str | None]:
        return await asyncio.to_thread(self.book.snapshot_now)
