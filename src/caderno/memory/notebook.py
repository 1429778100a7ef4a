"""The notebook: MEMORY.md (the agent's notes) and USER.md (the user's profile).

Bounded in characters, edited by add / replace / remove on a short unique
substring (no ids), and shown to the model as a **frozen snapshot** taken at
``load()``. Writes are stored at once, but the snapshot does not move for
the rest of the session: the prompt prefix stays cache-stable, and the next
session's ``load()`` sees every note.

One set of rules (``plan_edit``, ``check_entry``, ``render``), two places a
notebook can live: ``Notebook`` keeps the two files in a directory (below),
for a local agent; ``StoredNotebook`` keeps them as rows of a resource in
the database, seen alike by every process, with each conversation's
snapshot stored with its thread. Both give a ``NotebookPort``, which is
what the agent, the tools and the servers use.

The rest of this docstring is about the files.

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
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from ..core.clock import utcnow
from ..core.errors import NotebookError
from ..core.files import atomic_write, locked, read_regular
from ..core.messages import ToolSpec
from ..core.text import first_invisible
from ..core.validate import check_id, check_name
from ..stores import ops
from ..stores.base import Runner
from ._injection import scan

__all__ = ["DELIMITER", "MEMORY_TOOL_SPEC", "Notebook", "NotebookOutcome", "NotebookPort", "StoredNotebook"]

log = logging.getLogger("caderno.memory.notebook")

Target = Literal["memory", "user"]
DELIMITER = "\n§\n"
RULE = "═" * 46
FILES = {"memory": "MEMORY.md", "user": "USER.md"}
HEADERS = {"memory": "MEMORY (your personal notes)", "user": "USER PROFILE (who the user is)"}


class _InvisibleFinder:
    """``_INVISIBLE.search(text)``: truthy when ``text`` holds a hidden character.

    The set of hidden characters is a Unicode category, not a short list, so
    it is tested per character rather than with one regular expression.
    """

    @staticmethod
    def search(text: str) -> tuple[int, str] | None:
        return first_invisible(text)


_INVISIBLE = _InvisibleFinder()

@dataclass(frozen=True, kw_only=True, slots=True)
class NotebookOutcome:
    """The result of a successful notebook operation."""

    target: str
    """``memory`` or ``user``."""
    entries: list[str]
    """The live entries after the operation."""
    entry_count: int
    """``len(entries)``."""
    usage: str
    """``P% — used/limit chars``."""
    message: str
    """What happened, for the model."""


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


def _usage(used: int, limit: int) -> str:
    return f"{min(100, used * 100 // limit)}% — {used:,}/{limit:,} chars"


def _parse(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    return [piece.strip() for piece in text.split(DELIMITER) if piece.strip()]


def _dedupe(entries: list[str]) -> list[str]:
    return list(dict.fromkeys(entries))


def _preview(entry: str, width: int = 60) -> str:
    flat = " ".join(entry.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# -- the rules, wherever the notebook lives ---------------------------------------------------

#: Default character budgets of the two targets, delimiters included.
MEMORY_CHAR_LIMIT = 2200
USER_CHAR_LIMIT = 1375
#: Conversations whose frozen snapshot a file notebook keeps in this process (least recently used go first).
SNAPSHOT_CACHE = 1024

#: An edit of one target's entries: ``(entries, limit) -> (new entries, message, changed)``.
Edit = Callable[[list[str], int], tuple[list[str], str, bool]]


def check_target(target: Any) -> str:
    if target not in FILES:
        raise NotebookError(f"Invalid target {target!r}. Use 'memory' or 'user'.")
    return str(target)


def check_entry(content: str | None, what: str = "Content") -> str:
    """An entry as it is stored (stripped), or ``NotebookError``: empty, a ``§`` line, or what ``scan`` refuses."""
    content = (content or "").strip()
    if not content:
        raise NotebookError(f"{what} is empty; nothing to save.")
    if re.search(r"(^|\n)§(\n|$)", content):
        raise NotebookError(f"{what} may not contain a line holding only '§' (the entry separator).")
    scan(content)
    return content


def _check_old_text(old_text: str | None) -> str:
    if not (old_text or "").strip():
        raise NotebookError("old_text is empty. Give a short, unique piece of the entry to change.")
    return (old_text or "").strip()


def _match(entries: list[str], old_text: str) -> int:
    hits = [i for i, e in enumerate(entries) if old_text in e]
    if not hits:
        raise NotebookError(f"No entry matched {old_text!r}. Current entries:\n{_listing(entries)}")
    if len({entries[i] for i in hits}) > 1:
        previews = "\n".join(f"- {_preview(entries[i])}" for i in hits)
        raise NotebookError(f"Multiple entries matched {old_text!r}. Be more specific. Matches:\n{previews}")
    return hits[0]


def _check_limit(target: str, limit: int, before: list[str], after: list[str], what: str) -> None:
    used, new_used = len(DELIMITER.join(before)), len(DELIMITER.join(after))
    if new_used > limit:
        raise NotebookError(
            f"{FILES[target]} is at {used:,}/{limit:,} chars; {what} would make it {new_used:,}. "
            f"Consolidate first: merge or shorten entries with 'replace', or drop stale ones with 'remove', "
            f"then retry. Current entries:\n{_listing(before)}"
        )


def _listing(entries: list[str]) -> str:
    return "\n".join(f"- {_preview(e, 120)}" for e in entries) or "(none)"


def plan_edit(action: Any, target: Any, content: Any, old_text: Any) -> Edit:
    """Check one action's arguments and return the edit it makes; ``NotebookError`` with the model's message.

    The arguments come from a model: a number or a list where text belongs is
    an error it can read, not a TypeError in the agent. Everything that does
    not need the current entries is checked here, before any read or lock.
    """
    for name, value in (("action", action), ("target", target), ("content", content), ("old_text", old_text)):
        if value is not None and not isinstance(value, str):
            raise NotebookError(f"'{name}' must be a string, not {type(value).__name__}.")
    target = check_target(target)
    if action == "add":
        if content is None:
            raise NotebookError("'add' needs content: the entry to save.")
        entry = check_entry(content, "Content")

        def add(entries: list[str], limit: int) -> tuple[list[str], str, bool]:
            if entry in entries:
                return entries, "Entry already exists (no duplicate added).", False
            new = entries + [entry]
            _check_limit(target, limit, entries, new, f"adding this entry ({len(entry):,} chars)")
            return new, "Entry added.", True

        return add
    if action == "replace":
        if old_text is None:
            raise NotebookError("'replace' needs old_text: a short unique piece of the entry to change.")
        if content is None:
            raise NotebookError("'replace' needs content: the new text of the entry.")
        old = _check_old_text(old_text)
        if not content.strip():
            raise NotebookError("New content is empty. To delete an entry, use 'remove'.")
        entry = check_entry(content, "New content")

        def replace(entries: list[str], limit: int) -> tuple[list[str], str, bool]:
            index = _match(entries, old)
            new = _dedupe(entries[:index] + [entry] + entries[index + 1 :])
            _check_limit(target, limit, entries, new, "this replacement")
            return new, "Entry replaced.", True

        return replace
    if action == "remove":
        if old_text is None:
            raise NotebookError("'remove' needs old_text: a short unique piece of the entry to remove.")
        old = _check_old_text(old_text)

        def remove(entries: list[str], limit: int) -> tuple[list[str], str, bool]:
            index = _match(entries, old)
            return entries[:index] + entries[index + 1 :], "Entry removed.", True

        return remove
    raise NotebookError(f"Unknown action {action!r}. Use: add, replace, remove.")


def render(target: str, entries: list[str], limit: int) -> str | None:
    """The block the model's instructions show for ``target`` (``None`` when it has no entries)."""
    if not entries:
        return None
    header = f"{HEADERS[target]} [{_usage(len(DELIMITER.join(entries)), limit)}]"
    return f"{RULE}\n{header}\n{RULE}\n{DELIMITER.join(entries)}"


