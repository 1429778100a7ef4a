"""ReadVectors hands a resource's vectors over in blocks and packs, with their threads, on every backend.

Vectors the embedding worker stores come as packs (one row a batch); those
stored before packs existed (migration 0020) come in glued blocks, as
float32 or as the codes stored beside them (0019), below the first pack.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder
from caderno.memory.recall import VectorIndex, code_dtype, quantize
from caderno.stores import _plans, ops

DIM = 32


def sql(memory: caderno.Memory, db_url: str, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on the store's database through a connection of its own (autocommit)."""
    if db_url.startswith(("memory:", "sqlite:")):
        with closing(sqlite3.connect(memory.store.path, isolation_level=None)) as conn:  # type: ignore[attr-defined]
            return conn.execute(statement, params).fetchall()
    import psycopg

    url = urlsplit(db_url)
    query = parse_qs(url.query)
    schema = query.pop("schema")[0]
    query.pop("pooler", None)
    base = url._replace(query=urlencode(query, doseq=True)).geturl()
    with psycopg.connect(base, autocommit=True, prepare_threshold=None) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        cur = conn.execute(statement.replace("?", "%s"), params)
        return cur.fetchall() if cur.description else []


def as_rows(rows: ops.VectorRows) -> dict[int, bytes]:
    """``{seq: codes}`` of the float32 vectors (quantized here), the stored codes and the packs,
    the later copy of a seq read twice winning, as the cache keeps them."""
    floats = len(rows.loose) - rows.coded
    blob = b"".join(rows.vectors)
    assert len(blob) == floats * DIM * 4
    codes = np.frombuffer(blob, dtype=np.float32).reshape(-1, DIM)
    codes = np.concatenate([quantize(codes), np.frombuffer(b"".join(rows.codes), dtype=code_dtype(DIM))])
    assert len(codes) == len(rows.loose)
    out = {seq: code.tobytes() for seq, code in zip(rows.loose, codes, strict=True)}
    for pack in rows.packs:
        seqs = np.frombuffer(pack.seqs, dtype="<i8")
        planes = np.empty(len(seqs), dtype=code_dtype(DIM))
        at = 0
        for name in ops.PACK_PLANES:
            size = planes[name].nbytes
            planes[name] = np.frombuffer(pack.codes[at : at + size], planes.dtype[name].base).reshape(
                planes[name].shape
            )
            at += size
        assert at == len(pack.codes) and len(pack.thread_of) == 4 * len(seqs)
        out.update({int(seq): code.tobytes() for seq, code in zip(seqs, planes, strict=True)})
    return out


def pack_threads(rows: ops.VectorRows) -> dict[str, set[int]]:
    """Each thread's seqs as the packs name them."""
    out: dict[str, set[int]] = {}
    for pack in rows.packs:
        for seq, t in zip(np.frombuffer(pack.seqs, "<i8"), np.frombuffer(pack.thread_of, "<i4"), strict=True):
            out.setdefault(pack.threads[t], set()).add(int(seq))
    return out


async def stored(memory: caderno.Memory, emb: HashingEmbedder, thread_id: str) -> dict[int, bytes]:
    """What each message of the thread should have as its codes: the embedder's float32 vector's."""
    messages = await memory.run(ops.ReadThread(resource_id="r", thread_id=thread_id))
    vecs = emb.embed([m.content for m in messages])
    return {m.seq or 0: quantize([v]).tobytes() for m, v in zip(messages, vecs, strict=True)}


async def notes(memory: caderno.Memory, counts: dict[str, int], *, start: int = 0) -> None:
    for thread_id, n in counts.items():
        await memory.append_messages(
            resource_id="r",
            thread_id=thread_id,
            messages=[Message.user(f"{thread_id} note {i}") for i in range(start, start + n)],
        )
    await memory.append_messages(resource_id="other", thread_id="a", messages=[Message.user("not this one")])
    await memory.flush()


