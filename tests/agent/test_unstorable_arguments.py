"""A model's unstorable output never costs its turn (issue 23, "a model can lose its own turn").

The model sends ``update_working_memory`` with arguments the validation
layer refuses — every refusal ``caderno.core.jsonvalue.check_json`` and
``check_text`` have: nested past ``MAX_JSON_DEPTH``, NaN, ±infinity, an
integer past printable digits, a NUL or a lone surrogate in a value or a
key, a key that is not text, a tuple, a value that is not JSON, more than
``MAX_PATCH_BYTES`` in one value or in all, and argument text with a NUL, a
lone surrogate or past the size kept — or reply text with a NUL, a lone
surrogate or past ``MAX_MESSAGE_CHARS``. The tool tells the model its error;
the turn then commits whole: the arguments stored as text,
``REPLACED_ARGUMENTS`` naming the call and why, working memory untouched.
Before, the commit's own validation refused the assistant message and
``ask`` raised with nothing stored (and the proxy answered 400, blaming its
client).

What cannot be kept even as text — a tool call's id or name that is empty,
too long or holds a NUL — fails the turn as the model's error
(``ModelError``: the proxy's 502), never as the caller's.

The same calls then come from a scripted upstream through the memory proxy
over real HTTP, as far as JSON can carry them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import AgentChat, Message, ScriptedModel, ToolCall
from caderno.core.errors import ModelError
from caderno.core.jsonvalue import MAX_JSON_DEPTH, MAX_MESSAGE_CHARS, MAX_PATCH_BYTES
from caderno.core.validate import MAX_ID_LENGTH, REPLACED_ARGUMENTS, UNSTORABLE_PREFIX, storable_reply

R, T = "casa", "t"


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


#: Arguments the validation layer refuses, one per kind of refusal.
UNSTORABLE: dict[str, Any] = {
    "too-deep": {"patch": nested(MAX_JSON_DEPTH + 1)},
    "nan": {"patch": {"rate": float("nan")}},
    "infinity": {"patch": {"rate": float("inf")}},
    "minus-infinity": {"patch": {"rate": float("-inf")}},
    "huge-int": {"patch": {"n": 10**5000}},
    "nul": {"patch": {"name": "a\x00b"}},
    "lone-surrogate": {"patch": {"name": "a\ud800b"}},
    "nul-in-key": {"patch": {"a\x00b": 1}},
    "surrogate-in-key": {"patch": {"a\udfffb": 1}},
    "key-not-text": {"patch": {1: "one"}},
    "tuple": {"patch": {"pair": (1, 2)}},
    "not-json": {"patch": {"when": datetime(2026, 5, 1, tzinfo=UTC)}},
    "too-large-value": {"patch": {"notes": "x" * (MAX_PATCH_BYTES + 1)}},
    "too-large-total": {"patch": {f"k{i}": "x" * 1000 for i in range(MAX_PATCH_BYTES // 1000 + 1)}},
    "text-with-nul": "{not json \x00",
    "text-with-lone-surrogate": "{not json \ud800",
    "text-too-large": "{" + "x" * MAX_PATCH_BYTES,
}


@pytest.mark.parametrize("kind", list(UNSTORABLE))
async def test_a_models_unstorable_arguments_do_not_cost_its_turn(memory: caderno.Memory, kind: str) -> None:
    call = ToolCall(id="c1", name="update_working_memory", arguments=UNSTORABLE[kind])
    model = ScriptedModel([Message.assistant(tool_calls=[call]), Message.assistant("Não consegui guardar isso.")])
    result = await AgentChat(model=model, memory=memory).ask(messages="guarde", resource_id=R, thread_id=T)
    assert result.tool_calls[0].error is not None  # the model was told
    assert json.loads(result.tool_calls[0].error)["ok"] is False
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    kept = stored[1].tool_calls[0]
    assert isinstance(kept.arguments, str) and kept.arguments.startswith(UNSTORABLE_PREFIX)
    assert len(kept.arguments) <= MAX_PATCH_BYTES
    assert "\x00" not in kept.arguments
    assert set((stored[1].metadata or {})[REPLACED_ARGUMENTS]) == {"c1"}
    assert stored[2].content == result.tool_calls[0].error  # the refusal the model read is stored as it read it
    assert stored[3].content == "Não consegui guardar isso."
    assert await memory.get_working_memory(resource_id=R) is None


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        ("antes\x00depois", "antes\ufffddepois"),
        ("antes\ud800depois", "antes\ufffddepois"),
        ("x" * (MAX_MESSAGE_CHARS + 10), "x" * MAX_MESSAGE_CHARS),
    ],
    ids=["nul", "lone-surrogate", "too-long"],
)
async def test_reply_text_is_kept_cleaned(memory: caderno.Memory, content: str, kept: str) -> None:
    model = ScriptedModel([Message.assistant(content)])
    await AgentChat(model=model, memory=memory).ask(messages="oi", resource_id=R, thread_id=T)
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert stored[-1].content == kept


async def test_a_tools_unstorable_output_is_kept_cleaned(memory: caderno.Memory) -> None:
    def shout() -> str:
        """Returns text with a NUL."""
        return "a\x00b"

    call = ToolCall(id="c1", name="shout", arguments={})
    model = ScriptedModel([Message.assistant(tool_calls=[call]), Message.assistant("feito")])
    await AgentChat(model=model, memory=memory, tools=[shout]).ask(messages="grite", resource_id=R, thread_id=T)
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert stored[2].content == "a\ufffdb"


#: Tool calls whose id or name cannot be kept even as text.
UNKEEPABLE = {
    "name-with-nul": ToolCall(id="c1", name="update\x00working_memory", arguments={}),
    "empty-name": ToolCall(id="c1", name="", arguments={}),
    "name-too-long": ToolCall(id="c1", name="n" * (MAX_ID_LENGTH + 1), arguments={}),
    "id-with-nul": ToolCall(id="c\x001", name="recall", arguments={"query": "x"}),
    "empty-id": ToolCall(id="", name="recall", arguments={"query": "x"}),
}


@pytest.mark.parametrize("kind", list(UNKEEPABLE))
async def test_an_unkeepable_tool_call_is_the_models_error(memory: caderno.Memory, kind: str) -> None:
    model = ScriptedModel([Message.assistant(tool_calls=[UNKEEPABLE[kind]]), Message.assistant("nunca")])
    with pytest.raises(ModelError, match="the model's reply cannot be stored"):
        await AgentChat(model=model, memory=memory).ask(messages="vai", resource_id=R, thread_id=T)
    assert await memory.get_messages(resource_id=R, thread_id=T) == []
    assert len(model.requests) == 1  # no tool ran, the model was not asked again


def test_a_storable_reply_is_left_alone() -> None:
    reply = Message.assistant(tool_calls=[ToolCall(id="c", name="recall", arguments={"query": "Amsterdam"})])
    assert storable_reply(reply) is reply


# -- the same through the memory proxy, over real HTTP ------------------------------------------------

#: The kinds JSON can carry from an upstream (no tuples, no non-text keys, no Python objects).
OVER_HTTP = [
    "too-deep",
    "nan",
    "infinity",
    "minus-infinity",
    "nul",
    "lone-surrogate",
    "nul-in-key",
    "surrogate-in-key",
    "too-large-value",
    "too-large-total",
    "text-with-nul",
    "text-with-lone-surrogate",
    "text-too-large",
]


@dataclass
class Proxied:
    memory: caderno.Memory
    upstream: Any
    url: str
    token: str

    async def ask(self, thread: str) -> Any:
        import httpx

        from caderno.server.proxy import THREAD_HEADER

        headers = {"Authorization": f"Bearer {self.token}", THREAD_HEADER: thread}
        body = {"model": "any", "messages": [{"role": "user", "content": "guarde"}]}
        async with httpx.AsyncClient(timeout=60) as client:
            return await client.post(f"{self.url}/v1/chat/completions", json=body, headers=headers)


@pytest.fixture
async def proxied(tmp_path: Path) -> AsyncIterator[Proxied]:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from _upstream import Upstream, serving

    from caderno.agent.models import OpenAIChatModel
    from caderno.server import create_app
    from caderno.server.proxy import install_proxy

    memory = await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=[R])
    upstream = Upstream()
    try:
        async with serving(upstream.app()) as up:
            model = OpenAIChatModel(model="scripted", base_url=f"{up}/v1", api_key="upstream")
            try:
                app = create_app(memory, model=model, background=False, routers=[install_proxy])
                async with serving(app) as url:
                    yield Proxied(memory=memory, upstream=upstream, url=url, token=token)
            finally:
                await model.aclose()
    finally:
        await memory.close()


def _raw(arguments: Any) -> str:
    """The argument text an upstream sends (text arguments as they are, NaN as ``NaN``)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


