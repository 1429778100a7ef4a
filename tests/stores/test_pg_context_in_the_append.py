"""PostgreSQL: an append and an import give each message its full text themselves (migration 0027).

A message's ``search_tsv`` is its own words, its 2 neighbours' on each side
in its thread and its day (migration 0013); the triggers that kept it on
insert are gone, and the statement that writes the messages computes it,
setting the 2 messages before them again. Whatever wrote them, every
message's stored text must be what ``caderno_search_tsv`` (the function the
triggers used, which edits still use) makes of the thread as it stands.
"""

from __future__ import annotations

import asyncio
import random
from urllib.parse import parse_qs, urlsplit

import pytest
from _pg import pg_schema

import caderno
from caderno import Message
from caderno.stores import _postgres_plans

pytestmark = pytest.mark.postgres

R = "casa"
WORDS = [
    "viagem",
    "carro",
    "seguro",
    "amsterdam",
    "budget",
    "renda",
    "casa",
    "escola",
    "junho",
    "julho",
    "conta",
    "luz",
    "médico",
    "consulta",
]


def _stale(url: str) -> list[tuple[object, ...]]:
    """The messages whose stored full text differs from what the thread as it stands makes of them."""
    import psycopg

    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        return conn.execute(
            "SELECT resource_id, thread_id, position FROM events WHERE kind = 'message' AND search_tsv "
            "IS DISTINCT FROM caderno_search_tsv(resource_id, thread_id, seq, content, created_at)"
        ).fetchall()


def _turn(rng: random.Random, n: int) -> list[Message]:
    return [Message.user(" ".join(rng.choices(WORDS, k=rng.randint(0, 5)))) for _ in range(n)]


async def test_appends_and_imports_store_the_full_text_the_thread_makes() -> None:
    rng = random.Random(7)
    with pg_schema() as url:
        async with caderno.connect(url, embedder=None) as memory:
            for _ in range(40):  # turns of 1 to 4 messages over a few threads, empty texts among them
                tid = f"t{rng.randrange(4)}"
                await memory.append_messages(resource_id=R, thread_id=tid, messages=_turn(rng, rng.randint(1, 4)))
            await memory.append_messages(resource_id=R, thread_id="t0", messages=[Message.assistant("")])
            # Longer than one statement: the second chunk sets the last 2 of the first again.
            await memory.append_messages(resource_id=R, thread_id="long", messages=_turn(rng, 5))
            big = _turn(rng, _postgres_plans.APPEND_CHUNK + 3)
            await memory.append_messages(resource_id=R, thread_id="long", messages=big)
            # Summaries are no messages: no full text, and not anyone's neighbour.
            (first,) = await memory.append_messages(resource_id=R, thread_id="t1", messages=_turn(rng, 1))
            summary = memory.turns.prepare_messages([Message.system("resumo da viagem")])[0]
            await memory.run(
                caderno.stores.ops.WriteSummary(
                    resource_id=R, thread_id="t1", summary=summary, covered=(first.seq or 0,), now=first.created_at
                )
            )
            await memory.append_messages(resource_id=R, thread_id="t1", messages=_turn(rng, 2))
            assert _stale(url) == []
            dump = await memory.export_resource(resource_id=R)
            await memory.erase_resource(resource_id=R)
            await memory.import_resource(dump)
            assert _stale(url) == []
            hits = await memory.recall(resource_id=R, query="amsterdam", recent=0, salient=0, relevant=0, lexical=5)
            assert hits  # the index serves what the statements wrote


async def test_concurrent_appends_to_one_thread_each_see_the_turn_before() -> None:
    """A turn reads its thread's last messages after it holds the thread: a turn committed meanwhile is there."""
    rng = random.Random(3)
    with pg_schema() as url:
        async with caderno.connect(url, embedder=None) as memory:

            async def turn() -> None:
                await memory.append_messages(resource_id=R, thread_id="t", messages=_turn(rng, 2))

            await asyncio.gather(*(turn() for _ in range(24)))
            got = await memory.get_messages(resource_id=R, thread_id="t")
            assert [m.position for m in got] == list(range(1, 49))
            assert _stale(url) == []
