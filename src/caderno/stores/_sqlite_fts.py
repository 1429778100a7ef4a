"""SQLite full text: each message's stems, its thread neighbours' stems and its day as words.

``events_fts`` (migration 0013_index_time_context) has three columns:
``terms`` (the message's own stems), ``context`` (the stems of the
``CONTEXT_BEFORE`` messages before it and ``CONTEXT_AFTER`` after it in its
thread) and ``day`` (``date_words`` of its ``created_at``). Stems are made
here in Python (``caderno.core.text.stems``): FTS5 has no Portuguese stemmer.

Rows are indexed in batches by the writer (``catch_up_fts``), after appends
and before every search, so the cost of a commit stays a few µs a message.
What is indexed is one watermark (``fts_state.indexed_upto``: sequence
numbers grow in commit order) plus a queue of rows to index again
(``fts_redo``). Keeping the context exact:

* an append changes the context of the ``CONTEXT_AFTER`` messages before
  each new one: the catch-up indexes them again with the new rows;
* an edit or a deletion changes the context of the messages around it: the
  triggers of migration 0013 queue them in ``fts_redo`` in the same
  transaction, and a search skips any row still queued there, so a stale
  context is never used (the search's own catch-up empties the queue first).

Only messages are indexed (summaries are never searched), and a neighbour
is always a message of the same resource and thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, date, datetime
from functools import lru_cache

from ..core.clock import from_iso
from ..core.text import CONTEXT_AFTER, CONTEXT_BEFORE, date_words, stems

#: Rows of one thread read around a run of rows to index: (seq, content, created_at, indexed stems or None).
Row = tuple[int, str, str, str | None]

#: The rows of a thread around a run, each with its stems as the index holds them (``NULL`` for a
#: row not in the index: new, or edited since); an edit deletes a row's index entry at once
#: (migration 0013's trigger), so stems found there are the row's own words as they are now.
_NEAR = (
    "SELECT e.seq, e.content, e.created_at, f.terms FROM events e LEFT JOIN events_fts f ON f.rowid = e.seq "
    "WHERE e.resource_id = ? AND e.thread_id = ? AND e.kind = 'message'"
)


def catch_up_fts(conn: sqlite3.Connection) -> int:
    """Index every message not yet indexed, and those queued again (inside the caller's transaction).

    Returns how many rows were (re)written to the index.
    """
    upto = conn.execute("SELECT indexed_upto FROM fts_state").fetchone()[0]
    last = conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
    runs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    # New messages: one run per thread, from its first new message to the last.
    for rid, tid, lo, hi in conn.execute(
        "SELECT resource_id, thread_id, min(seq), max(seq) FROM events "
        "WHERE seq > ? AND seq <= ? AND kind = 'message' GROUP BY resource_id, thread_id",
        (upto, last),
    ):
        runs.setdefault((rid, tid), []).append((lo, hi))
    # Rows an edit or a deletion queued: one run each. CROSS JOIN keeps the
    # queue (usually empty) outside: joined the other way SQLite scanned
    # every event (12 ms a search at 100k messages).
    for rid, tid, seq in conn.execute(
        "SELECT e.resource_id, e.thread_id, e.seq FROM fts_redo r CROSS JOIN events e ON e.seq = r.seq "
        "WHERE e.kind = 'message'"
    ):
        runs.setdefault((rid, tid), []).append((seq, seq))
    if not runs:  # nothing to index: write nothing (a commit without changes costs no fsync)
        if last > upto:
            conn.execute("UPDATE fts_state SET indexed_upto = ?", (last,))
        return 0
    rows: dict[int, tuple[str, str, str]] = {}
    for (rid, tid), spans in runs.items():
        for lo, hi in spans:
            rows.update(_index_run(conn, rid, tid, lo, hi, new=lo > upto))
    if rows:
        # A row above the watermark was never indexed: only those below have an entry to replace.
        conn.executemany("DELETE FROM events_fts WHERE rowid = ?", [(seq,) for seq in rows if seq <= upto])
        conn.executemany(
            "INSERT INTO events_fts (rowid, terms, context, day) VALUES (?, ?, ?, ?)",
            [(seq, *parts) for seq, parts in rows.items()],
        )
    conn.execute("DELETE FROM fts_redo")
    conn.execute("UPDATE fts_state SET indexed_upto = ?", (max(last, upto),))
    return len(rows)


def _index_run(
    conn: sqlite3.Connection, rid: str, tid: str, lo: int, hi: int, *, new: bool
) -> Iterable[tuple[int, tuple[str, str, str]]]:
    """The index rows of the thread's messages ``lo..hi`` and, for new ones, of the messages before them.

    A new message is part of the context of the ``CONTEXT_AFTER`` messages
    before it, so those are indexed again too (``new``). A new run has no
    message after it (it runs to the newest), and the stems of a message
    already indexed are read back rather than made again.
    """
    extra = CONTEXT_AFTER if new else 0
    before = conn.execute(
        _NEAR + " AND e.seq < ? ORDER BY e.seq DESC LIMIT ?", (rid, tid, lo, CONTEXT_BEFORE + extra)
    ).fetchall()
    inside = conn.execute(_NEAR + " AND e.seq BETWEEN ? AND ? ORDER BY e.seq", (rid, tid, lo, hi)).fetchall()
    after = (
        []
        if new
        else conn.execute(_NEAR + " AND e.seq > ? ORDER BY e.seq LIMIT ?", (rid, tid, hi, CONTEXT_AFTER)).fetchall()
    )
    thread: list[Row] = [*reversed(before), *inside, *after]
    first = max(0, len(before) - extra)  # index of the first row to (re)index
    own = [stems(content) if terms is None else terms.split() for _, content, _, terms in thread]
    for i in range(first, len(before) + len(inside)):
        seq, _, created_at, _ = thread[i]
        near = [*own[max(0, i - CONTEXT_BEFORE) : i], *own[i + 1 : i + 1 + CONTEXT_AFTER]]
        context = " ".join(term for terms in near for term in terms)
        yield seq, (" ".join(own[i]), context, _day_terms(from_iso(created_at).astimezone(UTC).date()))


@lru_cache(maxsize=4096)
def _day_terms(day: date) -> str:
    """The stems of a UTC day's words (cached: a conversation has few days)."""
    return " ".join(stems(date_words(datetime(day.year, day.month, day.day, tzinfo=UTC))))
