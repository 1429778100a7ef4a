"""SQLite schema: its migrations, and how they run (the runner is ``_migrate``; aidaemon's import ``_sqlite_legacy``).

Each migration is written out as the text that ran — 0001's indentation
included — and never edited; a change is a new entry at the end. Statements
run one by one (a trigger's body holds ';'). ``PRAGMA user_version``
mirrors the number applied, so a database migrated by a newer caderno is
recognised and refused before anything is written.

aidaemon's database is imported only when asked for (``migrate``'s
``import_aidaemon_as``; ``_sqlite_legacy``): a normal migration never runs
it, and refuses a file that holds aidaemon's tables still to import
(``import_first``), with the command that imports them.
"""

from __future__ import annotations

import shlex
import sqlite3
from typing import Any

from ..core.clock import to_iso, utcnow
from ..core.errors import SchemaTooNew, StorageError
from ..core.validate import check_name
from . import _migrate, _sqlite_legacy
from ._sql import run_plan_sync

#: The table that records applied migrations, in SQLite's types.
LEDGER = "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"


#: Migration 0013's trigger bodies share this step, written once as the text
#: that ran (a literal of that migration alone; no later code uses it): the 2
#: messages before and the 2 after ``old`` in its thread, already indexed, are
#: queued to be indexed again, since ``old`` is part of their context.
_REQUEUE_NEIGHBOURS_0013 = """                INSERT OR IGNORE INTO fts_redo (seq)
                    SELECT seq FROM (SELECT seq FROM events WHERE resource_id = old.resource_id
                        AND thread_id = old.thread_id AND kind = 'message' AND seq < old.seq
                        ORDER BY seq DESC LIMIT 2)
                    WHERE seq <= (SELECT indexed_upto FROM fts_state)
                    UNION ALL
                    SELECT seq FROM (SELECT seq FROM events WHERE resource_id = old.resource_id
                        AND thread_id = old.thread_id AND kind = 'message' AND seq > old.seq
                        ORDER BY seq LIMIT 2)
                    WHERE seq <= (SELECT indexed_upto FROM fts_state);
"""


