"""PostgreSQL schema: the same named, append-only migrations as SQLite (the runner is ``_migrate``).

Every table carries ``resource_id`` first in its primary key, so the schema
can be distributed by ``resource_id`` (see docs/guides/scaling.md). Each migration
is one script, written out as the text that ran and never edited; a change
is a new entry at the end. Migrations run under a transaction-scoped
advisory lock: ten processes starting at once migrate exactly once.
"""

from __future__ import annotations

from . import _migrate

#: The table that records applied migrations, in PostgreSQL's types.
LEDGER = "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)"

#: The pgvector column, added when the ``vector`` extension is installed in
#: the database (by migration 0009, or on a later open if an administrator
#: installs the extension afterwards). The column has no fixed dimension
#: (models differ); each dimension gets its own partial HNSW index on
#: ``vec::vector(dim)`` (see ``hnsw_index``). The extension's schema is
#: named, so a store in another schema finds the type.
VECTOR_COLUMN = """
DO $$
DECLARE ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF ext_schema IS NOT NULL THEN
        EXECUTE format('ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS vec %I.vector', ext_schema);
        -- rows written without a pgvector value (before the extension, or by
        -- an older caderno): found at open through this small index, and filled
        CREATE INDEX IF NOT EXISTS embeddings_vec_missing ON embeddings (id) WHERE vec IS NULL;
    END IF;
END $$;
"""


#: Migration 0013's three trigger functions end with this step, written once
#: as the text that ran (a literal of that migration alone): the changed
#: messages and the 2 before and 2 after each, in their thread, get their
#: search_tsv again. ``c`` is the changed messages, as each function selects them.
_REFRESH_CONTEXT_0013 = """            t AS (
                SELECT c.resource_id, c.seq FROM c
                UNION
                SELECT n.resource_id, n.seq FROM c CROSS JOIN LATERAL (
                    (SELECT b.resource_id, b.seq FROM events b WHERE b.resource_id = c.resource_id
                        AND b.thread_id = c.thread_id AND b.kind = 'message' AND b.seq < c.seq
                        ORDER BY b.seq DESC LIMIT 2)
                    UNION ALL
                    (SELECT a.resource_id, a.seq FROM events a WHERE a.resource_id = c.resource_id
                        AND a.thread_id = c.thread_id AND a.kind = 'message' AND a.seq > c.seq
                        ORDER BY a.seq LIMIT 2)) n
            )
            UPDATE events e SET search_tsv = caderno_search_tsv(e.resource_id, e.thread_id, e.seq, e.content, e.created_at)
                FROM t WHERE e.resource_id = t.resource_id AND e.seq = t.seq;
            RETURN NULL;
"""


