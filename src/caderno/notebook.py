"""The notebook: MEMORY.md (the agent's notes) and USER.md (the user's profile).

Bounded in characters, edited by add / replace / remove on a short unique
substring (no ids), and shown to the model as a **frozen snapshot** taken at
``load()``. Writes reach the disk at once, but the snapshot does not move for
the rest of the session: the prompt prefix stays cache-stable, and the next
session's ``load()`` sees every note.

Every mutation locks ``<file>.lock``, re-reads the file (so concurrent
writers merge instead of overwriting), mutates, and writes atomically.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ._files import atomic_write, locked
from .errors import NotebookError
from .messages import ToolSpec

__all__ = ["DELIMITER", "MEMORY_TOOL_SPEC", "Notebook", "NotebookOutcome"]

Target = Literal["memory", "user"]
DELIMITER = "\n§\n"
RULE = "═" * 46
FILES = {"memory": "MEMORY.md", "user": "USER.md"}
HEADERS = {"memory": "MEMORY (your personal notes)", "user": "USER PROFILE (who the user is)"}

_INVISIBLE = re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e]")
#: (pattern, name) pairs refused in written content. Scanned case-insensitively.
_BLOCKED: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"ignore\s+(all\s+)?(the\s+)?(previous|prior|above|earlier)\s+instructions", re.I),
        "prompt injection ('ignore previous instructions')",
    ),
    (re.compile(r"\byou\s+are\s+now\b", re.I), "role hijack ('you are now …')"),
    (re.compile(r"\bdo\s+not\s+tell\s+the\s+user\b", re.I), "concealment ('do not tell the user')"),
    (re.compile(r"system\s+prompt\s+override", re.I), "prompt injection ('system prompt override')"),
    (
        re.compile(
            r"(^|[\s/~])\.env\b|\.netrc\b|\bcredentials?\b[^\n]{0,20}\b(file|json|read|cat)\b|\b(cat|read|open|print|dump)\b[^\n]{0,40}\bcredentials?\b",
            re.I,
        ),
        "secret file access (.env / .netrc / credentials)",
    ),
    (re.compile(r"authorized_keys|~/\.ssh|\.ssh/id_", re.I), "SSH key access (authorized_keys / ~/.ssh)"),
    (
        re.compile(
            r"\b(curl|wget)\b[^\n]*(\$\{?\w*(key|token|secret|password|passwd)\w*|api[_-]?key|token|secret|password)",
            re.I,
        ),
        "exfiltration (curl/wget with secrets)",
    ),
]


def scan(content: str) -> None:
    """Refuse content with invisible control characters or injection patterns."""
    found = _INVISIBLE.search(content)
    if found:
        raise NotebookError(
            f"Blocked: invisible or bidirectional control character U+{ord(found.group()):04X} in content."
        )
    for pattern, name in _BLOCKED:
        if pattern.search(content):
            raise NotebookError(f"Blocked: content matches {name}; notes must not carry instructions or secrets.")


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


class Notebook:
    """MEMORY.md and USER.md in one directory, with a snapshot frozen at load.

    Args:
        directory: where the two files live (created on first write).
        memory_char_limit: most characters of MEMORY.md, delimiters included.
        user_char_limit: most characters of USER.md, delimiters included.
    """

    def __init__(self, directory: str | Path, *, memory_char_limit: int = 2200, user_char_limit: int = 1375) -> None:
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
        slug = re.sub(r"[^A-Za-z0-9_-]", "_", resource_id)[:48] or "_"
        digest = hashlib.sha256(resource_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return cls(Path(home) / "notebooks" / f"{slug}-{digest}", **limits)

    def path(self, target: str) -> Path:
        return self.directory / FILES[self._check_target(target)]

    # -- reading ---------------------------------------------------------------------------

    def _read(self, target: str) -> list[str]:
        path = self.path(target)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return _parse(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise NotebookError(
                f"{path} is not valid UTF-8 (byte {exc.start}); refusing to read or overwrite it. Fix the file by hand."
            ) from None

    def load(self) -> Notebook:
        """Read both files (duplicates dropped, first kept) and freeze the snapshot."""
        self._snapshot = {}
        for target in FILES:
            entries = _dedupe(self._read(target))
            self._snapshot[target] = self._render(target, entries) if entries else None
        return self

    def snapshot(self, target: str) -> str | None:
        """The block frozen at ``load()``, or ``None`` when that file was empty.

        Nothing done after ``load()`` changes it.
        """
        self._check_target(target)
        if self._snapshot is None:
            raise NotebookError("call load() before snapshot()")
        return self._snapshot[target]

    def entries(self, target: str) -> list[str]:
        """The live entries, read from disk now."""
        return _dedupe(self._read(target))

    def _render(self, target: str, entries: list[str]) -> str:
        used = len(DELIMITER.join(entries))
        header = f"{HEADERS[target]} [{_usage(used, self.limits[target])}]"
        return f"{RULE}\n{header}\n{RULE}\n{DELIMITER.join(entries)}"

    # -- writing -----------------------------------------------------------------------------

    def add(self, target: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Add an entry. Raises ``NotebookError`` with a message for the model."""
        content = self._check_content(content, "Content")
        with locked(self.path(target)):
            entries = self.entries(target)
            if content in entries:
                return self._outcome(target, entries, "Entry already exists (no duplicate added).")
            new = entries + [content]
            self._check_limit(target, entries, new, f"adding this entry ({len(content):,} chars)")
            return self._commit(target, new, "Entry added.", dry_run)

    def replace(self, target: str, old_text: str, content: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Replace the one entry containing ``old_text`` with ``content``."""
        old_text = self._check_old_text(old_text)
        if not (content or "").strip():
            raise NotebookError("New content is empty. To delete an entry, use 'remove'.")
        content = self._check_content(content, "New content")
        with locked(self.path(target)):
            entries = self.entries(target)
            index = self._match(target, entries, old_text)
            new = entries[:index] + [content] + entries[index + 1 :]
            new = _dedupe(new)
            self._check_limit(target, entries, new, "this replacement")
            return self._commit(target, new, "Entry replaced.", dry_run)

    def remove(self, target: str, old_text: str, *, dry_run: bool = False) -> NotebookOutcome:
        """Remove the one entry containing ``old_text``."""
        old_text = self._check_old_text(old_text)
        with locked(self.path(target)):
            entries = self.entries(target)
            index = self._match(target, entries, old_text)
            return self._commit(target, entries[:index] + entries[index + 1 :], "Entry removed.", dry_run)

    def _commit(self, target: str, entries: list[str], message: str, dry_run: bool) -> NotebookOutcome:
        if not dry_run:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path(target), DELIMITER.join(entries) + ("\n" if entries else ""))
        return self._outcome(target, entries, message)

    def _outcome(self, target: str, entries: list[str], message: str) -> NotebookOutcome:
        used = len(DELIMITER.join(entries))
        return NotebookOutcome(
            target=target,
            entries=entries,
            entry_count=len(entries),
            usage=_usage(used, self.limits[target]),
            message=message,
        )

    def _check_target(self, target: str) -> str:
        if target not in FILES:
            raise NotebookError(f"Invalid target {target!r}. Use 'memory' or 'user'.")
        return target

    @staticmethod
    def _check_content(content: str | None, what: str) -> str:
        content = (content or "").strip()
        if not content:
            raise NotebookError(f"{what} is empty; nothing to save.")
        if re.search(r"(^|\n)§(\n|$)", content):
            raise NotebookError(f"{what} may not contain a line holding only '§' (the entry separator).")
        scan(content)
        return content

    @staticmethod
    def _check_old_text(old_text: str | None) -> str:
        if not (old_text or "").strip():
            raise NotebookError("old_text is empty. Give a short, unique piece of the entry to change.")
        return (old_text or "").strip()

    def _match(self, target: str, entries: list[str], old_text: str) -> int:
        hits = [i for i, e in enumerate(entries) if old_text in e]
        if not hits:
            raise NotebookError(f"No entry matched {old_text!r}. Current entries:\n{self._listing(entries)}")
        if len({entries[i] for i in hits}) > 1:
            previews = "\n".join(f"- {_preview(entries[i])}" for i in hits)
            raise NotebookError(f"Multiple entries matched {old_text!r}. Be more specific. Matches:\n{previews}")
        return hits[0]

    def _check_limit(self, target: str, before: list[str], after: list[str], what: str) -> None:
        limit = self.limits[target]
        used, new_used = len(DELIMITER.join(before)), len(DELIMITER.join(after))
        if new_used > limit:
            raise NotebookError(
                f"{FILES[target]} is at {used:,}/{limit:,} chars; {what} would make it {new_used:,}. "
                f"Consolidate first: merge or shorten entries with 'replace', or drop stale ones with 'remove', "
                f"then retry. Current entries:\n{self._listing(before)}"
            )

    @staticmethod
    def _listing(entries: list[str]) -> str:
        return "\n".join(f"- {_preview(e, 120)}" for e in entries) or "(none)"

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
        """Run one ``memory`` tool call; returns the JSON the model reads."""
        try:
            outcome = self.apply(action, target, content, old_text, dry_run=dry_run)
        except NotebookError as exc:
            payload: dict[str, Any] = {"success": False, "error": str(exc)}
            if target in FILES:
                try:
                    live = self.entries(target)
                    payload["usage"] = _usage(len(DELIMITER.join(live)), self.limits[target])
                except NotebookError:
                    pass
            return json.dumps(payload, ensure_ascii=False)
        return json.dumps({"success": True, **asdict(outcome)}, ensure_ascii=False)

    def apply(
        self, action: str, target: str, content: str | None, old_text: str | None, *, dry_run: bool = False
    ) -> NotebookOutcome:
        """Dispatch one action; raises ``NotebookError`` with the model's message."""
        self._check_target(target)
        if action == "add":
            if content is None:
                raise NotebookError("'add' needs content: the entry to save.")
            return self.add(target, content, dry_run=dry_run)
        if action == "replace":
            if old_text is None:
                raise NotebookError("'replace' needs old_text: a short unique piece of the entry to change.")
            if content is None:
                raise NotebookError("'replace' needs content: the new text of the entry.")
            return self.replace(target, old_text, content, dry_run=dry_run)
        if action == "remove":
            if old_text is None:
                raise NotebookError("'remove' needs old_text: a short unique piece of the entry to remove.")
            return self.remove(target, old_text, dry_run=dry_run)
        raise NotebookError(f"Unknown action {action!r}. Use: add, replace, remove.")


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
