"""Migration "summary_spans": summaries name what they cover in positions, not in seq.

Before it, a summary event's ``metadata.covers`` was ``[first seq, last seq]``
of the messages it stands for. ``seq`` is one counter for the whole database,
and summaries reach clients (HTTP, CLI, MCP, the model's prompt), so a tenant
could read how much the others write. Now a summary holds
``metadata.span = [first position, last position]`` in its own thread
(``Message.position``: 1, 2, 3…, set by migration 0012_thread_positions for
older rows), and ``covers`` is removed.

For each summary event with a ``covers`` array, the span is the least and
the greatest position among its thread's messages whose seq lies within the
old range (a merged summary's range also holds the summaries it merged:
they have no position and count for nothing). A summary whose messages were
all deleted before this migration keeps no span (there is nothing left to
name; ``caderno.memory.consolidation.summary_span`` reads that as covering nothing)
and loses ``covers`` all the same, so no seq stays behind.

Each dialect's text runs as it stands inside the migration's transaction;
it only touches rows that still have ``covers``, so running it a second
time changes nothing. Registered by the schema files as their next
migration (SQLite: a list of statements; PostgreSQL: one script).
"""

from __future__ import annotations

#: The migration's name in ``schema_migrations`` (each schema file adds its number).
NAME = "summary_spans"

#: SQLite (3.33+ for UPDATE … FROM, the JSON1 functions built in): one statement each.
SQLITE: list[str] = [
    # Summaries with at least one message left in their old seq range.
    "UPDATE events SET metadata = json_remove(json_set(events.metadata, '$.span', json_array(p.lo, p.hi)), '$.covers') "
    "FROM (SELECT s.seq AS summary_seq, min(m.position) AS lo, max(m.position) AS hi "
    "FROM events AS s JOIN events AS m ON m.resource_id = s.resource_id AND m.thread_id = s.thread_id "
    "AND m.kind = 'message' AND m.position IS NOT NULL "
    "AND m.seq BETWEEN json_extract(s.metadata, '$.covers[0]') AND json_extract(s.metadata, '$.covers[1]') "
    "WHERE s.kind = 'summary' AND json_type(s.metadata, '$.covers') = 'array' "
    "GROUP BY s.seq) AS p "
    "WHERE events.seq = p.summary_seq",
    # Those whose messages are all gone: no span, and no seq left behind.
    "UPDATE events SET metadata = json_remove(metadata, '$.covers') "
    "WHERE kind = 'summary' AND json_type(metadata, '$.covers') IS NOT NULL",
]

#: PostgreSQL: ``events.metadata`` is text holding JSON, read and written back through jsonb.
POSTGRES = """
UPDATE events SET metadata = ((events.metadata::jsonb - 'covers')
        || jsonb_build_object('span', jsonb_build_array(p.lo, p.hi)))::text
    FROM (SELECT s.resource_id, s.seq, min(m.position) AS lo, max(m.position) AS hi
        FROM events AS s JOIN events AS m ON m.resource_id = s.resource_id AND m.thread_id = s.thread_id
            AND m.kind = 'message' AND m.position IS NOT NULL
            AND m.seq BETWEEN (s.metadata::jsonb #>> '{covers,0}')::bigint
                          AND (s.metadata::jsonb #>> '{covers,1}')::bigint
        WHERE s.kind = 'summary' AND jsonb_typeof(s.metadata::jsonb -> 'covers') = 'array'
        GROUP BY s.resource_id, s.seq) AS p
    WHERE events.resource_id = p.resource_id AND events.seq = p.seq;
UPDATE events SET metadata = (metadata::jsonb - 'covers')::text
    WHERE kind = 'summary' AND jsonb_typeof(metadata::jsonb -> 'covers') IS NOT NULL;
"""