MIGRATIONS: list[_migrate.Migration] = [
    (
        "0001_core",
        [
            """
        CREATE TABLE resources (
            resource_id    TEXT PRIMARY KEY,
            working_memory TEXT,
            version        INTEGER NOT NULL DEFAULT 0,
            created_at     TEXT NOT NULL,
            updated_at     TEXT NOT NULL
        )""",
            """
        CREATE TABLE threads (
            resource_id TEXT NOT NULL,
            thread_id   TEXT NOT NULL,
            title       TEXT,
            metadata    TEXT,
            created_at  TEXT NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        ) WITHOUT ROWID""",
            """
        CREATE TABLE events (
            seq             INTEGER PRIMARY KEY AUTOINCREMENT,
            id              TEXT NOT NULL,
            resource_id     TEXT NOT NULL,
            thread_id       TEXT NOT NULL,
            kind            TEXT NOT NULL DEFAULT 'message',
            role            TEXT NOT NULL,
            content         TEXT NOT NULL,
            tool_calls      TEXT,
            tool_call_id    TEXT,
            name            TEXT,
            importance      REAL,
            created_at      TEXT NOT NULL,
            consolidated_at TEXT,
            metadata        TEXT,
            UNIQUE (resource_id, id),
            FOREIGN KEY (resource_id, thread_id) REFERENCES threads (resource_id, thread_id) ON DELETE CASCADE
        )""",
            """
        CREATE INDEX events_thread ON events (resource_id, thread_id, seq)""",
            """
        CREATE TABLE working_memory_log (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            resource_id TEXT NOT NULL,
            version     INTEGER NOT NULL,
            patch       TEXT NOT NULL,
            source      TEXT NOT NULL,
            created_at  TEXT NOT NULL
        )""",
            """
        CREATE INDEX working_memory_log_resource ON working_memory_log (resource_id, version)""",
        ],
    ),
    (
        "0002_recall",
        [
            # Full text over every event, kept in step by triggers (same transaction).
            "CREATE VIRTUAL TABLE events_fts USING fts5(content, content='events', content_rowid='seq', "
            "tokenize='unicode61 remove_diacritics 2')",
            "INSERT INTO events_fts(events_fts) VALUES ('rebuild')",
            # Durable embedding work: one row per message waiting for a vector.
            """CREATE TABLE embedding_queue (
                seq         INTEGER PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
                resource_id TEXT NOT NULL,
                attempts    INTEGER NOT NULL DEFAULT 0,
                not_before  TEXT NOT NULL DEFAULT '',
                error       TEXT
            )""",
            "CREATE INDEX embedding_queue_due ON embedding_queue (not_before, seq)",
            # id is a change feed: vector caches read rows with id > last seen.
            """CREATE TABLE embeddings (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                seq         INTEGER NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
                resource_id TEXT NOT NULL,
                model       TEXT NOT NULL,
                dim         INTEGER NOT NULL,
                vector      BLOB NOT NULL,
                UNIQUE (seq, model)
            )""",
            "CREATE INDEX embeddings_resource ON embeddings (resource_id, model, id)",
            "CREATE INDEX events_salient ON events (resource_id, seq) WHERE importance >= 0.8",
            """CREATE TRIGGER events_ai AFTER INSERT ON events BEGIN
                INSERT INTO events_fts (rowid, content) VALUES (new.seq, new.content);
                INSERT INTO embedding_queue (seq, resource_id) SELECT new.seq, new.resource_id
                    WHERE new.kind = 'message' AND new.role IN ('user', 'assistant') AND new.content <> '';
            END""",
            """CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
                INSERT INTO events_fts (events_fts, rowid, content) VALUES ('delete', old.seq, old.content);
            END""",
            """CREATE TRIGGER events_au AFTER UPDATE OF content ON events BEGIN
                INSERT INTO events_fts (events_fts, rowid, content) VALUES ('delete', old.seq, old.content);
                INSERT INTO events_fts (rowid, content) VALUES (new.seq, new.content);
            END""",
            "INSERT INTO embedding_queue (seq, resource_id) SELECT seq, resource_id FROM events "
            "WHERE kind = 'message' AND role IN ('user', 'assistant') AND content <> ''",
        ],
    ),
    (
        "0003_consolidation",
        [
            """CREATE TABLE facts (
                resource_id TEXT NOT NULL,
                category    TEXT NOT NULL,
                key         TEXT NOT NULL,
                value       TEXT NOT NULL,
                source      TEXT NOT NULL,
                created_at  TEXT NOT NULL,
                updated_at  TEXT NOT NULL,
                PRIMARY KEY (resource_id, category, key)
            ) WITHOUT ROWID""",
            """CREATE TABLE facts_history (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                resource_id TEXT NOT NULL,
                category    TEXT NOT NULL,
                key         TEXT NOT NULL,
                value       TEXT NOT NULL,
                source      TEXT NOT NULL,
                valid_from  TEXT NOT NULL,
                replaced_at TEXT NOT NULL
            )""",
            "CREATE INDEX facts_history_key ON facts_history (resource_id, category, key, id)",
            "ALTER TABLE threads ADD COLUMN consolidating_until TEXT",
            "ALTER TABLE events ADD COLUMN facts_extracted_at TEXT",
            """CREATE TABLE consolidation_log (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                resource_id TEXT NOT NULL,
                thread_id   TEXT,
                step        TEXT NOT NULL,
                outcome     TEXT NOT NULL,
                detail      TEXT,
                created_at  TEXT NOT NULL
            )""",
            "CREATE INDEX consolidation_log_resource ON consolidation_log (resource_id, id)",
            "CREATE INDEX events_fact_candidates ON events (resource_id, seq) "
            "WHERE facts_extracted_at IS NULL AND role = 'user' AND importance >= 0.7",
        ],
    ),
    (
        "0004_batch_port",
        [
            # Edits, pops and deletions of messages: who, when, why (and the old
            # text of an edit; a deletion keeps no text, so deleting erases).
            """CREATE TABLE message_log (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                resource_id TEXT NOT NULL,
                message_id  TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                action      TEXT NOT NULL,
                role        TEXT NOT NULL,
                old_content TEXT,
                actor       TEXT NOT NULL,
                reason      TEXT,
                created_at  TEXT NOT NULL
            )""",
            "CREATE INDEX message_log_resource ON message_log (resource_id, message_id, id)",
            # Which messages are embedded is decided once, in Python
            # (importance.embeddable); the append queues them itself.
            "DROP TRIGGER events_ai",
            """CREATE TRIGGER events_ai AFTER INSERT ON events BEGIN
                INSERT INTO events_fts (rowid, content) VALUES (new.seq, new.content);
            END""",
            # Thresholds come from one place: the fact threshold is a setting
            # (bound per query), the salient one is importance.SALIENT, written
            # here as the literal it was (a migration never changes after it
            # ran; tests/stores/test_policy_in_schema.py checks they agree).
            "DROP INDEX events_fact_candidates",
            "CREATE INDEX events_fact_candidates ON events (resource_id, seq) "
            "WHERE facts_extracted_at IS NULL AND role = 'user'",
            "DROP INDEX events_salient",
            "CREATE INDEX events_salient ON events (resource_id, seq) WHERE importance >= 0.8",
        ],
    ),
    (
        "0005_agent_state",
        [
            """CREATE TABLE scheduled_tasks (
                resource_id       TEXT NOT NULL,
                id                TEXT NOT NULL,
                name              TEXT NOT NULL,
                cron_expr         TEXT,
                original_schedule TEXT NOT NULL,
                prompt            TEXT NOT NULL,
                source            TEXT NOT NULL,
                is_oneshot        INTEGER NOT NULL,
                is_paused         INTEGER NOT NULL DEFAULT 0,
                is_trusted        INTEGER NOT NULL DEFAULT 0,
                timezone          TEXT NOT NULL,
                thread_id         TEXT NOT NULL,
                next_run_at       TEXT,
                last_run_at       TEXT,
                claimed_until     TEXT,
                created_at        TEXT NOT NULL,
                updated_at        TEXT NOT NULL,
                PRIMARY KEY (resource_id, id),
                UNIQUE (resource_id, name)
            ) WITHOUT ROWID""",
            "CREATE INDEX scheduled_tasks_due ON scheduled_tasks (next_run_at) WHERE is_paused = 0",
            """CREATE TABLE macros (
                resource_id     TEXT NOT NULL,
                trigger_tool    TEXT NOT NULL,
                trigger_pattern TEXT NOT NULL,
                next_tool       TEXT NOT NULL,
                next_args       TEXT NOT NULL,
                confidence      REAL NOT NULL,
                used_count      INTEGER NOT NULL DEFAULT 0,
                success_count   INTEGER NOT NULL DEFAULT 0,
                failure_count   INTEGER NOT NULL DEFAULT 0,
                created_at      TEXT NOT NULL,
                updated_at      TEXT NOT NULL,
                PRIMARY KEY (resource_id, trigger_tool, trigger_pattern, next_tool, next_args)
            ) WITHOUT ROWID""",
            """CREATE TABLE allowed_prefixes (
                resource_id TEXT NOT NULL,
                prefix      TEXT NOT NULL,
                created_at  TEXT NOT NULL,
                PRIMARY KEY (resource_id, prefix)
            ) WITHOUT ROWID""",
        ],
    ),
    (
        "0006_fts_in_batches",
        [
            # Full text is indexed in batches by the writer after appends, and
            # before any search (stores/sqlite.py catch_up_fts): one watermark
            # says what is indexed. Triggers maintain indexed rows only.
            "CREATE TABLE fts_state (id INTEGER PRIMARY KEY CHECK (id = 1), indexed_upto INTEGER NOT NULL)",
            "INSERT INTO fts_state (id, indexed_upto) SELECT 1, coalesce(max(seq), 0) FROM events",
            "DROP TRIGGER events_ai",
            "DROP TRIGGER events_ad",
            """CREATE TRIGGER events_ad AFTER DELETE ON events
                WHEN old.seq <= (SELECT indexed_upto FROM fts_state) BEGIN
                INSERT INTO events_fts (events_fts, rowid, content) VALUES ('delete', old.seq, old.content);
            END""",
            "DROP TRIGGER events_au",
            """CREATE TRIGGER events_au AFTER UPDATE OF content ON events
                WHEN old.seq <= (SELECT indexed_upto FROM fts_state) BEGIN
                INSERT INTO events_fts (events_fts, rowid, content) VALUES ('delete', old.seq, old.content);
                INSERT INTO events_fts (rowid, content) VALUES (new.seq, new.content);
            END""",
        ],
    ),
    (
        "0007_api_keys",
        [
            # Keys span resources, so this table is global; only a hash of
            # each token is kept (tokens are random, 256 bits: SHA-256 is enough).
            """CREATE TABLE api_keys (
                id         TEXT PRIMARY KEY,
                name       TEXT NOT NULL,
                token_hash TEXT NOT NULL UNIQUE,
                resources  TEXT NOT NULL,
                admin      INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                revoked_at TEXT
            )""",
        ],
    ),
    (
        "0008_items",
        [
            # Documents of the LangGraph store; the namespace path is joined
            # with '.', which LangGraph labels never contain, so a prefix of
            # the path is a prefix of the text.
            """CREATE TABLE items (
                resource_id TEXT NOT NULL,
                namespace   TEXT NOT NULL,
                key         TEXT NOT NULL,
                value       TEXT NOT NULL,
                created_at  TEXT NOT NULL,
                updated_at  TEXT NOT NULL,
                PRIMARY KEY (resource_id, namespace, key)
            ) WITHOUT ROWID""",
        ],
    ),
    # PostgreSQL's pgvector column (see _postgres_schema); SQLite keeps the
    # bytes and the in-process search, so nothing to do: the entry keeps the
    # migration names the same on both databases.
    ("0009_pgvector", []),
    (
        "0010_item_vectors",
        [
            # Semantic search of the LangGraph store: one row per item with
            # texts to embed. The put writes it in its own transaction (a new
            # put replaces it); the worker claims rows whose vectors are
            # missing and stores them only while updated_at is still the
            # item's, so a vector never describes an older value.
            """CREATE TABLE item_embeddings (
                resource_id TEXT NOT NULL,
                namespace   TEXT NOT NULL,
                key         TEXT NOT NULL,
                updated_at  TEXT NOT NULL,
                texts       TEXT NOT NULL,
                model       TEXT,
                dim         INTEGER,
                vectors     BLOB,
                attempts    INTEGER NOT NULL DEFAULT 0,
                not_before  TEXT NOT NULL,
                error       TEXT,
                PRIMARY KEY (resource_id, namespace, key),
                FOREIGN KEY (resource_id, namespace, key) REFERENCES items (resource_id, namespace, key)
                    ON DELETE CASCADE
            ) WITHOUT ROWID""",
            "CREATE INDEX item_embeddings_due ON item_embeddings (not_before) WHERE vectors IS NULL",
        ],
    ),
    (
        "0011_stemmed_full_text",
        [
            # Full text of stems (caderno.core.text.stems: English and Portuguese
            # Snowball), which FTS5 cannot make itself, so the index keeps its
            # own copy of the terms instead of reading events.content: a
            # deleted or edited row leaves the index by rowid alone. An edit
            # queues its row in fts_redo for the indexer to stem again.
            "DROP TRIGGER events_ad",
            "DROP TRIGGER events_au",
            "DROP TABLE events_fts",
            "CREATE VIRTUAL TABLE events_fts USING fts5(terms, tokenize='unicode61 remove_diacritics 2')",
            "CREATE TABLE fts_redo (seq INTEGER PRIMARY KEY)",
            """CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
                DELETE FROM events_fts WHERE rowid = old.seq;
                DELETE FROM fts_redo WHERE seq = old.seq;
            END""",
            """CREATE TRIGGER events_au AFTER UPDATE OF content ON events
                WHEN old.seq <= (SELECT indexed_upto FROM fts_state) BEGIN
                DELETE FROM events_fts WHERE rowid = old.seq;
                INSERT OR IGNORE INTO fts_redo (seq) VALUES (old.seq);
            END""",
            # Everything is indexed again, by the first search or batch.
            "UPDATE fts_state SET indexed_upto = 0",
        ],
    ),
    (
        "0012_thread_positions",
        [
            # What a client sees is a message's place in its thread, never
            # seq (one counter for the whole database: it tells a tenant how
            # much the others write). threads.last_position is the highest
            # position ever given, so a deleted message's is never reused.
            "ALTER TABLE events ADD COLUMN position INTEGER",
            "ALTER TABLE threads ADD COLUMN last_position INTEGER NOT NULL DEFAULT 0",
            "UPDATE events SET position = p.n FROM (SELECT seq, row_number() OVER "
            "(PARTITION BY resource_id, thread_id ORDER BY seq) AS n FROM events WHERE kind = 'message') AS p "
            "WHERE events.seq = p.seq",
            "UPDATE threads SET last_position = coalesce((SELECT max(e.position) FROM events e "
            "WHERE e.resource_id = threads.resource_id AND e.thread_id = threads.thread_id), 0)",
            "CREATE UNIQUE INDEX events_position ON events (resource_id, thread_id, position) "
            "WHERE position IS NOT NULL",
        ],
    ),
    (
        "0013_index_time_context",
        [
            # Each message is indexed with its thread neighbours' words and
            # its day as words, in columns of their own (stores/_sqlite_fts.py).
            # An edit or a deletion changes its neighbours' context: the
            # triggers queue them again (fts_redo), in the same transaction,
            # and a search skips what is queued until it is indexed again.
            # The numbers are caderno.core.text's CONTEXT_BEFORE / CONTEXT_AFTER
            # (2 and 2) as they were when this migration was written.
            "DROP TRIGGER events_ad",
            "DROP TRIGGER events_au",
            "DROP TABLE events_fts",
            "CREATE VIRTUAL TABLE events_fts USING fts5(terms, context, day, tokenize='unicode61 remove_diacritics 2')",
            "DELETE FROM fts_redo",
            """CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
                DELETE FROM events_fts WHERE rowid = old.seq;
                DELETE FROM fts_redo WHERE seq = old.seq;
"""
            + _REQUEUE_NEIGHBOURS_0013
            + "            END",
            """CREATE TRIGGER events_au AFTER UPDATE OF content ON events BEGIN
                DELETE FROM events_fts WHERE rowid = old.seq;
                INSERT OR IGNORE INTO fts_redo (seq) SELECT old.seq WHERE old.seq <= (SELECT indexed_upto FROM fts_state);
"""
            + _REQUEUE_NEIGHBOURS_0013
            + "            END",
            # Every message is indexed again, by the first search or batch.
            "UPDATE fts_state SET indexed_upto = 0",
        ],
    ),
    (
        "0014_summary_spans",
        [
            # A summary names what it covers in positions of its thread
            # (metadata.span), no longer in seq (metadata.covers): seq is one
            # counter for the whole database, and summaries reach clients, so
            # a tenant could read how much the others write. The span is the
            # least and greatest position among the thread's messages in the
            # old seq range (a merged summary's range also holds the
            # summaries it merged: they have no position). A summary whose
            # messages were all deleted keeps no span and loses covers all
            # the same. Only rows that still have covers are touched.
            "UPDATE events SET metadata = json_remove(json_set(events.metadata, '$.span', json_array(p.lo, p.hi)), '$.covers') "
            "FROM (SELECT s.seq AS summary_seq, min(m.position) AS lo, max(m.position) AS hi "
            "FROM events AS s JOIN events AS m ON m.resource_id = s.resource_id AND m.thread_id = s.thread_id "
            "AND m.kind = 'message' AND m.position IS NOT NULL "
            "AND m.seq BETWEEN json_extract(s.metadata, '$.covers[0]') AND json_extract(s.metadata, '$.covers[1]') "
            "WHERE s.kind = 'summary' AND json_type(s.metadata, '$.covers') = 'array' "
            "GROUP BY s.seq) AS p "
            "WHERE events.seq = p.summary_seq",
            "UPDATE events SET metadata = json_remove(metadata, '$.covers') "
            "WHERE kind = 'summary' AND json_type(metadata, '$.covers') IS NOT NULL",
        ],
    ),
    # PostgreSQL only (cheaper context triggers); the name keeps both lists equal.
    ("0015_cheaper_context_triggers", []),
    (
        "0016_notebook_and_turns",
        [
            # The notebook in the database, so every process serving a
            # resource shows the same one: each target's entries as a JSON
            # array, with a version for compare-and-swap writes.
            """CREATE TABLE notebooks (
                resource_id TEXT NOT NULL,
                target      TEXT NOT NULL CHECK (target IN ('memory', 'user')),
                entries     TEXT NOT NULL,
                version     INTEGER NOT NULL,
                updated_at  TEXT NOT NULL,
                PRIMARY KEY (resource_id, target)
            ) WITHOUT ROWID""",
            # A conversation's frozen notebook blocks (a JSON object by target), taken at its first load.
            """CREATE TABLE notebook_snapshots (
                resource_id TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                blocks      TEXT NOT NULL,
                taken_at    TEXT NOT NULL,
                PRIMARY KEY (resource_id, thread_id)
            ) WITHOUT ROWID""",
            # One turn at a time per thread: a lease with an expiry, so a killed process releases it.
            """CREATE TABLE turn_leases (
                resource_id TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                holder      TEXT NOT NULL,
                expires_at  TEXT NOT NULL,
                PRIMARY KEY (resource_id, thread_id)
            ) WITHOUT ROWID""",
        ],
    ),
    (
        "0017_lean_appends",
        [
            # Every index on the rows an append inserts is one more page in
            # the WAL, fsynced at each commit; this one bought no read.
            # Positions are unique by construction (reserved on the thread's
            # row in the inserting transaction), and the one read by position,
            # a page of a thread before a position, walks events_thread back
            # from the newest message instead of sorting the thread's whole
            # prefix by seq.
            "DROP INDEX events_position",
        ],
    ),
    (
        "0018_queue_without_an_index_on_new_jobs",
        [
            # An append queues its messages at the end of embedding_queue
            # (their seqs are the highest); indexing them too cost a page of
            # the WAL per append. Only taken jobs — leased, failed, or queued
            # behind others (not_before '0': due at once) — are indexed now,
            # and every new job (not_before '') lies above the highest taken
            # one, so a claim reads new jobs from there, in seq order, and
            # taken ones by when they are due (stores/_sqlite_plans.py).
            "DROP INDEX embedding_queue_due",
            "UPDATE embedding_queue SET not_before = '0' WHERE not_before = '' "
            "AND seq < (SELECT coalesce(max(seq), 0) FROM embedding_queue WHERE not_before <> '')",
            "CREATE INDEX embedding_queue_taken ON embedding_queue (not_before, seq) WHERE not_before <> ''",
            "CREATE INDEX embedding_queue_taken_seq ON embedding_queue (seq) WHERE not_before <> ''",
            # A job queued below another (a reindex, an import) is taken at once.
            """CREATE TRIGGER embedding_queue_behind AFTER INSERT ON embedding_queue
                WHEN new.not_before = '' AND new.seq < (SELECT max(seq) FROM embedding_queue) BEGIN
                UPDATE embedding_queue SET not_before = '0' WHERE seq = new.seq;
            END""",
        ],
    ),
    (
        "0019_embedding_codes",
        [
            # Each vector's quantized form, as the vector cache holds it, so
            # a cache's first load reads half the bytes and skips quantizing.
            # A table of its own, not a column: a 1.5 KB vector and its codes
            # in one row fill a page each, and the load would walk the
            # vectors' pages to reach the codes. Deleted with its vector.
            """CREATE TABLE embedding_codes (
                id          INTEGER PRIMARY KEY REFERENCES embeddings (id) ON DELETE CASCADE,
                resource_id TEXT NOT NULL,
                model       TEXT NOT NULL,
                seq         INTEGER NOT NULL,
                codes       BLOB NOT NULL
            )""",
            "CREATE INDEX embedding_codes_resource ON embedding_codes (resource_id, model, id)",
        ],
    ),
    (
        "0020_lease_tokens",
        [
            # Each lease names its holder (a fresh id per claim), so renewing
            # it, writing under it and giving it back touch only a lease that
            # is still ours: a worker stalled past its lease while another
            # took the work over stores nothing and takes nothing back.
            "ALTER TABLE threads ADD COLUMN consolidating_by TEXT",
            "ALTER TABLE scheduled_tasks ADD COLUMN claimed_by TEXT",
            # A running batch renews its claim by token every few seconds.
            "CREATE INDEX scheduled_tasks_claimed ON scheduled_tasks (claimed_by) WHERE claimed_by IS NOT NULL",
        ],
    ),
    (
        "0021_sparse_terms",
        [
            # Each message's learned-sparse term weights (caderno.embeddings.splade),
            # computed with its vector and deleted with it (an edit, a delete, an
            # erase, a reindex). ``model`` is the sparse encoder's name: weights of
            # another encoder are never compared. Read by seq, for the candidates
            # recall reranks, never scanned.
            """CREATE TABLE sparse_terms (
                id          INTEGER PRIMARY KEY REFERENCES embeddings (id) ON DELETE CASCADE,
                resource_id TEXT NOT NULL,
                model       TEXT NOT NULL,
                seq         INTEGER NOT NULL,
                terms       BLOB NOT NULL
            )""",
            "CREATE INDEX sparse_terms_seq ON sparse_terms (resource_id, seq)",
        ],
    ),
    (
        # A page of a LangGraph store search walks the newest items first (PostgreSQL's
        # 0022 also keeps each document parsed; here filters read the text).
        "0022_item_documents",
        ["CREATE INDEX items_recent ON items (resource_id, updated_at DESC, namespace, key)"],
    ),
    (
        "0023_positions_without_the_thread_row",
        [
            # An append no longer writes its thread's row (a page of the WAL
            # each turn): its messages take the positions after the newest
            # positioned message of the thread, or after last_position when
            # that is higher. last_position now keeps only what no message
            # shows any more — the position of a deleted message that was its
            # thread's newest — raised here, in the deleting transaction, so
            # a position is still never given twice. The values 0012 and the
            # appends before this migration left already cover their threads.
            """CREATE TRIGGER events_keep_last_position AFTER DELETE ON events
                WHEN old.position IS NOT NULL BEGIN
                UPDATE threads SET last_position = old.position WHERE resource_id = old.resource_id
                    AND thread_id = old.thread_id AND last_position < old.position;
            END""",
        ],
    ),
    (
        "0024_embedding_watermark",
        [
            # An append no longer writes a queue row for each message to embed
            # (a page of the WAL each turn): it marks the message (embed = 1),
            # and a marked message above the watermark is a new job. A claim
            # reads them from the watermark up (a range of seq: seqs are given
            # in commit order, one writer at a time), moves those it takes
            # into embedding_queue as leased jobs and raises the watermark past
            # what it read; the queue keeps every other job as before (leased,
            # failed, queued again by an edit, a reindex or an import). Every
            # job queued before this migration is a queue row already.
            "ALTER TABLE events ADD COLUMN embed INTEGER",
            "CREATE TABLE embedding_state (id INTEGER PRIMARY KEY CHECK (id = 1), claimed_upto INTEGER NOT NULL)",
            "INSERT INTO embedding_state (id, claimed_upto) SELECT 1, coalesce(max(seq), 0) FROM events",
        ],
    ),
    (
        "0025_fact_candidates_at_the_default_threshold",
        [
            # Every user message entered events_fact_candidates (a page of the
            # WAL each turn), though fact extraction reads only those at or
            # above its threshold. The index keeps those at or above the
            # default threshold (0.7 when this was written: FACT_INDEX_FLOOR
            # in stores/capabilities/consolidation.py, which a test checks
            # against the setting); a lower threshold reads events itself.
            "DROP INDEX events_fact_candidates",
            "CREATE INDEX events_fact_candidates ON events (resource_id, seq) "
            "WHERE facts_extracted_at IS NULL AND role = 'user' AND importance >= 0.7",
        ],
    ),
    (
        "0026_seqs_given_in_blocks",
        [
            # AUTOINCREMENT wrote sqlite_sequence at every append (a page of
            # the WAL each turn). An append now gives its messages the seqs
            # after the highest ever given — the newest row's, or deleted_upto,
            # raised here when a deletion takes rows above it — and moves
            # sqlite_sequence ahead a block at a time (stores/_sqlite_plans.py):
            # AUTOINCREMENT writes it only for a seq above it, so the appends
            # in between write nothing there, and every other insert still
            # takes a seq above all. Seqs stay in commit order, never given twice.
            "CREATE TABLE events_seq (id INTEGER PRIMARY KEY CHECK (id = 1), deleted_upto INTEGER NOT NULL)",
            "INSERT INTO events_seq (id, deleted_upto) "
            "SELECT 1, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)",
            """CREATE TRIGGER events_keep_seq AFTER DELETE ON events
                WHEN old.seq > (SELECT deleted_upto FROM events_seq) BEGIN
                UPDATE events_seq SET deleted_upto = old.seq;
            END""",
        ],
    ),
    # PostgreSQL only (its context triggers for inserts replaced); the name keeps both lists equal.
    ("0027_context_in_the_append", []),
]


