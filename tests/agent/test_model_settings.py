"""A turn's model settings (temperature, max_tokens, response_format…): checked once, sent with every model call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import AgentChat, Message, ScriptedModel, ToolCall
from caderno.agent.models import check_settings
from caderno.core.errors import UsageError

JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "total", "schema": {"type": "object"}}}


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[caderno.Memory]:
    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}") as mem:
        yield mem


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"temprature": 0.2}, "unknown model setting"),
        ({"temperature": 2.5}, "from 0 to 2"),
        ({"temperature": True}, "from 0 to 2"),
        ({"top_p": "1"}, "from 0 to 1"),
        ({"max_tokens": 0}, "at least 1"),
        ({"max_tokens": 1.5}, "whole number"),
        ({"seed": -1}, "at least 0"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "at most 4"),
        ({"stop": "\x00"}, "NUL"),
        ({"response_format": {"type": "xml"}}, "json_object or json_schema"),
        ({"response_format": {"type": "json_object", "x": float("nan")}}, "response_format"),
    ],
)
def test_settings_the_api_would_refuse_are_refused_here(settings: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        check_settings(settings)


def test_good_settings_pass_and_empty_ones_are_left_out() -> None:
    given = {"temperature": 0, "top_p": 1, "max_tokens": 256, "stop": "FIM", "seed": 7, "response_format": JSON_FORMAT}
    assert check_settings({**given, "frequency_penalty": None}) == given


async def test_every_model_call_of_a_turn_gets_the_settings(memory: caderno.Memory) -> None:
    step = Message.assistant(tool_calls=[ToolCall(id="c1", name="recall", arguments={"query": "junho"})])
    model = ScriptedModel([step, Message.assistant('{"total": 6778.3}')])
    chat = AgentChat(model=model, memory=memory)
    settings = {"temperature": 0.1, "response_format": JSON_FORMAT}
    await chat.ask(messages="Quanto gastamos em junho?", resource_id="r", thread_id="t", settings=settings)
    assert [r.settings for r in model.requests] == [settings, settings]
    seen: list[Any] = []
    model.steps.append(Message.assistant("ok"))
    await chat.ask(messages="oi", resource_id="r", thread_id="t", settings={"max_tokens": 9}, on_delta=seen.append)
    assert model.requests[-1].settings == {"max_tokens": 9} and seen  # streamed calls too


async def test_bad_settings_store_nothing_and_call_no_model(memory: caderno.Memory) -> None:
    model = ScriptedModel([Message.assistant("never")])
    chat = AgentChat(model=model, memory=memory)
    with pytest.raises(UsageError, match="from 0 to 2"):
        await chat.ask(messages="oi", resource_id="r", thread_id="t", settings={"temperature": 9})
    assert model.requests == [] and await memory.get_messages(resource_id="r", thread_id="t") == []


async def test_a_model_without_settings_still_runs_turns_without_them(memory: caderno.Memory) -> None:
    class Plain:
        async def complete(self, messages: list[Message], tools: list[Any]) -> Message:
            return Message.assistant("olá")

    result = await AgentChat(model=Plain(), memory=memory).ask(messages="oi", resource_id="r", thread_id="t")
    assert result.reply.content == "olá"
