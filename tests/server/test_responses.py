"""The Responses API endpoint (``POST /v1/responses``), driven by the official openai client over real HTTP.

Two real uvicorn servers on loopback ports: a scripted upstream model that
speaks chat completions (and records what it is sent), and caderno's app with
the proxy in front of it (``OpenAIChatModel(base_url=upstream)``).
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
uvicorn = pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _upstream import (  # noqa: E402
    LEAKED,
    NOT_EXPECTED,
    ODD_ANSWER_IDS,
    ODD_ANSWERS,
    Upstream,
    call,
    calls,
    content,
    events,
    parts,
    proxy_in_front,
    sse_data,
    text,
)

import caderno  # noqa: E402
from caderno.server.proxy import MAX_INSTRUCTIONS_CHARS, MAX_REQUEST_CHARS, THREAD_HEADER  # noqa: E402
from caderno.server.responses import response_id, thread_of  # noqa: E402

BUDGET_TOOL = {
    "type": "function",
    "name": "budgetTotal",
    "description": "What the household spent in a month.",
    "parameters": {"type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]},
    "strict": True,
}


@dataclass
class Proxy:
    memory: caderno.Memory
    upstream: Upstream
    base_url: str
    token: str
    """A key for resource ``alice`` only."""
    other: str
    """A key for resource ``bob`` only."""

    def client(self, token: str | None = None, **headers: str) -> Any:
        return openai.AsyncOpenAI(
            base_url=f"{self.base_url}/v1", api_key=token or self.token, default_headers=headers, max_retries=0
        )

    async def thread(self, thread_id: str, resource_id: str = "alice") -> list[caderno.Message]:
        return await self.memory.get_messages(resource_id=resource_id, thread_id=thread_id)


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    upstream = Upstream()
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'responses.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["alice"], name="app")
    other, _ = await memory.keys.create(resources=["bob"], name="bob's app")
    try:
        async with proxy_in_front(memory, upstream) as base_url:
            yield Proxy(memory=memory, upstream=upstream, base_url=base_url, token=token, other=other)
    finally:
        await memory.close()


async def test_text_in_text_out_and_the_thread_goes_on(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Hello Ana."), text("Your name is Ana.")]
    client = proxy.client(**{THREAD_HEADER: "t"})
    first = await client.responses.create(model="anything", input="I am Ana", instructions="Be brief.")
    assert first.object == "response" and first.status == "completed" and first.error is None
    assert first.output_text == "Hello Ana."
    assert first.model == "scripted-1" and first.instructions == "Be brief."
    assert first.usage is not None and first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    stored = await proxy.thread("t")
    assert first.id == response_id("t", str(stored[-1].id)) and thread_of(first.id) == "t"
    turn_usage = (stored[-1].metadata or {})["usage"]
    assert (first.usage.input_tokens, first.usage.output_tokens) == (
        turn_usage["prompt_tokens"],
        turn_usage["completion_tokens"],
    )

    # The next turn names the conversation by the response alone; the client sends only what is new.
    second = await proxy.client().responses.create(
        model="m",
        input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is my name?"}]}],
        instructions="Be brief.",
        previous_response_id=first.id,
        store=True,
    )
    assert second.output_text == "Your name is Ana." and second.previous_response_id == first.id
    assert [(m.role, m.content) for m in await proxy.thread("t")] == [
        ("user", "I am Ana"),
        ("assistant", "Hello Ana."),
        ("user", "What is my name?"),
        ("assistant", "Your name is Ana."),
    ]
    sent = proxy.upstream.requests[-1]
    assert sent["store"] is False  # the client's store: true is not passed on: the history is caderno's
    assert sent["messages"][0]["role"] == "system" and "Be brief." in sent["messages"][0]["content"]
    assert [(m["role"], m["content"]) for m in sent["messages"] if m["role"] != "system"][-3:] == [
        ("user", "I am Ana"),
        ("assistant", "Hello Ana."),
        ("user", "What is my name?"),
    ]


async def test_resent_items_are_history_and_system_items_are_instructions(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Hi."), text("Lisbon, I said.")]
    client = proxy.client(**{THREAD_HEADER: "items"})
    first = await client.responses.create(model="m", input="I live in Lisbon")
    items: list[Any] = [
        {"role": "developer", "content": "Answer in English."},
        {"role": "user", "content": "I live in Lisbon"},
        *[o.model_dump(exclude_none=True) for o in first.output],  # the SDK's own output item, resent
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": "Where do I live?"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Which city?"}]},
    ]
    await client.responses.create(model="m", input=items, instructions="You are a travel agent.")
    assert [(m.role, m.content) for m in await proxy.thread("items")] == [
        ("user", "I live in Lisbon"),
        ("assistant", "Hi."),
        ("user", "Where do I live?"),
        ("user", "Which city?"),
        ("assistant", "Lisbon, I said."),
    ]
    system = proxy.upstream.requests[-1]["messages"][0]["content"]
    assert "You are a travel agent.\n\nAnswer in English." in system
    assert proxy.upstream.prompt().count("I live in Lisbon") == 1


async def test_client_function_tools(proxy: Proxy) -> None:
    proxy.upstream.script = [
        calls(("budgetTotal", {"month": "2026-06"}, "c1"), content="Vou ver."),
        text("Em junho: R$ 6.778,30."),
    ]
    client = proxy.client(**{THREAD_HEADER: "budget"})
    asked = await client.responses.create(model="m", input="Quanto gastamos em junho?", tools=[BUDGET_TOOL])
    assert [o.type for o in asked.output] == ["message", "function_call"]
    assert asked.output_text == "Vou ver."
    fc = asked.output[1]
    assert (fc.call_id, fc.name, json.loads(fc.arguments), fc.status) == (
        "c1",
        "budgetTotal",
        {"month": "2026-06"},
        "completed",
    )
    assert asked.tools[0].name == "budgetTotal"  # echoed
    assert "budgetTotal" in {t["function"]["name"] for t in proxy.upstream.requests[0]["tools"]}

    answered = await client.responses.create(
        model="m",
        input=[{"type": "function_call_output", "call_id": "c1", "output": "6778.30"}],
        tools=[BUDGET_TOOL],
        previous_response_id=asked.id,
    )
    assert answered.output_text == "Em junho: R$ 6.778,30."
    assert proxy.upstream.tool_results() == ["6778.30"]
    stored = await proxy.thread("budget")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0].content == "Quanto gastamos em junho?"
    assert stored[1].content == "Vou ver."
    assert [(c.id, c.name, c.arguments) for c in stored[1].tool_calls or ()] == [
        ("c1", "budgetTotal", {"month": "2026-06"})
    ]
    assert (stored[2].tool_call_id, stored[2].content) == ("c1", "6778.30")
    assert stored[3].content == "Em junho: R$ 6.778,30."
    assert asked.id == response_id("budget", str(stored[1].id))


async def test_a_caderno_tool_runs_server_side(proxy: Proxy) -> None:
    proxy.upstream.script = [call("update_working_memory", {"patch": {"goal": "Amsterdam"}}), text("Noted: Amsterdam!")]
    answer = await proxy.client().responses.create(model="m", input="I want to go to Amsterdam", user="trip")
    assert [o.type for o in answer.output] == ["message"]
    assert answer.output_text == "Noted: Amsterdam!"
    assert await proxy.memory.get_working_memory(resource_id="alice") == {"goal": "Amsterdam"}
    assert [m.role for m in await proxy.thread("trip")] == ["user", "assistant", "tool", "assistant"]


async def test_which_thread(proxy: Proxy) -> None:
    proxy.upstream.script = [text("a"), text("b"), text("c")]
    by_conversation = await proxy.client().responses.create(model="m", input="one", conversation="conv-1")
    assert by_conversation.conversation is not None and by_conversation.conversation.id == "conv-1"
    await proxy.client().responses.create(model="m", input="two", conversation={"id": "conv-1"})
    assert [m.content for m in await proxy.thread("conv-1")] == ["one", "a", "two", "b"]
    fresh = await proxy.client().responses.create(model="m", input="three")
    new_thread = thread_of(fresh.id)
    assert new_thread and new_thread != "conv-1"
    assert [m.content for m in await proxy.thread(new_thread)] == ["three", "c"]


async def test_a_previous_response_of_another_resource_is_not_found(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Secret noted.")]
    alice = await proxy.client(**{THREAD_HEADER: "secret"}).responses.create(model="m", input="my secret is 42")
    bob = proxy.client(proxy.other)
    with pytest.raises(openai.NotFoundError) as theirs:
        await bob.responses.create(model="m", input="what is the secret?", previous_response_id=alice.id)
    with pytest.raises(openai.NotFoundError) as missing:
        await bob.responses.create(model="m", input="hi", previous_response_id=response_id("nowhere", "x"))
    assert "previous response" in theirs.value.message and "not found" in theirs.value.message
    # The same answer as for a response that never existed: nothing tells bob that alice's thread exists.
    assert theirs.value.body["detail"].replace(alice.id, "<id>") == missing.value.body["detail"].replace(
        response_id("nowhere", "x"), "<id>"
    )
    assert len(proxy.upstream.requests) == 1
    assert await proxy.thread("secret", resource_id="bob") == []
    assert await proxy.memory.list_threads(resource_id="bob") == []


@pytest.mark.parametrize(
    "bad",
    [
        "garbage",
        "resp_",
        "resp_!!!_x",
        "resp_dA_",
        response_id("\x00", "x"),
        "resp_/w==_x",
        "resp_" + "A" * 5000 + "_x",
        "resp_dA=_x",  # thread "t", spelled otherwise than its ids are
        "resp_d!A_x",
    ],
)
async def test_a_malformed_previous_response_id_is_not_found(proxy: Proxy, bad: str) -> None:
    await proxy.memory.threads.create(resource_id="alice", thread_id="t")
    assert thread_of(response_id("t", "x")) == "t"
    with pytest.raises(openai.NotFoundError, match="previous response"):
        await proxy.client().responses.create(model="m", input="hi", previous_response_id=bad)
    assert proxy.upstream.requests == []


async def test_a_previous_response_of_another_thread_than_the_header_is_refused(proxy: Proxy) -> None:
    proxy.upstream.script = [text("ok")]
    first = await proxy.client(**{THREAD_HEADER: "one"}).responses.create(model="m", input="hi")
    with pytest.raises(openai.BadRequestError, match="another conversation"):
        await proxy.client(**{THREAD_HEADER: "two"}).responses.create(
            model="m", input="hi again", previous_response_id=first.id
        )
    assert len(proxy.upstream.requests) == 1


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (
            {"input": "hi", "tools": [{"type": "function", "name": "recall", "parameters": {"type": "object"}}]},
            "one of caderno's own tools",
        ),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "function tools only, not 'web_search'"),
        (
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA"}]}
                ]
            },
            "only text content is supported by the proxy, not 'input_image'",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "not 'item_reference'"),
        ({"input": [{"role": "tool", "content": "x"}]}, "unknown role 'tool'"),
        (
            {"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
            "nothing to answer",
        ),
        ({"input": [{"type": "function_call_output", "output": "1"}]}, "needs the call_id"),
        ({"input": "hi", "background": True}, "background"),
        ({"input": "hi", "prompt": {"id": "pmpt_1"}}, "prompt templates"),
        ({"input": "hi", "metadata": {f"k{i}": "v" for i in range(17)}}, "17 pairs; the limit is 16"),
        ({"input": "hi", "metadata": {"k" * 65: "v"}}, "key is 65 characters long; the limit is 64"),
        ({"input": "hi", "metadata": {"k": "v" * 513}}, "is 513 characters long; the limit is 512"),
        ({"input": "hi", "metadata": {"k": {"nested": "v"}}}, "values must be strings, not dict"),
        ({"input": "hi", "metadata": ["k", "v"]}, "metadata must be an object of strings, not list"),
    ],
    ids=[
        "clashing-tool",
        "not-a-function",
        "image",
        "item-reference",
        "tool-role",
        "nothing-new",
        "no-call-id",
        "background",
        "prompt",
        "metadata-pairs",
        "metadata-key",
        "metadata-value",
        "metadata-not-a-string",
        "metadata-not-an-object",
    ],
)
async def test_bad_requests_are_400_problems(proxy: Proxy, kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await proxy.client(**{THREAD_HEADER: "t"}).responses.create(model="m", **kwargs)
    problem = caught.value.response.json()
    assert problem["status"] == 400 and words in problem["detail"] and problem["message"] == problem["detail"]
    assert proxy.upstream.requests == []
    assert await proxy.thread("t") == []


async def test_instructions_past_the_bound_are_a_413(proxy: Proxy) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        await proxy.client(**{THREAD_HEADER: "t"}).responses.create(
            model="m",
            input=[{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}],
            instructions="y" * MAX_INSTRUCTIONS_CHARS,
        )
    assert caught.value.status_code == 413 and "instructions" in caught.value.message
    assert proxy.upstream.requests == []


async def test_a_request_past_the_bound_is_a_413(proxy: Proxy) -> None:
    """Every text counts: the items' content, function call arguments and outputs, and the instructions."""
    instructions = "i" * (MAX_INSTRUCTIONS_CHARS - 10)
    third = (MAX_REQUEST_CHARS - len(instructions)) // 3 + 1
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "u" * third}]},
        {"type": "function_call", "call_id": "c1", "name": "budgetTotal", "arguments": "a" * third},
        {"type": "function_call_output", "call_id": "c1", "output": "o" * third},
    ]
    with pytest.raises(openai.APIStatusError) as caught:
        await proxy.client(**{THREAD_HEADER: "big"}).responses.create(
            model="m", input=items, instructions=instructions, tools=[BUDGET_TOOL]
        )
    assert caught.value.status_code == 413 and "the request holds" in caught.value.message
    assert proxy.upstream.requests == []


