"""A turn lease's commit does not wait for the disk; every other write still does (SQLite, synchronous=FULL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.stores import ops


def test_only_the_leases_are_not_durable() -> None:
    assert {t for t in ops.ALL if t.writes and not t.durable} == {ops.ClaimTurn, ops.ReleaseTurn}


async def test_a_lease_commit_skips_the_fsync_and_the_setting_comes_back(tmp_path: Path) -> None:
    async with await caderno.connect(f"sqlite:///{tmp_path / 'c.db'}", embedder=None) as memory:
        store: Any = memory.store
        writer = store.writer_connection
        seen: list[int] = []

        def synchronous() -> int:
            return int(writer().execute("PRAGMA synchronous").fetchone()[0])

        lease = ops.ClaimTurn(resource_id="r", thread_id="t", holder="h", lease_seconds=30, now=utcnow())

        def spy(conn: Any) -> None:  # runs inside the lease's transaction, on the writer
            seen.append(int(conn.execute("PRAGMA synchronous").fetchone()[0]))

        real = store._write

        async def watched(fn: Any, *args: Any, **kwargs: Any) -> Any:
            def both(conn: Any) -> Any:
                spy(conn)
                return fn(conn)

            return await real(both, *args, **kwargs)

        store._write = watched
        assert await memory.batch([lease]) == [True]
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
        await memory.batch([ops.ReleaseTurn(resource_id="r", thread_id="t", holder="h")])
        # NORMAL (1) for the lease's commits, FULL (2) for the append, and FULL again after each.
        assert seen == [1, 2, 1]
        assert synchronous() == 2
        (claimed,) = await memory.batch(
            [ops.ClaimTurn(resource_id="r", thread_id="t", holder="x", lease_seconds=30, now=utcnow())]
        )
        assert claimed  # the release was committed
