"""The memory proxy, driven by the official openai client over real HTTP.

Two real uvicorn servers on loopback ports: a scripted upstream model that
speaks chat completions (and records what it is sent), and caderno's app with
the proxy in front of it (``OpenAIChatModel(base_url=upstream)``).
"""

from __future__ import annotations

import asyncio
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
    content,
    parts,
    proxy_in_front,
    serving,
    sse_data,
    text,
)

import caderno  # noqa: E402
from caderno.agent.models import OpenAIChatModel  # noqa: E402
from caderno.core.clock import utcnow  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.proxy import RESOURCE_HEADER, THREAD_HEADER, install_proxy  # noqa: E402
from caderno.stores import ops  # noqa: E402


@dataclass
class Proxy:
    memory: caderno.Memory
    upstream: Upstream
    base_url: str
    token: str
    """A key for resource ``alice`` only."""
    other: str
    """A key for resource ``bob`` only."""
    both: str
    """A key for ``alice`` and ``bob``."""

    def client(self, token: str | None = None, **headers: str) -> Any:
        return openai.AsyncOpenAI(
            base_url=f"{self.base_url}/v1", api_key=token or self.token, default_headers=headers, max_retries=0
        )


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    upstream = Upstream()
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["alice"], name="app")
    other, _ = await memory.keys.create(resources=["bob"], name="bob's app")
    both, _ = await memory.keys.create(resources=["alice", "bob"], name="family")
    async with proxy_in_front(memory, upstream) as base_url:
        yield Proxy(memory=memory, upstream=upstream, base_url=base_url, token=token, other=other, both=both)


async def test_turn_is_stored_and_tools_run_server_side(proxy: Proxy) -> None:
    proxy.upstream.script = [call("update_working_memory", {"patch": {"goal": "Amsterdam"}}), text("Noted: Amsterdam!")]
    client = proxy.client(**{THREAD_HEADER: "trip"})
    answer = await client.chat.completions.create(
        model="anything",
        messages=[
            {"role": "system", "content": "You plan trips."},
            {"role": "user", "content": "I want to go to Amsterdam"},
        ],
    )
    assert answer.object == "chat.completion"
    assert answer.model == "scripted-1"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "Noted: Amsterdam!"
    assert answer.choices[0].finish_reason == "stop"
    assert (
        answer.usage is not None
        and answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens > 0
    )

    assert await proxy.memory.get_working_memory(resource_id="alice") == {"goal": "Amsterdam"}
    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="trip")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert answer.id == f"chatcmpl-{stored[-1].id}"
    # The client's system message is the turn's instructions (not stored), caderno's tools are offered,
    # and the upstream key is the configured one, not the client's caderno key.
    first = proxy.upstream.requests[0]
    assert first["messages"][0]["role"] == "system" and "You plan trips." in first["messages"][0]["content"]
    assert {"update_working_memory", "recall", "memory"} <= {t["function"]["name"] for t in first["tools"]}
    assert first["model"] == "scripted-1"


async def test_a_models_unstorable_arguments_are_not_the_clients_fault(proxy: Proxy) -> None:
    """The upstream sends a patch nested past what caderno stores: the turn completes and is stored."""
    deep: dict[str, Any] = {}
    for _ in range(70):
        deep = {"x": deep}
    proxy.upstream.script = [call("update_working_memory", {"patch": deep}), text("I could not save that.")]
    answer = await proxy.client(**{THREAD_HEADER: "deep"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "save this"}]
    )
    assert answer.choices[0].message.content == "I could not save that."
    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="deep")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert "nests deeper" in stored[2].content  # what the model was told
    assert await proxy.memory.get_working_memory(resource_id="alice") is None


async def test_working_memory_reaches_a_new_thread(proxy: Proxy) -> None:
    proxy.upstream.script = [
        call("update_working_memory", {"patch": {"goal": "Amsterdam"}}),
        text("Noted."),
        text("Amsterdam, then."),
    ]
    await proxy.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Amsterdam please"}], user="first"
    )
    answer = await proxy.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Where was I going?"}], user="second"
    )
    assert answer.choices[0].message.content == "Amsterdam, then."
    prompt = proxy.upstream.prompt()
    assert "WORKING MEMORY" in prompt and '"goal": "Amsterdam"' in prompt
    assert "Amsterdam please" not in prompt  # another thread's history is not this one's
    assert [m.content for m in await proxy.memory.get_messages(resource_id="alice", thread_id="second")] == [
        "Where was I going?",
        "Amsterdam, then.",
    ]


async def test_only_new_messages_are_stored(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Hello Ana."), text("You said your name is Ana.")]
    client = proxy.client(**{THREAD_HEADER: "t"})
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I am Ana"},
    ]
    first = await client.chat.completions.create(model="m", messages=history)
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "What did I say?"},
        {"role": "user", "content": "My name, I mean."},
    ]
    await client.chat.completions.create(model="m", messages=history)

    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="t")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "I am Ana"),
        ("assistant", "Hello Ana."),
        ("user", "What did I say?"),
        ("user", "My name, I mean."),
        ("assistant", "You said your name is Ana."),
    ]
    # The upstream sees the resent history once: from caderno's store, not twice.
    assert proxy.upstream.prompt().count("I am Ana") == 1


