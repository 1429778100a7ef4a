"""Background embedding: failures recorded and retried, durable work, degraded recall."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder, MiniLMEmbedder
from caderno.memory.engines.vector_cache import VectorIndex
from caderno.stores import ops
from conftest import python_env


class FlakyEmbedder(HashingEmbedder):
    """Fails on any text containing BOOM while ``broken`` is set."""

    def __init__(self) -> None:
        super().__init__(32)
        self.broken = True

    def embed(self, texts: list[str]):
        if self.broken and any("BOOM" in t for t in texts):
            raise RuntimeError("cannot embed this text")
        return super().embed(texts)


async def test_a_failing_text_is_recorded_and_retried_with_backoff(db_url: str) -> None:
    emb = FlakyEmbedder()
    async with caderno.connect(db_url, embedder=emb) as memory:
        await memory.append_messages(
            resource_id="r",
            thread_id="t",
            messages=[Message.user("fine one"), Message.user("BOOM here"), Message.user("fine two")],
        )
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 1  # the two others are embedded
        rows = await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))
        assert len(rows.seqs) == 2
        if db_url.startswith("sqlite"):
            error, attempts = memory.store._writer.execute("SELECT error, attempts FROM embedding_queue").fetchone()
            assert error == "RuntimeError: cannot embed this text" and attempts == 1
        # Not due yet: a flush does nothing; after the backoff (1 s) it succeeds.
        emb.broken = False
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 1
        await asyncio.sleep(1.2)
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 0
        assert len((await memory.run(ops.ReadVectors(resource_id="r", model=emb.name, after_id=0))).seqs) == 3


async def test_append_never_waits_for_or_fails_on_embedding(tmp_path: Path) -> None:
    gate = threading.Event()

    class Blocked(HashingEmbedder):
        def embed(self, texts):
            gate.wait(10)  # holds the worker until the appends are done
            raise RuntimeError("always fails")

    async with caderno.connect(tmp_path / "c.db", embedder=Blocked()) as memory:
        for i in range(5):
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user(f"m{i}")])
        # Every append returned while the embedder was blocked.
        assert not gate.is_set()
        assert len(await memory.get_messages(resource_id="r", thread_id="t")) == 5
        gate.set()
        await memory.flush()
        assert await memory.run(ops.CountPendingEmbeddings()) == 5  # failures recorded, retried later
        assert len(await memory.get_messages(resource_id="r", thread_id="t")) == 5


async def test_pending_work_survives_the_process(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code = textwrap.dedent(
        f"""
        import asyncio, caderno
        async def main():
            async with caderno.connect({str(db)!r}, embedder=None) as m:
                await m.append_messages(resource_id="r", thread_id="t", messages=[
                    caderno.Message.user("We are saving for a trip to Amsterdam.")])
        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    async with caderno.connect(db) as memory:
        assert await memory.run(ops.CountPendingEmbeddings()) == 1
        await memory.flush()
        hits = await memory.recall(resource_id="r", query="our Amsterdam travel fund", recent=0, salient=0, lexical=0)
        assert [h.message.content for h in hits] == ["We are saving for a trip to Amsterdam."]


async def test_without_the_model_recall_degrades_to_lexical_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="caderno")
    broken = MiniLMEmbedder(tmp_path / "missing.onnx")
    async with caderno.connect(tmp_path / "c.db", embedder=broken) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("Lisbon trip in May")])
        await memory.flush()
        for _ in range(3):
            hits = await memory.recall(resource_id="r", query="Lisbon", recent=0)
            assert [h.reasons for h in hits] == [{"lexical"}]
        assert len(await memory.get_messages(resource_id="r", thread_id="t")) == 1
        assert await memory.run(ops.CountPendingEmbeddings()) == 1  # kept for a process that has the model
    warnings = [r for r in caplog.records if "embeddings are off" in r.getMessage()]
    assert len(warnings) == 1 and "missing.onnx" in warnings[0].getMessage()