MIGRATIONS: list[_migrate.Migration] = [
    (
        "0001_core",
        [
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
        """
        ],
    ),
    (
        "0002_recall",
        [
            """
        ALTER TABLE events ADD COLUMN content_tsv tsvector
            GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED;
        CREATE INDEX events_fts ON events USING gin (content_tsv);
        CREATE INDEX events_salient ON events (resource_id, seq) WHERE importance >= 0.8;
        CREATE TABLE embedding_queue (
            resource_id text NOT NULL,
            seq         bigint NOT NULL,
            attempts    integer NOT NULL DEFAULT 0,
            not_before  timestamptz NOT NULL DEFAULT '-infinity',
            error       text,
            PRIMARY KEY (resource_id, seq),
            FOREIGN KEY (resource_id, seq) REFERENCES events (resource_id, seq) ON DELETE CASCADE
        );
        CREATE INDEX embedding_queue_due ON embedding_queue (not_before);
        CREATE TABLE embeddings (
            resource_id text NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,
            seq         bigint NOT NULL,
            model       text NOT NULL,
            dim         integer NOT NULL,
            vector      bytea NOT NULL,
            PRIMARY KEY (resource_id, id),
            UNIQUE (resource_id, seq, model),
            FOREIGN KEY (resource_id, seq) REFERENCES events (resource_id, seq) ON DELETE CASCADE
        );
        CREATE INDEX embeddings_resource ON embeddings (resource_id, model, id);
        CREATE FUNCTION caderno_enqueue_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.kind = 'message' AND NEW.role IN ('user', 'assistant') AND NEW.content <> '' THEN
                INSERT INTO embedding_queue (resource_id, seq) VALUES (NEW.resource_id, NEW.seq);
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER events_enqueue_embedding AFTER INSERT ON events
            FOR EACH ROW EXECUTE FUNCTION caderno_enqueue_embedding();
        INSERT INTO embedding_queue (resource_id, seq) SELECT resource_id, seq FROM events
            WHERE kind = 'message' AND role IN ('user', 'assistant') AND content <> '';
        """
        ],
    ),
    (
        "0003_consolidation",
        [
            """
        CREATE TABLE facts (
            resource_id text NOT NULL,
            category    text NOT NULL,
            key         text NOT NULL,
            value       text NOT NULL,
            source      text NOT NULL,
            created_at  timestamptz NOT NULL,
            updated_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, category, key)
        );
        CREATE TABLE facts_history (
            resource_id text NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,
            category    text NOT NULL,
            key         text NOT NULL,
            value       text NOT NULL,
            source      text NOT NULL,
            valid_from  timestamptz NOT NULL,
            replaced_at timestamptz NOT NULL,
            PRIMARY KEY (resource_id, id)
        );
        CREATE INDEX facts_history_key ON facts_history (resource_id, category, key, id);
        ALTER TABLE threads ADD COLUMN consolidating_until timestamptz;
        ALTER TABLE events ADD COLUMN facts_extracted_at timestamptz;
        CREATE TABLE consolidation_log (
            resource_id text NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,
            thread_id   text,
            step        text NOT NULL,
            outcome     text NOT NULL,
            detail      text,
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, id)
        );
        CREATE INDEX events_fact_candidates ON events (resource_id, seq)
            WHERE facts_extracted_at IS NULL AND role = 'user' AND importance >= 0.7;
        """
        ],
    ),
    (
        # The salient threshold is importance.SALIENT as it was, written as the
        # literal (a migration never changes after it ran, whatever later
        # becomes of the constant; tests/stores/test_policy_in_schema.py checks
        # they agree).
        "0004_batch_port",
        [
            """
        CREATE TABLE message_log (
            resource_id text NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,
            message_id  text NOT NULL,
            thread_id   text NOT NULL,
            action      text NOT NULL,
            role        text NOT NULL,
            old_content text,
            actor       text NOT NULL,
            reason      text,
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, id)
        );
        CREATE INDEX message_log_message ON message_log (resource_id, message_id, id);
        -- Which messages are embedded is decided once, in Python; the append queues them.
        DROP TRIGGER events_enqueue_embedding ON events;
        DROP FUNCTION caderno_enqueue_embedding();
        -- Thresholds come from one place (the fact threshold is bound per query).
        DROP INDEX events_fact_candidates;
        CREATE INDEX events_fact_candidates ON events (resource_id, seq)
            WHERE facts_extracted_at IS NULL AND role = 'user';
        DROP INDEX events_salient;
        CREATE INDEX events_salient ON events (resource_id, seq) WHERE importance >= 0.8;
        """
        ],
    ),
    (
        "0005_agent_state",
        [
            """
        CREATE TABLE scheduled_tasks (
            resource_id       text NOT NULL,
            id                text NOT NULL,
            name              text NOT NULL,
            cron_expr         text,
            original_schedule text NOT NULL,
            prompt            text NOT NULL,
            source            text NOT NULL,
            is_oneshot        boolean NOT NULL,
            is_paused         boolean NOT NULL DEFAULT false,
            is_trusted        boolean NOT NULL DEFAULT false,
            timezone          text NOT NULL,
            thread_id         text NOT NULL,
            next_run_at       timestamptz,
            last_run_at       timestamptz,
            claimed_until     timestamptz,
            created_at        timestamptz NOT NULL,
            updated_at        timestamptz NOT NULL,
            PRIMARY KEY (resource_id, id),
            UNIQUE (resource_id, name)
        );
        CREATE INDEX scheduled_tasks_due ON scheduled_tasks (next_run_at) WHERE NOT is_paused;
        CREATE TABLE macros (
            resource_id     text NOT NULL,
            trigger_tool    text NOT NULL,
            trigger_pattern text NOT NULL,
            next_tool       text NOT NULL,
            next_args       text NOT NULL,
            confidence      double precision NOT NULL,
            used_count      integer NOT NULL DEFAULT 0,
            success_count   integer NOT NULL DEFAULT 0,
            failure_count   integer NOT NULL DEFAULT 0,
            created_at      timestamptz NOT NULL,
            updated_at      timestamptz NOT NULL,
            PRIMARY KEY (resource_id, trigger_tool, trigger_pattern, next_tool, next_args)
        );
        CREATE TABLE allowed_prefixes (
            resource_id text NOT NULL,
            prefix      text NOT NULL,
            created_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, prefix)
        );
        """
        ],
    ),
    (
        # SQLite indexes full text in batches (a watermark and new triggers);
        # PostgreSQL's tsvector is a generated column, always in step. The
        # name is kept so both schemas list the same migrations.
        "0006_fts_in_batches",
        ["SELECT 1"],
    ),
    (
        "0007_api_keys",
        [
            """
        CREATE TABLE api_keys (
            id         text PRIMARY KEY,
            name       text NOT NULL,
            token_hash text NOT NULL UNIQUE,
            resources  text NOT NULL,
            admin      boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL,
            revoked_at timestamptz
        );
        """
        ],
    ),
    (
        "0008_items",
        [
            """
        CREATE TABLE items (
            resource_id text NOT NULL,
            namespace   text NOT NULL,
            key         text NOT NULL,
            value       text NOT NULL,
            created_at  timestamptz NOT NULL,
            updated_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, namespace, key)
        );
        """
        ],
    ),
    # A no-op without the vector extension; with it, embeddings get a
    # pgvector column beside the bytes. VECTOR_COLUMN runs the same text at
    # every open (the extension may come later); this is it as 0009 ran.
    (
        "0009_pgvector",
        [
            """
