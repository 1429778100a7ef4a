"""AgentChat: the household scenarios and the loop's guarantees."""

from __future__ import annotations

import asyncio
import json

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.core.errors import ModelError
from caderno.examples.household import BudgetTool, WorkingMemory

R = "casa-gabriel"
WM0 = {"members": ["Gabriel", "esposa"], "currencyPreferred": "BRL", "monthlyIncomeBRL": 14000, "activeGoals": []}
AMSTERDAM = {"name": "Amsterdam", "target": "EUR 6000", "deadline": "2026-09-01", "savedInTarget": "EUR 500"}


def call(name: str, args: object, id: str = "call_1") -> Message:
    return Message.assistant(tool_calls=[ToolCall(id=id, name=name, arguments=args)])  # type: ignore[arg-type]


@pytest.fixture
async def hh(db_url: str):
    async with caderno.connect(db_url, working_memory_schema=WorkingMemory) as memory:
        yield memory


async def scenario_1(memory: caderno.Memory) -> None:
    model = ScriptedModel(
        [call("budget_total", {"month": "2026-06"}), Message.assistant("Em junho vocês gastaram R$ 6.778,30.")]
    )
    chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()])
    result = await chat.ask(messages=[Message.user("Quanto gastamos em junho?")], resource_id=R, thread_id="thread-1")
    first = model.requests[0]
    assert [m.role for m in first.messages] == ["system", "system", "user"]  # no history yet
    assert {t.name for t in first.tools} == {"budget_total", "update_working_memory", "recall", "remember_fact"}
    assert result.tool_calls[0].name == "budget_total" and result.tool_calls[0].result["total"] == 6778.3
    stored = await memory.get_messages(resource_id=R, thread_id="thread-1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].content.startswith("Em junho") and stored == result.messages
    assert json.loads(stored[2].content)["total"] == 6778.3 and stored[2].tool_call_id == "call_1"
    assert await memory.get_working_memory(resource_id=R) is None


async def scenario_2(memory: caderno.Memory) -> None:
    await memory.update_working_memory(resource_id=R, patch=WM0)
    model = ScriptedModel(
        [
            call("update_working_memory", {"patch": {"activeGoals": [AMSTERDAM]}}, id="call_2"),
            Message.assistant("Anotado: Amsterdam, EUR 6000 até 2026-09-01."),
        ]
    )
    chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()])
    result = await chat.ask(
        messages=[Message.user("Estamos juntando EUR 6000 para Amsterdam até 2026-09-01.")],
        resource_id=R,
        thread_id="thread-1",
    )
    seen = model.requests[0]
    assert "Quanto gastamos em junho?" in seen.text() and "R$ 6.778,30" in seen.text()  # previous turn
    wm_block = next(m.content for m in seen.messages if m.content.startswith("WORKING MEMORY"))
    assert '"monthlyIncomeBRL": 14000' in wm_block and "Its JSON shape" in wm_block and "activeGoals" in wm_block
    wm = await memory.get_working_memory(resource_id=R)
    assert wm["activeGoals"][0]["name"] == "Amsterdam"
    assert wm["members"] == ["Gabriel", "esposa"] and wm["monthlyIncomeBRL"] == 14000
    assert result.working_memory and result.working_memory.data == wm
    assert len(await memory.get_messages(resource_id=R, thread_id="thread-1")) == 8


async def scenario_3(memory: caderno.Memory) -> None:
    before = await memory.get_messages(resource_id=R, thread_id="thread-1")
    model = ScriptedModel([Message.assistant("Sim: Amsterdam, EUR 6000 até 2026-09-01.")])
    chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()])
    result = await chat.ask(
        messages=[Message.user("e a meta de Amsterdam, lembra?")], resource_id=R, thread_id="thread-2"
    )
    seen = model.requests[0]
    assert [m.role for m in seen.messages] == ["system", "system", "user"]  # new thread: no history
    assert '"name": "Amsterdam"' in seen.text()
    assert result.tool_calls == []
    assert await memory.get_messages(resource_id=R, thread_id="thread-1") == before
    assert [m.role for m in await memory.get_messages(resource_id=R, thread_id="thread-2")] == ["user", "assistant"]


async def test_household_scenarios(hh: caderno.Memory) -> None:
    await scenario_1(hh)
    await scenario_2(hh)
    await scenario_3(hh)


async def test_fifty_concurrent_asks_through_one_instance(memory: caderno.Memory) -> None:
    class EchoModel:
        async def complete(self, messages, tools):
            user = messages[-1]
            if user.role == "tool":
                return Message.assistant(f"ok {user.tool_call_id}")
            await asyncio.sleep(0.001)
            tag = user.content
            return Message.assistant(
                tool_calls=[ToolCall(id=f"c-{tag}", name="update_working_memory", arguments={"patch": {tag: True}})]
            )

    chat = AgentChat(model=EchoModel(), memory=memory)
    jobs = [(f"r{i % 10}", f"t{i}") for i in range(50)]
    await asyncio.gather(*(chat.ask(messages=f"{r}-{t}", resource_id=r, thread_id=t) for r, t in jobs))
    for r, t in jobs:
        msgs = await memory.get_messages(resource_id=r, thread_id=t)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert msgs[0].content == f"{r}-{t}" and msgs[-1].content == f"ok c-{r}-{t}"
    for i in range(10):
        wm = await memory.get_working_memory(resource_id=f"r{i}")
        assert wm == {f"r{i}-t{k}": True for k in range(i, 50, 10)}


