"""An applied migration is never edited: the text of each is checked against its fingerprint.

A migration's SQL is what ran on every database that has its name in
``schema_migrations``; editing it would give new databases a schema the old
ones never got. The fingerprints below were taken when the migrations were
written out as literals (issue 23), from the texts as they ran until then —
0013 and 0014 built from constants, 0001 with escaped newlines — so they
also show the literals are those texts, byte for byte. A new migration adds
its line here; a changed one fails with its name. And a database already
migrated is left as it is by the next open.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence

import caderno
from caderno.stores import _postgres_schema, _sqlite_schema

#: name: (SQLite's fingerprint, PostgreSQL's)
FROZEN = {
    "0001_core": ("eb5b840afd3be3bb", "1745b97075d96ecd"),
    "0002_recall": ("d1a8632be8194e1f", "e19221465904e050"),
    "0003_consolidation": ("64b4f53449f19548", "6f93903565a7d775"),
    "0004_batch_port": ("01b6f45cfd9c7741", "22fa51ed0159f7f4"),
    "0005_agent_state": ("5578402f169289e0", "4079364adc2957db"),
    "0006_fts_in_batches": ("63e6de38747e2660", "e004ebd5b5532a4b"),
    "0007_api_keys": ("43b34431d3b833b3", "2bd8d1f7f44cd2da"),
    "0008_items": ("a2968d9237273b09", "da830ba55a2c3b87"),
    "0009_pgvector": ("e3b0c44298fc1c14", "7620b33c3ae1e4a5"),
    "0010_item_vectors": ("cca031b5975e745a", "1572c4dde7c93526"),
    "0011_stemmed_full_text": ("bb82ff66e333a452", "a50b4d8fab847a0c"),
    "0012_thread_positions": ("5eb8d9d4731c1176", "c32a1b6cfd615fb4"),
    "0013_index_time_context": ("407c4e2031917673", "23e5b7beef6782cf"),
    "0014_summary_spans": ("b51c26ed22f4934e", "999893a1d47ff3e5"),
    "0015_cheaper_context_triggers": ("e3b0c44298fc1c14", "72826420ac7df290"),
    "0016_notebook_and_turns": ("8411b30aa035520d", "aad41d8913bb0738"),
    "0017_lean_appends": ("7e5f7c6e81b91d3d", "e3b0c44298fc1c14"),
    "0018_queue_without_an_index_on_new_jobs": ("ae693038d4de969e", "e3b0c44298fc1c14"),
    "0019_embedding_codes": ("898f9690d4ca7b14", "02eff82b2d4de208"),
    "0020_lease_tokens": ("e2e06e5147132454", "4c700da0eb1e42cc"),
    "0021_sparse_terms": ("39949d6f00501c27", "aac1eded003857c0"),
    "0022_item_documents": ("04691b1b852bfd2e", "dbdafeb05d8bdfdb"),
    "0023_positions_without_the_thread_row": ("a3bf56bb3035abef", "e3b0c44298fc1c14"),
    "0024_embedding_watermark": ("fbfcbe7729d4999a", "e3b0c44298fc1c14"),
    "0025_fact_candidates_at_the_default_threshold": ("94eb79903abf7206", "e3b0c44298fc1c14"),
    "0026_seqs_given_in_blocks": ("1952d39b9b9686d1", "e3b0c44298fc1c14"),
    "0027_context_in_the_append": ("e3b0c44298fc1c14", "dab32fff33ece64e"),
}


def fingerprint(statements: Sequence[str]) -> str:
    """The first 16 hex digits of the SHA-256 of the statements (those of only whitespace run nothing)."""
    return hashlib.sha256("\0".join(s for s in statements if s.strip()).encode()).hexdigest()[:16]


def test_both_databases_have_the_same_migrations_in_the_same_order() -> None:
    names = [name for name, _ in _sqlite_schema.MIGRATIONS]
    assert names == [name for name, _ in _postgres_schema.MIGRATIONS] == list(FROZEN)


def test_no_migration_that_ran_was_edited() -> None:
    changed = [
        f"{name} ({dialect})"
        for column, (dialect, schema) in enumerate((("SQLite", _sqlite_schema), ("PostgreSQL", _postgres_schema)))
        for name, statements in schema.MIGRATIONS
        if fingerprint(statements) != FROZEN[name][column]
    ]
    assert changed == [], "a migration that ran is never edited; add a new one at the end instead"


def _recorded(shared_url: str) -> list[tuple[object, ...]]:
    """The database's schema_migrations rows, its schema objects and (SQLite) user_version."""
    if "://" not in shared_url:
        with sqlite3.connect(shared_url) as conn:
            rows = conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY name").fetchall()
            rows += conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
            return [*rows, conn.execute("PRAGMA user_version").fetchone()]
    import psycopg

    base, schema = shared_url.split("?schema=")
    with psycopg.connect(base) as conn:
        rows = conn.execute(f'SELECT name, applied_at FROM "{schema}".schema_migrations ORDER BY name').fetchall()
        return (
            rows
            + conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = %s "
                "ORDER BY table_name, column_name",
                (schema,),
            ).fetchall()
        )


async def test_a_migrated_database_is_not_changed_by_opening_it_again(shared_url: str) -> None:
    async with caderno.connect(shared_url, embedder=None):
        pass
    first = _recorded(shared_url)
    assert [row[0] for row in first[: len(FROZEN)]] == sorted(FROZEN)
    async with caderno.connect(shared_url, embedder=None):
        pass
    assert _recorded(shared_url) == first