async def test_streaming(proxy: Proxy) -> None:
    reply = "A long answer, long enough to come back in several pieces over server-sent events."
    proxy.upstream.script = [text(reply)]
    stream = await proxy.client(**{THREAD_HEADER: "s"}).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Tell me"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == reply
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1  # one completion, streamed
    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="s")
    assert [(m.role, m.content) for m in stored] == [("user", "Tell me"), ("assistant", reply)]
    assert proxy.upstream.requests[0]["stream"] is True  # the upstream streamed too


async def test_sync_client_with_user_field(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Hi!")]
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=proxy.token, max_retries=0)

    def ask() -> Any:
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], user="u1")

    answer = await asyncio.to_thread(ask)
    assert answer.choices[0].message.content == "Hi!"
    assert len(await proxy.memory.get_messages(resource_id="alice", thread_id="u1")) == 2


async def test_another_resource_cannot_reach_the_thread(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Secret noted."), text("I know nothing yet.")]
    await proxy.client(**{THREAD_HEADER: "t"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "my secret is 42"}]
    )
    bob = proxy.client(proxy.other, **{THREAD_HEADER: "t", RESOURCE_HEADER: "alice"})
    with pytest.raises(openai.NotFoundError) as caught:
        await bob.chat.completions.create(model="m", messages=[{"role": "user", "content": "what is the secret?"}])
    assert caught.value.response.headers["content-type"].startswith("application/problem+json")
    # Without the header, bob's key reaches bob's own thread "t": a different conversation.
    await proxy.client(proxy.other, **{THREAD_HEADER: "t"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "what is the secret?"}]
    )
    assert "42" not in proxy.upstream.prompt()
    assert len(proxy.upstream.requests) == 2
    assert len(await proxy.memory.get_messages(resource_id="alice", thread_id="t")) == 2


async def test_a_key_for_several_resources_names_one(proxy: Proxy) -> None:
    proxy.upstream.script = [text("ok")]
    with pytest.raises(openai.BadRequestError, match=RESOURCE_HEADER):
        await proxy.client(proxy.both, **{THREAD_HEADER: "t"}).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    await proxy.client(proxy.both, **{THREAD_HEADER: "t", RESOURCE_HEADER: "bob"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert len(await proxy.memory.get_messages(resource_id="bob", thread_id="t")) == 2


UNASKED = {"name": "weather", "arguments": "{}"}


@pytest.mark.parametrize(
    ("kwargs", "headers", "words"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, {}, THREAD_HEADER),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "recall", "parameters": {"type": "object"}}}],
            },
            {THREAD_HEADER: "t"},
            "one of caderno's own tools",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web_search"}]},
            {THREAD_HEADER: "t"},
            "function tools only",
        ),
        (
            {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "../etc"}}],
            },
            {THREAD_HEADER: "t"},
            "a tool's name is 1 to 64",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "tool_calls": [{"id": "c9", "type": "function", "function": UNASKED}]},
                    {"role": "tool", "content": "1", "tool_call_id": "c9"},
                ]
            },
            {THREAD_HEADER: "t"},
            "not waiting for tool results",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
            {THREAD_HEADER: "t"},
            "nothing to answer",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            {THREAD_HEADER: "t"},
            "only text content",
        ),
    ],
    ids=["no-thread", "clashing-tool", "not-a-function", "bad-tool-name", "unasked-result", "nothing-new", "image"],
)
async def test_bad_requests_are_400_problems(
    proxy: Proxy, kwargs: dict[str, Any], headers: dict[str, str], words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await proxy.client(**headers).chat.completions.create(model="m", **kwargs)
    problem = caught.value.response.json()
    assert problem["status"] == 400 and words in problem["detail"]
    assert proxy.upstream.requests == []


async def test_text_parts_and_bad_key(proxy: Proxy) -> None:
    proxy.upstream.script = [text("seen")]
    await proxy.client(**{THREAD_HEADER: "p"}).chat.completions.create(
        model="m",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}
        ],
    )
    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="p")
    assert stored[0].content == "part one\npart two"
    # The key is checked before the body is read, and the SDK user still reads why.
    with pytest.raises(openai.AuthenticationError, match="unknown or revoked|API key") as caught:
        await proxy.client("cad_not-a-key", **{THREAD_HEADER: "p"}).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.message != "Error code: 401"


async def test_upstream_failure_is_a_502_and_stores_nothing(proxy: Proxy) -> None:
    def broken(body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": None}  # empty answer: the turn fails

    proxy.upstream.script = [broken]
    with pytest.raises(openai.APIStatusError) as caught:
        await proxy.client(**{THREAD_HEADER: "x"}).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 502
    assert await proxy.memory.get_messages(resource_id="alice", thread_id="x") == []


async def test_no_model_configured_is_a_503(tmp_path: Path) -> None:
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'none.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["alice"])
    async with serving(create_app(memory, background=False, routers=[install_proxy])) as base_url:
        client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=token, max_retries=0)
        with pytest.raises(openai.APIStatusError, match=r"set \[model\] in caderno.toml") as caught:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], user="t")
    assert caught.value.status_code == 503


