"""Conversation history: the same behaviour on every backend."""

from __future__ import annotations

import asyncio

import pytest

import caderno
from caderno import Message, ToolCall
from caderno.core.errors import NotFound, UsageError

R, T = "casa-gabriel", "thread-1"
pytestmark = pytest.mark.core  # history is CORE: every test here runs on the dict store too


async def test_append_returns_ids_times_and_order(memory: caderno.Memory) -> None:
    stored = await memory.append_messages(
        resource_id=R, thread_id=T, messages=[Message.user("oi"), Message.assistant("olá!")]
    )
    assert [m.content for m in stored] == ["oi", "olá!"]
    assert all(m.id and m.created_at and m.seq for m in stored)
    assert stored[0].seq < stored[1].seq
    assert await memory.get_messages(resource_id=R, thread_id=T) == stored


async def test_order_is_the_sequence_not_the_clock(memory: caderno.Memory) -> None:
    # 300 messages in a few calls, many inside the same millisecond, and
    # with created_at deliberately going backwards.
    from datetime import UTC, datetime, timedelta

    base = datetime(2026, 1, 1, tzinfo=UTC)
    for batch in range(3):
        msgs = [
            Message.user(f"m{batch * 100 + i}", created_at=base - timedelta(seconds=batch * 100 + i))
            for i in range(100)
        ]
        await memory.append_messages(resource_id=R, thread_id=T, messages=msgs)
    got = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.content for m in got] == [f"m{i}" for i in range(300)]


async def test_concurrent_appends_to_one_thread_keep_each_call_contiguous(memory: caderno.Memory) -> None:
    async def turn(i: int) -> None:
        await memory.append_messages(
            resource_id=R, thread_id=T, messages=[Message.user(f"q{i}"), Message.assistant(f"a{i}")]
        )

    await asyncio.gather(*(turn(i) for i in range(40)))
    got = [m.content for m in await memory.get_messages(resource_id=R, thread_id=T)]
    assert len(got) == 80
    for k in range(0, 80, 2):
        assert got[k][0] == "q" and got[k + 1] == "a" + got[k][1:]


@pytest.mark.parametrize("limit,expected", [(0, []), (1, ["m4"]), (3, ["m2", "m3", "m4"]), (5, None), (99, None)])
async def test_limit_returns_newest_oldest_first(memory: caderno.Memory, limit: int, expected: list | None) -> None:
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(5)])
    got = [m.content for m in await memory.get_messages(resource_id=R, thread_id=T, limit=limit)]
    assert got == (expected if expected is not None else [f"m{i}" for i in range(5)])


async def test_limit_after_more_appends_sees_the_new_messages(memory: caderno.Memory) -> None:
    # Exercises any read cache: read, append, read again.
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("a")])
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T, limit=20)] == ["a"]
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("b")])
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T, limit=20)] == ["a", "b"]
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T)] == ["a", "b"]


async def test_negative_limit_is_refused(memory: caderno.Memory) -> None:
    with pytest.raises(UsageError, match="limit"):
        await memory.get_messages(resource_id=R, thread_id=T, limit=-1)


async def test_before_pages_by_position_and_is_bounded_to_64_bits(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id="other", thread_id=T, messages=[Message.user("x")] * 4)
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(5)])
    page = await memory.get_messages(resource_id=R, thread_id=T, limit=2, before=4)
    assert [(m.content, m.position) for m in page] == [("m1", 2), ("m2", 3)]
    edge = 2**63 - 1
    assert len(await memory.get_messages(resource_id=R, thread_id=T, before=edge)) == 5
    assert await memory.get_messages(resource_id=R, thread_id=T, before=-edge) == []
    for huge in (2**63, -(2**63) - 1, 10**23, -(10**23), 10**5000):
        with pytest.raises(UsageError, match="before must be a message position"):
            await memory.get_messages(resource_id=R, thread_id=T, before=huge)
    with pytest.raises(UsageError, match="before must be a message position"):
        await memory.get_messages(resource_id=R, thread_id=T, before="3")  # type: ignore[arg-type]


async def test_missing_thread_reads_empty(memory: caderno.Memory) -> None:
    assert await memory.get_messages(resource_id=R, thread_id="nope") == []


