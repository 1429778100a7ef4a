"""One validation layer for everything that enters caderno.

Append, patch, import, tool arguments, the CLI and the HTTP API all pass
their values through these checks before anything is written, so a refusal
is the same ``UsageError`` on every backend and changes nothing. The JSON
rules and the size policy are in ``caderno.core.jsonvalue``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .clock import from_iso
from .errors import UsageError
from .jsonvalue import MAX_JSON_DEPTH, MAX_MESSAGE_CHARS, MAX_METADATA_BYTES, MAX_PATCH_BYTES, check_json
from .messages import Message, check_text
from .text import first_invisible

__all__ = [
    "FACT_SOURCES",
    "MAX_FACT_CATEGORY",
    "MAX_FACT_KEY",
    "MAX_FACT_VALUE",
    "MAX_ID_LENGTH",
    "MAX_TITLE",
    "MAX_ZONE_NAME",
    "REPLACED_ARGUMENTS",
    "UNSTORABLE_PREFIX",
    "NAME_RULE",
    "check_actor",
    "check_fact",
    "check_id",
    "check_message",
    "check_metadata",
    "check_name",
    "check_time",
    "check_title",
    "check_zone",
    "storable_reply",
]

#: Resource, thread, message and other ids: long enough for any UUID or slug.
MAX_ID_LENGTH = 256
#: Fact limits, in characters: short enough to show many per turn.
MAX_FACT_CATEGORY, MAX_FACT_KEY, MAX_FACT_VALUE = 64, 256, 4000
FACT_SOURCES = ("agent", "user", "consolidation")
#: Longest thread title, in characters.
MAX_TITLE = 500
#: Longest time zone name, in characters. The longest IANA name is 32
#: ("America/Argentina/ComodRivadavia"); 64 leaves room for new ones and keeps
#: a hostile name from reaching the file system (a 10,000-character name made
#: ``ZoneInfo`` fail with ENAMETOOLONG, an ``OSError`` nobody caught: a 500).
MAX_ZONE_NAME = 64
#: What an IANA name is made of: "America/Sao_Paulo", "Etc/GMT+3", "UTC".
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")


def check_id(value: Any, what: str) -> str:
    """Ids: non-empty text of at most ``MAX_ID_LENGTH`` characters, no NUL, no lone surrogate."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise UsageError(f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    check_text(value, what)
    return value


#: What an id that can reach a URL never holds: a path separator, or a control
#: character (C0, DEL, C1) a link or a log line could hide. (A backslash is
#: allowed: encodeURIComponent sends it as %5C, and the notebook's directory
#: names are slugs, so it is never a separator.)
_NOT_IN_NAMES = re.compile(r"[/\x00-\x1f\x7f-\x9f]")
#: The one sentence every entry (Python, CLI, HTTP, MCP, import) refuses such an id with.
NAME_RULE = "ids are names, never paths (no '/', not '.' or '..', no control or invisible characters)"


def check_name(value: Any, what: str) -> str:
    """An id that can appear in a URL path, checked where it is created or written.

    Resource, thread, message, task and key ids and fact categories and keys
    travel as one path segment (``/v1/resources/{resource}/threads/{thread}``,
    the inspector's links). A segment that is ``.`` or ``..`` or holds ``/``
    is resolved by a browser before it is sent, so a stored id could make a
    click act on another resource: such ids are refused here, on top of
    ``check_id``. Reads and deletes keep ``check_id`` alone, so a database
    written before this rule still reads, and its odd ids can be removed.

    Raises:
        UsageError: ``"thread_id '..' is not a valid name: ids are names, never paths (…)"``.
    """
    check_id(value, what)
    if value in (".", "..") or _NOT_IN_NAMES.search(value) or first_invisible(value):
        raise UsageError(f"{what} {value!r} is not a valid name: {NAME_RULE}")
    return value