async def test_streaming(proxy: Proxy) -> None:
    reply = "A long answer, long enough to come back in several pieces over server-sent events."
    proxy.upstream.script = [text(reply)]
    stream = await proxy.client(**{THREAD_HEADER: "s"}).responses.create(model="m", input="Tell me", stream=True)
    seen = [e async for e in stream]
    kinds = [e.type for e in seen]
    deltas = [e for e in seen if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * len(deltas),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    stored = await proxy.thread("s")
    assert "".join(d.delta for d in deltas) == reply == stored[-1].content == seen[-4].text
    done = seen[-1].response
    assert done.status == "completed" and done.output_text == reply and done.id == seen[0].response.id
    assert thread_of(done.id) == "s"
    assert done.usage is not None and done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens > 0
    assert {d.item_id for d in deltas} == {done.output[0].id}
    assert proxy.upstream.requests[0]["stream"] is True


async def test_metadata_at_openais_bounds_is_echoed_and_streamed_only_in_the_first_and_last_response(
    proxy: Proxy,
) -> None:
    """Before: unbounded metadata came back once per response event (15 MB in, 45.6 MB out)."""
    metadata = {f"k{i:02d}" + "k" * 61: f"{i:02d}" + "v" * 510 for i in range(16)}  # every bound, exactly
    proxy.upstream.script = [text("plain"), text("streamed")]
    answer = await proxy.client(**{THREAD_HEADER: "m"}).responses.create(model="m", input="hi", metadata=metadata)
    assert answer.metadata == metadata
    async with (
        httpx.AsyncClient(base_url=proxy.base_url, timeout=30) as http,
        http.stream(
            "POST",
            "/v1/responses",
            json={"input": "again", "metadata": metadata, "stream": True},
            headers={"authorization": f"Bearer {proxy.token}", THREAD_HEADER: "m"},
        ) as streamed,
    ):
        assert streamed.status_code == 200
        frames = [json.loads(line[6:]) async for line in streamed.aiter_lines() if line.startswith("data: ")]
    carrying = [f["type"] for f in frames if metadata["k00" + "k" * 61] in json.dumps(f)]
    assert carrying == ["response.created", "response.completed"], [f["type"] for f in frames]
    assert frames[-1]["response"]["metadata"] == metadata
    assert [m.content for m in await proxy.thread("m")] == ["hi", "plain", "again", "streamed"]


async def test_a_stream_shows_the_text_written_before_a_memory_tool_call(proxy: Proxy) -> None:
    proxy.upstream.script = [
        calls(("update_working_memory", {"patch": {"goal": "Porto"}}, "m1"), content="Let me note that. "),
        text("Noted: Porto."),
    ]
    stream = await proxy.client(**{THREAD_HEADER: "two-steps"}).responses.create(model="m", input="Porto", stream=True)
    seen = [e async for e in stream]
    assert [e.type for e in seen].count("response.output_item.added") == 1  # the memory call is not shown
    done = seen[-1].response
    assert (
        done.output_text
        == "Let me note that. Noted: Porto."
        == "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    )
    stored = await proxy.thread("two-steps")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "Porto"),
        ("assistant", "Let me note that. "),
        ("tool", stored[2].content),
        ("assistant", "Noted: Porto."),
    ]


