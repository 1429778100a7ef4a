"""A recall finds what was just written by meaning, with no ``flush()``: it embeds the resource's pending messages first.

The user's first script (append "I love hiking in the Alps", recall
"mountains") on a SQLite file and on PostgreSQL, in one process and across
two; and the bound: more pending than ``RECALL_EMBED_LIMIT`` and the hits say
how many were not searchable by meaning.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from typing import Any

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines import indexer
from caderno.stores import ops
from conftest import PROCESS_SECONDS, python_env

HIKING = "I love hiking in the Alps"
EMBEDDER = HashingEmbedder(64)


def _by_meaning(hits: list[caderno.Recalled], text: str) -> bool:
    """Whether the relevant leg (the one that searches by meaning) found ``text``: no word of it is in the query."""
    return any(h.message.content == text and "relevant" in h.reasons for h in hits)


async def test_a_recall_right_after_an_append_finds_it_by_meaning(shared_url: str) -> None:
    async with caderno.connect(shared_url) as memory:
        await memory.append_messages(resource_id="u", thread_id="t", messages=[Message.user(HIKING)])
        hits = await memory.recall(resource_id="u", query="mountains")
        assert _by_meaning(hits, HIKING), hits
        assert hits.not_searchable == 0


async def test_a_recall_finds_what_another_process_just_appended(shared_url: str) -> None:
    # The other process does not embed (embedder=None), as a server whose worker runs elsewhere:
    # the message waits in the queue, and this process's recall embeds it.
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        import caderno
        from caderno import Message

        async def main():
            async with caderno.connect(sys.argv[1], embedder=None) as memory:
                await memory.append_messages(resource_id="u", thread_id="t", messages=[Message.user({HIKING!r})])

        asyncio.run(main())
        """
    )
    subprocess.run([sys.executable, "-c", script, shared_url], env=python_env(), check=True, timeout=120)
    async with caderno.connect(shared_url) as memory:
        assert await memory.run(ops.CountPendingEmbeddings(resource_id="u")) == 1
        hits = await memory.recall(resource_id="u", query="mountains")
        assert _by_meaning(hits, HIKING), hits
        assert await memory.run(ops.CountPendingEmbeddings()) == 0


async def test_past_the_bound_the_hits_say_how_many_were_not_searchable(shared_url: str) -> None:
    embedder = HashingEmbedder(64)
    async with caderno.connect(shared_url, embedder=None) as writer:  # queued, not embedded
        await writer.append_messages(
            resource_id="u", thread_id="t", messages=[Message.user(f"note number {i}") for i in range(12)]
        )
        await writer.append_messages(resource_id="other", thread_id="t", messages=[Message.user("elsewhere")])
    async with caderno.connect(shared_url, embedder=embedder) as memory:
        assert memory.indexer.recall_limit == indexer.RECALL_EMBED_LIMIT
        memory.indexer.recall_limit = 5
        hits = await memory.recall(resource_id="u", query="note")
        assert hits.not_searchable == 7  # 12 pending, 5 embedded (the newest), 7 left
        rows = await memory.run(ops.ReadVectors(resource_id="u", model=embedder.name, after_id=0))
        assert len(rows.seqs) == 5
        # Another resource's pending message is not this recall's work.
        assert await memory.run(ops.CountPendingEmbeddings(resource_id="other")) == 1
        # Off: nothing embedded, nothing counted.
        again = await memory.recall(resource_id="u", query="note", embed_pending=False)
        assert again.not_searchable == 0
        assert await memory.run(ops.CountPendingEmbeddings(resource_id="u")) == 7
        # The next recalls take the rest, and a worker's claim still finds the other resource's job.
        await memory.recall(resource_id="u", query="note")
        last = await memory.recall(resource_id="u", query="note")
        assert last.not_searchable == 0
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 0


@contextlib.asynccontextmanager
async def _hiking_and_two_workers(url: str) -> AsyncIterator[tuple[caderno.Memory, caderno.Memory]]:
    """HIKING appended by a process that embeds nothing, then two memories with ``EMBEDDER`` on ``url``."""
    async with caderno.connect(url, embedder=None) as writer:
        await writer.append_messages(resource_id="u", thread_id="t", messages=[Message.user(HIKING)])
    async with caderno.connect(url, embedder=EMBEDDER) as one, caderno.connect(url, embedder=EMBEDDER) as two:
        yield one, two


async def test_a_recall_waits_for_a_batch_another_worker_holds_and_embeds_it_once(shared_url: str) -> None:
    async with _hiking_and_two_workers(shared_url) as (other, memory):
        # Another worker claims the job (its lease holds it), then finishes it while this recall waits
        # (as long as it takes on a loaded machine: this test is about waiting and embedding once, not the bound).
        memory.indexer.recall_wait = PROCESS_SECONDS
        (job,) = await other.run(ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=utcnow()))

        async def finish_later() -> None:
            await asyncio.sleep(0.3)  # the other worker's embedding time; the outcome holds whichever finishes first
            await other.indexer._finish_messages([job], await other.indexer._embed_messages([job]))

        finishing = asyncio.create_task(finish_later())
        hits = await memory.recall(resource_id="u", query="hiking Alps")
        await finishing
        assert hits.not_searchable == 0
        rows = await memory.run(ops.ReadVectors(resource_id="u", model=EMBEDDER.name, after_id=0))
        assert len(rows.seqs) == 1  # embedded once, by the worker that held it
        assert any("relevant" in h.reasons for h in hits)


