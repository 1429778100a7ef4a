"""Each vector's codes are stored beside it, read in its place, and go where it goes, on every backend.

The codes are the vector cache's own form of a vector (``quantize``): a
cache's first load reads them instead of quantizing float32. Vectors stored
without them (before migration 0019) still load, beside coded ones.
"""

from __future__ import annotations

import numpy as np

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.embeddings import HashingEmbedder
from caderno.memory.engines.vector_cache import VectorIndex, _Entry, code_dtype, quantize
from caderno.stores import ops

DIM = 32
R = "r"


async def appended(memory: caderno.Memory, thread_id: str, n: int) -> list[Message]:
    return await memory.append_messages(
        resource_id=R, thread_id=thread_id, messages=[Message.user(f"{thread_id} note {i}") for i in range(n)]
    )


def embedded(emb: HashingEmbedder, messages: list[Message]) -> tuple[tuple[str, int, bytes], ...]:
    vectors = np.asarray(emb.embed([m.content for m in messages]), dtype=np.float32)
    return tuple((R, m.seq or 0, v.tobytes()) for m, v in zip(messages, vectors, strict=True))


async def test_vectors_with_and_without_codes_load_together_and_search_alike(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=None) as memory:
        old, new = await appended(memory, "a", 6), await appended(memory, "b", 5)
        plain, coded = embedded(emb, old), embedded(emb, new)
        codes = tuple(c.tobytes() for c in quantize([np.frombuffer(v, np.float32) for _, _, v in coded]))
        await memory.run(ops.FinishEmbeddings(model=emb.name, dim=DIM, done=plain, failed=(), now=utcnow()))
        await memory.run(
            ops.FinishEmbeddings(model=emb.name, dim=DIM, done=coded, failed=(), now=utcnow(), codes=codes)
        )

        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        assert rows.coded == 5 and set(rows.seqs) == {seq for _, seq, _ in plain + coded}
        assert set(rows.seqs[: len(rows.seqs) - rows.coded]) == {seq for _, seq, _ in plain}
        assert b"".join(rows.vectors) == b"".join(v for _, _, v in plain)
        assert b"".join(rows.codes) == b"".join(codes)

        # The same search as over float32 alone: codes made at load or stored are the same codes.
        matrix = np.frombuffer(b"".join(v for _, _, v in plain + coded), np.float32).reshape(-1, DIM)
        q = matrix[7] + 0.1 * matrix[2]
        hits = await VectorIndex().search(memory.run, R, emb.name, DIM, q, 5, -1.0, None)
        floats = _Entry(DIM)
        floats.add([seq for _, seq, _ in plain + coded], ["a"] * 6 + ["b"] * 5, matrix.tobytes())
        assert hits == floats.search(q, 5, -1.0, None)
        exact = np.argsort(-(matrix @ q), kind="stable")[:5]
        assert [seq for seq, _ in hits] == [(plain + coded)[i][1] for i in exact]
        thread_b = await VectorIndex().search(memory.run, R, emb.name, DIM, q, 10, -1.0, "b")
        assert {seq for seq, _ in thread_b} == {m.seq for m in new}


async def test_the_worker_stores_each_vectors_codes(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        messages = await appended(memory, "a", 4)
        await memory.flush()
        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        assert rows.coded == len(rows.seqs) == 4 and not rows.vectors
        want = quantize(np.asarray(emb.embed([m.content for m in messages]), dtype=np.float32))
        got = np.frombuffer(b"".join(rows.codes), dtype=code_dtype(DIM))
        by_seq = {seq: code.tobytes() for seq, code in zip(rows.seqs, got, strict=True)}
        assert by_seq == {m.seq: code.tobytes() for m, code in zip(messages, want, strict=True)}


async def test_codes_go_with_their_vectors(db_url: str) -> None:
    """Deleting a message or a thread, a reindex and an erase leave no codes behind."""
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        # No background worker here (as when serve's worker embeds elsewhere): the reindexed messages
        # stay queued until flush, instead of racing the assertion that their codes are gone.
        memory.indexer.elsewhere = lambda: None
        a, b = await appended(memory, "a", 3), await appended(memory, "b", 3)
        await memory.flush()

        async def coded() -> set[int]:
            rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
            return set(rows.seqs[len(rows.seqs) - rows.coded :])

        assert await coded() == {m.seq for m in a + b}
        await memory.messages.delete(resource_id=R, message_id=str(a[0].id))
        assert await coded() == {m.seq for m in a[1:] + b}
        await memory.delete_thread(resource_id=R, thread_id="b")
        assert await coded() == {m.seq for m in a[1:]}
        assert await memory.reindex(resource_id=R) == 2
        assert await coded() == set()
        await memory.flush()
        assert await coded() == {m.seq for m in a[1:]}
        await memory.erase_resource(resource_id=R)
        assert await coded() == set()