async def test_same_thread_id_under_two_resources_are_two_threads(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id="a", thread_id=T, messages=[Message.user("segredo de a")])
    await memory.append_messages(resource_id="b", thread_id=T, messages=[Message.user("segredo de b")])
    assert [m.content for m in await memory.get_messages(resource_id="a", thread_id=T)] == ["segredo de a"]
    assert [m.content for m in await memory.get_messages(resource_id="b", thread_id=T)] == ["segredo de b"]
    assert [t.id for t in await memory.list_threads(resource_id="c")] == []
    # Deleting b's thread through a does nothing to b.
    await memory.delete_thread(resource_id="a", thread_id=T)
    assert await memory.get_messages(resource_id="a", thread_id=T) == []
    assert [m.content for m in await memory.get_messages(resource_id="b", thread_id=T)] == ["segredo de b"]


async def test_other_resource_thread_is_not_found_like_a_missing_one(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id="b", thread_id="private", messages=[Message.user("x")])
    with pytest.raises(NotFound) as exc:
        await memory.delete_thread(resource_id="a", thread_id="private")
    with pytest.raises(NotFound) as missing:
        await memory.delete_thread(resource_id="a", thread_id="never-existed")
    assert str(exc.value).replace("private", "X") == str(missing.value).replace("never-existed", "X")
    assert len(await memory.get_messages(resource_id="b", thread_id="private")) == 1


async def test_append_is_all_or_nothing(memory: caderno.Memory) -> None:
    first = await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("one")])
    dup = Message.user("dup", id=first[0].id)
    with pytest.raises(UsageError, match="already stored"):
        await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("two"), dup])
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T)] == ["one"]


async def test_message_id_may_repeat_across_resources(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id="a", thread_id=T, messages=[Message.user("x", id="same-id")])
    await memory.append_messages(resource_id="b", thread_id=T, messages=[Message.user("y", id="same-id")])
    assert (await memory.get_messages(resource_id="b", thread_id=T))[0].content == "y"


async def test_tool_calls_and_unicode_round_trip(memory: caderno.Memory) -> None:
    call = ToolCall(
        id="call_1", name="budget_total", arguments={"month": "2026-06", "deep": {"list": [1, {"ç": None}]}}
    )
    long = "ção 🇧🇷 " * 20_000
    msgs = [
        Message.user(""),
        Message.assistant("", tool_calls=[call]),
        Message.tool('{"total": 1.5}', tool_call_id="call_1", name="budget_total"),
        Message.assistant(long, metadata={"emoji": "😀", "n": [1, 2]}, importance=0.9),
    ]
    stored = await memory.append_messages(resource_id=R, thread_id=T, messages=msgs)
    got = await memory.get_messages(resource_id=R, thread_id=T)
    assert got == stored
    assert got[1].tool_calls == (call,)
    assert got[3].content == long and got[3].metadata == {"emoji": "😀", "n": [1, 2]} and got[3].importance == 0.9


@pytest.mark.parametrize(
    "rid",
    ["'; DROP TABLE events; --", 'a" OR 1=1 --', "%", "_", "\\", "résumé..%2F..", "x" * 256],
)
async def test_injection_shaped_ids_and_content_are_plain_data(memory: caderno.Memory, rid: str) -> None:
    await memory.append_messages(resource_id=rid, thread_id=rid, messages=[Message.user("'); DELETE FROM events; --")])
    await memory.append_messages(resource_id="other", thread_id="t", messages=[Message.user("safe")])
    assert [m.content for m in await memory.get_messages(resource_id=rid, thread_id=rid)] == [
        "'); DELETE FROM events; --"
    ]
    assert [t.id for t in await memory.list_threads(resource_id=rid)] == [rid]
    assert len(await memory.get_messages(resource_id="other", thread_id="t")) == 1


async def test_list_threads_counts_and_orders(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id=R, thread_id="old", messages=[Message.user("1")])
    await memory.append_messages(resource_id=R, thread_id="new", messages=[Message.user("1"), Message.user("2")])
    threads = await memory.list_threads(resource_id=R)
    assert [(t.id, t.message_count) for t in threads] == [("new", 2), ("old", 1)]
    assert all(t.resource_id == R and t.created_at and t.updated_at for t in threads)


async def test_delete_thread_leaves_siblings(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id=R, thread_id="t1", messages=[Message.user("1")])
    await memory.append_messages(resource_id=R, thread_id="t2", messages=[Message.user("2")])
    await memory.delete_thread(resource_id=R, thread_id="t1")
    assert [t.id for t in await memory.list_threads(resource_id=R)] == ["t2"]
    with pytest.raises(NotFound):
        await memory.delete_thread(resource_id=R, thread_id="t1")
