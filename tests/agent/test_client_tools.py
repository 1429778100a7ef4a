"""AgentChat with the caller's own tools: a turn stops at their calls and goes on with their results."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall, ToolSpec
from caderno.agent.models import Delta
from caderno.core.clock import utcnow
from caderno.core.errors import UsageError
from caderno.memory.engines.idempotency import RETRY_WINDOW

R, T = "casa", "t1"
BUDGET = ToolSpec(name="budgetTotal", description="What the household spent in a month.", parameters={"type": "object"})
GOALS = ToolSpec(name="goals", description="The household's goals.", parameters={"type": "object"})


def calls(*pairs: tuple[str, str]) -> Message:
    return Message.assistant(tool_calls=[ToolCall(id=i, name=n, arguments={"month": "2026-06"}) for n, i in pairs])


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[caderno.Memory]:
    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}") as mem:
        yield mem


async def stored(memory: caderno.Memory) -> list[Message]:
    return await memory.get_messages(resource_id=R, thread_id=T)


async def test_the_turn_stops_at_a_client_call_and_goes_on_with_its_result(memory: caderno.Memory) -> None:
    model = ScriptedModel([calls(("budgetTotal", "c1")), Message.assistant("Em junho: R$ 6.778,30.")])
    chat = AgentChat(model=model, memory=memory)
    first = await chat.ask(messages="Quanto gastamos em junho?", resource_id=R, thread_id=T, client_tools=[BUDGET])
    assert [c.id for c in first.pending] == ["c1"] and list(first.reply.tool_calls or ()) == first.pending
    assert "budgetTotal" in {t.name for t in model.requests[0].tools}
    assert [m.role for m in await stored(memory)] == ["user", "assistant"]

    result = await chat.ask(
        messages=[Message.tool('{"total": 6778.3}', tool_call_id="c1")],
        resource_id=R,
        thread_id=T,
        client_tools=[BUDGET],
    )
    assert result.pending == [] and result.reply.content == "Em junho: R$ 6.778,30."
    # The model saw the step again, with the result after its call.
    assert [m.role for m in model.requests[1].messages if m.role != "system"] == ["user", "assistant", "tool"]
    thread = await stored(memory)
    assert [m.role for m in thread] == ["user", "assistant", "tool", "assistant"]
    assert thread[2].tool_call_id == "c1" and thread[2].name == "budgetTotal"  # the name comes from its call
    assert (thread[3].metadata or {})["usage"]["model_calls"] == 1


async def test_caderno_tools_of_the_same_step_run_and_only_the_clients_call_is_handed_back(
    memory: caderno.Memory,
) -> None:
    step = Message.assistant(
        tool_calls=[
            ToolCall(id="c1", name="update_working_memory", arguments={"patch": {"monthlyIncomeBRL": 14000}}),
            ToolCall(id="c2", name="budgetTotal", arguments={"month": "2026-06"}),
        ]
    )
    model = ScriptedModel([step, Message.assistant("Pronto.")])
    chat = AgentChat(model=model, memory=memory)
    first = await chat.ask(messages="Ganhamos R$ 14.000", resource_id=R, thread_id=T, client_tools=[BUDGET])
    assert [c.id for c in first.pending] == ["c2"]
    assert (await memory.get_working_memory(resource_id=R)) == {"monthlyIncomeBRL": 14000}
    await chat.ask(messages=[Message.tool("6778.3", tool_call_id="c2")], resource_id=R, thread_id=T)
    thread = await stored(memory)
    assert [(m.role, m.tool_call_id) for m in thread] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("assistant", None),
    ]


async def test_an_abandoned_step_is_kept_and_left_out_of_later_prompts(memory: caderno.Memory) -> None:
    model = ScriptedModel([calls(("budgetTotal", "c1")), Message.assistant("Oi!")])
    chat = AgentChat(model=model, memory=memory)
    await chat.ask(messages="Quanto gastamos?", resource_id=R, thread_id=T, client_tools=[BUDGET])
    await chat.ask(messages="Esquece, oi.", resource_id=R, thread_id=T)
    assert [m.role for m in await stored(memory)] == ["user", "assistant", "user", "assistant"]
    prompt = [m for m in model.requests[1].messages if m.role != "system"]
    assert [(m.role, m.content) for m in prompt] == [("user", "Quanto gastamos?"), ("user", "Esquece, oi.")]


async def test_results_that_do_not_fit_the_waiting_step_are_refused_and_store_nothing(memory: caderno.Memory) -> None:
    model = ScriptedModel([calls(("budgetTotal", "c1"), ("goals", "c2"))])
    chat = AgentChat(model=model, memory=memory)
    with pytest.raises(UsageError, match="one of caderno's own tools"):
        await chat.ask(messages="oi", resource_id=R, thread_id=T, client_tools=[replace(BUDGET, name="recall")])
    assert await stored(memory) == []
    await chat.ask(messages="Quanto?", resource_id=R, thread_id=T, client_tools=[BUDGET, GOALS])
    before = await stored(memory)
    refusals = {
        "missing: c2": [Message.tool("1", tool_call_id="c1")],
        "not waiting for": [Message.tool("1", tool_call_id="c1"), Message.tool("2", tool_call_id="zz")],
        "same call": [Message.tool("1", tool_call_id="c1"), Message.tool("1", tool_call_id="c1")],
        "before any new user": [Message.user("e?"), Message.tool("1", tool_call_id="c1")],
    }
    for error, messages in refusals.items():
        with pytest.raises(UsageError, match=error):
            await chat.ask(messages=messages, resource_id=R, thread_id=T)
    assert await stored(memory) == before
    with pytest.raises(UsageError, match="not waiting for tool results"):
        await chat.ask(messages=[Message.tool("1", tool_call_id="c1")], resource_id=R, thread_id="other")
    assert len(model.requests) == 1


async def test_results_sent_twice_are_answered_once(memory: caderno.Memory) -> None:
    model = ScriptedModel([calls(("budgetTotal", "c1")), Message.assistant("R$ 10.")])
    chat = AgentChat(model=model, memory=memory)
    await chat.ask(messages="Quanto?", resource_id=R, thread_id=T, client_tools=[BUDGET])
    result = [Message.tool("10", tool_call_id="c1")]
    once = await chat.ask(messages=result, resource_id=R, thread_id=T)
    again = await chat.ask(messages=result, resource_id=R, thread_id=T)
    assert again.replayed and again.reply == once.reply and len(model.requests) == 2
    assert len(await stored(memory)) == 4
    with pytest.raises(UsageError, match="not waiting for"):  # another result for an answered call
        await chat.ask(messages=[Message.tool("11", tool_call_id="c1")], resource_id=R, thread_id=T)


async def test_a_retry_answers_the_newest_turn_only_while_it_is_recent(memory: caderno.Memory) -> None:
    model = ScriptedModel([Message.assistant("Oi!"), Message.assistant("Oi de novo!")])
    chat = AgentChat(model=model, memory=memory)
    once = await chat.ask(messages="oi", resource_id=R, thread_id=T)
    again = await chat.ask(messages="oi", resource_id=R, thread_id=T, retry=True)
    assert again.replayed and again.reply == once.reply and len(model.requests) == 1
    later = utcnow() + timedelta(seconds=RETRY_WINDOW + 60)
    late = AgentChat(model=model, memory=memory, settings=ChatSettings(clock=lambda: later))
    fresh = await late.ask(messages="oi", resource_id=R, thread_id=T, retry=True)
    assert not fresh.replayed and fresh.reply.content == "Oi de novo!"
    assert [m.content for m in await stored(memory)] == ["oi", "Oi!", "oi", "Oi de novo!"]


async def test_a_streamed_turn_hands_out_text_and_the_clients_calls_only(memory: caderno.Memory) -> None:
    step = Message.assistant(
        "Vou ver.",
        tool_calls=[
            ToolCall(id="c1", name="recall", arguments={"query": "junho"}),
            ToolCall(id="c2", name="budgetTotal", arguments={"month": "2026-06"}),
        ],
    )
    model = ScriptedModel([step])
    seen: list[Delta] = []
    chat = AgentChat(model=model, memory=memory)
    result = await chat.ask(messages="Quanto?", resource_id=R, thread_id=T, client_tools=[BUDGET], on_delta=seen.append)
    assert [c.id for c in result.pending] == ["c2"]
    assert [d.content for d in seen if d.call_index is None] == ["Vou ver."]
    assert [(d.call_index, d.call_id, d.call_name) for d in seen if d.call_index is not None] == [
        (0, "c2", "budgetTotal")
    ]


async def test_a_retry_is_matched_only_to_a_turn_after_the_reply_the_caller_saw(memory: caderno.Memory) -> None:
    model = ScriptedModel([Message.assistant("Oi!"), Message.assistant("Sim?"), Message.assistant("Sim, sim.")])
    chat = AgentChat(model=model, memory=memory)
    await chat.ask(messages="sim", resource_id=R, thread_id=T)
    await chat.ask(messages="sim", resource_id=R, thread_id=T)
    # A retry of the second request (the caller had seen "Oi!"): its stored turn.
    again = await chat.ask(messages="sim", resource_id=R, thread_id=T, retry=True, retry_after="Oi!")
    assert again.replayed and again.reply.content == "Sim?"
    # A retry of a third request whose first try stored nothing (the caller had seen "Sim?"): a new turn.
    third = await chat.ask(messages="sim", resource_id=R, thread_id=T, retry=True, retry_after="Sim?")
    assert not third.replayed and third.reply.content == "Sim, sim."
    assert len(await stored(memory)) == 6 and len(model.requests) == 3
