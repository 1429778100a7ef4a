"""Facts and consolidation primitives of the SQLite store.

A mixin of ``SQLiteStore``: it uses the store's ``_read`` / ``_write``
helpers and keeps every call one transaction.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from .._time import to_iso, utcnow
from ..messages import Fact, Message
from ._rows import EVENT_COLUMNS, event_params, row_to_fact, row_to_message


class _SQLiteConsolidation:
    async def upsert_fact(self, resource_id: str, category: str, key: str, value: str, source: str) -> Fact:
        def run(conn: sqlite3.Connection) -> Fact:
            now = to_iso(utcnow())
            old = conn.execute(
                "SELECT value, source, updated_at, created_at FROM facts WHERE resource_id = ? AND category = ? AND key = ?",
                (resource_id, category, key),
            ).fetchone()
            if old is not None and old[0] != value:
                conn.execute(
                    "INSERT INTO facts_history (resource_id, category, key, value, source, valid_from, replaced_at) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (resource_id, category, key, old[0], old[1], old[2], now),
                )
            created = old[3] if old else now
            if old is None or old[0] != value or old[1] != source:
                conn.execute(
                    "INSERT INTO facts (resource_id, category, key, value, source, created_at, updated_at) "
                    "VALUES (?,?,?,?,?,?,?) ON CONFLICT (resource_id, category, key) DO UPDATE SET "
                    "value = excluded.value, source = excluded.source, updated_at = excluded.updated_at",
                    (resource_id, category, key, value, source, created, now),
                )
            updated = now if old is None or old[0] != value or old[1] != source else old[2]
            return row_to_fact(resource_id, (category, key, value, source, created, updated))

        return await self._write(run)

    async def get_facts(self, resource_id: str, category: str | None) -> list[Fact]:
        def run(conn: sqlite3.Connection) -> list[Fact]:
            sql = "SELECT category, key, value, source, created_at, updated_at FROM facts WHERE resource_id = ?"
            params: list[Any] = [resource_id]
            if category is not None:
                sql += " AND category = ?"
                params.append(category)
            rows = conn.execute(sql + " ORDER BY updated_at DESC, category, key", params).fetchall()
            return [row_to_fact(resource_id, r) for r in rows]

        return await self._read(run)

    async def fact_history(self, resource_id: str, category: str, key: str) -> list[dict[str, Any]]:
        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT value, source, valid_from, replaced_at FROM facts_history "
                "WHERE resource_id = ? AND category = ? AND key = ? ORDER BY id",
                (resource_id, category, key),
            ).fetchall()
            return [{"value": r[0], "source": r[1], "valid_from": r[2], "replaced_at": r[3]} for r in rows]

        return await self._read(run)

    async def forget_fact(self, resource_id: str, category: str, key: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM facts WHERE resource_id = ? AND category = ? AND key = ?", (resource_id, category, key)
            )
            return cur.rowcount > 0

        return await self._write(run)

    # -- consolidation ------------------------------------------------------------------

    async def consolidation_candidates(self, resource_id: str | None, min_chars: int) -> list[tuple[str, str]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            where, params = ("AND resource_id = ?", [resource_id]) if resource_id is not None else ("", [])
            rows = conn.execute(
                "SELECT resource_id, thread_id FROM events WHERE consolidated_at IS NULL "
                f"{where} GROUP BY resource_id, thread_id HAVING sum(length(content)) > ?",
                (*params, min_chars),
            ).fetchall()
            return [(r[0], r[1]) for r in rows]

        return await self._read(run)

    async def claim_consolidation(self, resource_id: str, thread_id: str, lease_seconds: float) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            now = utcnow()
            cur = conn.execute(
                "UPDATE threads SET consolidating_until = ? WHERE resource_id = ? AND thread_id = ? "
                "AND (consolidating_until IS NULL OR consolidating_until < ?)",
                (to_iso(now + timedelta(seconds=lease_seconds)), resource_id, thread_id, to_iso(now)),
            )
            return cur.rowcount > 0

        return await self._write(run)

    async def release_consolidation(self, resource_id: str, thread_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE threads SET consolidating_until = NULL WHERE resource_id = ? AND thread_id = ?",
                (resource_id, thread_id),
            )

        await self._write(run)

    async def unconsolidated(self, resource_id: str, thread_id: str) -> list[Message]:
        def run(conn: sqlite3.Connection) -> list[Message]:
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE resource_id = ? AND thread_id = ? "
                "AND kind = 'message' AND consolidated_at IS NULL ORDER BY seq",
                (resource_id, thread_id),
            ).fetchall()
            return [row_to_message(r) for r in rows]

        return await self._read(run)

    async def summaries(self, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        def run(conn: sqlite3.Connection) -> list[tuple[Message, bool]]:
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS}, consolidated_at IS NOT NULL FROM events "
                "WHERE resource_id = ? AND thread_id = ? AND kind = 'summary' ORDER BY seq",
                (resource_id, thread_id),
            ).fetchall()
            return [(row_to_message(r[:-1]), bool(r[-1])) for r in rows]

        return await self._read(run)

    async def write_summary(self, resource_id: str, thread_id: str, summary: Message, covered: list[int]) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            marks = ",".join("?" * len(covered))
            free = conn.execute(
                f"SELECT count(*) FROM events WHERE resource_id = ? AND thread_id = ? AND seq IN ({marks}) "
                "AND consolidated_at IS NULL",
                (resource_id, thread_id, *covered),
            ).fetchone()[0]
            if free != len(covered):
                return False  # someone summarised (part of) this range already
            conn.execute(
                "INSERT INTO events (resource_id, thread_id, id, kind, role, content, tool_calls, tool_call_id, "
                "name, importance, created_at, metadata) VALUES (?,?,?,'summary',?,?,?,?,?,?,?,?)",
                (resource_id, thread_id, *event_params(summary)),
            )
            conn.execute(
                f"UPDATE events SET consolidated_at = ? WHERE resource_id = ? AND seq IN ({marks})",
                (to_iso(utcnow()), resource_id, *covered),
            )
            return True

        return await self._write(run, lambda _: self.cache.discard(resource_id, thread_id))

    async def fact_candidates(
        self, resource_id: str | None, min_importance: float, limit: int
    ) -> list[tuple[str, Message]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, Message]]:
            where, params = ("AND resource_id = ?", [resource_id]) if resource_id is not None else ("", [])
            rows = conn.execute(
                f"SELECT resource_id, {EVENT_COLUMNS} FROM events WHERE facts_extracted_at IS NULL "
                f"AND role = 'user' AND kind = 'message' AND importance >= {float(min_importance)!r} {where} "
                "ORDER BY seq LIMIT ?",
                (*params, limit),
            ).fetchall()
            return [(r[0], row_to_message(r[1:])) for r in rows]

        return await self._read(run)

    async def mark_facts_extracted(self, resource_id: str, seqs: list[int]) -> None:
        def run(conn: sqlite3.Connection) -> None:
            marks = ",".join("?" * len(seqs))
            conn.execute(
                f"UPDATE events SET facts_extracted_at = ? WHERE resource_id = ? AND seq IN ({marks})",
                (to_iso(utcnow()), resource_id, *seqs),
            )

        if seqs:
            await self._write(run)

    async def log_consolidation(
        self, resource_id: str, thread_id: str | None, step: str, outcome: str, detail: str | None
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO consolidation_log (resource_id, thread_id, step, outcome, detail, created_at) "
                "VALUES (?,?,?,?,?,?)",
                (resource_id, thread_id, step, outcome, detail, to_iso(utcnow())),
            )

        await self._write(run)

    async def consolidation_log(self, resource_id: str) -> list[dict[str, Any]]:
        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT thread_id, step, outcome, detail, created_at FROM consolidation_log "
                "WHERE resource_id = ? ORDER BY id",
                (resource_id,),
            ).fetchall()
            keys = ("thread_id", "step", "outcome", "detail", "created_at")
            return [dict(zip(keys, r, strict=True)) for r in rows]

        return await self._read(run)
