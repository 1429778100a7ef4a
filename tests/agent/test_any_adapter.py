"""The household port: AgentChat on any four-method adapter, in each form the design allows.

Each adapter below is written here, the way an application would write one
over its own store: async or sync, with caderno's ``resource_id`` keywords or
the design's own signature without it, an ``append_messages`` that returns
the stored list or nothing. None of them gives its messages a ``position``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, InMemoryAgentMemory, Message, ScriptedModel, ToolCall
from caderno.memory.parts.working_memory import merge_patch


class AsyncKeywords:
    """caderno's own spelling: async, keyword-only, with resource_id."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, str], list[Message]] = {}
        self.wm: dict[str, dict[str, Any]] = {}

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        found = self.threads.get((resource_id, thread_id), [])
        return found[-limit:] if limit else list(found)

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        self.threads.setdefault((resource_id, thread_id), []).extend(messages)
        return list(messages)

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        return self.wm.get(resource_id)

    async def update_working_memory(self, *, resource_id: str, patch: dict[str, Any]) -> None:
        self.wm[resource_id] = merge_patch(self.wm.get(resource_id, {}), patch)

    def thread(self, resource_id: str, thread_id: str) -> list[Message]:
        return self.threads.get((resource_id, thread_id), [])


class SyncKeywords:
    """Plain functions, as a client over a blocking driver would have them."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, str], list[Message]] = {}
        self.wm: dict[str, dict[str, Any]] = {}

    def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        found = self.threads.get((resource_id, thread_id), [])
        return found[-limit:] if limit else list(found)

    def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        self.threads.setdefault((resource_id, thread_id), []).extend(messages)
        return list(messages)

    def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        return self.wm.get(resource_id)

    def update_working_memory(self, *, resource_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.wm[resource_id] = merge_patch(self.wm.get(resource_id, {}), patch)
        return self.wm[resource_id]

    def thread(self, resource_id: str, thread_id: str) -> list[Message]:
        return self.threads.get((resource_id, thread_id), [])


class Household:
    """The design's exact signature: getMessages(threadId, limit), appendMessages(threadId, messages)…"""

    def __init__(self) -> None:
        self.threads: dict[str, list[Message]] = {}  # thread ids are unique across resources here
        self.wm: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []

    async def get_messages(self, thread_id: str, limit: int) -> list[Message]:
        self.calls.append(("get_messages", thread_id, limit))
        return self.threads.get(thread_id, [])[-limit:]

    async def append_messages(self, thread_id: str, messages: list[Message]) -> None:
        self.calls.append(("append_messages", thread_id, len(messages)))
        self.threads.setdefault(thread_id, []).extend(messages)

    def get_working_memory(self, resource: str) -> dict[str, Any] | None:  # sync, and its own parameter name
        return self.wm.get(resource)

    async def update_working_memory(self, resource: str, patch: dict[str, Any]) -> None:
        self.wm[resource] = merge_patch(self.wm.get(resource, {}), patch)

    def thread(self, resource_id: str, thread_id: str) -> list[Message]:
        return self.threads.get(thread_id, [])


class VoidAppend(AsyncKeywords):
    """Async with resource_id, but append_messages returns nothing (the design's ``void``)."""

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> None:  # type: ignore[override]
        self.threads.setdefault((resource_id, thread_id), []).extend(messages)


class Fake(InMemoryAgentMemory):
    """caderno's own fake, with the accessor the tests share."""

    def thread(self, resource_id: str, thread_id: str) -> list[Message]:
        return self.messages.get((resource_id, thread_id), [])


ADAPTERS = [AsyncKeywords, SyncKeywords, Household, VoidAppend, Fake]


def two_turns() -> ScriptedModel:
    return ScriptedModel(
        [
            Message.assistant(
                tool_calls=[ToolCall(id="c1", name="update_working_memory", arguments={"patch": {"goal": "Amsterdam"}})]
            ),
            Message.assistant("Anotado."),
            Message.assistant("A meta é Amsterdam."),
        ]
    )


def talk(messages: list[Message]) -> list[tuple[str, str]]:
    """The conversation part of a prompt (no system blocks)."""
    return [(m.role, m.content) for m in messages if m.role != "system"]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
async def test_the_second_ask_sees_the_first_turn(adapter: type[Any]) -> None:
    mem = adapter()
    assert isinstance(mem, caderno.AgentMemory)
    model = two_turns()
    chat = AgentChat(model=model, memory=mem)
    first = await chat.ask(messages="Vamos juntar para Amsterdam.", resource_id="casa", thread_id="t1")
    assert first.reply.content == "Anotado."
    assert first.working_memory is not None and first.working_memory.data == {"goal": "Amsterdam"}
    second = await chat.ask(messages="Qual é a meta?", resource_id="casa", thread_id="t1")
    assert second.reply.content == "A meta é Amsterdam."

    prompt = model.requests[2].messages  # the second ask's only model call
    # The tool steps stay in the turn; the thread keeps the turn as the design counts it.
    assert [role for role, _ in talk(first.messages)] == ["user", "assistant", "tool", "assistant"]
    assert talk(prompt) == [
        ("user", "Vamos juntar para Amsterdam."),
        ("assistant", "Anotado."),
        ("user", "Qual é a meta?"),
    ]
    assert '"goal": "Amsterdam"' in "\n".join(m.content for m in prompt if m.role == "system")
    stored = mem.thread("casa", "t1")
    assert [(m.role, m.content) for m in stored] == [
        *talk(model.requests[2].messages),
        ("assistant", "A meta é Amsterdam."),
    ]  # after two turns, one of which called the update tool: 4 messages
    assert all(m.position is None for m in stored)  # shown by order, not by a position they never had


