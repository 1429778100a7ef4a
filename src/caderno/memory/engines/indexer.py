"""The background embedding worker.

New messages are queued in the database by the append itself (same
transaction), and so are the texts of LangGraph store items by their put, so
pending work is durable: a process that exits early leaves it for the next
one. The worker claims batches with a lease (any number of workers, in any
number of processes, share the queue), embeds them off the event loop, and
stores the vectors. Every text goes through the model's one embedding
service in the process (``caderno.embeddings.batcher``): the worker's in its
background lane, at a lower CPU priority; a recall's pending messages in its
urgent lane, in one model call with other recalls' texts and queries. A
failed text is recorded on its queue row with the error and retried later
with exponential backoff; it never blocks or fails an append or a put.

A running worker looks at the queue every ``POLL_SECONDS`` whatever
happened in its own process, and at once when woken (``notify``: an append
here; on PostgreSQL, another process's append announced by ``NOTIFY``). It
renews its batch's lease while the batch embeds, so a lease runs out only
when its worker stopped: any running worker takes up new work within
``POLL_SECONDS`` and a dead worker's batch within ``POLL_SECONDS +
LEASE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ...core.clock import utcnow
from ...core.errors import EmbeddingUnavailable, Unsupported
from ...stores import ops
from ...stores.base import EmbeddingJob, Runner
from ...stores.ops import ItemEmbeddingJob
from .vector_cache import quantize


def batcher(model: Any) -> Any:
    """The model's embedding service (``caderno.embeddings.batcher``), imported on first use: the CLI
    imports this module for its defaults, and a command that never embeds loads no model code
    (``tests/cli/test_startup.py``)."""
    from ...embeddings.batcher import batcher as service

    return service(model)


log = logging.getLogger("caderno.memory.engines.indexer")

J = TypeVar("J", EmbeddingJob, ItemEmbeddingJob)

__all__ = ["Indexer"]

#: A claim holds about this many seconds of embedding (never more than a
#: quarter of the lease), judged by the seconds per job of the batch before:
#: long texts on a slow CPU come fewer to a claim, so a lease does not run out
#: mid-batch and ``close`` does not wait long; short texts still come
#: ``batch_size`` at a time.
BATCH_SECONDS = 10.0
#: How many jobs a worker's first claim of each queue takes, before any batch is timed.
FIRST_BATCH = 32
#: Seconds between two looks at the queue when nothing woke the worker. It is
#: how late a worker may notice work queued by a process that cannot wake it
#: (SQLite has no notices; a notice lost, or a transaction pooler with no
#: LISTEN) and a lease that ran out. An idle look is one claim that finds
#: nothing (an indexed read in a write transaction that writes nothing): 2 s
#: costs each worker half a statement a second and keeps the wait short.
POLL_SECONDS = 2.0
#: Seconds a claimed batch stays its worker's unless renewed (``caderno worker
#: --embed-lease``). The worker renews it every third of that while the batch
#: embeds (``RENEWALS_PER_LEASE``), so it runs out only when its worker died
#: or stalled: then another takes the batch within ``POLL_SECONDS`` + this.
#: 30 s keeps that wait short; a renewal is one small write every 10 s.
LEASE_SECONDS = 30.0
#: Renewals of a batch's lease per lease while it embeds: one late renewal still leaves two thirds of it.
RENEWALS_PER_LEASE = 3
#: Most of a resource's pending messages one recall embeds before it searches
#: (``Indexer.embed_pending``). What a caller just wrote is a few messages;
#: 256 covers a long conversation appended at once and costs about 2-3 s of
#: MiniLM on one CPU core (~10 ms a message), the most a recall should wait.
#: Past it the hits say how many are not yet searchable by meaning
#: (``Hits.not_searchable``); a worker or ``caderno reindex`` embeds the rest.
RECALL_EMBED_LIMIT = 256
#: Jobs a recall claims at a time while it embeds its resource's pending
#: messages: small enough that a claim's lease never runs out mid-batch.
RECALL_CLAIM = 32
#: Seconds a recall waits for its resource's messages another worker has
#: claimed and is embedding (a claim of ``FIRST_BATCH`` short texts takes
#: well under a second), polling every ``RECALL_POLL_SECONDS``. Past it
#: those count as not yet searchable.
RECALL_WAIT_SECONDS = 2.0
RECALL_POLL_SECONDS = 0.05
#: Seconds a recall waits for messages this process's own worker is embedding before it embeds
#: them itself: a batch's model call runs at the worker's lower priority, which on a busy machine
#: can take seconds (seen: 9 short messages past ``RECALL_WAIT_SECONDS`` under ``stress-ng``),
#: and the urgent lane cannot take over a call once started. A quiet worker finishes a batch of
#: short messages well within it, so nothing is embedded twice then.
RECALL_TAKE_OVER_SECONDS = 0.25
#: Seconds before the worker tries again after a round failed (the database
#: away, say): long enough not to fill a log with one warning every poll.
RETRY_SECONDS = 10.0


def backoff_seconds(attempts: int) -> float:
    """1 s, 2 s, 4 s … capped at one hour."""
    return float(min(3600, 2**attempts))


class Indexer:
    """Embeds queued messages (and items, with ``items``) in the background for one ``Memory``.

    ``batch_size`` bounds each claim: one batch of messages and one of items
    per round, fewer when the batch before shows that many would take more
    than ``BATCH_SECONDS`` to embed.
    """

    def __init__(
        self,
        run: Runner,
        embedder: Any,
        *,
        sparse: Any = None,
        items: bool = False,
        batch_size: int = 256,
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.run = run
        self.embedder = embedder
        self.sparse = sparse
        """The learned-sparse encoder whose term weights are stored beside each message's vector
        (``caderno.embeddings.splade``), or None."""
        self.items = items
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.unavailable: str | None = None
        self.recall_limit = RECALL_EMBED_LIMIT
        """Most pending messages of its resource a recall embeds first (``embed_pending``)."""
        self.recall_wait = RECALL_WAIT_SECONDS
        """Most seconds a recall waits for its resource's messages another worker holds (``embed_pending``)."""
        self._lock = asyncio.Lock()
        self._held: list[EmbeddingJob] = []
        """The batch of messages this worker holds, from its model call until its finish is stored (a waiting
        recall embeds its resource's share itself while the call runs, and waits for the finish after it)."""
        self._stored: asyncio.Event | None = None
        """While ``_held`` is embedded and its finish is being stored: set once that write has ended."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._loaded = False
        self._per_job: dict[object, float] = {}  # seconds of embedding per job, by queue
        self.elsewhere: Callable[[], None] | None = None
        """Set when another process embeds for this one (``caderno serve``'s worker): ``notify`` calls it instead."""
        self.reported: Callable[[str, int, int], None] | None = None
        """Called after each batch with the queue's name (``messages``, ``items``), how many were embedded and
        how many failed (``caderno worker`` prints it)."""

    @property
    def active(self) -> bool:
        return self.embedder is not None and self.unavailable is None

    def notify(self) -> None:
        """New work may be queued: start the worker if needed and wake it."""
        if not self.active or self._stopping:
            return
        if self.elsewhere is not None:
            self.elsewhere()
            return
        self.start()
        self._wake.set()

    def start(self) -> None:
        """Run the worker in this process from now on, whether or not anything is appended here.

        For a process that runs background work (``Memory.run_background``):
        the worker then looks at the queue every ``poll_seconds``, so work
        queued by other processes, and batches whose lease ran out, are taken
        up here too. Call it on the running event loop.
        """
        if not self.active or self._stopping:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="caderno-indexer")

    async def flush(self) -> None:
        """Embed everything that is due now (work leased by others is theirs)."""
        while await self.run_once():
            pass

    async def embed_pending(
        self,
        resource_id: str,
        *,
        everything: bool = False,
        wait: float | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Embed ``resource_id``'s pending messages, newest first, before a recall; how many still wait.

        At most ``recall_limit`` of them, or all with ``everything`` (the
        CLI's recall, which shows a progress bar). Jobs another worker holds
        are not embedded twice: they are waited for, at most ``wait``
        seconds (default ``recall_wait``), while they are not past their lease (what this process's
        worker holds and has not started is handed to the urgent lane:
        ``Batcher.hurry``; what its model call has started, the recall
        embeds itself after ``RECALL_TAKE_OVER_SECONDS``; what it has
        embedded and is storing, the recall waits for whatever ``wait``); a job whose
        embedding failed before waits out its backoff and counts as waiting.
        A text embedded twice keeps one vector (the finish replaces it). The
        texts go to the embedding service's urgent lane, above the worker's
        priority: someone waits for them, and concurrent recalls' texts share
        its model calls. ``progress(done, total)`` is called after each batch.

        Returns how many of the resource's messages still wait for a
        vector (0 when embeddings are off: there is nothing to wait for).
        """
        if not self.active or not await self._ensure_loaded():
            return 0
        left = await self.run(ops.CountPendingEmbeddings(resource_id=resource_id))
        if not left:
            return 0
        budget = left if everything else min(left, self.recall_limit)
        done = 0
        taken: set[int] = set()  # seqs of this process's worker's batch embedded here
        deadline = time.monotonic() + (self.recall_wait if wait is None else wait)
        take_over = time.monotonic() + RECALL_TAKE_OVER_SECONDS
        while True:
            while done < budget:
                claim = ops.ClaimEmbeddings(
                    resource_id=resource_id,
                    limit=min(RECALL_CLAIM, budget - done),
                    lease_seconds=self.lease_seconds,
                    now=utcnow(),
                )
                jobs = await self.run(claim)
                if not jobs:
                    break
                await self._finish_messages(jobs, await self._embed_messages(jobs))
                done += len(jobs)
                if progress is not None:
                    progress(done, budget)
            left = await self.run(ops.CountPendingEmbeddings(resource_id=resource_id))
            mine = [j for j in self._held if j.resource_id == resource_id and j.seq not in taken]
            stored = self._stored
            if left and mine and stored is not None:
                # This process's worker has the vectors and is storing them: the same write a take-over
                # would make, so it is waited for whatever the deadline (it ends, stored or failed).
                await stored.wait()
                continue
            if not left or done >= budget or time.monotonic() >= deadline:
                return left
            if not await self.run(ops.CountPendingEmbeddings(resource_id=resource_id, failed=False)):
                return left  # only failed jobs wait, for their backoff: not worth waiting for
            # Those this process's worker holds, still in the background lane, go to the urgent one.
            batcher(self.embedder).hurry()
            if self.sparse is not None:
                batcher(self.sparse).hurry()
            if mine and time.monotonic() >= take_over:
                # What the worker's model call has started cannot change lanes: on a busy machine
                # it could take seconds at the worker's lower priority. Someone waits for it, so
                # it is embedded here too; the worker's finish later writes the same vectors again.
                taken.update(j.seq for j in mine)
                await self._finish_messages(mine, await self._embed_messages(mine))
                continue
            await asyncio.sleep(RECALL_POLL_SECONDS)

    async def run_once(self) -> int:
        """Claim, embed and store one batch of messages and one of items; returns how many jobs it handled."""
        async with self._lock:
            if not await self._ensure_loaded():
                return 0
            handled = await self._messages()
            if self.items:
                handled += await self._items()
            return handled

    async def _embed_messages(self, jobs: list[EmbeddingJob], *, urgent: bool = True) -> tuple[list[Any], list[Any]]:
        """Vectors (with their codes and sparse terms) of the jobs that embedded, and the failures.

        ``urgent``: someone waits (a recall), else the worker's batch (the service's background lane).
        The vectors and the sparse terms are computed side by side.
        """
        texts = [j.content for j in jobs]
        (done, failed), all_terms = await asyncio.gather(
            self._embed_jobs(jobs, lambda j: [j.content], urgent=urgent), self._sparse_terms(texts, urgent=urgent)
        )
        codes = quantize([block[0] for _, block in done]) if done else []  # ~0.3 ms for 256: on the loop
        index = {id(j): i for i, j in enumerate(jobs)}
        terms = [all_terms[index[id(j)]] for j, _ in done]
        return (
            [
                (j.resource_id, j.seq, block[0].tobytes(), c.tobytes(), t)
                for (j, block), c, t in zip(done, codes, terms, strict=True)
            ],
            [(j.resource_id, j.seq, error, wait) for j, error, wait in failed],
        )

    async def _sparse_terms(self, texts: list[str], *, urgent: bool) -> list[bytes]:
        """Each text's learned-sparse terms (``b""`` when there is no sparse encoder, or it failed on
        that text: the message is still found by its vector and its words, and ``reindex`` computes
        them again)."""
        if self.sparse is None or not texts:
            return [b""] * len(texts)
        results = await batcher(self.sparse).each(texts, urgent=urgent)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:  # the sparse leg is an extra: its failure never fails an embedding
            log.warning(
                "sparse encoding failed for %d of %d texts, stored without it: %s",
                len(failed),
                len(texts),
                _error(failed[0]),
            )
        return [b"" if isinstance(r, BaseException) else r for r in results]

    def _finish_op(
        self, *, done: tuple[tuple[str, int, bytes, bytes, bytes], ...], **rest: Any
    ) -> ops.FinishEmbeddings:
        """Each vector stored with its codes (the vector cache's form of it, read at its first load) and its sparse terms."""
        sparse = tuple(row[4] for row in done)
        return ops.FinishEmbeddings(
            done=tuple(row[:3] for row in done),
            codes=tuple(row[3] for row in done),
            sparse=sparse if any(sparse) else (),
            sparse_model=self.sparse.name if self.sparse is not None else "",
            **rest,
        )

    async def _finish_messages(self, jobs: list[EmbeddingJob], result: tuple[list[Any], list[Any]]) -> None:
        done, failed = result
        await self.run(
            self._finish_op(
                model=self.embedder.name, dim=self.embedder.dim, done=tuple(done), failed=tuple(failed), now=utcnow()
            )
        )

    async def _messages(self) -> int:
        async def embed(jobs: list[EmbeddingJob]) -> tuple[list[Any], list[Any]]:
            self._held = jobs
            result = await self._embed_messages(jobs, urgent=False)
            self._stored = asyncio.Event()
            return result

        try:
            return await self._round(ops.ClaimEmbeddings, embed, self._finish_op, name="messages", renew=self._renew)
        finally:
            if self._stored is not None:
                self._stored.set()
            self._held, self._stored = [], None

    async def _items(self) -> int:
        async def embed(jobs: list[ItemEmbeddingJob]) -> tuple[list[Any], list[Any]]:
            done, failed = await self._embed_jobs(jobs, lambda j: list(j.texts), urgent=False)
            return [(j, block.tobytes()) for j, block in done], failed  # one row per text, in order

        return await self._round(ops.ClaimItemEmbeddings, embed, ops.FinishItemEmbeddings, name="items")

    async def _round(
        self,
        claim: Callable[..., ops.Op[Any]],
        embed: Callable[[Any], Coroutine[Any, Any, tuple[list[Any], list[Any]]]],
        finish: Callable[..., ops.Op[None]],
        *,
        name: str,
        renew: Callable[[list[Any]], Coroutine[Any, Any, None]] | None = None,
    ) -> int:
        """Claim a batch, embed it in the service's background lane (``renew`` keeping its lease), store what
        came of it; how many jobs."""
        jobs = await self.run(claim(limit=self.claim_size(claim), lease_seconds=self.lease_seconds, now=utcnow()))
        if not jobs:
            return 0
        started = time.perf_counter()
        renewing = asyncio.create_task(renew(jobs), name="caderno-indexer-renew") if renew is not None else None
        try:
            done, failed = await embed(jobs)
        finally:
            if renewing is not None:
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
        self._per_job[claim] = (time.perf_counter() - started) / len(jobs)
        await self.run(
            finish(
                model=self.embedder.name, dim=self.embedder.dim, done=tuple(done), failed=tuple(failed), now=utcnow()
            )
        )
        if self.reported is not None:
            self.reported(name, len(done), len(failed))
        return len(jobs)

    async def _renew(self, jobs: list[EmbeddingJob]) -> None:
        """Keep a batch's lease while it embeds: every ``1/RENEWALS_PER_LEASE`` of the lease, until cancelled.

        A renewal that fails (the database away) is tried at the next turn;
        should the lease run out meanwhile, another worker embeds the batch
        too, which costs time but stores one vector (``ops.RenewEmbeddings``).
        """
        keys = tuple((j.resource_id, j.seq) for j in jobs)
        while True:
            await asyncio.sleep(self.lease_seconds / RENEWALS_PER_LEASE)
            try:
                await self.run(ops.RenewEmbeddings(jobs=keys, lease_seconds=self.lease_seconds, now=utcnow()))
            except Unsupported:
                return  # a store without renewals: the batch is sized to fit its lease (``BATCH_SECONDS``)
            except Exception:
                log.info("could not renew an embedding batch's lease; trying again", exc_info=True)

    def claim_size(self, queue: object) -> int:
        """How many jobs the next claim of ``queue`` takes (see ``BATCH_SECONDS``)."""
        per_job = self._per_job.get(queue)
        if per_job is None:
            return min(self.batch_size, FIRST_BATCH)
        seconds = min(BATCH_SECONDS, self.lease_seconds / 4)
        return max(1, min(self.batch_size, int(seconds / max(per_job, 1e-9))))

    async def close(self) -> None:
        """Let the batch in flight finish, then stop."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        """Embed while there is work; then wait for a wake-up, at most ``poll_seconds`` (``RETRY_SECONDS`` after a failure)."""
        while not self._stopping:
            wait = self.poll_seconds
            try:
                handled = await self.run_once()
            except Exception:  # the database went away, say; try again later
                log.warning("embedding batch failed; retrying in %.0f s", RETRY_SECONDS, exc_info=True)
                handled, wait = 0, RETRY_SECONDS
            if handled or self._stopping or not self.active:
                if not self.active:
                    return
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _ensure_loaded(self) -> bool:
        if not self.active:
            return False
        if not self._loaded and hasattr(self.embedder, "load"):
            try:
                await asyncio.to_thread(self.embedder.load)
            except EmbeddingUnavailable as exc:
                self.unavailable = str(exc)
                log.warning("embeddings are off: %s; recall falls back to lexical and salient search", exc)
                return False
            if self.sparse is not None and hasattr(self.sparse, "load"):
                try:
                    await asyncio.to_thread(self.sparse.load)
                except EmbeddingUnavailable as exc:
                    self.sparse = None
                    log.warning("the sparse encoder is off: %s; recall ranks without it", exc)
        self._loaded = True
        return True

    async def _embed_jobs(
        self, jobs: list[J], texts: Callable[[J], list[str]], *, urgent: bool
    ) -> tuple[list[tuple[J, Any]], list[tuple[J, str, float]]]:
        """Each job's texts as a float32 block, one row per text, and the jobs that failed.

        The texts go to the model's embedding service, which runs them with
        other callers' and gives each text its own outcome: a text the model
        cannot embed fails its job alone (with its error and the backoff of
        its next attempt), never the others.
        """
        import numpy as np

        per_job = [texts(j) for j in jobs]
        results = await batcher(self.embedder).each([t for own in per_job for t in own], urgent=urgent)
        done: list[tuple[J, Any]] = []
        failed: list[tuple[J, str, float]] = []
        start = 0
        for job, own in zip(jobs, per_job, strict=True):
            rows, start = results[start : start + len(own)], start + len(own)
            error = next((r for r in rows if isinstance(r, BaseException)), None)
            if error is not None:
                failed.append((job, _error(error), backoff_seconds(job.attempts)))
            elif not rows:
                done.append((job, np.zeros((0, self.embedder.dim), dtype=np.float32)))
            else:
                done.append((job, np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)))
        return done, failed


def _error(exc: BaseException) -> str:
    """What a queue row records of a failure (bounded)."""
    return f"{type(exc).__name__}: {exc}"[:500]
