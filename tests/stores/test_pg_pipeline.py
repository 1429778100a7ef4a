"""PostgreSQL: a batch of independent reads sends its statements together (psycopg's pipeline mode).

Counted from libpq's own protocol trace: each round trip ends with the
server's ReadyForQuery. A batch of five one-statement reads costs its BEGIN,
one round for the five, and its COMMIT — where one statement at a time cost
one each. Multi-statement plans advance side by side, round by round, and
give the same results as run alone.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _pg import pg_schema

import caderno
from caderno import Message
from caderno.stores import ops
from caderno.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _traced(store: PostgresStore, where: Path) -> Any:
    """Trace the connections the store's pool lends to this task from now on, each while it is lent;
    a function counting their round trips so far.

    Only this task's: a background task of the store (the key listener's
    heartbeat, say) may borrow a connection at the same moment on a loaded
    machine, and its statements are not the batch's.
    """
    import psycopg

    mine = asyncio.current_task()
    lend = store._pool.connection

    def connection(*args: Any, **kw: Any) -> Any:
        manager = lend(*args, **kw)

        class Traced:
            async def __aenter__(self) -> Any:
                conn = await manager.__aenter__()
                self.traced = asyncio.current_task() is mine
                if self.traced:
                    self.file = (where / f"{len(list(where.iterdir()))}.trace").open("w")
                    conn.pgconn.trace(self.file.fileno())
                    conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
                    self.conn = conn
                return conn

            async def __aexit__(self, *exc: Any) -> Any:
                if self.traced:  # libpq writes its trace through its own buffer: untrace flushes it
                    self.conn.pgconn.untrace()
                    self.file.close()
                return await manager.__aexit__(*exc)

        return Traced()

    store._pool.connection = connection  # type: ignore[method-assign]

    def round_trips() -> int:
        """Round trips traced so far."""
        return sum(
            1
            for p in where.glob("*.trace")
            for line in p.read_text().splitlines()
            if line.startswith("B\t") and "ReadyForQuery" in line
        )

    return round_trips


async def test_five_reads_in_one_batch_take_three_round_trips() -> None:
    with pg_schema() as url:
        memory = await caderno.connect(url, embedder=None)
        try:
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("Amsterdam")])
            store = memory.store
            assert isinstance(store, PostgresStore)
            reads: list[ops.Op[Any]] = [
                ops.ReadThread(resource_id="r", thread_id="t", limit=20),
                ops.ReadWorkingMemory(resource_id="r"),
                ops.ReadSummaries(resource_id="r", thread_id="t"),
                ops.ReadFacts(resource_id="r"),
                ops.GetThread(resource_id="r", thread_id="t"),
            ]
            alone = [await memory.run(op) for op in reads]
            with tempfile.TemporaryDirectory() as where:
                round_trips = _traced(store, Path(where))
                together = await memory.batch(reads)
                assert round_trips() == 3  # BEGIN, the five statements, COMMIT
            assert [repr(x) for x in together] == [repr(x) for x in alone]
        finally:
            await memory.close()
