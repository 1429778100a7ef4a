"""One gate for JSON values entering caderno, and the size policy it enforces.

Everything caderno stores as JSON (message metadata, tool-call arguments,
working-memory patches) passes :func:`check_json` first, so every backend
receives only values that it can store and give back unchanged:

- only JSON types: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``,
  ``float``, ``bool``, ``None``. Tuples are refused, not converted: a tuple
  would come back from the database as a list, so what was stored and what
  is read would differ.
- no NaN or ±Infinity: not JSON, and PostgreSQL ``jsonb`` rejects them.
- no NUL and no lone surrogates in strings or keys (see
  :func:`caderno.core.messages.check_text`).
- bounded nesting and encoded size, checked without recursion, so a value
  nested 100,000 deep is a clean :class:`~caderno.core.errors.UsageError`, never a
  ``RecursionError`` from deep inside ``json``.

Every refusal names the value (``what``) and the path inside it
(``metadata.a[3].b``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import UsageError
from .messages import check_text

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_MESSAGES_PER_APPEND",
    "MAX_MESSAGE_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_PATCH_BYTES",
    "check_json",
    "dumps_strict",
    "loads_strict",
]

#: Characters in one message's content. A million is far beyond any model's
#: context window (≈250k tokens) while still refusing a runaway tool output
#: or a pasted file that would bloat every later recall and dump.
MAX_MESSAGE_CHARS = 1_000_000
#: Encoded bytes of one working-memory patch. Working memory is rendered into
#: every prompt, so a quarter of a MiB is already far more than is useful.
MAX_PATCH_BYTES = 256 * 1024
#: Encoded bytes of one message's metadata: bookkeeping (summary ranges,
#: sources, ids), not content; 64 KiB leaves room and stops abuse.
MAX_METADATA_BYTES = 64 * 1024
#: Nesting of arrays and objects. Real data rarely passes 10; 64 leaves room
#: while keeping every consumer (``json`` in C, PostgreSQL's parser, the
#: recursive renderers) far from its recursion limit.
MAX_JSON_DEPTH = 64
#: Messages in one ``append`` call: one transaction holding the thread lock,
#: so a bound keeps a single call from stalling every other writer.
MAX_MESSAGES_PER_APPEND = 10_000

_SCALARS = (str, int, float, bool, type(None))
#: Python refuses to print integers over 4,300 digits (CVE-2020-10735); this
#: bound (≈3,900 digits) refuses them here, with a path, instead of in a store.
_MAX_INT_BITS = 13_000


#: Longest key shown in an error path; a megabyte-long key must not make a
#: megabyte-long error message.
_SHOWN_KEY_CHARS = 40


def _key_path(path: str, key: str) -> str:
    if key.isidentifier() and len(key) <= _SHOWN_KEY_CHARS:
        return f"{path}.{key}"
    shown = key if len(key) <= _SHOWN_KEY_CHARS else key[:_SHOWN_KEY_CHARS] + "…"
    # Escaped when not printable: an error message holding a lone surrogate
    # or a control character would break the terminal or log that shows it.
    return f"{path}[{json.dumps(shown, ensure_ascii=not shown.isprintable())}]"


def check_json(value: Any, what: str, *, max_bytes: int | None, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a value caderno cannot store as JSON exactly.

    Walks the value with an explicit stack (no recursion). Nesting beyond
    ``max_depth`` stops the walk, so a self-containing list is refused as too
    deep rather than walked forever.

    Args:
        value: the value to check.
        what: its name in error messages (``metadata``, ``patch``).
        max_bytes: most bytes of its compact UTF-8 JSON encoding; ``None``
            for no limit.
        max_depth: most levels of nested arrays and objects (a flat object
            is depth 1).

    Raises:
        UsageError: naming ``what`` and the path of the first offending part.
    """
    stack: list[tuple[Any, str, int]] = [(value, what, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, path)
            # Every character is at least one byte: a long string is refused
            # before the whole value is encoded.
            if max_bytes is not None and len(item) > max_bytes:
                raise UsageError(f"{path} is longer than the {max_bytes:,} bytes allowed for {what}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise UsageError(f"{path} is {item!r}; JSON has no NaN or Infinity")
        elif isinstance(item, int) and item.bit_length() > _MAX_INT_BITS:
            raise UsageError(f"{path} is an integer of {item.bit_length():,} bits; too long to store as JSON")
        elif isinstance(item, _SCALARS):
            continue
        elif isinstance(item, dict | list):
            if depth + 1 > max_depth:
                raise UsageError(f"{path} nests deeper than {max_depth} levels, the most allowed in {what}")
            if isinstance(item, list):
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in reversed(list(enumerate(item))))
                continue
            children = []
            for key, v in item.items():
                if not isinstance(key, str):
                    raise UsageError(f"{path} has a non-string key {key!r}; JSON object keys are strings")
                child = _key_path(path, key)
                check_text(key, f"a key of {path}")
                children.append((v, child, depth + 1))
            stack.extend(reversed(children))
        elif isinstance(item, tuple):
            raise UsageError(f"{path} is a tuple; use a list (tuples do not come back from storage as tuples)")
        else:
            raise UsageError(f"{path} is of type {type(item).__name__}, which is not a JSON value")
    if max_bytes is not None:
        size = len(dumps_strict(value, what).encode("utf-8"))
        if size > max_bytes:
            raise UsageError(f"{what} is {size:,} bytes as JSON; the most allowed is {max_bytes:,}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are refused: Python keeps the last, other parsers the
    # first, and a value must mean one thing to every reader.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def loads_strict(text: str | bytes, what: str, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text from outside, refusing what :func:`check_json` refuses.

    Also refuses the ``NaN``/``Infinity`` constants Python's parser accepts,
    duplicate object keys, and malformed text.

    Args:
        text: JSON text (``bytes`` are decoded as UTF-8).
        what: its name in error messages.
        max_bytes: most bytes of ``text``; ``None`` for no limit.
        max_depth: most levels of nesting.

    Returns:
        The parsed value.

    Raises:
        UsageError: the text is not strict JSON within the limits.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{what} is not UTF-8 (byte {exc.start})") from None
    if max_bytes is not None and len(text) > max_bytes:
        raise UsageError(f"{what} is longer than the {max_bytes:,} bytes allowed")
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"{what} nests deeper than {max_depth} levels") from None
    check_json(value, what, max_bytes=max_bytes, max_depth=max_depth)
    return value


def dumps_strict(value: Any, what: str = "value") -> str:
    """Compact JSON text of ``value`` (UTF-8 kept as is); NaN and Infinity refused.

    Args:
        value: a JSON value (run :func:`check_json` first for the full checks).
        what: its name in error messages.

    Raises:
        UsageError: the value holds NaN/Infinity, a non-JSON type, or an
            integer too long to print.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise UsageError(f"{what} nests too deeply to encode") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} cannot be encoded as JSON: {exc}") from None
