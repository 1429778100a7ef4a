"""The OpenAI Agents SDK's ``OpenAIResponsesModel`` pointed at ``caderno serve``'s ``/v1/responses``.

Everything is real but the LLM: the SDK's Runner and its Responses model over
the official ``AsyncOpenAI`` client, caderno's app on a loopback port, and a
scripted chat-completions upstream behind it (``tests/_upstream.py``), which
records what caderno sent it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from _upstream import Upstream, call, proxy_in_front, text  # noqa: E402
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool  # noqa: E402

import caderno  # noqa: E402
from caderno.server.proxy import THREAD_HEADER  # noqa: E402
from caderno.server.responses import thread_of  # noqa: E402

#: No trace leaves the process (the SDK would export them to OpenAI); per run, not the SDK's global switch.
NO_TRACING = RunConfig(tracing_disabled=True)
SPENT = {"2026-06": "6778.30", "2026-05": "5120.00", "2026-04": "4990.10"}


@dataclass
class Household:
    memory: caderno.Memory
    upstream: Upstream
    base_url: str
    token: str


@pytest.fixture
async def household(tmp_path: Path) -> AsyncIterator[Household]:
    upstream = Upstream()
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'household.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["household"], name="budget app")
    try:
        async with proxy_in_front(memory, upstream) as base_url:
            yield Household(memory=memory, upstream=upstream, base_url=base_url, token=token)
    finally:
        await memory.close()


def budget_agent(household: Household, ran: list[str]) -> Agent[Any]:
    """An agent whose model is caderno, with the household's one client tool (its calls recorded in ``ran``)."""

    @function_tool
    def budgetTotal(month: str) -> str:  # noqa: N802 - the household app's tool name
        """What the household spent in a month (YYYY-MM)."""
        ran.append(month)
        return SPENT[month]

    client = openai.AsyncOpenAI(
        base_url=f"{household.base_url}/v1",
        api_key=household.token,
        default_headers={THREAD_HEADER: "budget"},
        max_retries=0,
    )
    model = OpenAIResponsesModel(model="gpt-anything", openai_client=client)
    return Agent(name="budget", instructions="You answer about the household budget.", model=model, tools=[budgetTotal])


async def test_runner_turns_with_a_client_tool(household: Household) -> None:
    up = household.upstream
    up.script = [
        call("budgetTotal", {"month": "2026-06"}, "c1"),
        text("In June: R$ 6.778,30."),
        call("budgetTotal", {"month": "2026-05"}, "c2"),
        text("In May: R$ 5.120,00."),
        call("budgetTotal", {"month": "2026-04"}, "c3"),
        text("In April: R$ 4.990,10."),
    ]
    ran: list[str] = []
    agent = budget_agent(household, ran)

    first = await Runner.run(agent, "How much did we spend in June?", run_config=NO_TRACING)
    assert first.final_output == "In June: R$ 6.778,30."
    assert first.last_response_id is not None and thread_of(first.last_response_id) == "budget"
    # The second turn continues from the last response: the SDK sends only what is new.
    second = await Runner.run(agent, "And in May?", previous_response_id=first.last_response_id, run_config=NO_TRACING)
    assert second.final_output == "In May: R$ 5.120,00."
    # The third resends the whole conversation it holds, plus the new question, and streams.
    streamed = Runner.run_streamed(
        agent, second.to_input_list() + [{"role": "user", "content": "And in April?"}], run_config=NO_TRACING
    )
    deltas = [
        e.data.delta
        async for e in streamed.stream_events()
        if e.type == "raw_response_event" and e.data.type == "response.output_text.delta"
    ]
    assert streamed.final_output == "In April: R$ 4.990,10." == "".join(deltas) and len(deltas) > 1

    assert ran == ["2026-06", "2026-05", "2026-04"]  # the tool ran in the SDK, once per call
    assert len(up.requests) == 6
    # The upstream saw caderno's prompt: the agent's instructions and caderno's memory tools beside the client's.
    system = up.requests[0]["messages"][0]
    assert system["role"] == "system" and "You answer about the household budget." in system["content"]
    offered = {t["function"]["name"] for t in up.requests[0]["tools"]}
    assert {"budgetTotal", "update_working_memory", "recall"} <= offered
    # Each tool result reached the model, and the next turns' prompts hold the earlier ones from caderno's store.
    assert [up.tool_results(i) for i in (1, 3, 5)] == [
        ["6778.30"],
        ["6778.30", "5120.00"],
        ["6778.30", "5120.00", "4990.10"],
    ]
    assert up.prompt(5).count("How much did we spend in June?") == 1

    stored = await household.memory.get_messages(resource_id="household", thread_id="budget")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"] * 3
    assert [m.content for m in stored if m.role == "user"] == [
        "How much did we spend in June?",
        "And in May?",
        "And in April?",
    ]
    calls = [(c.id, c.name, c.arguments) for m in stored for c in m.tool_calls or ()]
    assert calls == [
        ("c1", "budgetTotal", {"month": "2026-06"}),
        ("c2", "budgetTotal", {"month": "2026-05"}),
        ("c3", "budgetTotal", {"month": "2026-04"}),
    ]
    assert [(m.tool_call_id, m.content) for m in stored if m.role == "tool"] == [
        ("c1", "6778.30"),
        ("c2", "5120.00"),
        ("c3", "4990.10"),
    ]
    assert [m.content for m in stored[3::4]] == [
        "In June: R$ 6.778,30.",
        "In May: R$ 5.120,00.",
        "In April: R$ 4.990,10.",
    ]


async def test_working_memory_set_by_caderno_reaches_the_next_run(household: Household) -> None:
    """A memory tool call runs in caderno, never in the SDK; the next run's prompt carries what it saved."""
    up = household.upstream
    up.script = [
        call("update_working_memory", {"patch": {"currency": "BRL"}}),
        text("Noted: reais."),
        text("In reais."),
    ]
    ran: list[str] = []
    agent = budget_agent(household, ran)
    first = await Runner.run(agent, "We count in reais.", run_config=NO_TRACING)
    assert [item.type for item in first.new_items] == ["message_output_item"]
    await Runner.run(agent, "Which currency?", previous_response_id=first.last_response_id, run_config=NO_TRACING)
    assert ran == []
    assert await household.memory.get_working_memory(resource_id="household") == {"currency": "BRL"}
    prompt = up.prompt()
    assert "WORKING MEMORY" in prompt and json.dumps({"currency": "BRL"}) in prompt