async def test_two_asks_on_one_thread_are_serialized(memory: caderno.Memory) -> None:
    class SeesHistory:
        async def complete(self, messages, tools):
            await asyncio.sleep(0.01)
            return Message.assistant(f"history={sum(1 for m in messages if m.role != 'system')}")

    chat = AgentChat(model=SeesHistory(), memory=memory)
    a, b = await asyncio.gather(
        chat.ask(messages="um", resource_id=R, thread_id="t"), chat.ask(messages="dois", resource_id=R, thread_id="t")
    )
    assert sorted([a.reply.content, b.reply.content]) == ["history=1", "history=3"]
    assert len(await memory.get_messages(resource_id=R, thread_id="t")) == 4
    assert chat._locks == {}


async def test_failed_turns_store_nothing(memory: caderno.Memory) -> None:
    await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("antes")])

    async def boom(messages, tools):
        raise RuntimeError("model service down")

    cases = [
        (ScriptedModel([call("budget_total", {"month": "2026-06"}), boom]), "model service down"),
        (ScriptedModel([call("budget_total", {"month": "2026-06"}, id=f"c{i}") for i in range(3)]), "max_steps=3"),
        (ScriptedModel([call("update_working_memory", {"patch": {"x": 1}})]), "ran out of steps"),
        (ScriptedModel([Message.assistant("")]), "empty message"),
    ]
    for model, message in cases:
        chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()], settings=ChatSettings(max_steps=3))
        with pytest.raises(ModelError, match=message):
            await chat.ask(messages="quanto?", resource_id=R, thread_id="t")
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id="t")] == ["antes"]
    assert await memory.get_working_memory(resource_id=R) is None


async def test_cancelled_turn_stores_nothing(memory: caderno.Memory) -> None:
    started = asyncio.Event()

    async def hang(messages, tools):
        started.set()
        await asyncio.sleep(60)

    chat = AgentChat(model=ScriptedModel([hang]), memory=memory)
    task = asyncio.create_task(chat.ask(messages="oi", resource_id=R, thread_id="t"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await memory.get_messages(resource_id=R, thread_id="t") == []


async def test_bad_tool_calls_become_errors_for_the_model(hh: caderno.Memory) -> None:
    await hh.update_working_memory(resource_id=R, patch=WM0)

    def raises(x: int) -> int:
        """Always fails."""
        raise ZeroDivisionError("division by zero")

    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(id="a", name="budget_total", arguments="{month: 2026-06"),
                    ToolCall(id="b", name="budget_total", arguments={"month": 202606}),
                    ToolCall(id="c", name="nope", arguments={}),
                    ToolCall(id="d", name="raises", arguments={"x": 1}),
                    ToolCall(id="e", name="update_working_memory", arguments={"patch": [1, 2]}),
                    ToolCall(id="f", name="update_working_memory", arguments={"patch": {"monthlyIncomeBRL": "muito"}}),
                    ToolCall(id="g", name="update_working_memory", arguments={"patch": "{not json"}),
                    ToolCall(id="h", name="update_working_memory", arguments={"wrong": {}}),
                ]
            ),
            Message.assistant("Desculpe, tive problemas com as ferramentas."),
        ]
    )
    chat = AgentChat(model=model, memory=hh, tools=[BudgetTool(), raises])
    result = await chat.ask(messages="faça tudo", resource_id=R, thread_id="t")
    assert len(result.tool_calls) == 8
    assert all(r.error and r.result is None for r in result.tool_calls)
    results = [m.content for m in model.requests[1].messages if m.role == "tool"]
    # Your own tools and unknown names: an "Error: …" line.
    assert all(r.startswith("Error:") for r in results[:4])
    assert "not valid JSON" in results[0]
    assert "month" in results[1] and "string" in results[1]
    assert "unknown tool 'nope'" in results[2] and "budget_total" in results[2]
    assert "ZeroDivisionError: division by zero" in results[3]
    # The memory tools: the catalog's one refusal shape, {"ok": false, "error": …}.
    refusals = [json.loads(r) for r in results[4:]]
    assert all(r["ok"] is False for r in refusals)
    assert refusals[0]["error"] == "'patch' must be an object, not an array"
    assert "monthlyIncomeBRL" in refusals[1]["error"]
    assert refusals[2]["error"] == "'patch' must be an object, not a string"
    assert refusals[3]["error"].startswith("update_working_memory has no argument 'wrong'")
    assert await hh.get_working_memory(resource_id=R) == WM0
    stored = await hh.get_messages(resource_id=R, thread_id="t")
    assert [m.role for m in stored] == ["user", "assistant"] + ["tool"] * 8 + ["assistant"]


async def test_defaults_need_no_memory_and_no_ids() -> None:
    chat = AgentChat(model=ScriptedModel([Message.assistant("oi!"), Message.assistant("de novo")]))
    await chat.ask(messages="oi")
    await chat.ask(messages="oi de novo")
    msgs = await chat.memory.get_messages(resource_id="default", thread_id="default")
    assert [m.content for m in msgs] == ["oi", "oi!", "oi de novo", "de novo"]


async def test_history_window_never_starts_with_a_tool_result(memory: caderno.Memory) -> None:
    model = ScriptedModel(
        [call("budget_total", {"month": "2026-06"}), Message.assistant("feito"), Message.assistant("ok")]
    )
    chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()], settings=ChatSettings(history_limit=2))
    await chat.ask(messages="quanto?", resource_id=R, thread_id="t")
    await chat.ask(messages="e agora?", resource_id=R, thread_id="t")
    roles = [m.role for m in model.requests[-1].messages]
    assert roles == ["system", "system", "assistant", "user"]  # the tool result was dropped, not shown alone
