"""Facts and consolidation primitives of the Postgres store.

A mixin of ``PostgresStore``: it uses the store's ``_read`` / ``_write`` helpers (``_tx`` for PostgreSQL) and keeps every call one transaction.
"""

from __future__ import annotations

from typing import Any

from .._time import to_iso, utcnow
from ..messages import Fact, Message
from ._rows import EVENT_COLUMNS, event_row, row_to_fact, row_to_message


class _PostgresConsolidation:
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
            created, updated = (old[3] if old else now), (now if changed else old[2])
            return row_to_fact(resource_id, (category, key, value, source, created, updated))

        return await self._tx(run)

    async def get_facts(self, resource_id: str, category: str | None) -> list[Fact]:
        async def run(conn: Any) -> list[Fact]:
            sql = "SELECT category, key, value, source, created_at, updated_at FROM facts WHERE resource_id = %s"
            params: list[Any] = [resource_id]
            if category is not None:
                sql += " AND category = %s"
                params.append(category)
            rows = await (await conn.execute(sql + " ORDER BY updated_at DESC, category, key", params)).fetchall()
            return [row_to_fact(resource_id, r) for r in rows]

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
            p = event_row(summary, resource_id, thread_id)
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
