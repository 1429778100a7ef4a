"""Thresholds come from one place: the SQL schemas agree with the Python policy."""

from __future__ import annotations

import re

import caderno
from caderno import Message
from caderno.memory.engines.importance import SALIENT, embeddable
from caderno.stores import ops


async def test_salient_index_is_built_from_the_policy_constant(shared_url: str) -> None:
    async with caderno.connect(shared_url, embedder=None) as memory:
        store = memory.store
        if shared_url.startswith("postgresql"):
            async with store._pool.connection() as conn:  # type: ignore[attr-defined]
                row = await (
                    await conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'events_salient'")
                ).fetchone()
        else:
            row = await store._read(  # type: ignore[attr-defined]
                lambda c: c.execute("SELECT sql FROM sqlite_master WHERE name = 'events_salient'").fetchone()
            )
        (threshold,) = re.findall(r">=\s*\(?([0-9.]+)", row[0])
        assert float(threshold) == SALIENT


async def test_the_queue_takes_exactly_what_policy_embeds(memory: caderno.Memory) -> None:
    msgs = [
        Message.user("oi"),
        Message.assistant(""),
        Message.system("rules"),
        Message.assistant("olá"),
    ]
    stored = await memory.append_messages(resource_id="r", thread_id="t", messages=msgs)
    pending = await memory.run(ops.CountPendingEmbeddings())
    assert pending == sum(embeddable(m.role, m.content) for m in stored) == 2
