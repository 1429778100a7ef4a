"""The notebook's rules: MEMORY.md (the agent's notes) and USER.md (the user's profile).

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

This module holds the one set of rules both places use and the port they
give; ``caderno.memory.engines.injection`` is the screen every entry passes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ...core.errors import NotebookError
from ...core.messages import ToolSpec
from ...core.text import first_invisible
from .injection import scan

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


def usage_line(used: int, limit: int) -> str:
    return f"{min(100, used * 100 // limit)}% — {used:,}/{limit:,} chars"


def parse_entries(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    return [piece.strip() for piece in text.split(DELIMITER) if piece.strip()]


def dedupe(entries: list[str]) -> list[str]:
    return list(dict.fromkeys(entries))


def _preview(entry: str, width: int = 60) -> str:
    flat = " ".join(entry.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


#: Default character budgets of the two targets, delimiters included.
MEMORY_CHAR_LIMIT = 2200


USER_CHAR_LIMIT = 1375


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
            new = dedupe(entries[:index] + [entry] + entries[index + 1 :])
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
    header = f"{HEADERS[target]} [{usage_line(len(DELIMITER.join(entries)), limit)}]"
    return f"{RULE}\n{header}\n{RULE}\n{DELIMITER.join(entries)}"


def outcome(target: str, entries: list[str], limit: int, message: str) -> NotebookOutcome:
    return NotebookOutcome(
        target=target,
        entries=entries,
        entry_count=len(entries),
        usage=usage_line(len(DELIMITER.join(entries)), limit),
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


class NotebookFiles(Protocol):
    """What ``StoredNotebook.take_files`` reads of a file notebook (``caderno.memory.adapters.notebook_files``)."""

    def readable_entries(self, target: str) -> list[str] | None:
        """The live entries of ``target``, or ``None`` when its file cannot be read."""
        ...

    def path(self, target: str) -> Path:
        """Where ``target``'s file is."""
        ...


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
