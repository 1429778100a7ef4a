"""Clock and id helpers, kept in one place so tests and stores agree."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def to_iso(value: datetime) -> str:
    """RFC 3339 text with microseconds, always in UTC (sorts as text)."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(value: str) -> datetime:
    """Parse RFC 3339 text (a trailing ``Z`` included); naive values are UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def new_id() -> str:
    """A time-ordered UUID (version 7 layout: 48-bit milliseconds, then random).

    Ids sort roughly by creation time, which keeps B-tree inserts local; order
    inside a thread never depends on them (the store's sequence decides).
    """
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
