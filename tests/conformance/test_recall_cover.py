"""The lexical leg's weight follows how much of the question its best hit covers, on every backend.

A question whose words its best full-text hit mostly holds keeps the
lexical leg's whole weight; one whose best hit holds few of its words (a
paraphrase) leaves the lead to the dense leg: the lexical weight falls to
``COVER_FLOOR`` of itself (``caderno.memory.engines.recall.COVER_LOW`` / ``COVER_HIGH``).
Only the lexical leg runs here, and the sparse rerank is off (it scores by
rank alone, and would turn on for the second question whenever the
background indexer had stored the message's terms by then), so a hit's
fused score is its weight over ``RRF_K + 1``.
"""

from __future__ import annotations

import math

import caderno
from caderno import Message
from caderno.memory.engines.recall import COVER_FLOOR, LEG_WEIGHTS, RRF_K

R = "casa"


async def top_score(memory: caderno.Memory, query: str) -> tuple[str, float]:
    hits = await memory.recall(resource_id=R, query=query, recent=0, salient=0, relevant=0, lexical=5)
    best = max(hits, key=lambda h: h.score)
    return best.message.content, best.score


async def test_the_lexical_weight_follows_the_best_hits_cover(db_url: str) -> None:
    async with caderno.connect(db_url, sparse=None) as memory:
        await memory.append_messages(
            resource_id=R,
            thread_id="t",
            messages=[Message.user("the car insurance renewal is due in March"), Message.assistant("Noted.")],
        )
        await check_the_weights(memory)


async def check_the_weights(memory: caderno.Memory) -> None:
    full = LEG_WEIGHTS["lexical"] / (RRF_K + 1)
    # Every word of the question is in the hit's row: the whole weight.
    content, score = await top_score(memory, "car insurance renewal")
    assert content == "the car insurance renewal is due in March"
    assert math.isclose(score, full)
    # Two words of six: a paraphrase the dense leg should lead.
    content, score = await top_score(memory, "what did the broker quote for insuring our vehicle car")
    assert content == "the car insurance renewal is due in March"
    assert math.isclose(score, full * COVER_FLOOR)
