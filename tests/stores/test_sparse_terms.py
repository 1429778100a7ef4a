"""Each message's learned-sparse terms: stored beside its vector, read by seq, gone where the vector goes.

The terms rerank recall's fused candidates (``caderno.memory.engines.recall.SPARSE_POOL``).
Here a word-hashing encoder stands in for SPLADE (as ``HashingEmbedder`` does
for the dense model: fast and deterministic); ``tests/test_splade.py`` checks
the real encoder against the reference model, and the last test here runs it.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.embeddings.splade import dot, pack, unpack
from caderno.stores import ops
from caderno.stores._sqlite_plans import SEQ_BLOCK

R, OTHER = "r", "other"


class WordSparse:
    """Each distinct word a term (its crc32 within the vocabulary), weight 1; ``calls`` counts encoded texts."""

    name = "word-sparse-test"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> list[bytes]:
        self.calls += len(texts)
        out = []
        for text in texts:
            ids = np.array(sorted({zlib.crc32(w.encode()) % 30522 for w in re.findall(r"\w+", text.lower())}))
            out.append(pack(ids, np.ones(len(ids), dtype=np.float32)))
        return out


async def stored(memory: caderno.Memory, resource_id: str = R) -> dict[int, bytes]:
    # Every seq a test here can have given: appends count from 1, and on SQLite an import's
    # messages may take seqs up to a block ahead (``_sqlite_plans.SEQ_BLOCK``).
    seqs = tuple(range(1, 200 + SEQ_BLOCK))
    return await memory.run(ops.ReadSparse(resource_id=resource_id, model=WordSparse.name, seqs=seqs))


async def test_the_worker_stores_each_messages_terms_and_reads_them_by_seq(db_url: str) -> None:
    sparse = WordSparse()
    async with caderno.connect(db_url, embedder=HashingEmbedder(32), sparse=sparse) as memory:
        messages = await memory.append_messages(
            resource_id=R,
            thread_id="t",
            messages=[Message.user("the Amsterdam goal is EUR 6000"), Message.assistant("noted, by September")],
        )
        await memory.flush()
        got = await stored(memory)
        assert got == {m.seq: t for m, t in zip(messages, sparse.encode([m.content for m in messages]), strict=True)}
        ids, weights = unpack(got[messages[0].seq or 0])
        assert len(ids) == 6 and (weights == 1.0).all()
        # Another encoder's terms are never compared; another resource's are never read.
        assert await memory.run(ops.ReadSparse(resource_id=R, model="another", seqs=tuple(got))) == {}
        assert await stored(memory, OTHER) == {}


def embedded_on_flush_only(memory: caderno.Memory) -> None:
    """No background worker in this process (as when ``serve``'s worker embeds elsewhere): what is
    queued stays queued until ``flush``, so an assertion between a queueing call and ``flush``
    cannot race a batch."""
    memory.indexer.elsewhere = lambda: None


async def test_terms_go_with_their_vectors(db_url: str) -> None:
    """An edit, a pop, a delete, a thread's delete, a reindex and an erase leave no stale terms."""
    async with caderno.connect(db_url, embedder=HashingEmbedder(32), sparse=WordSparse()) as memory:
        embedded_on_flush_only(memory)
        a = await memory.append_messages(
            resource_id=R, thread_id="a", messages=[Message.user(f"a note {i}") for i in range(4)]
        )
        b = await memory.append_messages(resource_id=R, thread_id="b", messages=[Message.user("b note")])
        await memory.append_messages(resource_id=OTHER, thread_id="a", messages=[Message.user("other note")])
        await memory.flush()
        assert set(await stored(memory)) == {m.seq for m in a + b}

        await memory.messages.edit(resource_id=R, message_id=str(a[0].id), content="a rewritten note")
        assert set(await stored(memory)) == {m.seq for m in a[1:] + b}  # the old text's terms are gone at once
        await memory.flush()
        (edited,) = [t for seq, t in (await stored(memory)).items() if seq == a[0].seq]
        assert edited == WordSparse().encode(["a rewritten note"])[0]

        await memory.messages.delete(resource_id=R, message_id=str(a[1].id))
        await memory.messages.pop(resource_id=R, thread_id="a")
        await memory.delete_thread(resource_id=R, thread_id="b")
        assert set(await stored(memory)) == {a[0].seq, a[2].seq}

        assert await memory.reindex(resource_id=R) == 2
        assert await stored(memory) == {}
        await memory.flush()
        assert set(await stored(memory)) == {a[0].seq, a[2].seq}

        await memory.erase_resource(resource_id=R)
        assert await stored(memory) == {}
        assert len(await stored(memory, OTHER)) == 1  # nothing crosses resources


async def test_an_import_computes_the_terms_again(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=HashingEmbedder(32), sparse=WordSparse()) as memory:
        embedded_on_flush_only(memory)
        await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("the Amsterdam goal")])
        await memory.flush()
        before = await stored(memory)
        dump = await memory.export_resource(resource_id=R)
        await memory.erase_resource(resource_id=R)
        await memory.import_resource(dump)
        assert await stored(memory) == {}  # an export holds no vectors: they are computed again
        await memory.flush()
        assert list((await stored(memory)).values()) == list(before.values())


