"""``Memory.get_context`` (the reference agent's tri-hybrid context) on every backend, with the real embedder.

The reference: davo20019/aidaemon, commit 620a136, ``src/state/sqlite.rs``
``get_context``: recent 10, salient (importance >= 0.8) 5, relevant 5,
deduplicated by id.
"""

from __future__ import annotations

import math

import pytest

import caderno
from caderno import ContextParts, Message
from caderno.core.errors import UsageError

R = "casa"
#: The current thread: six exchanges about the house; two of its older user messages are salient.
CHAT = [
    Message.user(f"Note {i}: the garden needs watering on day {i}.", importance=0.9 if i in (0, 1) else 0.2)
    for i in range(6)
]
#: An older thread: salient decisions (0.8 exactly counts, 0.79 does not) and one about the trip.
OLD = [
    Message.user("Decision: the car is sold in June.", importance=0.8),
    Message.user("Decision: the piano lessons stop.", importance=0.79),
    Message.user("We decided the Lisbon trip happens in May, with a budget of EUR 3000.", importance=0.3),
    Message.user("Decision: rent is paid on the 5th.", importance=0.95),
]


@pytest.fixture
async def seeded(memory: caderno.Memory) -> caderno.Memory:
    await memory.append_messages(resource_id=R, thread_id="old", messages=OLD)
    await memory.append_messages(resource_id=R, thread_id="now", messages=CHAT)
    await memory.append_messages(
        resource_id="other",
        thread_id="now",
        messages=[Message.user("Decision: our Lisbon trip budget is EUR 9999.", importance=0.99)],
    )
    await memory.flush()
    return memory


def texts(hits: list) -> list[str]:
    return [h.message.content for h in hits]


async def test_three_parts_with_their_limits_and_orders(seeded: caderno.Memory) -> None:
    got = await seeded.get_context(
        resource_id=R,
        thread_id="now",
        query="how much money for the Portugal holiday?",
        recent=3,
        salient=2,
        relevant=1,
    )
    assert isinstance(got, ContextParts)
    # recent: the thread's last 3, oldest first
    assert texts(got.recent) == [m.content for m in CHAT[3:]]
    # salient: importance >= 0.8, not in recent, the newest 2 chosen, in conversation order
    assert texts(got.salient) == [CHAT[0].content, CHAT[1].content]
    assert all("salient" in h.reasons and (h.message.importance or 0) >= 0.8 for h in got.salient)
    # relevant: by meaning (no word in common), at the floor or above
    assert texts(got.relevant) == [OLD[2].content]
    assert got.relevant[0].scores["relevant"] >= caderno.memory.tri_hybrid.GET_CONTEXT_MIN_SIMILARITY
    assert texts(got.messages) == [OLD[2].content, *texts(got.salient), *texts(got.recent)]


async def test_default_limits_are_ten_five_five(memory: caderno.Memory) -> None:
    many = [Message.user(f"Fact {i}: the shed key number is {i}.", importance=0.9) for i in range(25)]
    await memory.append_messages(resource_id=R, thread_id="t", messages=many)
    await memory.flush()
    got = await memory.get_context(resource_id=R, thread_id="t", query="shed key number", min_similarity=0.0)
    assert (len(got.recent), len(got.salient), len(got.relevant)) == (10, 5, 5)
    assert texts(got.recent) == [m.content for m in many[15:]]
    assert texts(got.salient) == [m.content for m in many[10:15]]  # the newest salient ones not already recent


async def test_no_message_in_two_parts_and_later_parts_fill_up(seeded: caderno.Memory) -> None:
    # Every message of "now" is about the garden: recent, salient and relevant all want them.
    got = await seeded.get_context(
        resource_id=R, thread_id="now", query="the garden needs watering", recent=2, salient=3, relevant=2
    )
    ids = [h.message.id for h in [*got.recent, *got.salient, *got.relevant]]
    assert len(ids) == len(set(ids)) == 7
    assert texts(got.recent) == [CHAT[4].content, CHAT[5].content]
    assert texts(got.salient) == [OLD[3].content, CHAT[0].content, CHAT[1].content]
    # The most similar are already recent or salient; relevant fills up with the next ones.
    assert texts(got.relevant) == [CHAT[2].content, CHAT[3].content]
    assert sorted(h.message.id for h in got.messages) == sorted(ids)


async def test_salient_needs_importance_of_at_least_0_8(seeded: caderno.Memory) -> None:
    got = await seeded.get_context(resource_id=R, thread_id="old", query="", recent=0, salient=10, relevant=0)
    assert sorted(texts(got.salient)) == sorted([CHAT[0].content, CHAT[1].content, OLD[0].content, OLD[3].content])
    assert got.recent == [] and got.relevant == []  # "" switches the relevant part off


async def test_scope_thread_keeps_to_the_thread(seeded: caderno.Memory) -> None:
    got = await seeded.get_context(
        resource_id=R, thread_id="now", query="Lisbon trip budget", recent=0, salient=5, relevant=5, scope="thread"
    )
    assert all(h.thread_id == "now" for h in [*got.salient, *got.relevant])
    assert OLD[2].content not in texts(got.relevant)


async def test_a_high_floor_leaves_the_relevant_part_empty(seeded: caderno.Memory) -> None:
    query = "how much money for the Portugal holiday?"
    low = await seeded.get_context(resource_id=R, thread_id="now", query=query, recent=0, salient=0)
    high = await seeded.get_context(
        resource_id=R, thread_id="now", query=query, recent=0, salient=0, min_similarity=0.99
    )
    assert low.relevant and high.relevant == []


async def test_a_thread_id_of_another_resource_gives_nothing(seeded: caderno.Memory) -> None:
    # "other" owns a thread "now" with a salient, relevant message; "nobody" has nothing.
    got = await seeded.get_context(resource_id="nobody", thread_id="now", query="Lisbon trip budget")
    assert got == ContextParts(recent=[], salient=[], relevant=[])
    # And R's own context never holds "other"'s message, though its thread is named "now" too.
    mine = await seeded.get_context(resource_id=R, thread_id="now", query="Lisbon trip budget", salient=50)
    assert all("9999" not in t for t in texts(mine.messages))


@pytest.mark.parametrize(
    "bad",
    [
        {"recent": -1},
        {"salient": True},
        {"relevant": 1001},
        {"recent": "3"},
        {"min_similarity": 1.5},
        {"min_similarity": math.nan},
        {"min_similarity": "0.5"},
        {"min_similarity": False},
        {"scope": "everywhere"},
        {"query": 5},
        {"query": "a\x00b"},
        {"resource_id": ""},
        {"thread_id": 5},
        {"thread_id": None},
        {"now": "yesterday"},
    ],
)
async def test_bad_arguments_are_refused_and_change_nothing(seeded: caderno.Memory, bad: dict) -> None:
    before = await seeded.export_resource(resource_id=R)
    args = {"resource_id": R, "thread_id": "now", "query": "garden", **bad}
    with pytest.raises(UsageError):
        await seeded.get_context(**args)
    assert await seeded.export_resource(resource_id=R) == before