async def test_packs_hold_every_vector_with_its_thread_first_load_and_refresh(db_url: str) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        await notes(memory, {"a": 10, "b": 7})
        want = {"a": await stored(memory, emb, "a"), "b": await stored(memory, emb, "b")}

        first = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        assert not first.loose and not first.threads and first.packs
        assert as_rows(first) == {**want["a"], **want["b"]}
        assert pack_threads(first) == {t: set(want[t]) for t in ("a", "b")}

        await memory.append_messages(resource_id="r", thread_id="b", messages=[Message.user("b note 7")])
        await memory.flush()
        again = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=first.last_id))
        new = set(await stored(memory, emb, "b")) - set(want["b"])
        assert again.last_id > first.last_id and new <= set(as_rows(again))
        assert new <= pack_threads(again)["b"] and not new & pack_threads(again).get("a", set())
        nothing = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=again.last_id))
        assert nothing.last_id == again.last_id and set(as_rows(nothing)) <= set(as_rows(again))


async def test_vectors_from_before_packs_load_in_blocks_beside_packs(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database from before packs: float32 vectors, some with their codes beside them (0019)."""
    monkeypatch.setattr(_plans, "VECTOR_READ_CHUNK", 4)
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        await notes(memory, {"a": 10, "b": 7})
        want = {"a": await stored(memory, emb, "a"), "b": await stored(memory, emb, "b")}
        sql(memory, db_url, "DELETE FROM embedding_packs")
        coded = sql(memory, db_url, "SELECT id, seq FROM embeddings WHERE resource_id = 'r' AND mod(seq, 2) = 0")
        for id_, seq in coded:
            sql(
                memory,
                db_url,
                "INSERT INTO embedding_codes (resource_id, id, model, seq, codes) VALUES ('r', ?, ?, ?, ?)",
                (id_, emb.name, seq, {**want["a"], **want["b"]}[seq]),
            )

        first = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        assert not first.packs and len(first.loose) == 17 and first.coded == len(coded) > 0
        # Four vectors a statement on SQLite; PostgreSQL reads past its overlap window a statement.
        assert len(first.vectors) + len(first.codes) == (2 if db_url.startswith("postgres") else 3 + 2)
        assert as_rows(first) == {**want["a"], **want["b"]}
        for thread_id in ("a", "b"):
            assert set(want[thread_id]) <= set(first.threads[thread_id])

        # New vectors come in packs, above the old ones; a load reads both.
        await notes(memory, {"b": 2}, start=7)
        want["b"] = await stored(memory, emb, "b")
        both = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        assert len(both.loose) == 17 and both.packs and as_rows(both) == {**want["a"], **want["b"]}
        assert both.seqs[:17] == both.loose and set(both.seqs[17:]) == set(want["b"]) - set(first.loose)
        again = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=first.last_id))
        assert set(as_rows(again)) >= set(want["b"]) - set(first.loose)


async def test_a_chunked_load_searches_like_one_block(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = HashingEmbedder(DIM)
    async with caderno.connect(db_url, embedder=emb) as memory:
        for thread_id in ("a", "b", "c"):
            await memory.append_messages(
                resource_id="r",
                thread_id=thread_id,
                messages=[Message.user(f"{thread_id} said thing {i}") for i in range(20)],
            )
        await memory.flush()
        q = emb.embed(["b said thing 3"])[0]
        packed = {t: await VectorIndex().search(memory.run, "r", emb.name, DIM, q, 5, -1.0, t) for t in (None, "b")}
        sql(memory, db_url, "DELETE FROM embedding_packs")  # as stored before packs: float32 alone
        whole = {t: await VectorIndex().search(memory.run, "r", emb.name, DIM, q, 5, -1.0, t) for t in (None, "b")}
        assert whole == packed
        monkeypatch.setattr(_plans, "VECTOR_READ_CHUNK", 7)
        index = VectorIndex()
        for within, hits in whole.items():
            assert await index.search(memory.run, "r", emb.name, DIM, q, 5, -1.0, within) == hits
        b_seqs = set(await stored(memory, emb, "b"))
        assert {seq for seq, _ in whole["b"]} <= b_seqs and whole["b"][0][1] == pytest.approx(1.0, abs=1e-4)
