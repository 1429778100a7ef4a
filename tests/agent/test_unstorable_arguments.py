"""A model's unstorable output never costs its turn (issue 23, "a model can lose its own turn").

The model sends ``update_working_memory`` with arguments the validation
layer refuses — nested past ``MAX_JSON_DEPTH``, NaN, infinity, an integer
past printable digits, a NUL, a lone surrogate, more than ``MAX_PATCH_BYTES``
— or text content with a NUL. The tool tells the model its error; the turn
then commits whole: the arguments stored as text, ``REPLACED_ARGUMENTS``
naming the call and why, working memory untouched. Before, the commit's own
validation refused the assistant message and ``ask`` raised with nothing
stored.
"""

from __future__ import annotations

from typing import Any

import pytest

import caderno
from caderno import AgentChat, Message, ScriptedModel, ToolCall
from caderno.core.jsonvalue import MAX_JSON_DEPTH, MAX_PATCH_BYTES
from caderno.core.validate import REPLACED_ARGUMENTS, UNSTORABLE_PREFIX, storable_reply

R, T = "casa", "t"


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


UNSTORABLE: dict[str, Any] = {
    "too-deep": {"patch": nested(MAX_JSON_DEPTH + 1)},
    "nan": {"patch": {"rate": float("nan")}},
    "infinity": {"patch": {"rate": float("inf")}},
    "huge-int": {"patch": {"n": 10**5000}},
    "nul": {"patch": {"name": "a\x00b"}},
    "lone-surrogate": {"patch": {"name": "a\ud800b"}},
    "too-large": {"patch": {"notes": "x" * (MAX_PATCH_BYTES + 1)}},
    "text-with-nul": "{not json \x00",
}


@pytest.mark.parametrize("kind", list(UNSTORABLE))
async def test_a_models_unstorable_arguments_do_not_cost_its_turn(memory: caderno.Memory, kind: str) -> None:
    call = ToolCall(id="c1", name="update_working_memory", arguments=UNSTORABLE[kind])
    model = ScriptedModel([Message.assistant(tool_calls=[call]), Message.assistant("Não consegui guardar isso.")])
    result = await AgentChat(model=model, memory=memory).ask(messages="guarde", resource_id=R, thread_id=T)
    assert result.tool_calls[0].error is not None  # the model was told
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    kept = stored[1].tool_calls[0]
    assert isinstance(kept.arguments, str) and kept.arguments.startswith(UNSTORABLE_PREFIX)
    assert len(kept.arguments) <= MAX_PATCH_BYTES
    assert "\x00" not in kept.arguments
    assert set((stored[1].metadata or {})[REPLACED_ARGUMENTS]) == {"c1"}
    assert stored[3].content == "Não consegui guardar isso."
    assert await memory.get_working_memory(resource_id=R) is None


async def test_content_with_a_nul_is_kept_cleaned(memory: caderno.Memory) -> None:
    model = ScriptedModel([Message.assistant("antes\x00depois")])
    await AgentChat(model=model, memory=memory).ask(messages="oi", resource_id=R, thread_id=T)
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert stored[-1].content == "antes\ufffddepois"


def test_a_storable_reply_is_left_alone() -> None:
    reply = Message.assistant(tool_calls=[ToolCall(id="c", name="recall", arguments={"query": "Amsterdam"})])
    assert storable_reply(reply) is reply