def migrate(conn: sqlite3.Connection, *, import_aidaemon_as: str | None = None) -> _sqlite_legacy.Imported | None:
    """Bring the schema up to date, in one ``BEGIN IMMEDIATE`` transaction; safe to run concurrently.

    ``import_aidaemon_as``: import aidaemon's tables into this resource in the
    same transaction (its clashing tables moved aside before the migrations,
    its rows imported after them; ``_sqlite_legacy`` says which shapes are
    accepted), and return what moved. Without it, a file that holds
    aidaemon's tables still to import is refused (``import_first``), nothing
    written: the migrations would fail on a name aidaemon holds, or leave its
    rows unread.
    """

    def execute(q: Any) -> list[Any]:
        return conn.execute(q.sql, q.params).fetchall()

    if import_aidaemon_as is not None:
        check_name(import_aidaemon_as, "legacy_resource_id")  # the resource it creates
    conn.execute("BEGIN IMMEDIATE")
    try:
        ours = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()
        # Without schema_migrations the file is not caderno's, and its
        # user_version (if any) is another program's number, not ours.
        version = conn.execute("PRAGMA user_version").fetchone()[0] if ours else 0
        if version > len(MIGRATIONS):
            raise SchemaTooNew(
                f"database schema version {version} is newer than this caderno understands "
                f"({len(MIGRATIONS)}); upgrade caderno instead of opening it with an older one"
            )
        done = run_plan_sync(_migrate.applied(MIGRATIONS, LEDGER), execute)
        if import_aidaemon_as is None:
            if found := _sqlite_legacy.waiting(conn, MIGRATIONS, done):
                raise import_first(conn.execute("PRAGMA database_list").fetchone()[2], found)
        else:
            _sqlite_legacy.rename_clashes(conn, MIGRATIONS, done)
        if run_plan_sync(_migrate.apply(MIGRATIONS, done, to_iso(utcnow())), execute):
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        imported = None if import_aidaemon_as is None else _sqlite_legacy.import_legacy(conn, import_aidaemon_as)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return imported


