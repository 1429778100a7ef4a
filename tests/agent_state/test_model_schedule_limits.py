"""A model's schedules are bounded: a shortest interval and a most-tasks cap per resource.

Issue 21, finding 7: a model's tool call could schedule a task "every
minute" (1,440 model calls a day, with a prompt whoever talked to the model
chose), and as many of them as it liked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.agent.task_tools import MODEL_MAX_TASKS, MODEL_MIN_INTERVAL
from caderno.core.cron import shortest_gap

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def _create(name: str, schedule: str) -> ToolCall:
    args = {"action": "create", "name": name, "schedule": schedule, "prompt": "veja o preço"}
    return ToolCall(id=f"c-{name}", name="schedule", arguments=args)


async def _ask(memory: caderno.Memory, *calls: ToolCall) -> caderno.ChatResult:
    model = ScriptedModel([Message.assistant(tool_calls=list(calls)), Message.assistant("feito")])
    chat = AgentChat(model=model, memory=memory, schedule_tool=True, settings=ChatSettings(clock=lambda: NOW))
    return await chat.ask(messages="agende", resource_id="casa", thread_id="t")


@pytest.mark.parametrize(
    "schedule",
    [
        "every minute",
        "a cada minuto",
        "every 5 minutes",
        "*/14 * * * *",
        "0,10 9 * * *",
        "0,59 * * * *",
        # A one-shot run could schedule the next: a chain of these is "every minute".
        "in 1 minute",
        "daqui a 10 minutos",
    ],
)
async def test_the_model_cannot_schedule_faster_than_the_minimum(memory: caderno.Memory, schedule: str) -> None:
    result = await _ask(memory, _create("rapido", schedule))
    (record,) = result.tool_calls
    assert record.error is not None and record.result is None
    assert await memory.tasks.list(resource_id="casa") == []


@pytest.mark.parametrize(
    "schedule", ["every 15 minutes", "hourly", "daily at 9", "0,15,30,45 * * * *", "in 15 minutes", "in 2 hours"]
)
async def test_the_model_schedules_at_or_above_the_minimum(memory: caderno.Memory, schedule: str) -> None:
    result = await _ask(memory, _create("ok", schedule))
    assert result.tool_calls[0].error is None, result.tool_calls[0].error
    assert [t.name for t in await memory.tasks.list(resource_id="casa")] == ["ok"]


async def test_people_may_still_schedule_every_minute(memory: caderno.Memory) -> None:
    task = await memory.tasks.add(resource_id="casa", name="ops", schedule="every minute", prompt="p", now=NOW)
    assert task.cron_expr == "* * * * *"


async def test_the_model_creates_at_most_the_cap_per_resource(memory: caderno.Memory) -> None:
    for i in range(MODEL_MAX_TASKS - 1):
        await memory.tasks.add(resource_id="casa", name=f"t{i}", schedule="daily at 9", prompt="p", now=NOW)
    await memory.tasks.add(
        resource_id="casa", name="humano", schedule="daily at 9", prompt="p", source="config", now=NOW
    )
    # source "tool" counts (the API's default too); a person's config task does not
    result = await _ask(memory, _create("ultima", "daily at 10"), _create("demais", "daily at 11"))
    first, second = result.tool_calls
    assert first.error is None
    assert second.error is not None and str(MODEL_MAX_TASKS) in second.error
    names = {t.name for t in await memory.tasks.list(resource_id="casa")}
    assert "ultima" in names and "demais" not in names
    other = await _ask_other(memory)
    assert other.tool_calls[0].error is None  # the cap is per resource


async def _ask_other(memory: caderno.Memory) -> caderno.ChatResult:
    model = ScriptedModel([Message.assistant(tool_calls=[_create("x", "daily at 9")]), Message.assistant("ok")])
    chat = AgentChat(model=model, memory=memory, schedule_tool=True, settings=ChatSettings(clock=lambda: NOW))
    return await chat.ask(messages="agende", resource_id="outra", thread_id="t")


def test_shortest_gap_sees_across_midnight_and_dst() -> None:
    at_least = MODEL_MIN_INTERVAL
    assert shortest_gap("50 23 * * *", at_least=at_least, after=NOW, tz="UTC") is None
    assert shortest_gap("0,50 0,23 * * *", at_least=at_least, after=NOW, tz="UTC") == timedelta(minutes=10)
    assert shortest_gap("*/15 * * * *", at_least=at_least, after=NOW, tz="America/Sao_Paulo") is None
    assert shortest_gap("*/10 * * * *", at_least=at_least, after=NOW, tz="UTC") == timedelta(minutes=10)
