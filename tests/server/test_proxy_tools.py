"""The memory proxy with the client's own tools, real streaming and retries, driven by the official openai client.

Two real uvicorn servers on loopback ports: the scripted upstream of
``_upstream`` (chat completions, streamed when asked) and caderno's app with
the proxy. The client is the household app: its tools (``budgetTotal``) run
on its side, caderno's memory tools on the server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

import httpx  # noqa: E402
from _upstream import Upstream, call, calls, events, proxy_in_front, text  # noqa: E402

import caderno  # noqa: E402
from caderno.server.proxy import THREAD_HEADER  # noqa: E402

BUDGET = {
    "type": "function",
    "function": {
        "name": "budgetTotal",
        "description": "What the household spent in a month.",
        "parameters": {"type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]},
    },
}
SYSTEM = {"role": "system", "content": "Você é o assistente financeiro da casa."}
ASK = {"role": "user", "content": "Quanto gastamos em junho?"}


@dataclass
class Proxy:
    memory: caderno.Memory
    upstream: Upstream
    base_url: str
    token: str

    def client(self, thread: str, **options: Any) -> Any:
        options.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(
            base_url=f"{self.base_url}/v1", api_key=self.token, default_headers={THREAD_HEADER: thread}, **options
        )

    async def thread(self, thread: str) -> list[tuple[Any, ...]]:
        """The stored thread, message by message: (role, content, tool call ids and names, tool_call_id, name)."""
        stored = await self.memory.get_messages(resource_id="casa", thread_id=thread)
        return [
            (m.role, m.content, [(c.id, c.name) for c in m.tool_calls or ()], m.tool_call_id, m.name) for m in stored
        ]


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    upstream = Upstream()
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["casa"], name="household app")
    try:
        async with proxy_in_front(memory, upstream) as base_url:
            yield Proxy(memory=memory, upstream=upstream, base_url=base_url, token=token)
    finally:
        await memory.close()


def budget_total(arguments: str) -> str:
    """The household app's own tool."""
    month = json.loads(arguments)["month"]
    return json.dumps({"month": month, "total": 6778.3})


