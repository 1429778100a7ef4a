"""Erasure wins over a turn in flight: a turn whose thread or resource was erased while it ran stores nothing.

The turn's prompt was built before the erase, from what the erase removed
(the thread's messages, the working memory with an SSN in it): storing its
reply — or its working-memory patch, its facts — would bring erased data
back. Its commit checks the thread's turn lease, which an erase deletes, and
raises ``Erased``. Every backend; the model waits on an event while the
erase runs, so the order is certain, not timed.

These tests failed before the lease check became a fence: the commit's check
was an upsert, which re-created the lease the erase had deleted, and the
turn was stored over the erase.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.core.errors import Erased, ThreadBusy

SSN = "123-45-6789"


def patch_then_wait(started: asyncio.Event, release: asyncio.Event) -> list[Any]:
    """The model patches working memory and saves a fact, then waits (the erase runs meanwhile) and answers."""

    async def answer(messages: list[Message], tools: list[Any]) -> Message:
        started.set()
        await release.wait()
        return Message.assistant(f"o teu SSN é {SSN}")

    return [
        Message.assistant(
            tool_calls=[
                ToolCall(id="wm", name="update_working_memory", arguments={"patch": {"ssn": SSN, "again": True}}),
                ToolCall(id="f", name="remember_fact", arguments={"category": "id", "key": "ssn", "value": SSN}),
            ]
        ),
        answer,
    ]


async def seeded(memory: caderno.Memory) -> None:
    await memory.append_messages(
        resource_id="casa", thread_id="t", messages=[Message.user(f"o meu SSN é {SSN}"), Message.assistant("anotado")]
    )
    await memory.update_working_memory(resource_id="casa", patch={"ssn": SSN})


async def nothing_of(memory: caderno.Memory, *, resource_id: str = "casa") -> None:
    """Nothing of the erased resource came back: no thread, no working memory, no fact, no text anywhere."""
    dump = await memory.export_resource(resource_id=resource_id)
    assert dump["threads"] == [] and dump.get("working_memory") is None
    assert SSN not in repr(dump)
    assert await memory.get_working_memory(resource_id=resource_id) is None


Erase = Callable[[caderno.Memory], Awaitable[Any]]
ERASES: dict[str, Erase] = {
    "resource": lambda m: m.erase_resource(resource_id="casa"),
    "thread": lambda m: m.delete_thread(resource_id="casa", thread_id="t"),
}


@pytest.mark.parametrize("erase", sorted(ERASES))
async def test_a_turn_that_began_before_an_erase_stores_nothing(memory: caderno.Memory, erase: str) -> None:
    await seeded(memory)
    started, release = asyncio.Event(), asyncio.Event()
    chat = AgentChat(model=ScriptedModel(patch_then_wait(started, release)), memory=memory, consolidate=False)
    turn = asyncio.create_task(chat.ask(messages="e o meu SSN?", resource_id="casa", thread_id="t"))
    await started.wait()
    assert SSN in chat.model.requests[-1].text()  # type: ignore[attr-defined]  # the prompt saw the erased data
    await ERASES[erase](memory)
    release.set()
    with pytest.raises(Erased, match="was erased") as refused:
        await turn
    assert refused.value.thread_id == "t" and refused.value.resource_id == "casa"
    assert await memory.get_messages(resource_id="casa", thread_id="t") == []
    assert await memory.facts.list(resource_id="casa") == []
    if erase == "resource":
        await nothing_of(memory)
    else:  # the resource's working memory was not erased: the turn's patch is not stored all the same
        assert await memory.get_working_memory(resource_id="casa") == {"ssn": SSN}


async def test_the_thread_is_free_for_a_new_turn_right_after_the_erase(memory: caderno.Memory) -> None:
    """The erase gives the thread back at once: a new turn does not wait for the old lease to expire."""
    await seeded(memory)
    started, release = asyncio.Event(), asyncio.Event()
    old = AgentChat(model=ScriptedModel(patch_then_wait(started, release)), memory=memory, consolidate=False)
    turn = asyncio.create_task(old.ask(messages="e o meu SSN?", resource_id="casa", thread_id="t"))
    await started.wait()
    await memory.erase_resource(resource_id="casa")
    new = AgentChat(
        model=ScriptedModel([Message.assistant("olá de novo")]), memory=memory, settings=ChatSettings(turn_wait=5)
    )
    await new.ask(messages="recomeçar", resource_id="casa", thread_id="t")
    assert SSN not in new.model.requests[0].text()  # type: ignore[attr-defined]
    release.set()
    # The old turn's lease was erased, and the new turn has the thread now: either way, it stores nothing.
    with pytest.raises((Erased, ThreadBusy)):
        await turn
    stored = [m.content for m in await memory.get_messages(resource_id="casa", thread_id="t")]
    assert stored == ["recomeçar", "olá de novo"]


async def test_another_thread_of_the_resource_keeps_its_turn(memory: caderno.Memory) -> None:
    """Deleting one thread invalidates only the turns on that thread."""
    await seeded(memory)
    started, release = asyncio.Event(), asyncio.Event()

    async def answer(messages: list[Message], tools: list[Any]) -> Message:
        started.set()
        await release.wait()
        return Message.assistant("ainda aqui")

    chat = AgentChat(model=ScriptedModel([answer]), memory=memory, consolidate=False)
    turn = asyncio.create_task(chat.ask(messages="outra conversa", resource_id="casa", thread_id="outra"))
    await started.wait()
    await memory.delete_thread(resource_id="casa", thread_id="t")
    release.set()
    await turn
    stored = [m.content for m in await memory.get_messages(resource_id="casa", thread_id="outra")]
    assert stored == ["outra conversa", "ainda aqui"]