async def test_the_rerank_lifts_the_candidate_whose_terms_match(db_url: str) -> None:
    """The candidate whose terms match the query's best is among the first, and says so in ``scores``."""
    sparse = WordSparse()
    async with caderno.connect(db_url, embedder=HashingEmbedder(32), sparse=sparse) as memory:
        filler = [Message.user(f"a long day at the office, meeting {i} about the budget") for i in range(30)]
        needle = Message.user("budget tulips: Amsterdam savings in EUR")
        await memory.append_messages(resource_id=R, thread_id="t", messages=[needle, *filler])
        await memory.flush()
        memory.indexer.sparse = None  # the same store without the rerank
        base = await memory.recall(resource_id=R, query="budget tulips Amsterdam EUR", top=3, lexical=0)
        memory.indexer.sparse = sparse
        hits = await memory.recall(resource_id=R, query="budget tulips Amsterdam EUR", top=3, lexical=0)
        assert all("sparse" not in h.scores for h in base)
        assert needle.content in [h.message.content for h in hits]
        best = max(hits, key=lambda h: h.scores.get("sparse", 0.0))
        assert best.message.content == needle.content and "sparse" not in best.reasons


async def test_candidates_without_terms_keep_their_fused_place(db_url: str) -> None:
    """Messages embedded before terms were stored (until a reindex) are neither lifted nor sunk by the rerank."""
    sparse = WordSparse()
    async with caderno.connect(db_url, embedder=HashingEmbedder(32), sparse=None) as memory:
        await memory.append_messages(
            resource_id=R,
            thread_id="old",
            messages=[Message.user(f"the budget for trip {i} to Amsterdam in EUR") for i in range(12)],
        )
        await memory.flush()  # vectors, no terms
        query = "budget Amsterdam EUR trip"
        before = [h.message.id for h in await memory.recall(resource_id=R, query=query, top=8)]
        memory.indexer.sparse = sparse
        after = await memory.recall(resource_id=R, query=query, top=8)
        assert [h.message.id for h in after] == before and all("sparse" not in h.scores for h in after)
        # Newer messages with terms, each sharing one word of the query (so one sparse score for all):
        # their terms must not lift them over the older ones, which have none to show.
        await memory.append_messages(
            resource_id=R, thread_id="new", messages=[Message.user(f"a note {i} on Amsterdam") for i in range(3)]
        )
        await memory.flush()
        memory.indexer.sparse = None
        fused = {h.message.id for h in await memory.recall(resource_id=R, query=query, top=12)}
        memory.indexer.sparse = sparse
        mixed = await memory.recall(resource_id=R, query=query, top=12)
        assert {h.message.id for h in mixed} == fused
        assert (
            len(fused) == 12 and len(await memory.recall(resource_id=R, query=query, top=15)) == 15
        )  # all in the pool


def test_dot_is_the_dense_dot_product() -> None:
    rng = np.random.default_rng(7)
    vectors = []
    for n in (0, 1, 40, 300):
        ids = np.sort(rng.choice(30522, size=n, replace=False))
        vectors.append((ids, rng.random(n).astype(np.float32)))
    dense = np.zeros((len(vectors), 30522), dtype=np.float32)
    for row, (ids, w) in enumerate(vectors):
        dense[row, ids] = np.frombuffer(np.float16(w).tobytes(), np.float16)
    blobs = [pack(ids, w) for ids, w in vectors]
    assert np.allclose(dot(blobs[3], blobs), dense @ dense[3], rtol=1e-3)