async def test_vector_cache_is_bounded_in_bytes(tmp_path: Path) -> None:
    emb = HashingEmbedder(32)
    async with caderno.connect(tmp_path / "c.db", embedder=emb) as memory:
        for rid in ("a", "b"):
            await memory.append_messages(
                resource_id=rid, thread_id="t", messages=[Message.user(f"note {i} of {rid}") for i in range(50)]
            )
        await memory.flush()
        memory.vectors = VectorIndex(max_bytes=4_000)  # less than one resource's 50 vectors (~5 kB)
        q = emb.embed(["note of a"])[0]
        hits_a = await memory.vectors.search(memory.run, "a", emb.name, emb.dim, q, 3, 0.0, None)
        one = memory.vectors.nbytes
        assert one > 4_000
        await memory.vectors.search(memory.run, "b", emb.name, emb.dim, q, 3, 0.0, None)
        assert len(memory.vectors._entries) == 1 and memory.vectors.nbytes <= max(one, 4_000) + one
        again = await memory.vectors.search(memory.run, "a", emb.name, emb.dim, q, 3, 0.0, None)
        assert again == hits_a  # reloaded after eviction, same answer


async def test_vector_cache_refreshes_incrementally(tmp_path: Path) -> None:
    emb = HashingEmbedder(32)
    async with caderno.connect(tmp_path / "c.db", embedder=emb) as memory:
        await memory.append_messages(resource_id="a", thread_id="t", messages=[Message.user("first note")])
        await memory.flush()
        q = emb.embed(["second note"])[0]
        await memory.vectors.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None)
        entry = memory.vectors._entries[("a", emb.name)]
        first_id = entry.last_id
        await memory.append_messages(resource_id="a", thread_id="t", messages=[Message.user("second note")])
        await memory.flush()
        hits = await memory.vectors.search(memory.run, "a", emb.name, emb.dim, q, 5, -1.0, None)
        assert entry.n == 2 and entry.last_id > first_id and np.isclose(hits[0][1], 1.0)


class Relabelled(HashingEmbedder):
    """Exactly HashingEmbedder(64)'s vectors, under another model's name."""

    def __init__(self) -> None:
        super().__init__(64)
        self.name = "hashing-64-relabelled"


async def _relevant(memory: caderno.Memory, query: str) -> list[str]:
    hits = await memory.recall(resource_id="r", query=query, relevant=5, recent=0, salient=0, lexical=0)
    return [h.message.content for h in hits]


@pytest.mark.parametrize("new", [Relabelled(), HashingEmbedder(96)], ids=["same vectors, other name", "other dim"])
async def test_another_model_never_reads_the_old_vectors_and_reindex_switches(
    durable_url: str, new: HashingEmbedder
) -> None:
    db_url = durable_url  # reopened with another model: memory:// would not outlive the first connection
    old = HashingEmbedder(64)
    lisbon = "The Lisbon trip is in May"
    async with caderno.connect(db_url, embedder=old) as memory:
        await memory.append_messages(
            resource_id="r", thread_id="t", messages=[Message.user(lisbon), Message.user("risotto for dinner")]
        )
        await memory.flush()
        assert await _relevant(memory, "Lisbon trip") == [lisbon]
    async with caderno.connect(db_url, embedder=new) as memory:
        # The old vectors are there (for the relabelled model, identical to what
        # it would compute) but are another model's: never compared, not found.
        assert await _relevant(memory, "Lisbon trip") == []
        assert len((await memory.run(ops.ReadVectors(resource_id="r", model=old.name, after_id=0))).seqs) == 2
        assert await memory.reindex(resource_id="r") == 2
        await memory.flush()
        assert await _relevant(memory, "Lisbon trip") == [lisbon]
        assert len((await memory.run(ops.ReadVectors(resource_id="r", model=new.name, after_id=0))).seqs) == 2
        assert not (await memory.run(ops.ReadVectors(resource_id="r", model=old.name, after_id=0))).seqs