def outcome(target: str, entries: list[str], limit: int, message: str) -> NotebookOutcome:
    return NotebookOutcome(
        target=target,
        entries=entries,
        entry_count=len(entries),
        usage=_usage(len(DELIMITER.join(entries)), limit),
        message=message,
    )


def tool_json(result: NotebookOutcome | NotebookError, usage: str | None) -> str:
    """The notebook's own JSON answer (``{"success": …}``) for a direct caller of ``tool()``."""
    if isinstance(result, NotebookError):
        payload: dict[str, Any] = {"success": False, "error": str(result)}
        if usage is not None:
            payload["usage"] = usage
        return json.dumps(payload, ensure_ascii=False)
    return json.dumps({"success": True, **asdict(result)}, ensure_ascii=False)


class NotebookPort(Protocol):
    """What the agent, the tools and the servers use of a notebook, wherever it lives.

    ``Notebook(dir).port()`` (files, this machine) and ``StoredNotebook``
    (the database, every process) both give one.
    """

    async def blocks(self, thread_id: str) -> list[str]:
        """The conversation's frozen notebook blocks, taken at its first call."""
        ...

    async def apply(
        self, action: Any, target: Any, content: Any, old_text: Any, *, dry_run: bool = False
    ) -> NotebookOutcome:
        """Run one action; ``NotebookError`` with the model's message."""
        ...

    async def usage(self, target: Any) -> str | None:
        """How full ``target`` is now; ``None`` when unknown."""
        ...

    async def readable_entries(self, target: str) -> list[str] | None:
        """The live entries, or ``None`` when they cannot be read."""
        ...

    async def snapshot_now(self) -> dict[str, str | None]:
        """The blocks a conversation starting now would freeze."""
        ...


