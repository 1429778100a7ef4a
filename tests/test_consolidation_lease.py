"""Consolidation's lease is a fencing token: a worker whose lease was taken over writes nothing and frees nothing.

Before the lease named its holder, a worker stalled past it released the
thread under the worker that took it over (a third could then claim it),
and wrote its summary under no lease at all.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.stores import ops

LEASE = 60


async def test_a_taken_over_consolidation_lease_stores_and_frees_nothing(shared_url: str) -> None:
    async with await caderno.connect(shared_url, embedder=None) as memory:
        stored = await memory.append_messages(
            resource_id="casa", thread_id="t", messages=[Message.user("um"), Message.assistant("dois")]
        )
        now = utcnow()
        later = now + timedelta(seconds=LEASE + 1)  # A's lease has run out: B takes the thread over

        def claim(holder: str, at: object, *, renew: bool = False) -> ops.ClaimConsolidation:
            return ops.ClaimConsolidation(
                resource_id="casa", thread_id="t", holder=holder, lease_seconds=LEASE, now=at, renew=renew
            )

        assert await memory.batch([claim("A", now), claim("B", later)]) == [True, True]
        summary = memory.turns.prepare_messages([Message.system("resumo", metadata={"span": [1, 2]})])[0]
        late = ops.WriteSummary(
            resource_id="casa", thread_id="t", summary=summary, covered=tuple(m.seq for m in stored), now=later
        )
        written, renewed, _ = await memory.batch(
            [
                dataclasses.replace(late, holder="A"),
                claim("A", later, renew=True),
                ops.ReleaseConsolidation(resource_id="casa", thread_id="t", holder="A"),
            ]
        )
        assert (written, renewed) == (False, False)  # A's summary and renewal: nothing
        assert await memory.consolidation.summaries(resource_id="casa", thread_id="t") == []
        assert await memory.batch([claim("C", later)]) == [False]  # A's release left B's lease alone
        assert await memory.batch([dataclasses.replace(late, holder="B")]) == [True]