DO $$
DECLARE ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF ext_schema IS NOT NULL THEN
        EXECUTE format('ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS vec %I.vector', ext_schema);
        -- rows written without a pgvector value (before the extension, or by
        -- an older caderno): found at open through this small index, and filled
        CREATE INDEX IF NOT EXISTS embeddings_vec_missing ON embeddings (id) WHERE vec IS NULL;
    END IF;
END $$;
"""
        ],
    ),
    (
        # Semantic search of the LangGraph store (see _sqlite_schema for the why).
        "0010_item_vectors",
        [
            """
        CREATE TABLE item_embeddings (
            resource_id text NOT NULL,
            namespace   text NOT NULL,
            key         text NOT NULL,
            updated_at  timestamptz NOT NULL,
            texts       text NOT NULL,
            model       text,
            dim         integer,
            vectors     bytea,
            attempts    integer NOT NULL DEFAULT 0,
            not_before  timestamptz NOT NULL,
            error       text,
            PRIMARY KEY (resource_id, namespace, key),
            FOREIGN KEY (resource_id, namespace, key) REFERENCES items (resource_id, namespace, key)
                ON DELETE CASCADE
        );
        CREATE INDEX item_embeddings_due ON item_embeddings (not_before) WHERE vectors IS NULL;
        """
        ],
    ),
    (
        # Stemmed full text: every message under its English and its
        # Portuguese stems, accents folded first (the rule of
        # caderno.core.text.stems, with the database's own Snowball configurations).
        "0011_stemmed_full_text",
        [
            """
        ALTER TABLE events DROP COLUMN content_tsv;
        ALTER TABLE events ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS (
            to_tsvector('english', translate(lower(content), 'áàâãäåāéèêëēíìîïīóòôõöøōúùûüūçñýÿ', 'aaaaaaaeeeeeiiiiiooooooouuuuucnyy')) || to_tsvector('portuguese', translate(lower(content), 'áàâãäåāéèêëēíìîïīóòôõöøōúùûüūçñýÿ', 'aaaaaaaeeeeeiiiiiooooooouuuuucnyy'))
        ) STORED;
        CREATE INDEX events_fts ON events USING gin (content_tsv);
        """
        ],
    ),
    (
        # A client sees positions per thread, never seq (see _sqlite_schema).
        "0012_thread_positions",
        [
            """
        ALTER TABLE events ADD COLUMN position bigint;
        ALTER TABLE threads ADD COLUMN last_position bigint NOT NULL DEFAULT 0;
        UPDATE events SET position = p.n FROM (SELECT seq, row_number() OVER
            (PARTITION BY resource_id, thread_id ORDER BY seq) AS n FROM events WHERE kind = 'message') AS p
            WHERE events.seq = p.seq;
        UPDATE threads SET last_position = coalesce((SELECT max(e.position) FROM events e
            WHERE e.resource_id = threads.resource_id AND e.thread_id = threads.thread_id), 0);
        CREATE UNIQUE INDEX events_position ON events (resource_id, thread_id, position)
            WHERE position IS NOT NULL;
        """
        ],
    ),
    (
        # Index-time context (see caderno.core.text and stores/_sqlite_fts.py): a
        # message's full text is its own words (weight A), the words of the 2
        # messages before and the 2 after it in its thread (B) and its UTC day
        # as words in English and Portuguese (C). A generated column cannot
        # read other rows, so search_tsv is a plain column kept by statement
        # triggers in the same transaction as the write: an insert indexes
        # the new messages and the 2 before each; an edit or a deletion the
        # messages around it. The 2s are CONTEXT_BEFORE / CONTEXT_AFTER as
        # they were when this migration was written.
        "0013_index_time_context",
        [
            f"""
        ALTER TABLE events DROP COLUMN content_tsv;
        ALTER TABLE events ADD COLUMN search_tsv tsvector;
        CREATE FUNCTION caderno_terms(body text) RETURNS tsvector LANGUAGE sql IMMUTABLE AS $$
            SELECT to_tsvector('english', translate(lower(body), 'áàâãäåāéèêëēíìîïīóòôõöøōúùûüūçñýÿ', 'aaaaaaaeeeeeiiiiiooooooouuuuucnyy')) || to_tsvector('portuguese', translate(lower(body), 'áàâãäåāéèêëēíìîïīóòôõöøōúùûüūçñýÿ', 'aaaaaaaeeeeeiiiiiooooooouuuuucnyy'))
        $$;
        CREATE FUNCTION caderno_date_words(at timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
            SELECT to_char(at AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY FMDD "de" ')
                || (ARRAY['janeiro', 'fevereiro', 'março', 'abril', 'maio', 'junho', 'julho', 'agosto',
                          'setembro', 'outubro', 'novembro', 'dezembro'])[extract(month FROM at AT TIME ZONE 'UTC')::int]
                || to_char(at AT TIME ZONE 'UTC', ' "de" YYYY')
        $$;
        CREATE FUNCTION caderno_search_tsv(rid text, tid text, s bigint, body text, at timestamptz)
            RETURNS tsvector LANGUAGE sql STABLE AS $$
            SELECT setweight(caderno_terms(body), 'A')
                || setweight(caderno_terms(coalesce((SELECT string_agg(n.content, ' ') FROM (
                    (SELECT b.content FROM events b WHERE b.resource_id = rid AND b.thread_id = tid
                        AND b.kind = 'message' AND b.seq < s ORDER BY b.seq DESC LIMIT 2)
                    UNION ALL
                    (SELECT a.content FROM events a WHERE a.resource_id = rid AND a.thread_id = tid
                        AND a.kind = 'message' AND a.seq > s ORDER BY a.seq LIMIT 2)) n), '')), 'B')
                || setweight(caderno_terms(caderno_date_words(at)), 'C')
        $$;
        UPDATE events SET search_tsv = caderno_search_tsv(resource_id, thread_id, seq, content, created_at)
            WHERE kind = 'message';
        CREATE INDEX events_fts ON events USING gin (search_tsv);
        CREATE FUNCTION caderno_context_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
            WITH c AS (SELECT resource_id, thread_id, seq FROM changed_rows WHERE kind = 'message'),
{_REFRESH_CONTEXT_0013}        END $$;
        CREATE FUNCTION caderno_context_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- Only a change of content changes a context; this also ends the
            -- recursion of the UPDATE below (it changes search_tsv alone).
            IF NOT EXISTS (SELECT 1 FROM changed_rows n JOIN old_rows o ON o.resource_id = n.resource_id
                           AND o.seq = n.seq WHERE n.content IS DISTINCT FROM o.content) THEN
                RETURN NULL;
            END IF;
            
            WITH c AS (SELECT n.resource_id, n.thread_id, n.seq FROM changed_rows n JOIN old_rows o ON o.resource_id = n.resource_id AND o.seq = n.seq WHERE n.kind = 'message' AND n.content IS DISTINCT FROM o.content),
{_REFRESH_CONTEXT_0013}        END $$;
        CREATE FUNCTION caderno_context_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            
            WITH c AS (SELECT resource_id, thread_id, seq FROM old_rows WHERE kind = 'message'),
{_REFRESH_CONTEXT_0013}        END $$;
        CREATE TRIGGER events_context_insert AFTER INSERT ON events REFERENCING NEW TABLE AS changed_rows
            FOR EACH STATEMENT EXECUTE FUNCTION caderno_context_inserted();
        CREATE TRIGGER events_context_update AFTER UPDATE ON events
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS changed_rows
            FOR EACH STATEMENT EXECUTE FUNCTION caderno_context_updated();
        CREATE TRIGGER events_context_delete AFTER DELETE ON events REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION caderno_context_deleted();
        """
        ],
    ),
    # Summaries name what they cover in positions, not in seq (see
    # _sqlite_schema's 0014). events.metadata is text holding JSON, read and
    # written back through jsonb.
    (
        "0014_summary_spans",
        [
            """
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
        ],
    ),
    (
        # Cheaper index-time context (the same index as 0013, kept as exactly).
        # 0013 cost appends 2.5x: each new row was inserted, then updated by
        # the statement trigger, along with its neighbours, and every
        # caderno_search_tsv call planned its SQL body again and parsed the
        # text of the 4 neighbours again. Now: caderno_search_tsv is PL/pgSQL
        # (its query plan is cached for the session) and takes a neighbour's
        # words from the weight-A part of its stored search_tsv (ts_filter)
        # instead of parsing its content; a new message gets its search_tsv
        # in a BEFORE INSERT row trigger (written once); the statement
        # trigger after an insert re-indexes only the 2 messages before each
        # new one (and, should a row be inserted before existing ones, the 2
        # after it); an edit is a row trigger that fires only when content,
        # kind, thread or date change (never on its own search_tsv update:
        # no recursion), re-indexes the edited row first, then its neighbours.
        "0015_cheaper_context_triggers",
        [
            """
        CREATE OR REPLACE FUNCTION caderno_search_tsv(rid text, tid text, s bigint, body text, at timestamptz)
            RETURNS tsvector LANGUAGE plpgsql STABLE AS $$
        DECLARE near tsvector[];
        BEGIN
            SELECT array_agg(coalesce(ts_filter(n.search_tsv, '{a}'), caderno_terms(n.content))) INTO near FROM (
                (SELECT b.search_tsv, b.content FROM events b WHERE b.resource_id = rid AND b.thread_id = tid
                    AND b.kind = 'message' AND b.seq < s ORDER BY b.seq DESC LIMIT 2)
                UNION ALL
                (SELECT a.search_tsv, a.content FROM events a WHERE a.resource_id = rid AND a.thread_id = tid
                    AND a.kind = 'message' AND a.seq > s ORDER BY a.seq LIMIT 2)) n;
            RETURN setweight(caderno_terms(body), 'A')
                || setweight(coalesce(near[1], '') || coalesce(near[2], '') || coalesce(near[3], '') || coalesce(near[4], ''), 'B')
                || setweight(caderno_terms(caderno_date_words(at)), 'C');
        END $$;
        DROP TRIGGER events_context_insert ON events;
        DROP TRIGGER events_context_update ON events;
        CREATE FUNCTION caderno_context_new_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.kind = 'message' THEN
                NEW.search_tsv := caderno_search_tsv(NEW.resource_id, NEW.thread_id, NEW.seq, NEW.content, NEW.created_at);
            END IF;
            RETURN NEW;
        END $$;
        CREATE FUNCTION caderno_context_appended() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- The "after" side leaves out the statement's own rows with one
            -- hashed EXCEPT: a NOT EXISTS per row against the transition
            -- table (which has no index) made a 10,000-message append
            -- quadratic (minutes).
            WITH c AS (SELECT resource_id, thread_id, seq FROM new_rows WHERE kind = 'message'),
            t AS (
                SELECT n.resource_id, n.seq FROM c CROSS JOIN LATERAL (
                    SELECT b.resource_id, b.seq FROM events b WHERE b.resource_id = c.resource_id
                        AND b.thread_id = c.thread_id AND b.kind = 'message' AND b.seq < c.seq
                        ORDER BY b.seq DESC LIMIT 2) n
                UNION
                (SELECT n.resource_id, n.seq FROM c CROSS JOIN LATERAL (
                    SELECT a.resource_id, a.seq FROM events a WHERE a.resource_id = c.resource_id
                        AND a.thread_id = c.thread_id AND a.kind = 'message' AND a.seq > c.seq
                        ORDER BY a.seq LIMIT 2) n
                 EXCEPT SELECT resource_id, seq FROM new_rows)
            )
            UPDATE events e SET search_tsv = caderno_search_tsv(e.resource_id, e.thread_id, e.seq, e.content, e.created_at)
                FROM t WHERE e.resource_id = t.resource_id AND e.seq = t.seq;
            RETURN NULL;
        END $$;
        CREATE TRIGGER events_context_new_row BEFORE INSERT ON events
            FOR EACH ROW EXECUTE FUNCTION caderno_context_new_row();
        CREATE TRIGGER events_context_insert AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION caderno_context_appended();
        CREATE FUNCTION caderno_context_edited() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- The edited row first: its neighbours read its words from its search_tsv.
            UPDATE events e SET search_tsv = CASE WHEN e.kind = 'message' THEN
                    caderno_search_tsv(e.resource_id, e.thread_id, e.seq, e.content, e.created_at) END
                WHERE e.resource_id = NEW.resource_id AND e.seq = NEW.seq;
            WITH c(resource_id, thread_id, seq) AS (VALUES (OLD.resource_id, OLD.thread_id, OLD.seq), (NEW.resource_id, NEW.thread_id, NEW.seq)),
            t AS (
                SELECT DISTINCT n.resource_id, n.seq FROM c CROSS JOIN LATERAL (
                    (SELECT b.resource_id, b.seq FROM events b WHERE b.resource_id = c.resource_id
                        AND b.thread_id = c.thread_id AND b.kind = 'message' AND b.seq < c.seq
                        ORDER BY b.seq DESC LIMIT 2)
                    UNION ALL
                    (SELECT a.resource_id, a.seq FROM events a WHERE a.resource_id = c.resource_id
                        AND a.thread_id = c.thread_id AND a.kind = 'message' AND a.seq > c.seq
                        ORDER BY a.seq LIMIT 2)) n
            )
            UPDATE events e SET search_tsv = CASE WHEN e.kind = 'message' THEN
                    caderno_search_tsv(e.resource_id, e.thread_id, e.seq, e.content, e.created_at) END
                FROM t WHERE e.resource_id = t.resource_id AND e.seq = t.seq;
            RETURN NULL;
        END $$;
        CREATE TRIGGER events_context_update AFTER UPDATE OF content, kind, thread_id, created_at ON events
            FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.kind IS DISTINCT FROM NEW.kind
                OR OLD.thread_id IS DISTINCT FROM NEW.thread_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
            EXECUTE FUNCTION caderno_context_edited();
        """
        ],
    ),
    (
        # The notebook in the database, each conversation's frozen snapshot
        # of it, and one turn at a time per thread (see the SQLite list).
        "0016_notebook_and_turns",
        [
            """
        CREATE TABLE notebooks (
            resource_id text NOT NULL,
            target      text NOT NULL CHECK (target IN ('memory', 'user')),
            entries     text NOT NULL,
            version     integer NOT NULL,
            updated_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, target)
        );
        CREATE TABLE notebook_snapshots (
            resource_id text NOT NULL,
            thread_id   text NOT NULL,
            blocks      text NOT NULL,
            taken_at    timestamptz NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        );
        CREATE TABLE turn_leases (
            resource_id text NOT NULL,
            thread_id   text NOT NULL,
            holder      text NOT NULL,
            expires_at  timestamptz NOT NULL,
            PRIMARY KEY (resource_id, thread_id)
        );
        """
        ],
    ),
    # SQLite only (the pages an append writes to its WAL); the names keep both lists equal.
    ("0017_lean_appends", []),
    ("0018_queue_without_an_index_on_new_jobs", []),
    (
        "0019_embedding_codes",
        [
            """
        CREATE TABLE embedding_codes (
            resource_id text NOT NULL,
            id          bigint NOT NULL,
            model       text NOT NULL,
            seq         bigint NOT NULL,
            codes       bytea NOT NULL,
            PRIMARY KEY (resource_id, id),
            FOREIGN KEY (resource_id, id) REFERENCES embeddings (resource_id, id) ON DELETE CASCADE
        );
        CREATE INDEX embedding_codes_resource ON embedding_codes (resource_id, model, id);
        """
        ],
    ),
    (
        # Each lease names its holder, a fresh id per claim (see the SQLite list).
        "0020_lease_tokens",
        [
            """
        ALTER TABLE threads ADD COLUMN consolidating_by text;
        ALTER TABLE scheduled_tasks ADD COLUMN claimed_by text;
        CREATE INDEX scheduled_tasks_claimed ON scheduled_tasks (claimed_by) WHERE claimed_by IS NOT NULL;
        """
        ],
    ),
    (
        # Each message's learned-sparse term weights, deleted with its vector (see the SQLite list).
        "0021_sparse_terms",
        [
            """
        CREATE TABLE sparse_terms (
            resource_id text NOT NULL,
            id          bigint NOT NULL,
            model       text NOT NULL,
            seq         bigint NOT NULL,
            terms       bytea NOT NULL,
            PRIMARY KEY (resource_id, id),
            FOREIGN KEY (resource_id, id) REFERENCES embeddings (resource_id, id) ON DELETE CASCADE
        );
        CREATE INDEX sparse_terms_seq ON sparse_terms (resource_id, seq);
        """
        ],
    ),
    (
        # Each item's document parsed once, when written: the store's filters
        # read ``doc`` (jsonb operators) instead of parsing ``value`` per row and
        # per search. ``value`` stays the text that was written, so a read
        # returns the document exactly as put (key order, 1e16 as a float).
        # A document jsonb refuses (NaN, a \u0000 escape: an older caderno
        # stored them) keeps a NULL ``doc``, and no filter matches it.
        # Namespaces and keys compare byte by byte (collation "C", as on
        # SQLite): the namespaces under a prefix are a range of the primary
        # key (in a language's collation they are not), and items sort alike
        # on both databases. items_recent: a page of a search walks the
        # newest items first.
        "0022_item_documents",
        [
            """
        ALTER TABLE items ADD COLUMN doc jsonb;
        ALTER TABLE items ALTER COLUMN namespace TYPE text COLLATE "C", ALTER COLUMN key TYPE text COLLATE "C";
        ALTER TABLE item_embeddings
            ALTER COLUMN namespace TYPE text COLLATE "C", ALTER COLUMN key TYPE text COLLATE "C";
        CREATE INDEX items_recent ON items (resource_id, updated_at DESC, namespace, key);
        DO $$
        BEGIN
            UPDATE items SET doc = value::jsonb;
        EXCEPTION WHEN data_exception THEN
            DECLARE r record;
            BEGIN
                FOR r IN SELECT resource_id, namespace, key FROM items LOOP
                    BEGIN
                        UPDATE items SET doc = value::jsonb
                        WHERE resource_id = r.resource_id AND namespace = r.namespace AND key = r.key;
                    EXCEPTION WHEN data_exception THEN
                        NULL;
                    END;
                END LOOP;
            END;
        END $$;
        """
        ],
    ),
    # SQLite only (the pages a turn writes to its WAL): PostgreSQL's append
    # reserves positions on the thread's row, which also queues the thread's
    # writers; the queue and the index of fact candidates stay as they were
    # (a watermark needs ids given in commit order); an identity writes no
    # page per value. The names keep both lists equal.
    ("0023_positions_without_the_thread_row", []),
    ("0024_embedding_watermark", []),
    ("0025_fact_candidates_at_the_default_threshold", []),
    ("0026_seqs_given_in_blocks", []),
    (
        # A message's neighbour context is computed by the statement that
        # writes it, no longer by triggers: an append (and an import) reads
        # its thread's last 4 messages once (but its own, by id), gives each new message its
        # search_tsv as it inserts it, and sets the 2 messages before the
        # new ones again — the same tsvector caderno_search_tsv makes, built
        # from each message's own words (weight A) read once, with window
        # functions (stores/_postgres_plans.py). The read and the setting
        # again are VOLATILE functions, so their queries see a turn that
        # committed after the statement began, before it took its thread's
        # row (the statement's own snapshot would not). The triggers did it
        # a row at a time (a function call and 2 index walks per new row,
        # then the update of the 2 before each new row, from a transition
        # table) and cost an append half its speed. An edit or a deletion
        # keeps its triggers.
        "0027_context_in_the_append",
        [
            """
        DROP TRIGGER events_context_new_row ON events;
        DROP TRIGGER events_context_insert ON events;
        DROP FUNCTION caderno_context_new_row();
        DROP FUNCTION caderno_context_appended();
        CREATE FUNCTION caderno_thread_tail(rid text, tid text, written text[])
            RETURNS TABLE (n integer, seq bigint, own tsvector) LANGUAGE sql VOLATILE AS $$
            SELECT (row_number() OVER (ORDER BY t.seq DESC))::integer, t.seq, t.own FROM (
                SELECT e.seq, coalesce(ts_filter(e.search_tsv, '{a}'), setweight(caderno_terms(e.content), 'A')) AS own
                FROM events e WHERE e.resource_id = rid AND e.thread_id = tid AND e.kind = 'message'
                    AND NOT (e.id = ANY (written))
                ORDER BY e.seq DESC LIMIT 4) t
        $$;
        CREATE FUNCTION caderno_context_tsv(own tsvector, b1 tsvector, b2 tsvector, a1 tsvector, a2 tsvector,
                                            at timestamptz) RETURNS tsvector LANGUAGE sql STABLE AS $$
            SELECT setweight(own, 'A')
                || setweight(coalesce(b1, '') || coalesce(b2, '') || coalesce(a1, '') || coalesce(a2, ''), 'B')
                || setweight(caderno_terms(caderno_date_words(at)), 'C')
        $$;
        CREATE FUNCTION caderno_set_context(rid text, s bigint, own tsvector, b1 tsvector, b2 tsvector,
                                            a1 tsvector, a2 tsvector) RETURNS bigint LANGUAGE sql VOLATILE AS $$
            UPDATE events SET search_tsv = caderno_context_tsv(own, b1, b2, a1, a2, created_at)
                WHERE resource_id = rid AND seq = s RETURNING seq
        $$;
        """
        ],
    ),
]


#: HNSW indexes only up to this dimension (pgvector's limit for ``vector``);
#: past it the database searches exactly.
HNSW_MAX_DIM = 2000


def hnsw_index(dim: int) -> str:
    """The partial HNSW index of one dimension (inner product, as the in-process search)."""
    return (
        f"CREATE INDEX IF NOT EXISTS embeddings_hnsw_{dim:d} ON embeddings "
        f"USING hnsw ((vec::vector({dim:d})) vector_ip_ops) WHERE dim = {dim:d}"
    )


#: Key of the advisory lock that serialises migrations (any constant works).
MIGRATION_LOCK = 0x6361_6465_726E_6F  # "caderno"