async def test_a_tool_loop_runs_the_clients_tool_on_the_client(proxy: Proxy) -> None:
    proxy.upstream.script = [call("budgetTotal", {"month": "2026-06"}, "call_b"), text("Em junho: R$ 6.778,30.")]
    client = proxy.client("junho")
    messages: list[Any] = [SYSTEM, ASK]
    first = await client.chat.completions.create(model="m", messages=messages, tools=[BUDGET])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [tool_call] = choice.message.tool_calls
    assert (tool_call.id, tool_call.function.name) == ("call_b", "budgetTotal")
    # The upstream was offered caderno's memory tools and the client's.
    offered = {t["function"]["name"] for t in proxy.upstream.requests[0]["tools"]}
    assert {"budgetTotal", "update_working_memory", "recall"} <= offered

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": tool_call.id, "content": budget_total(tool_call.function.arguments)},
    ]
    final = await client.chat.completions.create(model="m", messages=messages, tools=[BUDGET])
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "Em junho: R$ 6.778,30."
    # The upstream's second call saw the step once, from caderno's store, with the client's result after it.
    second = [m for m in proxy.upstream.requests[1]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[2] == {"role": "tool", "content": '{"month": "2026-06", "total": 6778.3}', "tool_call_id": "call_b"}
    assert await proxy.thread("junho") == [
        ("user", "Quanto gastamos em junho?", [], None, None),
        ("assistant", "", [("call_b", "budgetTotal")], None, None),
        ("tool", '{"month": "2026-06", "total": 6778.3}', [], "call_b", "budgetTotal"),
        ("assistant", "Em junho: R$ 6.778,30.", [], None, None),
    ]
    assert final.usage.total_tokens > 0


async def test_caderno_tools_of_a_step_run_on_the_server_and_stay_out_of_the_clients_answer(proxy: Proxy) -> None:
    proxy.upstream.script = [
        calls(
            ("update_working_memory", {"patch": {"monthlyIncomeBRL": 14000}}, "call_w"),
            ("budgetTotal", {"month": "2026-06"}, "call_b"),
        ),
        text("Anotado, e em junho: R$ 6.778,30."),
    ]
    client = proxy.client("renda")
    ask = {"role": "user", "content": "Ganhamos R$ 14.000. Quanto gastamos em junho?"}
    first = await client.chat.completions.create(model="m", messages=[ask], tools=[BUDGET])
    assert [c.id for c in first.choices[0].message.tool_calls] == ["call_b"]
    assert await proxy.memory.get_working_memory(resource_id="casa") == {"monthlyIncomeBRL": 14000}
    result = {"role": "tool", "tool_call_id": "call_b", "content": "6778.3"}
    await client.chat.completions.create(
        model="m", messages=[ask, first.choices[0].message.model_dump(exclude_none=True), result], tools=[BUDGET]
    )
    stored = await proxy.thread("renda")
    assert [(role, calls, call_id) for role, _, calls, call_id, _ in stored] == [
        ("user", [], None),
        ("assistant", [("call_w", "update_working_memory"), ("call_b", "budgetTotal")], None),
        ("tool", [], "call_w"),
        ("tool", [], "call_b"),
        ("assistant", [], None),
    ]


async def test_an_abandoned_tool_call_is_kept_and_the_conversation_goes_on(proxy: Proxy) -> None:
    proxy.upstream.script = [call("budgetTotal", {"month": "2026-06"}, "call_b"), text("Oi! Tudo bem.")]
    client = proxy.client("abandono")
    await client.chat.completions.create(model="m", messages=[ASK], tools=[BUDGET])
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Deixa pra lá. Oi!"}])
    # The upstream never saw a call without its result (it would refuse such a prompt).
    assert [m["role"] for m in proxy.upstream.requests[1]["messages"] if m["role"] != "system"] == ["user", "user"]
    assert [role for role, *_ in await proxy.thread("abandono")] == ["user", "assistant", "user", "assistant"]


async def test_a_streamed_tool_loop(proxy: Proxy) -> None:
    proxy.upstream.script = [
        calls(
            ("update_working_memory", {"patch": {"city": "Recife"}}, "call_w"),
            ("budgetTotal", {"month": "2026-06"}, "call_b"),
            content="Vou somar.",
        ),
        text("Em junho vocês gastaram R$ 6.778,30, bem dentro do orçamento."),
    ]
    client = proxy.client("stream")
    stream = await client.chat.completions.create(model="m", messages=[ASK], tools=[BUDGET], stream=True)
    chunks = [c async for c in stream]
    text_seen = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    pieces = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert text_seen == "Vou somar."
    assert {p.index for p in pieces} == {0} and [p.id for p in pieces if p.id] == ["call_b"]
    assert [p.function.name for p in pieces if p.function.name] == ["budgetTotal"]
    assert json.loads("".join(p.function.arguments or "" for p in pieces)) == {"month": "2026-06"}
    assert len(pieces) > 1  # the arguments came in pieces, as the upstream sent them
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]

    call_msg = {"role": "assistant", "tool_calls": [{"id": "call_b", "type": "function", "function": {}}]}
    result = {"role": "tool", "tool_call_id": "call_b", "content": "6778.3"}
    stream = await client.chat.completions.create(
        model="m", messages=[ASK, call_msg, result], tools=[BUDGET], stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert answer == "Em junho vocês gastaram R$ 6.778,30, bem dentro do orçamento."
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert [(role, content) for role, content, *_ in await proxy.thread("stream")] == [
        ("user", "Quanto gastamos em junho?"),
        ("assistant", "Vou somar."),
        ("tool", '{"ok": true, "working_memory": {"city": "Recife"}, "version": 1}'),
        ("tool", "6778.3"),
        ("assistant", answer),
    ]


async def test_the_first_chunk_arrives_before_the_upstream_has_finished(proxy: Proxy) -> None:
    proxy.upstream.hold = asyncio.Event()
    proxy.upstream.script = [text("Primeiro pedaço, e o resto depois.")]
    stream = await proxy.client("cedo").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "oi"}], stream=True
    )
    seen = ""
    async for chunk in stream:
        seen += chunk.choices[0].delta.content or ""
        if seen:
            break
    assert seen and proxy.upstream.finished == []  # the upstream is still holding the rest
    assert await proxy.memory.get_messages(resource_id="casa", thread_id="cedo") == []  # stored at the end
    proxy.upstream.hold.set()
    async for chunk in stream:
        seen += (chunk.choices[0].delta.content or "") if chunk.choices else ""
    assert seen == "Primeiro pedaço, e o resto depois." and len(proxy.upstream.finished) == 1
    assert [m.content for m in await proxy.memory.get_messages(resource_id="casa", thread_id="cedo")] == ["oi", seen]