# -- the notebook in files --------------------------------------------------------------------


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
            return _parse(raw.decode("utf-8"))
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
        return _dedupe(self._read(target))

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
        return _usage(len(DELIMITER.join(live)), self.limits[target])


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


# -- the notebook in the database -------------------------------------------------------------


class StoredNotebook:
    """A resource's notebook in the database: the same rules, seen alike by every process.

    Each target's entries are one row with a version; an edit applies the
    rules (``plan_edit``: budgets, unique substrings, the scan) inside the
    store's transaction with that row locked (``ops.EditNotebook``), so
    concurrent writers queue and none overwrites another. A conversation's snapshot is stored with its thread the first
    time the conversation loads it (``blocks``), so whichever process serves
    its next turn shows the same one, and a new conversation takes a new one.

    Get one from ``memory.notebook(resource_id)``.
    """

    def __init__(
        self,
        run: Runner,
        resource_id: str,
        *,
        memory_char_limit: int = MEMORY_CHAR_LIMIT,
        user_char_limit: int = USER_CHAR_LIMIT,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._run = run
        self.resource_id = resource_id
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self._clock = clock

    def port(self) -> NotebookPort:
        return self

    async def _pages(self) -> dict[str, tuple[tuple[str, ...], int]]:
        return await self._run(ops.ReadNotebook(resource_id=check_id(self.resource_id, "resource id")))

    async def entries(self, target: str) -> list[str]:
        """The live entries of ``target``."""
        target = check_target(target)
        return list((await self._pages())[target][0])

    async def readable_entries(self, target: str) -> list[str] | None:
        return await self.entries(target)

    async def read(self) -> dict[str, list[str]]:
        """The live entries of both targets, in one read."""
        return {t: list(entries) for t, (entries, _) in (await self._pages()).items()}

    def render(self, entries: dict[str, list[str]]) -> dict[str, str | None]:
        """The blocks a conversation would freeze for ``entries`` (as ``read`` gives them)."""
        return {t: render(t, found, self.limits[t]) for t, found in entries.items()}

    async def snapshot_now(self) -> dict[str, str | None]:
        return self.render(await self.read())

    async def blocks(self, thread_id: str) -> list[str]:
        return [b for b in (await self.freeze(thread_id)).values() if b]

    async def freeze(self, thread_id: str) -> dict[str, str | None]:
        """The conversation's snapshot, taken and stored now if it has none (the first store wins)."""
        return await self.freeze_from(thread_id, await self._run(self.snapshot_read(thread_id)))

    def snapshot_read(self, thread_id: str) -> ops.ReadNotebookSnapshot:
        """The read of a conversation's stored snapshot, for a batch of the caller's (a turn's load)."""
        rid = check_name(self.resource_id, "resource id")
        return ops.ReadNotebookSnapshot(resource_id=rid, thread_id=check_name(thread_id, "thread id"))

    async def freeze_from(self, thread_id: str, stored: dict[str, str | None] | None) -> dict[str, str | None]:
        """``freeze``, given what ``snapshot_read`` found: the stored snapshot, or one taken and stored now."""
        if stored is not None:
            return stored
        rid = check_name(self.resource_id, "resource id")
        now = await self.snapshot_now()
        return await self._run(
            ops.FreezeNotebook(
                resource_id=rid, thread_id=check_name(thread_id, "thread id"), snapshot=now, now=self._clock()
            )
        )

    async def frozen(self, thread_id: str) -> dict[str, str | None] | None:
        """The conversation's snapshot, or ``None`` when it has not loaded the notebook yet (reads only)."""
        rid = check_id(self.resource_id, "resource id")
        return await self._run(ops.ReadNotebookSnapshot(resource_id=rid, thread_id=check_id(thread_id, "thread id")))

    async def apply(
        self, action: Any, target: Any, content: Any, old_text: Any, *, dry_run: bool = False
    ) -> NotebookOutcome:
        edit = plan_edit(action, target, content, old_text)
        rid = check_name(self.resource_id, "resource id")
        limit = self.limits[target]
        if dry_run:
            new, message, _ = edit(await self.entries(target), limit)
            return outcome(target, new, limit, message)
        said: list[str] = []

        def change(entries: list[str], version: int) -> list[str] | None:
            new, message, changed = edit(entries, limit)  # inside the transaction, the row locked
            said.append(message)
            return new if changed else None

        after = await self._run(ops.EditNotebook(resource_id=rid, target=target, edit=change, now=self._clock()))
        return outcome(target, after, limit, said[-1])

    async def add(self, target: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        return await self.apply("add", target, content, None, dry_run=dry_run)

    async def replace(self, target: str, old_text: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        return await self.apply("replace", target, content, old_text, dry_run=dry_run)

    async def remove(self, target: str, old_text: str, *, dry_run: bool = False) -> NotebookOutcome:
        return await self.apply("remove", target, None, old_text, dry_run=dry_run)

    async def replace_all(self, target: str, entries: list[str]) -> None:
        """Set ``target``'s entries as given (each checked by the rules; duplicates dropped): ``caderno notes import``."""
        target = check_target(target)
        checked = _dedupe([check_entry(e) for e in entries])
        rid = check_name(self.resource_id, "resource id")
        await self._run(
            ops.EditNotebook(resource_id=rid, target=target, edit=lambda _e, _v: checked, now=self._clock())
        )

    async def take_files(self, book: Notebook) -> list[str]:
        """Copy a file notebook's entries into each target never written in the database; the targets taken.

        A target already written here (even emptied since) keeps its rows, so
        running this again, or in two processes at once, imports nothing
        twice. An entry the rules refuse (a hand-edited file) is left out and
        logged; an unreadable file is skipped.
        """
        rid = check_name(self.resource_id, "resource id")
        taken = []
        for target in FILES:
            found = book.readable_entries(target)
            if not found:
                continue
            kept = []
            for entry in found:
                try:
                    kept.append(check_entry(entry))
                except NotebookError as exc:
                    log.warning("notebook entry of %r not imported from %s: %s", rid, book.path(target), exc)
            if not kept:
                continue

            wrote: list[bool] = []

            def first(
                entries: list[str], version: int, kept: list[str] = kept, wrote: list[bool] = wrote
            ) -> list[str] | None:
                wrote.append(version == 0)
                return _dedupe(kept) if version == 0 else None  # written here before: left alone

            await self._run(ops.EditNotebook(resource_id=rid, target=target, edit=first, now=self._clock()))
            if wrote[-1]:
                taken.append(target)
        return taken

    async def tool(
        self,
        action: str,
        target: str,
        content: str | None = None,
        old_text: str | None = None,
        *,
        dry_run: bool = False,
    ) -> str:
        """As ``Notebook.tool``: one action, answered in the notebook's own JSON."""
        try:
            return tool_json(await self.apply(action, target, content, old_text, dry_run=dry_run), None)
        except NotebookError as exc:
            return tool_json(exc, await self.usage(target))

    async def usage(self, target: Any) -> str | None:
        if not isinstance(target, str) or target not in FILES:
            return None
        live = await self.entries(target)
        return _usage(len(DELIMITER.join(live)), self.limits[target])


MEMORY_TOOL_SPEC = ToolSpec(
    name="memory",
    description=(
        "Your notebook, kept across sessions: 'memory' holds your own notes (MEMORY.md), 'user' what you know "
        "about the user (USER.md). Save durable things: preferences, corrections they made, facts about them "
        "and their world, lessons that will matter next time. Do not save task progress or temporary state. "
        "Both stores are bounded in characters: when one is full, consolidate (merge with 'replace', drop "
        "stale entries with 'remove') and retry. Entries are found by a short unique substring (old_text); "
        "there are no ids. What you save appears in your instructions from the next session on."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"], "description": "What to do."},
            "target": {"type": "string", "enum": ["memory", "user"], "description": "Which store."},
            "content": {"type": "string", "description": "The entry text (add, replace)."},
            "old_text": {"type": "string", "description": "A short unique piece of the entry (replace, remove)."},
        },
        "required": ["action", "target"],
        "additionalProperties": False,
    },
)
