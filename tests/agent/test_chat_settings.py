"""ChatSettings: AgentChat's tuning numbers, checked once when the settings are made."""

from __future__ import annotations

import dataclasses

import pytest

from caderno import AgentChat, ChatSettings, InMemoryAgentMemory, Message, ScriptedModel
from caderno.core.errors import UsageError


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"history_limit": 1}, "history_limit must be at least 2"),
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"turn_timeout": 0}, "turn_timeout must be a positive number"),
        ({"turn_timeout": True}, "turn_timeout must be a positive number"),
        ({"turn_timeout": "60"}, "turn_timeout must be a positive number"),
        ({"timezone": "Mars/Olympus"}, "time zone"),
    ],
)
def test_a_value_out_of_range_is_refused_when_the_settings_are_made(values: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        ChatSettings(**values)  # type: ignore[arg-type]


def test_the_settings_are_frozen_and_one_value_serves_many_chats() -> None:
    settings = ChatSettings(history_limit=6, turn_timeout=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.history_limit = 2  # type: ignore[misc]
    one = AgentChat(model=ScriptedModel([]), settings=settings)
    two = AgentChat(model=ScriptedModel([]), memory=InMemoryAgentMemory(), settings=settings)
    assert one.settings is two.settings is settings


def test_agent_chat_takes_its_tuning_numbers_only_through_settings() -> None:
    with pytest.raises(TypeError, match="history_limit"):
        AgentChat(model=ScriptedModel([]), history_limit=6)  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="ChatSettings"):
        AgentChat(model=ScriptedModel([]), settings={"history_limit": 6})  # type: ignore[arg-type]


async def test_the_history_limit_reaches_the_prompt_on_the_four_method_port() -> None:
    memory = InMemoryAgentMemory()
    earlier = [Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(10)]
    memory.messages[("r", "t")] = earlier
    model = ScriptedModel([Message.assistant("ok")])
    chat = AgentChat(model=model, memory=memory, settings=ChatSettings(history_limit=4))
    await chat.ask(messages="oi", resource_id="r", thread_id="t")
    shown = [m.content for m in model.requests[0].messages if m.role != "system"]
    assert shown == ["u6", "a7", "u8", "a9", "oi"]
