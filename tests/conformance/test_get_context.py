"""``Memory.get_context`` (the reference agent's tri-hybrid context) on every backend, with the real embedder.

The reference: davo20019/aidaemon, commit 620a136, ``src/state/sqlite.rs``
``get_context``: recent 10 (the session's last messages, every role),
salient (importance >= 0.8) 5, relevant 5, deduplicated by id.
"""

from __future__ import annotations

import math

import pytest

import caderno
from caderno import ContextParts, Message, ToolCall
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
    assert got.relevant[0].scores["relevant"] >= caderno.memory.engines.get_context.GET_CONTEXT_MIN_SIMILARITY
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


def call(*ids: str, importance: float | None = None) -> Message:
    """An assistant message asking for one tool call per id."""
    return Message.assistant(
        tool_calls=[ToolCall(id=i, name="lookup", arguments={"q": i}) for i in ids], importance=importance
    )


#: A turn with tool work: two calls answered, then a final reply; then the next question.
TOOLED = [
    Message.user("What is the water bill this month?"),
    call("c1", "c2"),
    Message.tool("water: EUR 41", tool_call_id="c1"),
    Message.tool("last month: EUR 39", tool_call_id="c2"),
    Message.assistant("The water bill is EUR 41, two more than last month."),
    Message.user("And the electricity?"),
    call("c3"),
    Message.tool("electricity: EUR 70", tool_call_id="c3"),
    Message.assistant("Electricity is EUR 70."),
]


def roles(hits: list) -> list[str]:
    return [h.message.role for h in hits]


async def test_recent_holds_tool_calls_and_their_results(memory: caderno.Memory) -> None:
    # recall's recent leg would keep only the user messages and final replies; get_context keeps every role.
    await memory.append_messages(resource_id=R, thread_id="t", messages=TOOLED)
    got = await memory.get_context(resource_id=R, thread_id="t", query="", recent=4, salient=0, relevant=0)
    assert roles(got.recent) == ["user", "assistant", "tool", "assistant"]
    assert got.recent[1].message.tool_calls == TOOLED[6].tool_calls
    assert got.recent[2].message.tool_call_id == "c3"
    assert all(h.reasons == {"recent"} and h.thread_id == "t" for h in got.recent)
    whole = await memory.get_context(resource_id=R, thread_id="t", query="", recent=9, salient=0, relevant=0)
    assert [h.message.content for h in whole.recent] == [m.content for m in TOOLED]
    assert roles(whole.recent) == [m.role for m in TOOLED]


@pytest.mark.parametrize(
    ("recent", "first"),
    [
        (2, 8),  # window [tool c3, final]: c3's call is outside it
        (3, 6),  # the window reaches the call: the unit is whole
        (6, 4),  # window [tool c2, final, user, ...]: c2's call is outside it
        (7, 4),  # window [tool c1, tool c2, ...]: both results of a call outside it
        (8, 1),
    ],
)
async def test_recent_never_starts_with_a_tool_result_whose_call_is_outside(
    memory: caderno.Memory, recent: int, first: int
) -> None:
    await memory.append_messages(resource_id=R, thread_id="t", messages=TOOLED)
    got = await memory.get_context(resource_id=R, thread_id="t", query="", recent=recent, salient=0, relevant=0)
    assert [h.message.content for h in got.recent] == [m.content for m in TOOLED[first:]]
    assert got.recent[0].message.role != "tool"
    assert len(got.recent) <= recent  # the call is never fetched from before the window


async def test_recent_is_the_newest_of_the_thread_only(seeded: caderno.Memory) -> None:
    # A newer message in another thread of the resource (and in another resource's "now") is not recent here.
    await seeded.append_messages(resource_id=R, thread_id="old", messages=[Message.user("Newest, elsewhere.")])
    got = await seeded.get_context(resource_id=R, thread_id="now", query="", recent=50, salient=0, relevant=0)
    assert texts(got.recent) == [m.content for m in CHAT]
    assert {h.thread_id for h in got.recent} == {"now"}
    # Newest first ranks highest within the part.
    assert [h.score for h in got.recent] == sorted(h.score for h in got.recent)


async def test_a_salient_tool_message_in_the_window_is_in_recent_only(memory: caderno.Memory) -> None:
    turn = [
        Message.user("Book the table."),
        call("b1", importance=0.9),
        Message.tool("booked for 8 pm", tool_call_id="b1", importance=0.95),
        Message.assistant("Booked for 8 pm."),
    ]
    await memory.append_messages(resource_id=R, thread_id="t", messages=turn)
    got = await memory.get_context(resource_id=R, thread_id="t", query="", recent=4, salient=5, relevant=0)
    assert roles(got.recent) == ["user", "assistant", "tool", "assistant"]
    assert got.salient == []  # both salient messages are already recent
    ids = [h.message.id for h in got.messages]
    assert len(ids) == len(set(ids)) == 4
    # With the window shorter, the salient ones come back in their own part.
    short = await memory.get_context(resource_id=R, thread_id="t", query="", recent=1, salient=5, relevant=0)
    assert roles(short.recent) == ["assistant"]
    assert [h.message.importance for h in short.salient] == [0.9, 0.95]


async def test_scope_thread_reads_no_other_thread(seeded: caderno.Memory) -> None:
    # Every part stays in "now"; with the resource scope the same call finds "old"'s salient and relevant ones.
    kwargs = {"resource_id": R, "thread_id": "now", "query": "Lisbon trip budget", "recent": 2, "salient": 9}
    narrow = await seeded.get_context(**kwargs, relevant=9, scope="thread", min_similarity=-1.0)
    assert {h.thread_id for h in narrow.messages} == {"now"}
    assert len(narrow.messages) == len(CHAT)  # the whole thread, and nothing else
    wide = await seeded.get_context(**kwargs, relevant=9, scope="resource", min_similarity=-1.0)
    assert {h.thread_id for h in wide.messages} == {"now", "old"}


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
