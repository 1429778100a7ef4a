"""PostgreSQL store: the same memory on a server database (extra ``postgres``).

psycopg 3 (async) with a connection pool. Connections are checked when taken
from the pool, so a server restart or a terminated backend costs one
reconnect, not an error storm. Every call is one transaction; a transaction
cut by a lost connection is rolled back by the server, so a turn is stored
whole or not at all.

Concurrency: appends lock their thread row (``SELECT … FOR UPDATE``), so two
writers of one thread queue and each turn's messages are contiguous;
working-memory updates lock the resource row for the read-merge-write.
Passwords never appear in errors or logs: URLs are shown redacted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._dump import new_dump
from .._time import from_iso, to_iso, utcnow
from ..errors import Conflict, MissingExtra, SchemaTooNew, StorageError, UsageError
from ..messages import Fact, Message, Thread, WorkingMemory
from ._postgres_schema import MIGRATION_LOCK, MIGRATIONS
from ._rows import EVENT_COLUMNS, dumps, event_params, loads, row_to_message
from .base import EmbeddingJob, ResourceDump, VectorRows, WorkingMemoryUpdate

T = TypeVar("T")

_OUR_PARAMS = {"schema", "pool_size"}
#: How far below the last seen change-feed id a vector refresh re-reads.
FEED_OVERLAP = 10_000
_INSERT_EVENT = (
    "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
    "importance, created_at, metadata) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING seq"
)
_LAST_EVENT_TIME = (
    "SELECT e.created_at FROM events e WHERE e.resource_id = t.resource_id AND e.thread_id = t.thread_id "
    "ORDER BY e.seq DESC LIMIT 1"
)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def _scrub(text: str, url: str) -> str:
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


def _params(m: Message, resource_id: str, thread_id: str) -> tuple[Any, ...]:
    """(resource_id, thread_id, *the event columns of ``_rows.event_params``)."""
    return (resource_id, thread_id, *event_params(m))


class PostgresStore:
    """A store in a PostgreSQL database (optionally in one schema of it).

    Args:
        url: ``postgresql://user[:password]@host:port/db``; ``?schema=NAME``
            and ``?pool_size=N`` are read here, other parameters go to libpq.
        schema: use (and create) this schema instead of ``public``.
        pool_size: most connections this process opens (default 10).
    """

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int | None = None) -> None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise MissingExtra("postgres", "psycopg and psycopg-pool") from None
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.schema = schema or query.get("schema")
        if self.schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", self.schema):
            raise UsageError(f"schema name {self.schema!r} must be lowercase letters, digits and '_'")
        self.pool_size = int(pool_size or query.get("pool_size") or 10)
        rest = urlencode({k: v for k, v in query.items() if k not in _OUR_PARAMS})
        self._conninfo = urlunsplit(parts._replace(scheme="postgresql", query=rest))
        self.url = redact(url)
        self._pool: Any = None
        self._open_lock = asyncio.Lock()

    # -- connections ---------------------------------------------------------------

    async def open(self) -> None:
        async with self._open_lock:
            if self._pool is not None:
                return
            from psycopg_pool import AsyncConnectionPool

            schema = self.schema

            async def configure(conn: Any) -> None:
                if schema:
                    await conn.execute(f'SET search_path TO "{schema}"')

            pool = AsyncConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self.pool_size,
                open=False,
                kwargs={"autocommit": True, "application_name": "caderno"},
                configure=configure,
                check=AsyncConnectionPool.check_connection,
                name="caderno",
            )
            try:
                await self._first_connect(pool)
                await self._migrate(pool)
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def _first_connect(self, pool: Any) -> None:
        import psycopg

        # Connect once directly for a clear, immediate error (the pool would
        # retry in the background instead).
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StorageError(
                f"cannot connect to PostgreSQL at {self.url}: {_scrub(str(exc), self._conninfo)}"
            ) from None
        try:
            if self.schema:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        finally:
            await conn.close()
        await pool.open(wait=True, timeout=30)

    async def _migrate(self, pool: Any) -> None:
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)"
            )
            applied = {r[0] for r in await (await conn.execute("SELECT name FROM schema_migrations")).fetchall()}
            unknown = applied - {name for name, _ in MIGRATIONS}
            if unknown:
                raise SchemaTooNew(
                    f"database has migrations this caderno does not know: {', '.join(sorted(unknown))}; "
                    "upgrade caderno instead of opening it with an older one"
                )
            for name, sql in MIGRATIONS:
                if name not in applied:
                    await conn.execute(sql)
                    await conn.execute("INSERT INTO schema_migrations VALUES (%s, now())", (name,))

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def _tx(self, fn: Callable[[Any], Awaitable[T]], *, write: bool = True, transaction: bool = True) -> T:
        """Run ``fn(conn)``, in one transaction unless it is a single statement.

        Writes run in their own task: a cancelled caller does not abandon a
        transaction halfway (it commits or rolls back on its own).
        """
        import psycopg

        if self._pool is None:
            await self.open()

        async def run() -> T:
            try:
                async with self._pool.connection() as conn:
                    if not transaction:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except psycopg.Error as exc:
                raise StorageError(f"PostgreSQL error on {self.url}: {_scrub(str(exc), self._conninfo)}") from exc

        if not write:
            return await run()
        return await asyncio.shield(asyncio.ensure_future(run()))

    # -- messages --------------------------------------------------------------------

    async def append(self, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        import psycopg

        # One statement, one round trip, atomic on its own. The advisory lock
        # (per thread) is joined into the insert's source rows, so it is held
        # before any sequence value is drawn: writers of one thread queue and
        # each turn gets consecutive places in the thread.
        rows_sql = ", ".join(
            ["(%s, %s, %s, %s, %s, %s, %s::double precision, %s::timestamptz, %s, %s::int)"] * len(messages)
        )
        sql = (
            "WITH r AS (INSERT INTO resources (resource_id, created_at, updated_at) VALUES (%s, %s, %s) "
            "  ON CONFLICT (resource_id) DO NOTHING), "
            "t AS (INSERT INTO threads (resource_id, thread_id, created_at) VALUES (%s, %s, %s) "
            "  ON CONFLICT (resource_id, thread_id) DO NOTHING), "
            "lk AS (SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)) AS held) "
            "INSERT INTO events (resource_id, thread_id, id, role, content, tool_calls, tool_call_id, name, "
            "importance, created_at, metadata) "
            "SELECT %s, %s, v.id, v.role, v.content, v.tool_calls, v.tool_call_id, v.name, v.importance, "
            "v.created_at, v.metadata "
            f"FROM (VALUES {rows_sql}) AS v (id, role, content, tool_calls, tool_call_id, name, importance, "
            "created_at, metadata, ord) CROSS JOIN lk ORDER BY v.ord RETURNING id, seq"
        )
        now = utcnow()
        params: list[Any] = [resource_id, now, now, resource_id, thread_id, messages[0].created_at or now]
        params += [f"{resource_id}\x1f{thread_id}", resource_id, thread_id]
        for i, m in enumerate(messages):
            params += [*_params(m, resource_id, thread_id)[2:], i]

        async def run(conn: Any) -> list[Message]:
            try:
                rows = await (await conn.execute(sql, params)).fetchall()
            except psycopg.errors.UniqueViolation as exc:
                raise UsageError(f"a message id is already stored for resource {resource_id!r}") from exc
            seqs = dict(rows)
            return [m._stamped(seq=seqs[m.id]) for m in messages]

        return await self._tx(run, transaction=False)

    async def read(self, resource_id: str, thread_id: str, limit: int | None) -> list[Message]:
        async def run(conn: Any) -> list[Message]:
            sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = %s AND thread_id = %s AND kind = 'message'"
            if limit is None:
                rows = await (await conn.execute(sql + " ORDER BY seq", (resource_id, thread_id))).fetchall()
            else:
                rows = await (
                    await conn.execute(sql + " ORDER BY seq DESC LIMIT %s", (resource_id, thread_id, limit))
                ).fetchall()
                rows.reverse()
            return [row_to_message(r) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def list_threads(self, resource_id: str) -> list[Thread]:
        async def run(conn: Any) -> list[Thread]:
            rows = await (
                await conn.execute(
                    "SELECT t.thread_id, t.title, t.metadata, t.created_at, "
                    f"coalesce(({_LAST_EVENT_TIME}), t.created_at) AS updated_at, "
                    "(SELECT count(*) FROM events e WHERE e.resource_id = t.resource_id "
                    " AND e.thread_id = t.thread_id AND e.kind = 'message') "
                    "FROM threads t WHERE t.resource_id = %s ORDER BY updated_at DESC, t.thread_id DESC",
                    (resource_id,),
                )
            ).fetchall()
            return [
                Thread(
                    id=r[0],
                    resource_id=resource_id,
                    title=r[1],
                    metadata=loads(r[2]),
                    created_at=r[3],
                    updated_at=r[4],
                    message_count=r[5],
                )
                for r in rows
            ]

        return await self._tx(run, write=False)

    async def delete_thread(self, resource_id: str, thread_id: str) -> bool:
        async def run(conn: Any) -> bool:
            await conn.execute("DELETE FROM events WHERE resource_id = %s AND thread_id = %s", (resource_id, thread_id))
            cur = await conn.execute(
                "DELETE FROM threads WHERE resource_id = %s AND thread_id = %s", (resource_id, thread_id)
            )
            return cur.rowcount > 0

        return await self._tx(run)

    async def erase_resource(self, resource_id: str) -> None:
        async def run(conn: Any) -> None:
            for table in (
                "events",
                "threads",
                "working_memory_log",
                "facts",
                "facts_history",
                "consolidation_log",
                "resources",
            ):
                await conn.execute(f"DELETE FROM {table} WHERE resource_id = %s", (resource_id,))

        await self._tx(run)

    # -- working memory ------------------------------------------------------------------

    async def get_working_memory(self, resource_id: str) -> WorkingMemory | None:
        async def run(conn: Any) -> WorkingMemory | None:
            row = await (
                await conn.execute(
                    "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = %s", (resource_id,)
                )
            ).fetchone()
            if row is None or row[0] is None:
                return None
            return WorkingMemory(resource_id=resource_id, data=loads(row[0]), version=row[1], updated_at=row[2])

        return await self._tx(run, write=False, transaction=False)

    async def update_working_memory(
        self,
        resource_id: str,
        update: WorkingMemoryUpdate,
        *,
        patch: dict[str, Any],
        expected_version: int | None,
        source: str,
    ) -> WorkingMemory:
        async def run(conn: Any) -> WorkingMemory:
            now = utcnow()
            await conn.execute(
                "INSERT INTO resources (resource_id, created_at, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (resource_id) DO NOTHING",
                (resource_id, now, now),
            )
            row = await (
                await conn.execute(
                    "SELECT working_memory, version FROM resources WHERE resource_id = %s FOR UPDATE", (resource_id,)
                )
            ).fetchone()
            current, version = loads(row[0]), row[1]
            if expected_version is not None and expected_version != version:
                raise Conflict(
                    f"working memory of {resource_id!r} is at version {version}, not {expected_version}",
                    resource_id=resource_id,
                    expected=expected_version,
                    actual=version,
                )
            data = update(current)
            await conn.execute(
                "UPDATE resources SET working_memory = %s, version = %s, updated_at = %s WHERE resource_id = %s",
                (dumps(data), version + 1, now, resource_id),
            )
            await conn.execute(
                "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                (resource_id, version + 1, dumps(patch), source, now),
            )
            return WorkingMemory(resource_id=resource_id, data=data, version=version + 1, updated_at=now)

        return await self._tx(run)

    # -- export / import -------------------------------------------------------------------

    async def export_resource(self, resource_id: str) -> ResourceDump:
        async def run(conn: Any) -> ResourceDump:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            dump = new_dump(resource_id)
            row = await (
                await conn.execute(
                    "SELECT working_memory, version, updated_at FROM resources WHERE resource_id = %s", (resource_id,)
                )
            ).fetchone()
            if row and row[0] is not None:
                dump["working_memory"] = {"data": loads(row[0]), "version": row[1], "updated_at": to_iso(row[2])}
            log = await (
                await conn.execute(
                    "SELECT version, patch, source, created_at FROM working_memory_log "
                    "WHERE resource_id = %s ORDER BY id",
                    (resource_id,),
                )
            ).fetchall()
            dump["working_memory_log"] = [
                {"version": v, "patch": loads(p), "source": s, "created_at": to_iso(c)} for v, p, s, c in log
            ]
            threads = await (
                await conn.execute(
                    "SELECT t.thread_id, t.title, t.metadata, t.created_at, "
                    f"coalesce(({_LAST_EVENT_TIME}), t.created_at) FROM threads t WHERE t.resource_id = %s "
                    "ORDER BY (SELECT min(seq) FROM events e WHERE e.resource_id = t.resource_id "
                    "AND e.thread_id = t.thread_id), t.thread_id",
                    (resource_id,),
                )
            ).fetchall()
            for tid, title, metadata, created, updated in threads:
                rows = await (
                    await conn.execute(
                        f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = %s AND thread_id = %s "
                        "AND kind = 'message' ORDER BY seq",
                        (resource_id, tid),
                    )
                ).fetchall()
                dump["threads"].append(
                    {
                        "id": tid,
                        "title": title,
                        "metadata": loads(metadata),
                        "created_at": to_iso(created),
                        "updated_at": to_iso(updated),
                        "messages": [row_to_message(r).to_dict() for r in rows],
                    }
                )
            return dump

        return await self._tx(run, write=False)

    async def import_resource(self, dump: ResourceDump) -> None:
        import psycopg

        resource_id = dump["resource_id"]

        async def run(conn: Any) -> None:
            exists = await (
                await conn.execute(
                    "SELECT 1 FROM resources WHERE resource_id = %s UNION ALL "
                    "SELECT 1 FROM threads WHERE resource_id = %s LIMIT 1",
                    (resource_id, resource_id),
                )
            ).fetchone()
            if exists:
                raise UsageError(f"resource {resource_id!r} already holds data; erase it before importing")
            now = utcnow()
            wm = dump.get("working_memory")
            await conn.execute(
                "INSERT INTO resources (resource_id, working_memory, version, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                (
                    resource_id,
                    dumps(wm["data"]) if wm else None,
                    int(wm["version"]) if wm else 0,
                    now,
                    from_iso(wm["updated_at"]) if wm and wm.get("updated_at") else now,
                ),
            )
            for e in dump.get("working_memory_log") or []:
                await conn.execute(
                    "INSERT INTO working_memory_log (resource_id, version, patch, source, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (resource_id, e["version"], dumps(e["patch"]), e["source"], from_iso(e["created_at"])),
                )
            for t in dump["threads"]:
                await conn.execute(
                    "INSERT INTO threads (resource_id, thread_id, title, metadata, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (
                        resource_id,
                        t["id"],
                        t.get("title"),
                        dumps(t.get("metadata")),
                        from_iso(t["created_at"]) if t.get("created_at") else now,
                    ),
                )
                if t["_parsed"]:
                    async with conn.cursor() as cur:
                        try:
                            await cur.executemany(
                                _INSERT_EVENT, [_params(m, resource_id, t["id"]) for m in t["_parsed"]]
                            )
                        except psycopg.errors.UniqueViolation as exc:
                            raise UsageError("export holds a message id twice") from exc

        await self._tx(run)

    # -- recall ----------------------------------------------------------------------

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

    # -- facts ------------------------------------------------------------------------

    async def upsert_fact(self, resource_id: str, category: str, key: str, value: str, source: str) -> Fact:
        async def run(conn: Any) -> Fact:
            now = utcnow()
            old = await (
                await conn.execute(
                    "SELECT value, source, updated_at, created_at FROM facts "
                    "WHERE resource_id = %s AND category = %s AND key = %s FOR UPDATE",
                    (resource_id, category, key),
                )
            ).fetchone()
            if old is not None and old[0] != value:
                await conn.execute(
                    "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (resource_id, category, key, old[0], old[1], old[2], now),
                )
            changed = old is None or old[0] != value or old[1] != source
            if changed:
                await conn.execute(
                    "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (resource_id, category, key) DO UPDATE SET "
                    "value = excluded.value, source = excluded.source, updated_at = excluded.updated_at",
                    (resource_id, category, key, value, source, old[3] if old else now, now),
                )
            return Fact(
                resource_id=resource_id,
                category=category,
                key=key,
                value=value,
                source=source,
                created_at=old[3] if old else now,
                updated_at=now if changed else old[2],
            )

        return await self._tx(run)

    async def get_facts(self, resource_id: str, category: str | None) -> list[Fact]:
        async def run(conn: Any) -> list[Fact]:
            sql = "SELECT category, key, value, source, created_at, updated_at FROM facts WHERE resource_id = %s"
            params: list[Any] = [resource_id]
            if category is not None:
                sql += " AND category = %s"
                params.append(category)
            rows = await (await conn.execute(sql + " ORDER BY updated_at DESC, category, key", params)).fetchall()
            return [
                Fact(
                    resource_id=resource_id,
                    category=r[0],
                    key=r[1],
                    value=r[2],
                    source=r[3],
                    created_at=r[4],
                    updated_at=r[5],
                )
                for r in rows
            ]

        return await self._tx(run, write=False, transaction=False)

    async def fact_history(self, resource_id: str, category: str, key: str) -> list[dict[str, Any]]:
        async def run(conn: Any) -> list[dict[str, Any]]:
            rows = await (
                await conn.execute(
                    "SELECT value, source, valid_from, replaced_at FROM facts_history "
                    "WHERE resource_id = %s AND category = %s AND key = %s ORDER BY id",
                    (resource_id, category, key),
                )
            ).fetchall()
            return [
                {"value": r[0], "source": r[1], "valid_from": to_iso(r[2]), "replaced_at": to_iso(r[3])} for r in rows
            ]

        return await self._tx(run, write=False, transaction=False)

    async def forget_fact(self, resource_id: str, category: str, key: str) -> bool:
        async def run(conn: Any) -> bool:
            cur = await conn.execute(
                "DELETE FROM facts WHERE resource_id = %s AND category = %s AND key = %s", (resource_id, category, key)
            )
            return cur.rowcount > 0

        return await self._tx(run)

    # -- consolidation ------------------------------------------------------------------

    async def consolidation_candidates(self, resource_id: str | None, min_chars: int) -> list[tuple[str, str]]:
        async def run(conn: Any) -> list[tuple[str, str]]:
            where, params = ("AND resource_id = %s", [resource_id]) if resource_id is not None else ("", [])
            rows = await (
                await conn.execute(
                    "SELECT resource_id, thread_id FROM events WHERE consolidated_at IS NULL "
                    f"{where} GROUP BY resource_id, thread_id HAVING sum(length(content)) > %s",
                    (*params, min_chars),
                )
            ).fetchall()
            return [(r[0], r[1]) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def claim_consolidation(self, resource_id: str, thread_id: str, lease_seconds: float) -> bool:
        async def run(conn: Any) -> bool:
            # SKIP LOCKED: a thread another worker is claiming right now is
            # simply not ours; the lease keeps it theirs afterwards.
            row = await (
                await conn.execute(
                    "SELECT 1 FROM threads WHERE resource_id = %s AND thread_id = %s "
                    "AND (consolidating_until IS NULL OR consolidating_until < now()) FOR UPDATE SKIP LOCKED",
                    (resource_id, thread_id),
                )
            ).fetchone()
            if row is None:
                return False
            await conn.execute(
                "UPDATE threads SET consolidating_until = now() + make_interval(secs => %s) "
                "WHERE resource_id = %s AND thread_id = %s",
                (lease_seconds, resource_id, thread_id),
            )
            return True

        return await self._tx(run)

    async def release_consolidation(self, resource_id: str, thread_id: str) -> None:
        async def run(conn: Any) -> None:
            await conn.execute(
                "UPDATE threads SET consolidating_until = NULL WHERE resource_id = %s AND thread_id = %s",
                (resource_id, thread_id),
            )

        await self._tx(run)

    async def unconsolidated(self, resource_id: str, thread_id: str) -> list[Message]:
        async def run(conn: Any) -> list[Message]:
            rows = await (
                await conn.execute(
                    f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = %s AND thread_id = %s "
                    "AND kind = 'message' AND consolidated_at IS NULL ORDER BY seq",
                    (resource_id, thread_id),
                )
            ).fetchall()
            return [row_to_message(r) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def summaries(self, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        async def run(conn: Any) -> list[tuple[Message, bool]]:
            rows = await (
                await conn.execute(
                    f"SELECT {EVENT_COLUMNS}, consolidated_at IS NOT NULL FROM events "
                    "WHERE resource_id = %s AND thread_id = %s AND kind = 'summary' ORDER BY seq",
                    (resource_id, thread_id),
                )
            ).fetchall()
            return [(row_to_message(r[:-1]), bool(r[-1])) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def write_summary(self, resource_id: str, thread_id: str, summary: Message, covered: list[int]) -> bool:
        async def run(conn: Any) -> bool:
            rows = await (
                await conn.execute(
                    "SELECT seq FROM events WHERE resource_id = %s AND thread_id = %s AND seq = ANY(%s) "
                    "AND consolidated_at IS NULL FOR UPDATE",
                    (resource_id, thread_id, list(covered)),
                )
            ).fetchall()
            if len(rows) != len(covered):
                return False  # someone summarised (part of) this range already
            p = _params(summary, resource_id, thread_id)
            await conn.execute(
                "INSERT INTO events (resource_id, thread_id, id, kind, role, content, tool_calls, tool_call_id, "
                "name, importance, created_at, metadata) VALUES (%s, %s, %s, 'summary', %s, %s, %s, %s, %s, %s, %s, %s)",
                p,
            )
            await conn.execute(
                "UPDATE events SET consolidated_at = now() WHERE resource_id = %s AND seq = ANY(%s)",
                (resource_id, list(covered)),
            )
            return True

        return await self._tx(run)

    async def fact_candidates(
        self, resource_id: str | None, min_importance: float, limit: int
    ) -> list[tuple[str, Message]]:
        async def run(conn: Any) -> list[tuple[str, Message]]:
            where, params = ("AND resource_id = %s", [resource_id]) if resource_id is not None else ("", [])
            rows = await (
                await conn.execute(
                    f"SELECT resource_id, {EVENT_COLUMNS} FROM events WHERE facts_extracted_at IS NULL "
                    f"AND role = 'user' AND kind = 'message' AND importance >= %s {where} ORDER BY seq LIMIT %s",
                    (min_importance, *params, limit),
                )
            ).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._tx(run, write=False, transaction=False)

    async def mark_facts_extracted(self, resource_id: str, seqs: list[int]) -> None:
        async def run(conn: Any) -> None:
            await conn.execute(
                "UPDATE events SET facts_extracted_at = now() WHERE resource_id = %s AND seq = ANY(%s)",
                (resource_id, list(seqs)),
            )

        if seqs:
            await self._tx(run)

    async def log_consolidation(
        self, resource_id: str, thread_id: str | None, step: str, outcome: str, detail: str | None
    ) -> None:
        async def run(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO consolidation_log (resource_id, thread_id, step, outcome, detail, created_at) "
                "VALUES (%s, %s, %s, %s, %s, now())",
                (resource_id, thread_id, step, outcome, detail),
            )

        await self._tx(run)

    async def consolidation_log(self, resource_id: str) -> list[dict[str, Any]]:
        async def run(conn: Any) -> list[dict[str, Any]]:
            rows = await (
                await conn.execute(
                    "SELECT thread_id, step, outcome, detail, created_at FROM consolidation_log "
                    "WHERE resource_id = %s ORDER BY id",
                    (resource_id,),
                )
            ).fetchall()
            keys = ("thread_id", "step", "outcome", "detail", "created_at")
            return [dict(zip(keys, (*r[:4], to_iso(r[4])), strict=True)) for r in rows]

        return await self._tx(run, write=False, transaction=False)