def check_message(m: Message) -> None:
    """Every text and JSON field of a message, by the rules every backend can keep.

    Raises:
        UsageError: NUL or lone surrogates in any text field, content past
            ``MAX_MESSAGE_CHARS``, ids past ``MAX_ID_LENGTH``, tool-call
            arguments or metadata that are not JSON (NaN, non-string keys,
            too deep, too large), a timestamp without a time zone.
    """
    check_text(m.content, "message content")
    if len(m.content) > MAX_MESSAGE_CHARS:
        raise UsageError(f"message content is {len(m.content):,} characters; the limit is {MAX_MESSAGE_CHARS:,}")
    if m.id is not None:
        check_name(m.id, "message id")
    for what, value in (("tool_call_id", m.tool_call_id), ("name", m.name)):
        if value is not None:
            check_id(value, f"message {what}")
    for call in m.tool_calls or ():
        check_id(call.id, "tool call id")
        check_id(call.name, "tool call name")
        if isinstance(call.arguments, str):
            check_text(call.arguments, f"arguments of tool call {call.id!r}")
        else:
            check_json(call.arguments, f"arguments of tool call {call.id!r}", max_bytes=MAX_PATCH_BYTES)
    if m.metadata is not None:
        if not isinstance(m.metadata, dict):
            raise UsageError(f"message metadata must be a JSON object, not {type(m.metadata).__name__}")
        check_json(m.metadata, "message metadata", max_bytes=MAX_METADATA_BYTES)
    if m.created_at is not None:
        if not isinstance(m.created_at, datetime) or m.created_at.utcoffset() is None:
            raise UsageError("message created_at must be an aware datetime (with a time zone)")
        _in_utc_range(m.created_at, "message created_at")
    if m.importance is not None and (
        not isinstance(m.importance, int | float) or isinstance(m.importance, bool) or not 0 <= m.importance <= 1
    ):
        raise UsageError(f"message importance must be a number within [0, 1], not {m.importance!r}")


def check_fact(category: Any, key: Any, value: Any, source: Any) -> None:
    """A fact's fields: non-empty text within the limits, and a known source."""
    if source not in FACT_SOURCES:
        raise UsageError(f"source must be agent, user or consolidation, not {source!r}")
    for name, text in (("category", category), ("key", key), ("value", value)):
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"fact {name} must be non-empty text")
        check_text(text, f"fact {name}")
    for name, text in (("category", category), ("key", key)):
        check_name(text, f"fact {name}")  # control characters anywhere, even where strip() would drop them
        check_name(text.strip(), f"fact {name}")  # what is stored: never '.' or '..'
    if len(category) > MAX_FACT_CATEGORY or len(key) > MAX_FACT_KEY or len(value) > MAX_FACT_VALUE:
        raise UsageError(
            f"fact too long: category <= {MAX_FACT_CATEGORY}, key <= {MAX_FACT_KEY}, value <= {MAX_FACT_VALUE} characters"
        )


def check_title(title: Any) -> None:
    if title is not None:
        if not isinstance(title, str):
            raise UsageError(f"title must be text or None, not {type(title).__name__}")
        if len(title) > MAX_TITLE:
            raise UsageError(f"title is {len(title)} characters long; the limit is {MAX_TITLE}")
        check_text(title, "title")


def check_metadata(metadata: Any, what: str = "metadata") -> None:
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise UsageError(f"{what} must be a JSON object or None, not {type(metadata).__name__}")
        check_json(metadata, what, max_bytes=MAX_METADATA_BYTES)


def check_actor(actor: Any, reason: Any) -> None:
    check_id(actor, "actor")
    if reason is not None:
        if not isinstance(reason, str):
            raise UsageError(f"reason must be text or None, not {type(reason).__name__}")
        check_text(reason, "reason")


def check_zone(value: Any, what: str = "time zone") -> str:
    """An IANA time zone name that ``zoneinfo`` knows: returned as given, or a ``UsageError``.

    The name is checked before ``ZoneInfo`` sees it (``ZoneInfo`` turns it
    into a file path: an over-long name is ``ENAMETOOLONG``, ``..`` a path
    outside the database), and whatever ``ZoneInfo`` still raises becomes the
    same sentence.
    """
    from zoneinfo import ZoneInfo

    if isinstance(value, str) and len(value) > MAX_ZONE_NAME:
        raise UsageError(f"{what} is {len(value)} characters long; an IANA name has at most {MAX_ZONE_NAME}")
    shown = repr(value) if isinstance(value, str) else type(value).__name__
    refusal = f"unknown {what} {shown}; use an IANA name such as 'America/Sao_Paulo'"
    if not isinstance(value, str) or not _ZONE_NAME.fullmatch(value):
        raise UsageError(refusal)
    try:
        ZoneInfo(value)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise UsageError(refusal) from None
    return value


