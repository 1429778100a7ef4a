"""Recall primitives of the Postgres store: embedding queue, vectors, full text, salience.

A mixin of ``PostgresStore``: it uses the store's ``_read`` / ``_write`` helpers (``_tx`` for PostgreSQL) and keeps every call one transaction.
"""

from __future__ import annotations

from typing import Any

from ..messages import Message
from ._rows import EVENT_COLUMNS, row_to_message
from .base import EmbeddingJob, VectorRows

#: How far below the last seen change-feed id a vector refresh re-reads.
FEED_OVERLAP = 10_000


class _PostgresRecall:
    async def claim_embedding_jobs(self, limit: int, lease_seconds: float) -> list[EmbeddingJob]:
        async def run(conn: Any) -> list[EmbeddingJob]:
            # SKIP LOCKED: workers on any number of machines take disjoint
            # batches without waiting on each other; the lease (not_before)
            # then keeps the batch theirs after this transaction commits.
            rows = await (
                await conn.execute(
                    "SELECT q.resource_id, q.seq, e.content, q.attempts FROM embedding_queue q "
                    "JOIN events e ON e.resource_id = q.resource_id AND e.seq = q.seq "
                    "WHERE q.not_before <= now() ORDER BY q.not_before, q.seq LIMIT %s FOR UPDATE OF q SKIP LOCKED",
                    (limit,),
                )
            ).fetchall()
            if rows:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "UPDATE embedding_queue SET not_before = now() + make_interval(secs => %s) "
                        "WHERE resource_id = %s AND seq = %s",
                        [(lease_seconds, r[0], r[1]) for r in rows],
                    )
            return [EmbeddingJob(resource_id=r[0], seq=r[1], content=r[2], attempts=r[3]) for r in rows]

        return await self._tx(run)

    async def finish_embedding_jobs(
        self,
        model: str,
        dim: int,
        done: list[tuple[str, int, bytes]],
        failed: list[tuple[str, int, str, float]],
    ) -> None:
        async def run(conn: Any) -> None:
            async with conn.cursor() as cur:
                if done:
                    await cur.executemany(
                        "DELETE FROM embeddings WHERE resource_id = %s AND seq = %s AND model = %s",
                        [(r, s, model) for r, s, _ in done],
                    )
                    await cur.executemany(
                        "INSERT INTO embeddings (resource_id, seq, model, dim, vector) "
                        "SELECT %s, %s, %s, %s, %s WHERE EXISTS "
                        "(SELECT 1 FROM events WHERE resource_id = %s AND seq = %s)",
                        [(r, s, model, dim, v, r, s) for r, s, v in done],
                    )
                    await cur.executemany(
                        "DELETE FROM embedding_queue WHERE resource_id = %s AND seq = %s", [(r, s) for r, s, _ in done]
                    )
                if failed:
                    await cur.executemany(
                        "UPDATE embedding_queue SET attempts = attempts + 1, error = %s, "
                        "not_before = now() + make_interval(secs => %s) WHERE resource_id = %s AND seq = %s",
                        [(e, after, r, s) for r, s, e, after in failed],
                    )

        await self._tx(run)

    async def pending_embeddings(self) -> int:
        async def run(conn: Any) -> int:
            return (await (await conn.execute("SELECT count(*) FROM embedding_queue")).fetchone())[0]

        return await self._tx(run, write=False, transaction=False)

    async def load_vectors(self, resource_id: str, model: str, after_id: int) -> VectorRows:
        async def run(conn: Any) -> VectorRows:
            # Identity values are drawn at insert but become visible at
            # commit, so a row with a lower id can appear after a higher one
            # was read. Re-reading a window below the last id catches those;
            # the caller drops seqs it already holds.
            rows = await (
                await conn.execute(
                    "SELECT m.id, m.seq, e.thread_id, m.vector FROM embeddings m "
                    "JOIN events e ON e.resource_id = m.resource_id AND e.seq = m.seq "
                    "WHERE m.resource_id = %s AND m.model = %s AND m.id > %s ORDER BY m.id",
                    (resource_id, model, max(0, after_id - FEED_OVERLAP) if after_id else 0),
                )
            ).fetchall()
            return VectorRows(
                seqs=[r[1] for r in rows],
                thread_ids=[r[2] for r in rows],
                vectors=b"".join(bytes(r[3]) for r in rows),
                last_id=max([after_id, *(r[0] for r in rows)]),
            )

        return await self._tx(run, write=False, transaction=False)

    async def lexical_search(
        self, resource_id: str, terms: list[str], limit: int, thread_id: str | None
    ) -> list[tuple[int, float]]:
        if not terms:
            return []

        async def run(conn: Any) -> list[tuple[int, float]]:
            # Terms are bound as one parameter and OR-ed by tsquery itself;
            # ts_rank_cd (cover density) is PostgreSQL's lexical rank.
            query = " | ".join(terms)
            sql = (
                "SELECT seq, ts_rank_cd(content_tsv, q) AS score FROM events, to_tsquery('simple', %s) q "
                "WHERE resource_id = %s AND kind = 'message' AND content_tsv @@ q"
            )
            params: list[Any] = [query, resource_id]
            if thread_id is not None:
                sql += " AND thread_id = %s"
                params.append(thread_id)
            rows = await (
                await conn.execute(sql + " ORDER BY score DESC, seq DESC LIMIT %s", (*params, limit))
            ).fetchall()
            return [(r[0], float(r[1])) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def salient(
        self, resource_id: str, threshold: float, limit: int, thread_id: str | None
    ) -> list[tuple[str, Message]]:
        async def run(conn: Any) -> list[tuple[str, Message]]:
            sql = (
                f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = %s "
                "AND importance >= %s AND kind = 'message'"
            )
            params: list[Any] = [resource_id, threshold]
            if thread_id is not None:
                sql += " AND thread_id = %s"
                params.append(thread_id)
            rows = await (await conn.execute(sql + " ORDER BY seq DESC LIMIT %s", (*params, limit))).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def get_by_seq(self, resource_id: str, seqs: list[int]) -> list[tuple[str, Message]]:
        if not seqs:
            return []

        async def run(conn: Any) -> list[tuple[str, Message]]:
            rows = await (
                await conn.execute(
                    f"SELECT thread_id, {EVENT_COLUMNS} FROM events WHERE resource_id = %s AND seq = ANY(%s)",
                    (resource_id, list(seqs)),
                )
            ).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def neighbours(self, resource_id: str, thread_id: str, seq: int, before: int, after: int) -> list[Message]:
        async def run(conn: Any) -> list[Message]:
            base = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = %s AND thread_id = %s AND kind = 'message'"
            older = await (
                await conn.execute(
                    base + " AND seq < %s ORDER BY seq DESC LIMIT %s", (resource_id, thread_id, seq, before)
                )
            ).fetchall()
            newer = await (
                await conn.execute(base + " AND seq > %s ORDER BY seq LIMIT %s", (resource_id, thread_id, seq, after))
            ).fetchall()
            return [row_to_message(r) for r in [*reversed(older), *newer]]

        return await self._tx(run, write=False)

    async def set_importance(self, resource_id: str, message_id: str, value: float) -> bool:
        async def run(conn: Any) -> bool:
            cur = await conn.execute(
                "UPDATE events SET importance = %s WHERE resource_id = %s AND id = %s", (value, resource_id, message_id)
            )
            return cur.rowcount > 0

        return await self._tx(run)

    async def reindex(self, resource_id: str | None) -> int:
        async def run(conn: Any) -> int:
            where, params = ("WHERE resource_id = %s", (resource_id,)) if resource_id is not None else ("", ())
            await conn.execute(f"DELETE FROM embeddings {where}", params)
            await conn.execute(
                "INSERT INTO embedding_queue (resource_id, seq) SELECT resource_id, seq FROM events "
                f"{where or 'WHERE true'} AND kind = 'message' AND role IN ('user', 'assistant') AND content <> '' "
                "ON CONFLICT DO NOTHING",
                params,
            )
            return (await (await conn.execute(f"SELECT count(*) FROM embedding_queue {where}", params)).fetchone())[0]

        return await self._tx(run)
