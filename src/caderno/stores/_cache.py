"""Bounded caches of a store: each thread's newest messages (SQLite), and live API keys (SQLite, PostgreSQL).

Correctness first. An entry is trusted only while the database has not been
changed by any other connection: the store compares SQLite's
``PRAGMA data_version`` on its own writer connection (which changes exactly
when *another* connection commits) with the value seen when the cache was
last cleared, and drops everything on a difference. Writes made through the
store itself update the affected entry in place, under the same lock.

A fill after a cache miss is accepted only if no write happened in this
process between the moment the read started and the fill (``epoch``), so a
slow read can never overwrite a newer entry with older data.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from ..core.messages import Message
from ..core.records import ApiKey

Key = tuple[str, str]

#: The longest a cached API key answers without being read from the database
#: again (seconds), whatever says the cache is fresh. Each store has its own
#: freshness rule (SQLite's ``data_version``; PostgreSQL's LISTEN session and
#: its heartbeat); this is the bound that still holds when such a rule fails
#: in a way nobody foresaw, so a revoked key stops working within it on every
#: server. 10 s: what the README promises; it costs one indexed read per live
#: key per 10 s, nothing beside a request's own reads.
KEY_MAX_AGE = 10.0


@dataclass
class _Entry:
    messages: list[Message]
    complete: bool  # the entry holds the whole thread


class RecentCache:
    """LRU over threads, at most ``per_thread`` newest messages each."""

    def __init__(self, per_thread: int = 50, max_threads: int = 1024) -> None:
        self.per_thread = per_thread
        self.max_threads = max_threads
        self.data_version: int | None = None
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._epoch = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.per_thread > 0 and self.max_threads > 0

    def get(self, key: Key, limit: int | None) -> list[Message] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not (entry.complete or (limit is not None and limit <= len(entry.messages))):
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            msgs = entry.messages
            return list(msgs if limit is None else msgs[-limit:] if limit else [])

    def epoch(self) -> int:
        with self._lock:
            return self._epoch

    def fill(self, key: Key, newest: list[Message], complete: bool, epoch: int) -> None:
        """Store a read result, unless a write happened since ``epoch``."""
        with self._lock:
            if epoch != self._epoch:
                return
            self._put(key, _Entry(newest[-self.per_thread :], complete and len(newest) <= self.per_thread))

    def appended(self, key: Key, messages: list[Message]) -> None:
        """Record this store's own committed append."""
        with self._lock:
            self._epoch += 1
            entry = self._entries.get(key)
            if entry is None:
                return
            # A fill that ran between the commit and this call may already
            # hold these messages; the sequence tells which are new.
            last = entry.messages[-1].seq if entry.messages else 0
            merged = entry.messages + [m for m in messages if (m.seq or 0) > (last or 0)]
            self._put(key, _Entry(merged[-self.per_thread :], entry.complete and len(merged) <= self.per_thread))

    def discard(self, resource_id: str, thread_id: str | None = None) -> None:
        """Forget one thread, or every thread of a resource."""
        with self._lock:
            self._epoch += 1
            for key in [k for k in self._entries if k[0] == resource_id and (thread_id is None or k[1] == thread_id)]:
                del self._entries[key]

    def reset(self, data_version: int) -> None:
        """Drop everything: another connection changed the database."""
        with self._lock:
            self._epoch += 1
            self._entries.clear()
            self.data_version = data_version

    def _put(self, key: Key, entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_threads:
            self._entries.popitem(last=False)


class KeyCache:
    """Live keys by token hash, trusted only while their store says nothing changed, and never past ``max_age``.

    Every request looks its key up; a key changes only when it is created or
    revoked. Each store clears the cache when a key may have changed: SQLite
    when another connection commits (the writer's ``PRAGMA data_version``, as
    for messages), PostgreSQL on a key notice from its LISTEN session (and
    it answers from the cache only while that session proves alive); both
    when they commit a key change themselves. So a revocation is seen by the
    next request, whichever process made it. Whatever the store says, an
    entry read more than ``max_age`` seconds ago (``KEY_MAX_AGE``) is read
    again. Only live keys are kept (an unknown token is looked up each time,
    and cannot fill the cache), at most ``max_keys``.
    """

    def __init__(self, max_keys: int = 1024, max_age: float = KEY_MAX_AGE) -> None:
        self.max_keys = max_keys
        self.max_age = max_age
        self._keys: OrderedDict[str, tuple[ApiKey, float]] = OrderedDict()  # the key, when it was read
        self._epoch = 0
        self._lock = threading.Lock()

    def get(self, token_hash: str) -> ApiKey | None:
        with self._lock:
            entry = self._keys.get(token_hash)
            if entry is None:
                return None
            key, read_at = entry
            if time.monotonic() - read_at >= self.max_age:
                del self._keys[token_hash]
                return None
            self._keys.move_to_end(token_hash)
            return key

    def epoch(self) -> int:
        with self._lock:
            return self._epoch

    def fill(self, token_hash: str, key: ApiKey, epoch: int, *, read_at: float | None = None) -> None:
        """Keep a key read from the database, unless the keys may have changed since ``epoch``.

        ``read_at`` is when the read began (``time.monotonic()``; default
        now): the age counts from there, so a slow read cannot stretch it.
        """
        with self._lock:
            if epoch != self._epoch:
                return
            self._keys[token_hash] = (key, time.monotonic() if read_at is None else read_at)
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._epoch += 1
            self._keys.clear()