async def test_streamed_client_call_with_the_stream_helper(proxy: Proxy) -> None:
    proxy.upstream.script = [calls(("budgetTotal", {"month": "2026-06"}, "c7"), content="Um momento.")]
    async with proxy.client(**{THREAD_HEADER: "sc"}).responses.stream(
        model="m", input="Quanto em junho?", tools=[BUDGET_TOOL]
    ) as stream:
        kinds = [e.type async for e in stream]
        final = await stream.get_final_response()
    words = kinds.count("response.output_text.delta")
    pieces = kinds.count("response.function_call_arguments.delta")
    assert pieces > 1  # the upstream sends the arguments in pieces, and they come through as they arrive
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * words,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * pieces,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    message, fc = final.output
    assert message.type == "message" and final.output_text == "Um momento."
    assert fc.type == "function_call" and (fc.call_id, fc.name, fc.status) == ("c7", "budgetTotal", "completed")
    assert json.loads(fc.arguments) == {"month": "2026-06"}
    stored = await proxy.thread("sc")
    assert [(c.id, c.name) for c in stored[-1].tool_calls or ()] == [("c7", "budgetTotal")]


async def test_a_call_whose_id_comes_after_its_first_piece(proxy: Proxy) -> None:
    """Its item opens once the id is known, with the arguments held until then."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return json.dumps(
            {"id": "up", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}
        )

    first = {"index": 0, "type": "function", "function": {"name": "budgetTotal", "arguments": '{"month": '}}
    second = {"index": 0, "id": "c9", "function": {"arguments": '"2026-06"'}}
    third = {"index": 0, "function": {"arguments": "}"}}
    proxy.upstream.script = [
        events(*(chunk({"tool_calls": [c]}) for c in (first, second, third)), chunk({}, "tool_calls"), "[DONE]")
    ]
    async with proxy.client(**{THREAD_HEADER: "late"}).responses.stream(
        model="m", input="junho?", tools=[BUDGET_TOOL]
    ) as stream:
        seen = [e async for e in stream]
        final = await stream.get_final_response()
    added = next(e for e in seen if e.type == "response.output_item.added")
    assert added.item.id == "fc_c9" and added.item.call_id == "c9"
    assert [e.delta for e in seen if e.type == "response.function_call_arguments.delta"] == ['{"month": "2026-06"', "}"]
    (fc,) = final.output
    assert (fc.call_id, json.loads(fc.arguments)) == ("c9", {"month": "2026-06"})


async def test_the_first_delta_arrives_before_the_upstream_has_finished(proxy: Proxy) -> None:
    proxy.upstream.hold = asyncio.Event()
    proxy.upstream.script = [text("First words, then the rest.")]
    stream = await proxy.client(**{THREAD_HEADER: "held"}).responses.create(model="m", input="go", stream=True)
    seen = []
    async for event in stream:
        seen.append(event)
        if event.type == "response.output_text.delta":
            break
    assert proxy.upstream.finished == []  # the upstream is still holding the rest of its answer
    assert seen[-1].delta == "Firs"
    proxy.upstream.hold.set()
    seen += [e async for e in stream]
    assert seen[-1].type == "response.completed" and seen[-1].response.output_text == "First words, then the rest."
    assert len(proxy.upstream.finished) == 1


async def test_an_error_after_the_stream_began_is_a_failed_event(proxy: Proxy) -> None:
    piece = {
        "id": "up",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Half an ans"}, "finish_reason": None}],
    }
    proxy.upstream.script = [events(json.dumps(piece), "not json")]  # the stream breaks after its first piece
    stream = await proxy.client(**{THREAD_HEADER: "broken"}).responses.create(model="m", input="go", stream=True)
    seen = [e async for e in stream]
    assert [e.type for e in seen][-2:] == ["response.output_text.delta", "response.failed"]
    failed = seen[-1].response
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "model-error" and "model" in failed.error.message
    assert "upstream-secret" not in failed.error.message
    assert await proxy.thread("broken") == []


async def test_an_idempotency_key_retry_answers_the_stored_response(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Stored once, a reply long enough to come back in more than one piece.")]
    client = proxy.client(**{THREAD_HEADER: "k", "Idempotency-Key": "key-1"})
    first = await client.responses.create(model="m", input="hello")
    again = await client.responses.create(model="m", input="hello")
    assert again.id == first.id and again.output_text == first.output_text
    stream = await client.responses.create(model="m", input="hello", stream=True)
    seen = [e async for e in stream]
    deltas = [e.delta for e in seen if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == first.output_text
    assert seen[-1].type == "response.completed" and seen[-1].response.output_text == first.output_text
    assert len(proxy.upstream.requests) == 1
    assert len(await proxy.thread("k")) == 2


async def test_raw_http_events_have_event_lines(proxy: Proxy) -> None:
    proxy.upstream.script = [text("ok")]
    headers = {"Authorization": f"Bearer {proxy.token}", THREAD_HEADER: "raw"}
    async with httpx.AsyncClient(base_url=proxy.base_url) as c:
        answer = await c.post("/v1/responses", json={"input": "hi", "stream": True}, headers=headers)
    assert answer.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in answer.text.split("\n\n") if b]
    for block in blocks:
        event, data = block.split("\n")
        assert event == f"event: {json.loads(data.removeprefix('data: '))['type']}"
    assert "[DONE]" not in answer.text


async def test_model_settings_reach_the_upstream_in_chat_completions_terms(proxy: Proxy) -> None:
    proxy.upstream.script = [text('{"total": 6778.3}')]
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    await proxy.client(**{THREAD_HEADER: "fmt"}).responses.create(
        model="m",
        input="Quanto gastamos em junho?",
        temperature=0.2,
        max_output_tokens=300,
        text={"format": {"type": "json_schema", "name": "total", "schema": schema, "strict": True}},
    )
    sent = proxy.upstream.requests[0]
    assert (sent["temperature"], sent["max_tokens"]) == (0.2, 300)
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "total", "schema": schema, "strict": True},
    }
    with pytest.raises(openai.BadRequestError, match="from 0 to 2"):
        await proxy.client(**{THREAD_HEADER: "fmt"}).responses.create(model="m", input="oi", temperature=7)
    assert len(proxy.upstream.requests) == 1 and len(await proxy.thread("fmt")) == 2


# -- upstream answers of other shapes: never the client's fault ---------------------------------



async def _post_response(proxy: Proxy, thread: str, stream: bool) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """The raw answer to one turn, and its server-sent events' data (none when not streamed)."""
    headers = {"authorization": f"Bearer {proxy.token}", THREAD_HEADER: thread}
    async with httpx.AsyncClient(base_url=proxy.base_url, timeout=30) as http:
        answer = await http.post(
            "/v1/responses", json={"model": "m", "input": "when?", "stream": stream}, headers=headers
        )
    return answer, sse_data(answer.text) if answer.headers["content-type"].startswith("text/event-stream") else []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_upstream_content_as_text_parts_is_answered_and_stored_joined(proxy: Proxy, stream: bool) -> None:
    """Before: ``content`` as ``[{"type": "text", …}]`` (real servers send it) was a 400 ``invalid-request``."""
    proxy.upstream.script = [parts("Amsterdam ", "in May")]
    answer, events = await _post_response(proxy, "parts", stream)
    assert answer.status_code == 200, answer.text
    done = events[-1]["response"] if stream else answer.json()
    assert not stream or events[-1]["type"] == "response.completed"
    assert [part["text"] for item in done["output"] for part in item["content"]] == ["Amsterdam in May"]
    stored = await proxy.thread("parts")
    assert [(m.role, m.content) for m in stored] == [("user", "when?"), ("assistant", "Amsterdam in May")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply,usage", ODD_ANSWERS, ids=ODD_ANSWER_IDS)
async def test_an_upstream_answer_of_another_shape_is_a_model_error_in_the_fixed_words(
    proxy: Proxy, stream: bool, reply: Any, usage: Any
) -> None:
    """Before: a malformed ``usage`` put ``ValueError: invalid literal … 'sk-…'`` in the 502's detail."""
    proxy.upstream.script = [content(reply)]
    proxy.upstream.reported_usage = usage
    answer, events = await _post_response(proxy, "odd", stream)
    assert LEAKED not in answer.text and "Error" not in answer.text, answer.text
    if answer.status_code == 502:  # failed before the first event: a problem
        assert answer.json()["detail"] == NOT_EXPECTED and answer.json()["type"].endswith("/model-error")
    else:  # failed after the stream began: its last event says so
        assert stream and answer.status_code == 200 and events[-1]["type"] == "response.failed", answer.text
        assert events[-1]["response"]["error"] == {"code": "model-error", "message": NOT_EXPECTED}
    assert await proxy.thread("odd") == []