@pytest.mark.parametrize("kind", OVER_HTTP)
async def test_through_the_proxy_the_turn_is_stored_and_answered(proxied: Proxied, kind: str) -> None:
    from _upstream import call, text

    proxied.upstream.script = [call("update_working_memory", _raw(UNSTORABLE[kind])), text("Não consegui.")]
    response = await proxied.ask(kind)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Não consegui."
    (told,) = proxied.upstream.tool_results()
    assert json.loads(told)["ok"] is False  # the model's error stays its own
    stored = await proxied.memory.get_messages(resource_id=R, thread_id=kind)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert set((stored[1].metadata or {})[REPLACED_ARGUMENTS]) == {"call_1"}
    assert await proxied.memory.get_working_memory(resource_id=R) is None


async def test_through_the_proxy_reply_text_with_a_nul_is_kept(proxied: Proxied) -> None:
    from _upstream import text

    proxied.upstream.script = [text("antes\x00depois")]
    response = await proxied.ask("nul-reply")
    assert response.status_code == 200, response.text
    stored = await proxied.memory.get_messages(resource_id=R, thread_id="nul-reply")
    assert stored[-1].content == "antes\ufffddepois"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("update\x00working_memory", "{}"),  # a name with a NUL
        ("", "{}"),  # no name
    ],
    ids=["name-with-nul", "empty-name"],
)
async def test_through_the_proxy_what_cannot_be_kept_is_a_502_never_a_400(
    proxied: Proxied, name: str, arguments: str
) -> None:
    from _upstream import call, text

    proxied.upstream.script = [call(name, arguments), text("nunca")]
    response = await proxied.ask("lost")
    assert response.status_code == 502, response.text
    assert response.json()["type"].endswith("model-error")
    assert await proxied.memory.list_threads(resource_id=R) == []


async def test_through_the_proxy_arguments_python_cannot_read_are_the_models_error(proxied: Proxied) -> None:
    # An integer past Python's digit limit is unreadable JSON to caderno: kept as the text the model
    # sent, and the model is told, like any arguments that are not JSON.
    from _upstream import call, text

    digits = '{"patch": {"n": 1' + "0" * 5000 + "}}"
    proxied.upstream.script = [call("update_working_memory", digits), text("Não consegui.")]
    response = await proxied.ask("digits")
    assert response.status_code == 200, response.text
    (told,) = proxied.upstream.tool_results()
    answer = json.loads(told)
    assert answer["ok"] is False and "not valid JSON" in answer["error"]
    stored = await proxied.memory.get_messages(resource_id=R, thread_id="digits")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert await proxied.memory.get_working_memory(resource_id=R) is None
