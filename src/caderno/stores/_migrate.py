"""One migration runner for both SQL databases: named, append-only migrations recorded by name.

A migration is a name and its statements (``_sqlite_schema.MIGRATIONS``,
``_postgres_schema.MIGRATIONS``: the same names, in the same order). Once
applied, its name is recorded in ``schema_migrations`` and it never runs
again; its text is never edited either (it is what ran on every database
that has it), so a change is a new migration at the end, and a migration's
SQL is written out as a literal, never built from a constant the code still
uses. A database holding a name this caderno does not know was migrated by a
newer one, and is refused (``SchemaTooNew``) before anything runs.

The runner is two plans (``caderno.stores._sql``), so SQLite drives them on
its writer connection and PostgreSQL on a pooled one. Each backend wraps
them in one transaction under its own lock — ``BEGIN IMMEDIATE`` (one
writer, across processes) on SQLite, a transaction-scoped advisory lock on
PostgreSQL (ten processes starting at once migrate exactly once) — and adds
what only it has between them: SQLite's import of an older agent's tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import SchemaTooNew
from ._sql import Plan, Q

#: A migration: its name (``NNNN_what``) and the statements it runs, in order.
Migration = tuple[str, Sequence[str]]


def applied(migrations: Sequence[Migration], ledger: str) -> Plan[set[str]]:
    """Make ``schema_migrations`` if missing (``ledger`` is its dialect's DDL); the names it records.

    Raises:
        SchemaTooNew: a recorded name is not among ``migrations``.
    """
    yield Q(ledger, (), "none")
    names = {row[0] for row in (yield Q("SELECT name FROM schema_migrations"))}
    unknown = names - {name for name, _ in migrations}
    if unknown:
        raise SchemaTooNew(
            f"database has migrations this caderno does not know: {', '.join(sorted(unknown))}; "
            "upgrade caderno instead of opening it with an older one"
        )
    return names


def apply(migrations: Sequence[Migration], done: set[str], applied_at: Any) -> Plan[list[str]]:
    """Run, in order, each migration whose name is not in ``done`` and record it; the names it ran."""
    ran = []
    for name, statements in migrations:
        if name in done:
            continue
        for statement in statements:
            yield Q(statement, (), "none")
        yield Q("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, applied_at), "none")
        ran.append(name)
    return ran