def tool_turn() -> ScriptedModel:
    """One turn that calls a tool (the budget, as the household's first scenario) before it answers."""
    return ScriptedModel(
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="budget_total", arguments={"month": "2026-06"})]),
            Message.assistant("Em junho vocês gastaram R$ 6.778,30."),
        ]
    )


def budget_total(month: str) -> dict[str, Any]:
    """Total household spending in a month."""
    return {"month": month, "total": 6778.3}


async def test_over_in_memory_agent_memory_a_tool_turn_stores_user_and_final_assistant() -> None:
    mem = Fake()
    chat = AgentChat(model=tool_turn(), memory=mem, tools=[budget_total])
    result = await chat.ask(messages="Quanto gastamos em junho?", resource_id="casa", thread_id="t1")
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]  # the turn, whole
    assert [t.name for t in result.tool_calls] == ["budget_total"]
    assert [(m.role, m.content) for m in mem.thread("casa", "t1")] == [
        ("user", "Quanto gastamos em junho?"),
        ("assistant", "Em junho vocês gastaram R$ 6.778,30."),
    ]
    assert result.reply.content == "Em junho vocês gastaram R$ 6.778,30."


async def test_over_a_memory_a_tool_turn_keeps_its_tool_steps(shared_url: str) -> None:
    async with caderno.connect(shared_url) as memory:
        chat = AgentChat(model=tool_turn(), memory=memory, tools=[budget_total])
        await chat.ask(messages="Quanto gastamos em junho?", resource_id="casa", thread_id="t1")
        stored = await memory.get_messages(resource_id="casa", thread_id="t1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls is not None and stored[1].tool_calls[0].name == "budget_total"


async def test_the_household_signature_is_called_positionally() -> None:
    mem = Household()
    chat = AgentChat(
        model=ScriptedModel([Message.assistant("Oi!")]), memory=mem, settings=ChatSettings(history_limit=6)
    )
    await chat.ask(messages="Oi", resource_id="casa", thread_id="t9")
    assert mem.calls == [("get_messages", "t9", 6), ("append_messages", "t9", 2)]


async def test_a_retry_after_a_void_append_returns_the_stored_turn() -> None:
    mem = VoidAppend()
    model = ScriptedModel([Message.assistant("Anotado.")])
    chat = AgentChat(model=model, memory=mem)
    first = await chat.ask(messages="Gastamos 300 no mercado.", resource_id="casa", thread_id="t", idempotency_key="k1")
    assert [m.content for m in first.messages] == ["Gastamos 300 no mercado.", "Anotado."]
    again = await chat.ask(messages="Gastamos 300 no mercado.", resource_id="casa", thread_id="t", idempotency_key="k1")
    assert again.replayed and again.messages == first.messages
    assert len(model.requests) == 1
    assert [m.content for m in mem.thread("casa", "t")] == ["Gastamos 300 no mercado.", "Anotado."]


async def test_in_memory_agent_memory_keeps_messages_as_given() -> None:
    mem = InMemoryAgentMemory()
    sent = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    assert await mem.append_messages(resource_id="r", thread_id="t", messages=sent) == sent
    assert mem.messages[("r", "t")] == sent  # no ids, times or positions added
    assert await mem.get_messages(resource_id="r", thread_id="t", limit=2) == sent[1:]
    assert await mem.get_messages(resource_id="r", thread_id="t", limit=0) == []
    assert await mem.get_messages(resource_id="other", thread_id="t") == []
    assert await mem.get_working_memory(resource_id="r") is None
    await mem.update_working_memory(resource_id="r", patch={"a": {"x": 1, "y": 2}, "b": [1]})
    assert await mem.update_working_memory(resource_id="r", patch={"a": {"x": None}, "b": [2]}) == {
        "a": {"y": 2},
        "b": [2],
    }


async def test_in_memory_agent_memory_refuses_bad_updates_and_changes_nothing() -> None:
    mem = InMemoryAgentMemory()
    await mem.update_working_memory(resource_id="r", patch={"n": 1})
    with pytest.raises(caderno.InvalidPatch, match="must be a JSON object"):
        await mem.update_working_memory(resource_id="r", patch=["n"])  # type: ignore[arg-type]
    with pytest.raises(caderno.UsageError, match="keeps no versions"):
        await mem.update_working_memory(resource_id="r", patch={"n": 2}, expected_version=1)
    assert mem.working_memory == {"r": {"n": 1}}
