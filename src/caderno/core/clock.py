"""Clock and id helpers, kept in one place so tests and stores agree."""

from __future__ import annotations

import os
import random
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


#: The random part of ids: seeded from the OS once (and again in a forked
#: child), not a system call per id — one ``os.urandom`` cost as much as the
#: rest of preparing a message. Private, so seeding ``random`` (tests do)
#: cannot repeat ids.
_random = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(32)))


def new_id() -> str:
    """A time-ordered UUID (version 7 layout: 48-bit milliseconds, then random).

    Ids sort roughly by creation time, which keeps B-tree inserts local; order
    inside a thread never depends on them (the store's sequence decides).
    """
    millis = time.time_ns() // 1_000_000
    rand = _random.getrandbits(80)
    value = (millis & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