async def test_an_upstream_failure_mid_stream_is_an_error_event_and_stores_nothing(proxy: Proxy) -> None:
    first = json.dumps({"id": "u", "choices": [{"index": 0, "delta": {"content": "Meio "}}]})
    proxy.upstream.script = [events(first, "{not json")]
    stream = await proxy.client("quebra").chat.completions.create(
        model="m", messages=[{"role": "user", "content": "oi"}], stream=True
    )
    seen = ""
    with pytest.raises(openai.APIError, match="the model call failed") as caught:
        async for chunk in stream:
            seen += chunk.choices[0].delta.content or ""
    assert seen == "Meio " and "{not json" not in str(caught.value)
    assert await proxy.memory.get_messages(resource_id="casa", thread_id="quebra") == []


async def test_an_idempotency_key_answers_a_paused_step_once(proxy: Proxy) -> None:
    proxy.upstream.script = [call("budgetTotal", {"month": "2026-06"}, "call_b")]
    client = proxy.client("chave")
    headers = {"Idempotency-Key": "4f7c1d5e-0c3b-4c59-9f3e-0d1b2a3c4d5e"}
    once = await client.chat.completions.create(model="m", messages=[ASK], tools=[BUDGET], extra_headers=headers)
    again = await client.chat.completions.create(model="m", messages=[ASK], tools=[BUDGET], extra_headers=headers)
    assert again.choices[0].message.tool_calls == once.choices[0].message.tool_calls
    assert again.choices[0].finish_reason == "tool_calls" and len(proxy.upstream.requests) == 1
    assert len(await proxy.thread("chave")) == 2


async def test_the_sdks_own_retry_after_a_timeout_stores_the_turn_once(proxy: Proxy) -> None:
    """The client gives up before the answer and retries without a key: the turn ran on, and the retry gets it."""
    proxy.upstream.script = [text("Resposta lenta.")]
    proxy.upstream.delays = [0.7]  # past the client's timeout; its retries come after ~0.4 s and ~1.2 s
    client = proxy.client("lento", max_retries=2, timeout=0.5)
    answer = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "oi"}])
    assert answer.choices[0].message.content == "Resposta lenta."
    assert len(proxy.upstream.requests) == 1
    assert [(role, content) for role, content, *_ in await proxy.thread("lento")] == [
        ("user", "oi"),
        ("assistant", "Resposta lenta."),
    ]


