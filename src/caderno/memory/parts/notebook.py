"""The notebook in the database (``memory.notebook(resource_id)``): MEMORY.md and USER.md as rows of a resource.

The rules (``plan_edit``, ``check_entry``, ``render``) are
``caderno.memory.engines.notebook_rules``; the same notebook kept as two
files in a directory, for a local agent, is
``caderno.memory.adapters.notebook_files``. Both give a ``NotebookPort``,
which is what the agent, the tools and the servers use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ...core.clock import utcnow
from ...core.errors import NotebookError
from ...core.validate import check_id, check_name
from ...stores import ops
from ...stores.base import Runner
from ..engines.notebook_rules import (
    DELIMITER,
    FILES,
    MEMORY_CHAR_LIMIT,
    USER_CHAR_LIMIT,
    NotebookFiles,
    NotebookOutcome,
    NotebookPort,
    check_entry,
    check_target,
    dedupe,
    outcome,
    plan_edit,
    render,
    tool_json,
    usage_line,
)

__all__ = ["StoredNotebook"]

log = logging.getLogger("caderno.memory.parts.notebook")


# -- the notebook in files --------------------------------------------------------------------


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
        checked = dedupe([check_entry(e) for e in entries])
        rid = check_name(self.resource_id, "resource id")
        await self._run(
            ops.EditNotebook(resource_id=rid, target=target, edit=lambda _e, _v: checked, now=self._clock())
        )

    async def take_files(self, book: NotebookFiles) -> list[str]:
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
                return dedupe(kept) if version == 0 else None  # written here before: left alone

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
        return usage_line(len(DELIMITER.join(live)), self.limits[target])
