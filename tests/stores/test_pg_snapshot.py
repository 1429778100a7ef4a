"""PostgreSQL: a batch of reads is one read-only snapshot, said on its BEGIN, and the pooled connection forgets it."""

from __future__ import annotations

from typing import Any

import pytest
from _pg import pg_schema

import caderno
from caderno import Message
from caderno.stores import ops

pytestmark = pytest.mark.postgres


async def test_a_read_batch_begins_read_only_and_repeatable_and_writers_get_a_plain_connection() -> None:
    with pg_schema() as url:
        async with await caderno.connect(f"{url}&pool_size=1", embedder=None) as memory:
            store: Any = memory.store

            async def characteristics(conn: Any) -> tuple[str, str]:
                isolation = (await (await conn.execute("SHOW transaction_isolation")).fetchone())[0]
                read_only = (await (await conn.execute("SHOW transaction_read_only")).fetchone())[0]
                return isolation, read_only

            assert await store._tx(characteristics, write=False, snapshot=True) == ("repeatable read", "on")
            assert await store._tx(characteristics, write=True) == ("read committed", "off")
            # Through the port: reads of several operations, then a write on the one pooled connection.
            for _ in range(3):
                await memory.batch([ops.ReadWorkingMemory(resource_id="r"), ops.ListThreads(resource_id="r")])
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
            async with store._pool.connection() as conn:
                assert conn.isolation_level is None and conn.read_only is None