async def test_a_repeated_message_without_the_retry_mark_is_a_new_turn(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Oi!"), text("Oi de novo!")]
    headers = {"Authorization": f"Bearer {proxy.token}", THREAD_HEADER: "oi"}
    body = {"model": "m", "messages": [{"role": "user", "content": "oi"}]}
    async with httpx.AsyncClient(base_url=proxy.base_url) as c:
        await c.post("/v1/chat/completions", json=body, headers=headers)
        retried = await c.post("/v1/chat/completions", json=body, headers=headers | {"x-stainless-retry-count": "1"})
        assert retried.json()["choices"][0]["message"]["content"] == "Oi!"  # the SDK's retry: the stored turn
        again = await c.post("/v1/chat/completions", json=body, headers=headers)
        assert again.json()["choices"][0]["message"]["content"] == "Oi de novo!"  # the user said it again
    assert [content for _, content, *_ in await proxy.thread("oi")] == ["oi", "Oi!", "oi", "Oi de novo!"]


async def test_a_retry_after_a_failed_try_is_not_answered_with_an_earlier_turn_in_the_same_words(
    proxy: Proxy,
) -> None:
    """The client resends its conversation: its last reply tells which turn a retry may repeat."""
    proxy.upstream.script = [text("Oi!"), text("Sim?")]
    headers = {"Authorization": f"Bearer {proxy.token}", THREAD_HEADER: "sim", "x-stainless-retry-count": "1"}
    said = [{"role": "user", "content": "sim"}]
    async with httpx.AsyncClient(base_url=proxy.base_url) as c:
        await c.post("/v1/chat/completions", json={"model": "m", "messages": said}, headers=headers)
        # Its first try failed before storing anything (a 502, say); the SDK retries with the same body.
        body = {"model": "m", "messages": [*said, {"role": "assistant", "content": "Oi!"}, *said]}
        retried = await c.post("/v1/chat/completions", json=body, headers=headers)
    assert retried.json()["choices"][0]["message"]["content"] == "Sim?"
    assert [content for _, content, *_ in await proxy.thread("sim")] == ["sim", "Oi!", "sim", "Sim?"]


async def test_tool_results_sent_twice_are_stored_once(proxy: Proxy) -> None:
    proxy.upstream.script = [call("budgetTotal", {"month": "2026-06"}, "call_b"), text("R$ 6.778,30.")]
    client = proxy.client("duas-vezes")
    first = await client.chat.completions.create(model="m", messages=[ASK], tools=[BUDGET])
    follow = [
        ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_b", "content": "6778.3"},
    ]
    once = await client.chat.completions.create(model="m", messages=follow, tools=[BUDGET])
    twice = await client.chat.completions.create(model="m", messages=follow, tools=[BUDGET])
    assert twice.choices[0].message.content == once.choices[0].message.content == "R$ 6.778,30."
    assert len(proxy.upstream.requests) == 2 and len(await proxy.thread("duas-vezes")) == 4


async def test_a_turn_paused_on_one_server_goes_on_on_another(proxy: Proxy, tmp_path: Path) -> None:
    """Nothing of a paused turn is kept in a server: a second server on the same database continues it."""
    proxy.upstream.script = [call("budgetTotal", {"month": "2026-06"}, "call_b"), text("R$ 6.778,30.")]
    first = await proxy.client("dois").chat.completions.create(model="m", messages=[ASK], tools=[BUDGET])
    follow = [
        ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_b", "content": "6778.3"},
    ]
    async with await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None) as memory:
        async with proxy_in_front(memory, proxy.upstream) as other:
            client = openai.AsyncOpenAI(
                base_url=f"{other}/v1", api_key=proxy.token, default_headers={THREAD_HEADER: "dois"}, max_retries=0
            )
            final = await client.chat.completions.create(model="m", messages=follow, tools=[BUDGET])
    assert final.choices[0].message.content == "R$ 6.778,30."
    assert [role for role, *_ in await proxy.thread("dois")] == ["user", "assistant", "tool", "assistant"]


async def test_a_streamed_retry_with_the_same_key_streams_the_stored_answer(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Uma resposta guardada, longa o bastante para vir em pedaços.")]
    client = proxy.client("replay")
    headers = {"Idempotency-Key": "b5f0f6c4-7f0e-4d5e-8a4a-3f6f1c2d9e01"}
    ask = [{"role": "user", "content": "oi"}]
    answers = []
    for _ in range(2):
        stream = await client.chat.completions.create(model="m", messages=ask, stream=True, extra_headers=headers)
        answers.append("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))
    assert answers == ["Uma resposta guardada, longa o bastante para vir em pedaços."] * 2
    assert len(proxy.upstream.requests) == 1 and len(await proxy.thread("replay")) == 2


async def test_model_settings_reach_the_upstream_on_every_call_of_the_turn(proxy: Proxy) -> None:
    proxy.upstream.script = [call("recall", {"query": "junho"}, "call_r"), text('{"total": 6778.3}')]
    json_mode = {"type": "json_object"}
    await proxy.client("json").chat.completions.create(
        model="m", messages=[ASK], temperature=0, max_tokens=200, stop=["FIM"], response_format=json_mode, stream=True
    )
    for sent in proxy.upstream.requests:
        assert (sent["temperature"], sent["max_tokens"], sent["stop"], sent["response_format"]) == (
            0,
            200,
            ["FIM"],
            json_mode,
        )
        assert sent["store"] is False and sent["model"] == "scripted-1"  # the client's fields never override these
    with pytest.raises(openai.BadRequestError, match="top_p is a number from 0 to 1"):
        await proxy.client("json").chat.completions.create(model="m", messages=[ASK], top_p=3)
    assert len(proxy.upstream.requests) == 2 and len(await proxy.thread("json")) == 4
