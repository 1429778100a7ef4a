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

from .._dump import FACT_FIELDS, FACT_HISTORY_FIELDS, new_dump
from .._time import from_iso, to_iso, utcnow
from ..errors import Conflict, MissingExtra, SchemaTooNew, StorageError, UsageError
from ..messages import Message, Thread, WorkingMemory
from ._postgres_consolidation import _PostgresConsolidation
from ._postgres_recall import _PostgresRecall
from ._postgres_schema import MIGRATION_LOCK, MIGRATIONS
from ._rows import EVENT_COLUMNS, dumps, event_params, event_row, loads, row_to_message, row_to_thread
from .base import ResourceDump, WorkingMemoryUpdate

T = TypeVar("T")

_OUR_PARAMS = {"schema", "pool_size"}
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


class PostgresStore(_PostgresRecall, _PostgresConsolidation):
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
            params += [*event_params(m), i]

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
            return [row_to_thread(resource_id, r) for r in rows]

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
            facts = await (
                await conn.execute(
                    "SELECT category, key, value, source, created_at, updated_at FROM facts "
                    "WHERE resource_id = %s ORDER BY category, key",
                    (resource_id,),
                )
            ).fetchall()
            dump["facts"] = [dict(zip(FACT_FIELDS, (*r[:4], to_iso(r[4]), to_iso(r[5])), strict=True)) for r in facts]
            history = await (
                await conn.execute(
                    "SELECT category, key, value, source, valid_from, replaced_at FROM facts_history "
                    "WHERE resource_id = %s ORDER BY id",
                    (resource_id,),
                )
            ).fetchall()
            dump["fact_history"] = [
                dict(zip(FACT_HISTORY_FIELDS, (*r[:4], to_iso(r[4]), to_iso(r[5])), strict=True)) for r in history
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
            async with conn.cursor() as cur:
                facts = dump.get("facts") or []
                if facts:
                    await cur.executemany(
                        "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(resource_id, *(f[k] for k in FACT_FIELDS)) for f in facts],
                    )
                history = dump.get("fact_history") or []
                if history:
                    await cur.executemany(
                        "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(resource_id, *(h[k] for k in FACT_HISTORY_FIELDS)) for h in history],
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
                                _INSERT_EVENT, [event_row(m, resource_id, t["id"]) for m in t["_parsed"]]
                            )
                        except psycopg.errors.UniqueViolation as exc:
                            raise UsageError("export holds a message id twice") from exc

        await self._tx(run)
