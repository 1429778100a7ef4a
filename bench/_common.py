"""What the benchmarks share: percentiles, and a throw-away PostgreSQL schema."""

from __future__ import annotations

import time


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def pg_schema_url(base: str) -> tuple[str, str] | None:
    """A new schema on the PostgreSQL at ``base``: ``(its caderno URL, its name)``, or None (and a line) when unreachable."""
    try:
        import psycopg

        name = f"bench_{int(time.time() * 1000)}"
        with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{base}?schema={name}&pool_size=16", name
    except Exception as exc:  # noqa: BLE001 — any failure means: no PostgreSQL rows
        print(f"PostgreSQL at {base} is not reachable ({type(exc).__name__}); its rows are skipped")
        return None


def drop_schema(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