class StalledInTheBackground(HashingEmbedder):
    """HashingEmbedder whose background-lane calls (the worker's batches) wait until ``release`` is set:
    a worker starved at its lower priority on a busy machine, made certain."""

    def __init__(self) -> None:
        super().__init__(64)
        self.release = threading.Event()
        self.stalled = threading.Event()

    def embed(self, texts: list[str]) -> Any:
        if threading.current_thread().name.endswith("-bg"):
            self.stalled.set()
            self.release.wait(PROCESS_SECONDS)
        return super().embed(texts)


async def test_a_recall_embeds_what_its_own_stalled_worker_holds_instead_of_waiting_for_it(shared_url: str) -> None:
    embedder = StalledInTheBackground()
    async with caderno.connect(shared_url, embedder=embedder, sparse=None) as memory:
        try:
            await memory.append_messages(resource_id="u", thread_id="t", messages=[Message.user(HIKING)])
            # The memory's own worker claims the message and its model call stalls.
            await asyncio.to_thread(embedder.stalled.wait, PROCESS_SECONDS)
            assert [j.resource_id for j in memory.indexer._held] == ["u"]
            hits = await memory.recall(resource_id="u", query="hiking Alps", recent=0, salient=0, lexical=0)
            assert hits.not_searchable == 0 and [h.message.content for h in hits] == [HIKING]  # by its vector alone
            assert memory.indexer._held  # found while the worker's call was still stalled
        finally:
            embedder.release.set()
        await memory.flush()
        rows = await memory.run(ops.ReadVectors(resource_id="u", model=embedder.name, after_id=0))
        assert len(rows.seqs) == 1  # the worker's finish wrote the same message's vector again, not a second one


async def test_two_finishes_of_one_message_at_once_store_one_vector(shared_url: str) -> None:
    """A recall and its worker (or two workers past a lease) may finish one message together: each
    waits for the other on the message's row, the second replaces the first's vector, neither fails."""
    async with _hiking_and_two_workers(shared_url) as (a, b):
        (job,) = await a.run(ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
        result = await a.indexer._embed_messages([job])
        for _ in range(20):
            await asyncio.gather(a.indexer._finish_messages([job], result), b.indexer._finish_messages([job], result))
        rows = await a.run(ops.ReadVectors(resource_id="u", model=EMBEDDER.name, after_id=0))
        assert len(rows.seqs) == 1


async def test_a_recall_waits_at_most_recall_wait_for_a_batch_another_worker_never_finishes(shared_url: str) -> None:
    async with _hiking_and_two_workers(shared_url) as (other, memory):
        assert memory.indexer.recall_wait == indexer.RECALL_WAIT_SECONDS
        memory.indexer.recall_wait = 0.2
        await other.run(ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=utcnow()))  # and stalls
        hits = await memory.recall(resource_id="u", query="hiking Alps", recent=0, salient=0)
        assert hits.not_searchable == 1  # said, not waited for past the bound
        assert [h.reasons for h in hits] == [frozenset({"lexical"})]  # found by its words meanwhile


async def test_a_recall_waits_for_what_its_own_worker_has_embedded_and_is_storing(shared_url: str) -> None:
    """Past the model call, before its vectors are stored: the recall neither holds the job nor
    should embed it again; it waits for the worker's write, even past ``recall_wait``."""
    async with caderno.connect(shared_url, embedder=EMBEDDER, sparse=None) as memory:
        storing, release = asyncio.Event(), asyncio.Event()
        run = memory.indexer.run

        async def slow_worker_finish(op: Any) -> Any:
            task = asyncio.current_task()
            if isinstance(op, ops.FinishEmbeddings) and task is not None and task.get_name() == "caderno-indexer":
                storing.set()
                await release.wait()  # a slow write on a busy database
            return await run(op)

        memory.indexer.run = slow_worker_finish
        memory.indexer.recall_wait = 0  # no waiting for jobs another worker holds
        await memory.append_messages(resource_id="u", thread_id="t", messages=[Message.user(HIKING)])
        await storing.wait()
        asyncio.get_running_loop().call_later(0.5, release.set)  # the write ends after the recall started
        hits = await memory.recall(resource_id="u", query="hiking Alps", recent=0, salient=0, lexical=0)
        assert release.is_set()
        assert hits.not_searchable == 0 and [h.message.content for h in hits] == [HIKING]
        rows = await memory.run(ops.ReadVectors(resource_id="u", model=EMBEDDER.name, after_id=0))
        assert len(rows.seqs) == 1
