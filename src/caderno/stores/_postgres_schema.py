"""PostgreSQL schema: the same named, append-only migrations as SQLite.

Every table carries ``resource_id`` first in its primary key, so the schema
can be distributed by ``resource_id`` (see docs/scaling.md). Migrations run
under a transaction-scoped advisory lock: ten processes starting at once
migrate exactly once.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        """
        CREATE TABLE resources (
            resource_id    text PRIMARY KEY,
            working_memory text,
            version        integer NOT NULL DEFAULT 0,
            created_at     timestamptz NOT NULL,
            updated_at     timestamptz NOT NULL
        );
        CREATE TABLE threads (
            resource_id text NOT NULL,
            thread_id   text NOT NULL,
            title       text,
            metadata    text,
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        );
        CREATE TABLE events (
            resource_id     text NOT NULL,
            seq             bigint GENERATED ALWAYS AS IDENTITY,
            id              text NOT NULL,
            thread_id       text NOT NULL,
            kind            text NOT NULL DEFAULT 'message',
            role            text NOT NULL,
            content         text NOT NULL,
            tool_calls      text,
            tool_call_id    text,
            name            text,
            importance      double precision,
            created_at      timestamptz NOT NULL,
            consolidated_at timestamptz,
            metadata        text,
            PRIMARY KEY (resource_id, seq),
            UNIQUE (resource_id, id),
            FOREIGN KEY (resource_id, thread_id) REFERENCES threads (resource_id, thread_id) ON DELETE CASCADE
        );
        CREATE INDEX events_thread ON events (resource_id, thread_id, seq);
        CREATE TABLE working_memory_log (
            resource_id text NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,
            version     integer NOT NULL,
            patch       text NOT NULL,
            source      text NOT NULL,
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, id)
        );
        """,
    ),
]

#: Key of the advisory lock that serialises migrations (any constant works).
MIGRATION_LOCK = 0x6361_6465_726E_6F  # "caderno"