async def test_recall_brings_an_earlier_conversation(proxy: Proxy) -> None:
    proxy.upstream.script = [text("Noted."), text("It is X1234.")]
    await proxy.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "My passport number is X1234"}], user="docs"
    )
    await proxy.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "What is my passport number?"}], user="travel"
    )
    prompt = proxy.upstream.prompt()
    assert "Remembered from earlier conversations" in prompt and "X1234" in prompt


async def test_a_turn_on_a_busy_thread_is_a_409_and_stores_nothing(tmp_path: Path) -> None:
    """Another process holds the thread's turn lease past the wait: ``thread-busy``, nothing stored, retry works."""
    upstream = Upstream()
    async with await caderno.connect(f"sqlite:///{tmp_path / 'busy.db'}", embedder=None) as memory:
        token, _ = await memory.keys.create(resources=["alice"], name="app")
        async with serving(upstream.app()) as up:
            model = OpenAIChatModel(model="m", base_url=f"{up}/v1", api_key="upstream-secret")
            app = create_app(memory, model=model, background=False, routers=[install_proxy])
            app.state.turn_wait = 0.2
            claim = ops.ClaimTurn(resource_id="alice", thread_id="t", holder="other", lease_seconds=60, now=utcnow())
            assert await memory.run(claim)
            try:
                async with serving(app) as base_url:
                    body = {"model": "m", "messages": [{"role": "user", "content": "oi"}]}
                    headers = {"Authorization": f"Bearer {token}", THREAD_HEADER: "t"}
                    async with httpx.AsyncClient(base_url=base_url) as c:
                        busy = await c.post("/v1/chat/completions", json=body, headers=headers)
                        assert busy.status_code == 409, busy.text
                        assert busy.json()["type"].endswith("/thread-busy") and "thread 't'" in busy.json()["detail"]
                        assert (
                            upstream.requests == []
                            and await memory.get_messages(resource_id="alice", thread_id="t") == []
                        )
                        await memory.run(ops.ReleaseTurn(resource_id="alice", thread_id="t", holder="other"))
                        upstream.script = [text("olá")]
                        done = await c.post("/v1/chat/completions", json=body, headers=headers)
                        assert done.status_code == 200 and done.json()["choices"][0]["message"]["content"] == "olá"
            finally:
                await model.aclose()


# -- upstream answers of other shapes: never the client's fault ---------------------------------



async def _post_chat(proxy: Proxy, thread: str, stream: bool) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """The raw answer to one turn, and its server-sent events' data (none when not streamed)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "when?"}], "stream": stream}
    headers = {"authorization": f"Bearer {proxy.token}", THREAD_HEADER: thread}
    async with httpx.AsyncClient(base_url=proxy.base_url, timeout=30) as http:
        answer = await http.post("/v1/chat/completions", json=body, headers=headers)
    return answer, sse_data(answer.text) if answer.headers["content-type"].startswith("text/event-stream") else []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_upstream_content_as_text_parts_is_answered_and_stored_joined(proxy: Proxy, stream: bool) -> None:
    """Before: ``content`` as ``[{"type": "text", …}]`` (real servers send it) was a 400 ``invalid-request``."""
    proxy.upstream.script = [parts("Amsterdam ", "in May")]
    answer, events = await _post_chat(proxy, "parts", stream)
    assert answer.status_code == 200, answer.text
    if stream:
        said = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    else:
        said = answer.json()["choices"][0]["message"]["content"]
    assert said == "Amsterdam in May"
    stored = await proxy.memory.get_messages(resource_id="alice", thread_id="parts")
    assert [(m.role, m.content) for m in stored] == [("user", "when?"), ("assistant", "Amsterdam in May")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply,usage", ODD_ANSWERS, ids=ODD_ANSWER_IDS)
async def test_an_upstream_answer_of_another_shape_is_a_model_error_in_the_fixed_words(
    proxy: Proxy, stream: bool, reply: Any, usage: Any
) -> None:
    """Before: a malformed ``usage`` put ``ValueError: invalid literal … 'sk-…'`` in the 502's detail."""
    proxy.upstream.script = [content(reply)]
    proxy.upstream.reported_usage = usage
    answer, events = await _post_chat(proxy, "odd", stream)
    assert LEAKED not in answer.text and "Error" not in answer.text, answer.text
    if answer.status_code == 502:  # failed before the first piece: a problem
        assert answer.json()["detail"] == NOT_EXPECTED and answer.json()["type"].endswith("/model-error")
    else:  # failed after the stream began: its last event says so
        assert stream and answer.status_code == 200, answer.text
        assert events[-1] == {"error": {"message": NOT_EXPECTED, "type": "model-error", "code": 502}}
    assert await proxy.memory.get_messages(resource_id="alice", thread_id="odd") == []
