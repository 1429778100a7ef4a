"""The learned-sparse rerank with the real models: on by default, off with an embedder of your own.

``tests/stores/test_sparse_terms.py`` checks storage and the rerank's
mechanics on every backend with a stand-in encoder; here the bundled
SPLADE-tiny and MiniLM run end to end on a SQLite file.
"""

from __future__ import annotations

from pathlib import Path

import caderno
from caderno import Message
from caderno.embeddings import HashingEmbedder, SpladeEncoder
from caderno.stores import ops

R = "casa"


async def test_the_default_memory_reranks_with_splade(tmp_path: Path) -> None:
    async with caderno.connect(tmp_path / "c.db") as memory:
        assert isinstance(memory.indexer.sparse, SpladeEncoder)
        said = [
            Message.user("We are saving EUR 6,000 for the Amsterdam trip, by 1 September 2026."),
            Message.assistant("Noted: EUR 6,000 for Amsterdam by 2026-09-01."),
            Message.user("The car insurance is R$ 310 a month."),
            Message.user("My sister adopted a greyhound called Pipoca."),
        ]
        stored = await memory.append_messages(resource_id=R, thread_id="monday", messages=said)
        hits = await memory.recall(resource_id=R, query="how much do we need for the Netherlands holiday?", top=2)
        # Found on the first recall (it embeds what is pending first), and ranked by the sparse terms too.
        assert hits.not_searchable == 0
        assert stored[0].id in {h.message.id for h in hits}
        assert all(h.scores.get("sparse", 0) > 0 for h in hits)
        terms = await memory.run(
            ops.ReadSparse(resource_id=R, model=memory.indexer.sparse.name, seqs=tuple(m.seq or 0 for m in stored))
        )
        assert set(terms) == {m.seq for m in stored}


async def test_an_embedder_of_your_own_comes_without_the_rerank_unless_given(tmp_path: Path) -> None:
    async with caderno.connect(tmp_path / "own.db", embedder=HashingEmbedder(16)) as memory:
        assert memory.indexer.sparse is None
        await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("Amsterdam, EUR 6,000")])
        hits = await memory.recall(resource_id=R, query="Amsterdam")
        assert hits and all("sparse" not in h.scores for h in hits)
    encoder = caderno.embeddings.default_sparse_encoder()
    async with caderno.connect(tmp_path / "given.db", embedder=HashingEmbedder(16), sparse=encoder) as memory:
        assert memory.indexer.sparse is encoder
    async with caderno.connect(tmp_path / "off.db", sparse=None) as memory:
        assert memory.indexer.sparse is None

