"""One turn at a time per thread, across processes: the thread's turn lease in the database.

Two ``Memory`` objects on one database are two processes as far as the
database knows (each its own connections); the lease is all they share.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel
from caderno.core.clock import utcnow
from caderno.core.errors import ThreadBusy
from caderno.stores import ops


def slow(text: str, started: asyncio.Event, release: asyncio.Event) -> Any:
    async def step(messages: list[Message], tools: list[Any]) -> Message:
        started.set()
        await release.wait()
        return Message.assistant(text)

    return step


@pytest.fixture
async def pair(shared_url: str) -> AsyncIterator[tuple[caderno.Memory, caderno.Memory]]:
    async with (
        await caderno.connect(shared_url, embedder=None) as a,
        await caderno.connect(shared_url, embedder=None) as b,
    ):
        yield a, b


async def test_two_processes_take_turns_on_one_thread(pair: tuple[caderno.Memory, caderno.Memory]) -> None:
    a, b = pair
    started, release = asyncio.Event(), asyncio.Event()
    chat_a = AgentChat(model=ScriptedModel([slow("resposta A", started, release)]), memory=a, consolidate=False)
    chat_b = AgentChat(model=ScriptedModel([Message.assistant("resposta B")]), memory=b, consolidate=False)
    first = asyncio.create_task(chat_a.ask(messages="pergunta A", resource_id="casa", thread_id="t"))
    await started.wait()  # A holds the thread and waits on its model: no database lock is held meanwhile
    second = asyncio.create_task(chat_b.ask(messages="pergunta B", resource_id="casa", thread_id="t"))
    await asyncio.sleep(0.3)
    assert not second.done()  # B waits for the thread
    assert await b.get_messages(resource_id="casa", thread_id="t") == []  # and reads still answer
    release.set()
    await asyncio.gather(first, second)
    stored = [m.content for m in await a.get_messages(resource_id="casa", thread_id="t")]
    assert stored == ["pergunta A", "resposta A", "pergunta B", "resposta B"]
    # B's prompt was built after A's turn was stored.
    assert "resposta A" in chat_b.model.requests[0].text()  # type: ignore[attr-defined]


async def test_a_turn_that_waits_too_long_is_refused_and_stores_nothing(
    pair: tuple[caderno.Memory, caderno.Memory],
) -> None:
    a, b = pair
    started, release = asyncio.Event(), asyncio.Event()
    chat_a = AgentChat(model=ScriptedModel([slow("resposta A", started, release)]), memory=a, consolidate=False)
    chat_b = AgentChat(
        model=ScriptedModel([Message.assistant("nunca")]),
        memory=b,
        consolidate=False,
        settings=ChatSettings(turn_wait=0.2),
    )
    first = asyncio.create_task(chat_a.ask(messages="pergunta A", resource_id="casa", thread_id="t"))
    await started.wait()
    with pytest.raises(ThreadBusy, match="another turn holds thread 't'") as refused:
        await chat_b.ask(messages="pergunta B", resource_id="casa", thread_id="t")
    assert refused.value.thread_id == "t" and chat_b.model.requests == []  # type: ignore[attr-defined]
    # Another thread of the same resource is not held.
    other = AgentChat(model=ScriptedModel([Message.assistant("ok")]), memory=b, consolidate=False)
    await other.ask(messages="noutra conversa", resource_id="casa", thread_id="outra")
    release.set()
    await first
    assert [m.content for m in await b.get_messages(resource_id="casa", thread_id="t")] == ["pergunta A", "resposta A"]


async def test_a_dead_holders_lease_expires(pair: tuple[caderno.Memory, caderno.Memory]) -> None:
    a, b = pair
    # A process that took the thread and was killed: its lease is never renewed nor released.
    (taken,) = await a.batch(
        [ops.ClaimTurn(resource_id="casa", thread_id="t", holder="morto", lease_seconds=0.5, now=utcnow())]
    )
    assert taken
    chat_b = AgentChat(
        model=ScriptedModel([Message.assistant("segui")]),
        memory=b,
        consolidate=False,
        settings=ChatSettings(turn_wait=5),
    )
    result = await chat_b.ask(messages="ainda aí?", resource_id="casa", thread_id="t")
    assert result.reply.content == "segui"
    (again,) = await b.batch(
        [ops.ClaimTurn(resource_id="casa", thread_id="t", holder="outro", lease_seconds=30, now=utcnow())]
    )
    assert again  # B's commit gave the thread back


async def test_a_turn_whose_lease_was_taken_over_stores_nothing(pair: tuple[caderno.Memory, caderno.Memory]) -> None:
    a, b = pair
    started, release = asyncio.Event(), asyncio.Event()
    chat_a = AgentChat(model=ScriptedModel([slow("tarde demais", started, release)]), memory=a, consolidate=False)
    first = asyncio.create_task(chat_a.ask(messages="pergunta A", resource_id="casa", thread_id="t"))
    await started.wait()
    # A stalled past its lease (seen from a clock a minute ahead) and another process took the thread.
    later = utcnow() + timedelta(seconds=60)
    (took,) = await b.batch([ops.ClaimTurn(resource_id="casa", thread_id="t", holder="B", lease_seconds=30, now=later)])
    assert took
    release.set()
    with pytest.raises(ThreadBusy, match="nothing of this turn was stored"):
        await first
    assert await a.get_messages(resource_id="casa", thread_id="t") == []


async def test_a_stalled_turn_stores_nothing_after_the_next_holder_finished(
    pair: tuple[caderno.Memory, caderno.Memory],
) -> None:
    """A stalled past its lease; B took the thread, answered and gave it back; A resumes: A stores nothing.

    Failed before the commit's lease check became a fence (it was an upsert:
    with B's lease given back, A's check took the thread again and A's turn
    was stored after B's, from a prompt that never saw B's turn).
    """
    a, b = pair
    started, release = asyncio.Event(), asyncio.Event()
    chat_a = AgentChat(model=ScriptedModel([slow("tarde demais", started, release)]), memory=a, consolidate=False)
    first = asyncio.create_task(chat_a.ask(messages="pergunta A", resource_id="casa", thread_id="t"))
    await started.wait()
    later = utcnow() + timedelta(seconds=60)  # A's lease, seen from a clock a minute ahead, has run out
    (took,) = await b.batch([ops.ClaimTurn(resource_id="casa", thread_id="t", holder="B", lease_seconds=30, now=later)])
    assert took
    await b.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("pergunta B")])
    await b.batch([ops.ReleaseTurn(resource_id="casa", thread_id="t", holder="B")])
    release.set()
    with pytest.raises(ThreadBusy, match="another turn took the thread"):
        await first
    assert [m.content for m in await a.get_messages(resource_id="casa", thread_id="t")] == ["pergunta B"]