def import_first(path: Any, found: list[str]) -> StorageError:
    """The refusal of a normal open of a file that holds aidaemon's tables still to import: it names the command."""
    where = shlex.quote(str(path))
    return StorageError(
        f"{path} holds aidaemon's tables not imported yet ({', '.join(found)}); caderno opens it once they are: "
        f"run `caderno import-from aidaemon {where} --resource NAME` (or open it with import_from='aidaemon', "
        "legacy_resource_id=NAME); nothing was changed"
    )


#: Tables aidaemon's database may hold (see ``_sqlite_legacy``).
LEGACY_TABLES = frozenset({"messages", "facts", "macros", "scheduled_tasks", "terminal_allowed_prefixes", "events"})


#: The columns that make an ``events`` table aidaemon's (renamed
#: ``legacy_events`` and read as history by its import); any other ``events``
#: table belongs to another application, whose file caderno must not change.
AIDAEMON_EVENTS_COLUMNS = frozenset({"session_id", "event_type", "data"})


def check_foreign(
    path: Any,
    tables: set[str],
    version: int,
    applied: set[str] | None,
    events_columns: set[str] | None = None,
    aidaemon_waiting: list[str] | None = None,
) -> None:
    """Refuse a database caderno must not change: a newer caderno's, or another application's; and one
    that holds aidaemon's tables still to import (``aidaemon_waiting``, when the open does not import them).

    Called with what a read-only look found, before anything is written.
    ``events_columns``: the columns of its ``events`` table, if any.
    """
    known = {name for name, _ in MIGRATIONS}
    if applied is not None:
        if applied - known or version > len(MIGRATIONS):
            raise SchemaTooNew(
                f"{path} was migrated by a newer caderno (schema {version}, migrations "
                f"{', '.join(sorted(applied - known)) or 'known'}); upgrade caderno instead of opening it"
            )
        if aidaemon_waiting:
            raise import_first(path, aidaemon_waiting)
        return
    own = {t for t in tables if not t.startswith("sqlite_")}
    if "events" in own and not (events_columns or set()) >= AIDAEMON_EVENTS_COLUMNS:
        # Even beside aidaemon's tables: moving them would rename this
        # table, and there is no layout to read it by.
        raise StorageError(
            f"{path} is another application's SQLite database (its events table is neither caderno's nor "
            "aidaemon's); caderno will not change it"
        )
    if own and not own & LEGACY_TABLES:
        raise StorageError(
            f"{path} is another application's SQLite database (tables: {', '.join(sorted(own)[:8])}); "
            "caderno will not change it"
        )
    if aidaemon_waiting:
        raise import_first(path, aidaemon_waiting)
