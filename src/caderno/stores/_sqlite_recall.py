"""Recall primitives of the SQLite store: embedding queue, vectors, full text, salience.

A mixin of ``SQLiteStore``: it uses the store's ``_read`` / ``_write``
helpers and keeps every call one transaction.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from .._time import to_iso, utcnow
from ..messages import Message
from ._rows import EVENT_COLUMNS, row_to_message
from .base import EmbeddingJob, VectorRows


class _SQLiteRecall:
    async def claim_embedding_jobs(self, limit: int, lease_seconds: float) -> list[EmbeddingJob]:
        def run(conn: sqlite3.Connection) -> list[EmbeddingJob]:
            now = utcnow()
            rows = conn.execute(
                "SELECT q.seq, q.resource_id, e.content, q.attempts FROM embedding_queue q "
                "JOIN events e ON e.seq = q.seq WHERE q.not_before <= ? ORDER BY q.not_before, q.seq LIMIT ?",
                (to_iso(now), limit),
            ).fetchall()
            until = to_iso(now + timedelta(seconds=lease_seconds))
            conn.executemany("UPDATE embedding_queue SET not_before = ? WHERE seq = ?", [(until, r[0]) for r in rows])
            return [EmbeddingJob(resource_id=r[1], seq=r[0], content=r[2], attempts=r[3]) for r in rows]

        return await self._write(run)

    async def finish_embedding_jobs(
        self,
        model: str,
        dim: int,
        done: list[tuple[str, int, bytes]],
        failed: list[tuple[str, int, str, float]],
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            now = utcnow()
            for resource_id, seq, vector in done:
                # A new row (new id) even when re-embedding, so vector caches
                # reading the change feed see it.
                conn.execute("DELETE FROM embeddings WHERE seq = ? AND model = ?", (seq, model))
                conn.execute(
                    "INSERT INTO embeddings (seq, resource_id, model, dim, vector) "
                    "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE seq = ?)",
                    (seq, resource_id, model, dim, vector, seq),
                )
                conn.execute("DELETE FROM embedding_queue WHERE seq = ?", (seq,))
            for _resource_id, seq, error, retry_after in failed:
                conn.execute(
                    "UPDATE embedding_queue SET attempts = attempts + 1, error = ?, not_before = ? WHERE seq = ?",
                    (error, to_iso(now + timedelta(seconds=retry_after)), seq),
                )

        await self._write(run)

    async def pending_embeddings(self) -> int:
        return await self._read(lambda conn: conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0])

    async def load_vectors(self, resource_id: str, model: str, after_id: int) -> VectorRows:
        def run(conn: sqlite3.Connection) -> VectorRows:
            rows = conn.execute(
                "SELECT m.id, m.seq, e.thread_id, m.vector FROM embeddings m JOIN events e ON e.seq = m.seq "
                "WHERE m.resource_id = ? AND m.model = ? AND m.id > ? ORDER BY m.id",
                (resource_id, model, after_id),
            ).fetchall()
            return VectorRows(
                seqs=[r[1] for r in rows],
                thread_ids=[r[2] for r in rows],
                vectors=b"".join(r[3] for r in rows),
                last_id=rows[-1][0] if rows else after_id,
            )

        return await self._read(run, snapshot=True)

    async def lexical_search(
        self, resource_id: str, terms: list[str], limit: int, thread_id: str | None
    ) -> list[tuple[int, float]]:
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)

        def run(conn: sqlite3.Connection) -> list[tuple[int, float]]:
            sql = (
                "SELECT f.rowid, -bm25(events_fts) AS score FROM events_fts f JOIN events e ON e.seq = f.rowid "
                "WHERE events_fts MATCH ? AND e.resource_id = ? AND e.kind = 'message'"
            )
            params: list[Any] = [match, resource_id]
            if thread_id is not None:
                sql += " AND e.thread_id = ?"
                params.append(thread_id)
            return [(r[0], r[1]) for r in conn.execute(sql + " ORDER BY score DESC LIMIT ?", (*params, limit))]

        return await self._read(run)

    async def salient(
        self, resource_id: str, threshold: float, limit: int, thread_id: str | None
    ) -> list[tuple[str, Message]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, Message]]:
            # The threshold is inlined (a float, not user text) so SQLite can
            # use the partial index events_salient.
            sql = (
                f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = ? "
                f"AND importance >= {float(threshold)!r} AND kind = 'message'"
            )
            params: list[Any] = [resource_id]
            if thread_id is not None:
                sql += " AND thread_id = ?"
                params.append(thread_id)
            rows = conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*params, limit)).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._read(run)

    async def get_by_seq(self, resource_id: str, seqs: list[int]) -> list[tuple[str, Message]]:
        if not seqs:
            return []

        def run(conn: sqlite3.Connection) -> list[tuple[str, Message]]:
            marks = ",".join("?" * len(seqs))
            # "+resource_id" keeps SQLite on the rowid lookup; the index on
            # resource_id would scan the whole resource (measured: 25 ms at 100k).
            rows = conn.execute(
                f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE seq IN ({marks}) AND +resource_id = ?",
                (*seqs, resource_id),
            ).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._read(run)

    async def neighbours(self, resource_id: str, thread_id: str, seq: int, before: int, after: int) -> list[Message]:
        def run(conn: sqlite3.Connection) -> list[Message]:
            base = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? AND kind = 'message'"
            older = conn.execute(
                base + " AND seq < ? ORDER BY seq DESC LIMIT ?", (resource_id, thread_id, seq, before)
            ).fetchall()
            newer = conn.execute(
                base + " AND seq > ? ORDER BY seq LIMIT ?", (resource_id, thread_id, seq, after)
            ).fetchall()
            return [row_to_message(r) for r in [*reversed(older), *newer]]

        return await self._read(run)

    async def set_importance(self, resource_id: str, message_id: str, value: float) -> bool:
        def run(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT thread_id FROM events WHERE resource_id = ? AND id = ?", (resource_id, message_id)
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE events SET importance = ? WHERE resource_id = ? AND id = ?", (value, resource_id, message_id)
            )
            return row[0]

        def after(thread_id: str | None) -> None:
            if thread_id is not None:
                self.cache.discard(resource_id, thread_id)

        return await self._write(run, after) is not None

    async def reindex(self, resource_id: str | None) -> int:
        def run(conn: sqlite3.Connection) -> int:
            where, params = ("WHERE resource_id = ?", (resource_id,)) if resource_id is not None else ("", ())
            conn.execute(f"DELETE FROM embeddings {where}", params)
            conn.execute(
                "INSERT OR IGNORE INTO embedding_queue (seq, resource_id) SELECT seq, resource_id FROM events "
                f"{where or 'WHERE 1'} AND kind = 'message' AND role IN ('user', 'assistant') AND content <> ''",
                params,
            )
            return conn.execute(f"SELECT count(*) FROM embedding_queue {where}", params).fetchone()[0]

        return await self._write(run)
