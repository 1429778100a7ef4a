"""Positions: the number a client sees is its message's place in its thread, never a database-wide counter.

A tenant reading its own thread must learn nothing about how much others
write: positions run 1, 2, 3… per thread, whatever other threads and
resources append meanwhile; they keep the thread's order, are assigned in
the append's transaction, and a deleted message's position is never given
to another.
"""

from __future__ import annotations

import asyncio

import pytest

import caderno
from caderno import Message

R, T = "casa-gabriel", "thread-1"
pytestmark = pytest.mark.core  # positions are CORE: every test here runs on the dict store too


async def positions(memory: caderno.Memory, resource_id: str, thread_id: str) -> list[int | None]:
    return [m.position for m in await memory.get_messages(resource_id=resource_id, thread_id=thread_id)]


async def test_positions_run_one_to_n_per_thread_whatever_others_write(memory: caderno.Memory) -> None:
    for i in range(3):
        # Between each of our turns, another thread of ours and another resource write more.
        await memory.append_messages(resource_id="other", thread_id="t", messages=[Message.user("x")] * 5)
        await memory.append_messages(resource_id=R, thread_id="t2", messages=[Message.user("y")] * 2)
        stored = await memory.append_messages(
            resource_id=R, thread_id=T, messages=[Message.user(f"q{i}"), Message.assistant(f"a{i}")]
        )
        assert [m.position for m in stored] == [2 * i + 1, 2 * i + 2]
    assert await positions(memory, R, T) == [1, 2, 3, 4, 5, 6]
    assert await positions(memory, R, "t2") == [1, 2, 3, 4, 5, 6]
    assert await positions(memory, "other", "t") == list(range(1, 16))
    got = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.content for m in got] == ["q0", "a0", "q1", "a1", "q2", "a2"]  # order unchanged
    assert "position" in got[0].to_dict() and got[0].to_dict()["position"] == 1
    assert "seq" not in got[0].to_dict()  # the database-wide number is never handed out


async def test_a_deleted_messages_position_is_never_given_again(memory: caderno.Memory) -> None:
    stored = await memory.append_messages(
        resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(4)]
    )
    await memory.messages.pop(resource_id=R, thread_id=T)  # m3, position 4
    await memory.messages.delete(resource_id=R, message_id=stored[1].id or "")  # m1, position 2
    again = await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("new")])
    assert again[0].position == 5
    assert await positions(memory, R, T) == [1, 3, 5]


async def test_concurrent_appends_to_one_thread_get_distinct_increasing_positions(memory: caderno.Memory) -> None:
    async def turn(i: int) -> list[Message]:
        return await memory.append_messages(
            resource_id=R, thread_id=T, messages=[Message.user(f"q{i}"), Message.assistant(f"a{i}")]
        )

    returned = await asyncio.gather(*(turn(i) for i in range(30)))
    for pair in returned:  # each call's own messages are consecutive
        assert pair[1].position == (pair[0].position or 0) + 1
    got = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.position for m in got] == list(range(1, 61))
    by_id = {m.id: m.position for pair in returned for m in pair}
    assert {m.id: m.position for m in got} == by_id  # what the append said is what is stored


async def test_before_pages_by_position(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id="other", thread_id="t", messages=[Message.user("x")] * 7)
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(10)])
    page = await memory.get_messages(resource_id=R, thread_id=T, limit=3, before=5)
    assert [(m.position, m.content) for m in page] == [(2, "m1"), (3, "m2"), (4, "m3")]


async def test_a_thread_deleted_and_written_again_starts_at_one(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("a"), Message.user("b")])
    await memory.delete_thread(resource_id=R, thread_id=T)
    stored = await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("c")])
    assert stored[0].position == 1


async def test_export_and_import_keep_positions(memory: caderno.Memory) -> None:
    stored = await memory.append_messages(
        resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(3)]
    )
    await memory.messages.delete(resource_id=R, message_id=stored[1].id or "")
    dump = await memory.export_resource(resource_id=R)
    assert [m["position"] for m in dump["threads"][0]["messages"]] == [1, 3]
    await memory.erase_resource(resource_id=R)
    await memory.import_resource(dump)
    assert await positions(memory, R, T) == [1, 3]
    more = await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("next")])
    assert more[0].position == 4  # the imported thread's counter went on from its highest position