def check_time(value: Any, what: str, *, optional: bool = False) -> datetime | None:
    """An RFC 3339 timestamp from a dump: parsed, or a ``UsageError`` naming the field."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{what} must be an RFC 3339 timestamp (text), not {type(value).__name__}")
    try:
        parsed = from_iso(value)
    except ValueError:
        raise UsageError(f"{what} is not a timestamp: {value[:40]!r}") from None
    _in_utc_range(parsed, what)
    return parsed


def _in_utc_range(value: datetime, what: str) -> None:
    """Stores keep times in UTC: one whose UTC form is before year 1 or after 9999 cannot be kept."""
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise UsageError(f"{what} is out of range once converted to UTC: {value.isoformat()}") from None


#: A dump nests a few levels (threads, messages) above its JSON payloads.
DUMP_DEPTH = MAX_JSON_DEPTH + 8


#: Metadata key of an assistant message whose tool-call arguments were made
#: storable: ``{tool call id: why the model's arguments could not be kept}``.
REPLACED_ARGUMENTS = "replaced_tool_arguments"
#: What such arguments begin with once kept as text: it also keeps a reader
#: from parsing them back into the JSON that could not be stored.
UNSTORABLE_PREFIX = "(unstorable arguments) "


def storable_reply(reply: Message) -> Message:
    """A model's assistant message, made storable without losing what it said.

    What the model sends is the model's, not the caller's: tool-call
    arguments nested past ``MAX_JSON_DEPTH``, holding NaN, a NUL, a lone
    surrogate or more than ``MAX_PATCH_BYTES``, would make ``check_message``
    refuse the whole turn at its commit — the tool already told the model
    its error, and the turn would be lost (the proxy even answered 400,
    blaming the client). Such arguments are kept as text (``UNSTORABLE_PREFIX``
    and their JSON, unstorable characters replaced by U+FFFD, cut to the
    size limit), and
    ``metadata[REPLACED_ARGUMENTS]`` says which call and why. Content with a
    NUL or a lone surrogate is cleaned the same way, and cut at
    ``MAX_MESSAGE_CHARS``. A reply that is already
    storable comes back unchanged (the same object).
    """
    replaced: dict[str, str] = {}
    calls = []
    for call in reply.tool_calls or ():
        try:
            if isinstance(call.arguments, str):
                check_text(call.arguments, "arguments")
                if len(call.arguments) > MAX_PATCH_BYTES:
                    raise UsageError(
                        f"arguments are {len(call.arguments):,} characters; the most kept is {MAX_PATCH_BYTES:,}"
                    )
            else:
                check_json(call.arguments, "arguments", max_bytes=MAX_PATCH_BYTES)
            calls.append(call)
        except UsageError as exc:
            replaced[call.id] = str(exc)
            text = UNSTORABLE_PREFIX + _clean(_as_text(call.arguments))
            calls.append(replace(call, arguments=text[:MAX_PATCH_BYTES]))
    content = reply.content
    try:
        check_text(content, "content")
    except UsageError:
        content = _clean(content)
    content = content[:MAX_MESSAGE_CHARS]
    if not replaced and content == reply.content:
        return reply
    metadata = {**(reply.metadata or {}), REPLACED_ARGUMENTS: replaced} if replaced else reply.metadata
    return reply.with_(content=content, tool_calls=calls or reply.tool_calls, metadata=metadata)


def _as_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    try:  # NaN stays "NaN": it is text now
        return json.dumps(arguments, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):  # an integer past Python's printable digits
        return "(arguments that cannot be written as JSON)"


def _clean(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD."""
    return "".join("\ufffd" if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in text)
