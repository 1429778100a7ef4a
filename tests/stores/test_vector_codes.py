"""Vectors' codes are stored a batch at a time (packs), read in their place, and gone with a reindex or an erase.

The codes are the vector cache's own form of a vector (``quantize``): a
cache's first load copies a pack's planes instead of quantizing float32.
Vectors stored without codes come as float32 and are quantized at load,
beside packed ones; a pack's copy of a vector deleted since is passed over
by recall, and a vector stored again wins over its older copy.
"""

from __future__ import annotations

import numpy as np

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.embeddings import HashingEmbedder
from caderno.memory.recall import VectorIndex, _Entry, code_dtype, quantize
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


def unpacked(pack: ops.VectorPack) -> dict[int, tuple[str, bytes]]:
    """``{seq: (thread, codes as code_dtype bytes)}`` of one pack, from its planes."""
    seqs = np.frombuffer(pack.seqs, dtype="<i8")
    codes = np.empty(len(seqs), dtype=code_dtype(DIM))
    at = 0
    for name in ops.PACK_PLANES:
        width = codes[name][0].nbytes
        plane = np.frombuffer(pack.codes[at : at + len(seqs) * width], dtype=codes.dtype[name].base)
        codes[name] = plane.reshape(codes[name].shape)
        at += len(seqs) * width
    assert at == len(pack.codes)
    threads = [pack.threads[i] for i in np.frombuffer(pack.thread_of, dtype="<i4")]
    return {int(seq): (t, c.tobytes()) for seq, t, c in zip(seqs, threads, codes, strict=True)}


def packed(rows: ops.VectorRows) -> dict[int, tuple[str, bytes]]:
    """Every pack's vectors, the later pack's copy of a seq winning (as the cache keeps them)."""
    out: dict[int, tuple[str, bytes]] = {}
    for pack in rows.packs:
        out.update(unpacked(pack))
    return out


async def test_vectors_with_and_without_codes_load_together_and_search_alike(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=None) as memory:
        old, new = await appended(memory, "a", 6), await appended(memory, "b", 5)
        plain, coded = embedded(emb, old), embedded(emb, new)
        codes = quantize([np.frombuffer(v, np.float32) for _, _, v in coded])
        await memory.run(ops.FinishEmbeddings(model=emb.name, dim=DIM, done=plain, failed=(), now=utcnow()))
        await memory.run(
            ops.FinishEmbeddings(
                model=emb.name, dim=DIM, done=coded, failed=(), now=utcnow(), codes=tuple(c.tobytes() for c in codes)
            )
        )

        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        # Without codes: float32, with the threads from the messages; with codes: one pack.
        assert rows.loose == [seq for _, seq, _ in plain] and rows.coded == 0
        assert b"".join(rows.vectors) == b"".join(v for _, _, v in plain)
        assert set(rows.threads["a"]) >= {m.seq for m in old}
        assert len(rows.packs) == 1
        assert packed(rows) == {m.seq: ("b", c.tobytes()) for m, c in zip(new, codes, strict=True)}

        # The same search as over float32 alone: codes made at load or stored are the same codes.
        matrix = np.frombuffer(b"".join(v for _, _, v in plain + coded), np.float32).reshape(-1, DIM)
        q = matrix[7] + 0.1 * matrix[2]
        hits = await VectorIndex().search(memory.run, R, emb.name, DIM, q, 5, -1.0, None)
        floats = _Entry(DIM)
        floats.add([seq for _, seq, _ in plain + coded], ["a"] * 6 + ["b"] * 5, matrix.tobytes())
        assert hits == floats.search(q, 5, -1.0, None)
        exact = np.argsort(-(matrix @ q), kind="stable")[:5]
        assert [seq for seq, _ in hits] == [(plain + coded)[i][1] for i in exact]
        for thread_id, messages in (("a", old), ("b", new)):
            within = await VectorIndex().search(memory.run, R, emb.name, DIM, q, 10, -1.0, thread_id)
            assert {seq for seq, _ in within} == {m.seq for m in messages}


async def test_the_worker_stores_a_pack_of_each_batchs_codes(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        a, b = await appended(memory, "a", 4), await appended(memory, "b", 3)
        await memory.flush()
        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        assert not rows.loose and not rows.vectors and not rows.codes and rows.packs  # a batch or more
        want = quantize(np.asarray(emb.embed([m.content for m in a + b]), dtype=np.float32))
        assert packed(rows) == {
            m.seq: (m_thread, code.tobytes())
            for m, m_thread, code in zip(a + b, ["a"] * 4 + ["b"] * 3, want, strict=True)
        }


async def test_a_vector_stored_again_wins_over_its_packed_copy(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        messages = await appended(memory, "a", 3)
        await memory.flush()
        target = messages[1]
        other = np.asarray(emb.embed(["something else entirely"])[0], dtype=np.float32)
        await memory.run(
            ops.FinishEmbeddings(
                model=emb.name,
                dim=DIM,
                done=((R, target.seq or 0, other.tobytes()),),
                failed=(),
                now=utcnow(),
                codes=(quantize([other]).tobytes(),),
            )
        )
        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        assert len(rows.packs) == 2 and packed(rows)[target.seq or 0] == ("a", quantize([other]).tobytes())
        hits = await VectorIndex().search(memory.run, R, emb.name, DIM, other, 1, -1.0, None)
        assert hits[0][0] == target.seq and hits[0][1] > 0.999


async def test_recall_passes_over_packed_vectors_of_deleted_messages(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        kept = await memory.append_messages(
            resource_id=R, thread_id="a", messages=[Message.user("the Lisbon trip is in May")]
        )
        gone = await memory.append_messages(
            resource_id=R, thread_id="b", messages=[Message.user("the Lisbon trip is in June")]
        )
        await memory.flush()
        await memory.messages.delete(resource_id=R, message_id=str(gone[0].id))
        rows = await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))
        assert gone[0].seq in packed(rows)  # the pack keeps its copy
        # The cache's first load is this recall's: the copy is loaded, and passed over.
        hits = await memory.recall(resource_id=R, query="Lisbon trip", recent=0, salient=0, lexical=0)
        assert [h.message.content for h in hits] == [kept[0].content]


async def test_a_reindex_and_an_erase_leave_no_pack(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        a = await appended(memory, "a", 3)
        await memory.flush()

        async def packed_seqs() -> set[int]:
            return set(packed(await memory.run(ops.ReadVectors(resource_id=R, model=emb.name, after_id=0))))

        assert await packed_seqs() == {m.seq for m in a}
        assert await memory.reindex(resource_id=R) == 3
        assert await packed_seqs() == set()
        await memory.flush()
        assert await packed_seqs() == {m.seq for m in a}
        await memory.erase_resource(resource_id=R)
        assert await packed_seqs() == set()
