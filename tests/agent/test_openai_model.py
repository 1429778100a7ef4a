"""OpenAIChatModel against a local HTTP server speaking chat completions."""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, OpenAIChatModel
from caderno.agent.models import RETRY_AFTER_MAX, RETRY_ATTEMPTS, RetryPolicy, _retry_after
from caderno.core.errors import ModelError, UsageError
from caderno.examples.household import BudgetTool


class FakeChatCompletions(BaseHTTPRequestHandler):
    """Answers like the OpenAI API: a tool call first, then text using the tool result."""

    received: list[dict] = []
    mode = "ok"

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.mode == "500":
            self._send(500, {"error": {"message": "overloaded"}})
            return
        if self.mode == "garbage":
            self._send(200, {"unexpected": True})
            return
        last = body["messages"][-1]
        if last["role"] == "tool" and self.mode != "badargs":
            total = json.loads(last["content"])["total"]
            message = {"role": "assistant", "content": f"Total: {total}"}
        elif self.mode == "badargs":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "x1", "type": "function", "function": {"name": "budget_total", "arguments": "{oops"}}
                ],
            }
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "budget_total", "arguments": '{"month": "2026-06"}'},
                    }
                ],
            }
        usage = {"prompt_tokens": 100 + len(FakeChatCompletions.received), "completion_tokens": 7, "total_tokens": 0}
        self._send(
            200, {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message}], "usage": usage}
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    FakeChatCompletions.received = []
    FakeChatCompletions.mode = "ok"
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeChatCompletions)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


async def test_round_trip_with_tool_calling(server: str, memory: caderno.Memory) -> None:
    model = OpenAIChatModel(model="local-model", base_url=server, api_key="sk-test")
    chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()])
    result = await chat.ask(messages="quanto gastamos?", resource_id="r", thread_id="t")
    await model.aclose()
    assert result.reply.content == "Total: 6778.3"
    first, second = FakeChatCompletions.received
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["body"]["model"] == "local-model"
    names = [t["function"]["name"] for t in first["body"]["tools"]]
    assert names == ["update_working_memory", "recall", "remember_fact", "budget_total"]
    wire = second["body"]["messages"]
    assert wire[-2]["tool_calls"][0]["function"] == {"name": "budget_total", "arguments": '{"month": "2026-06"}'}
    stored = await memory.get_messages(resource_id="r", thread_id="t")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    # The tool's result goes back on the wire as the stored tool message, in OpenAI's shape.
    assert wire[-1] == {"role": "tool", "content": stored[2].content, "tool_call_id": "call_a"}
    assert json.loads(wire[-1]["content"])["total"] == 6778.3
    # The turn's usage is the model's own figures, summed over its two calls (not estimates).
    assert stored[-1].metadata == {"usage": {"model_calls": 2, "prompt_tokens": 203, "completion_tokens": 14}}


async def test_malformed_arguments_reach_the_model_as_an_error(server: str) -> None:
    FakeChatCompletions.mode = "badargs"
    model = OpenAIChatModel(model="m", base_url=server)
    chat = AgentChat(model=model, tools=[BudgetTool()], settings=ChatSettings(max_steps=2))
    with pytest.raises(ModelError, match="max_steps=2"):
        await chat.ask(messages="x")
    tool_msg = FakeChatCompletions.received[1]["body"]["messages"][-1]
    assert tool_msg["role"] == "tool" and "not valid JSON" in tool_msg["content"]
    await model.aclose()


@pytest.mark.parametrize("mode,match", [("500", "HTTP 500"), ("garbage", "expected format")])
async def test_server_errors_are_model_errors(server: str, mode: str, match: str) -> None:
    FakeChatCompletions.mode = mode
    model = OpenAIChatModel(model="m", base_url=server)
    with pytest.raises(ModelError, match=match):
        await model.complete([Message.user("oi")], [])
    await model.aclose()


async def test_unreachable_server_is_a_model_error() -> None:
    model = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(ModelError, match="failed"):
        await model.complete([Message.user("oi")], [])
    await model.aclose()


# -- answers of other shapes (the scripted upstream on loopback) ---------------------------------

#: What an upstream might put where a count goes: a key-shaped secret, which must reach no client.
LEAKED = "sk-UPSTREAMSECRET0123456789abcdef"
#: A well-formed usage, for answers the scripted upstream cannot count.
COUNTED = {"prompt_tokens": 1, "completion_tokens": 1}
#: The one sentence a client reads for an answer caderno cannot read.
NOT_EXPECTED = "the model call failed: the upstream's answer is not in the expected format"


async def _complete(upstream: object) -> Message:
    from _upstream import serving

    async with serving(upstream.app()) as base:  # type: ignore[attr-defined]
        model = OpenAIChatModel(model="m", base_url=f"{base}/v1", api_key="sk-key-of-the-test-0123456789")
        try:
            return await model.complete([Message.user("oi")], [])
        finally:
            await model.aclose()


async def test_content_as_a_list_of_text_parts_is_joined() -> None:
    from _upstream import Upstream, parts

    reply = await _complete(Upstream(script=[parts("Amsterdam ", "in May")]))
    assert reply.content == "Amsterdam in May" and reply.metadata and "usage" in reply.metadata


def _answers() -> list[object]:
    from _upstream import content, refuse, text

    image = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]
    return [
        pytest.param(content({"text": "a"}), None, id="content-object"),
        pytest.param(content(image), None, id="content-image-part"),
        pytest.param(content([{"type": "text", "text": 7}]), None, id="content-part-not-text"),
        pytest.param(text("oi"), {"prompt_tokens": 3, "completion_tokens": LEAKED}, id="usage-count-a-secret"),
        pytest.param(text("oi"), {"prompt_tokens": f"{LEAKED}"}, id="usage-prompt-a-secret"),
        pytest.param(text("oi"), f"usage {LEAKED}", id="usage-not-object"),
        pytest.param(lambda body: {"role": "assistant", "tool_calls": f"{LEAKED}"}, COUNTED, id="calls-not-list"),
        pytest.param(
            lambda body: {"role": "assistant", "tool_calls": [{"function": LEAKED}]}, COUNTED, id="call-shape"
        ),
        pytest.param(refuse(200, json.dumps({"choices": [{"message": LEAKED}]})), None, id="message-not-object"),
    ]


@pytest.mark.parametrize("reply,usage", _answers())
async def test_an_answer_of_another_shape_is_the_fixed_sentence_and_the_detail_is_logged_scrubbed(
    reply: object, usage: object, caplog: pytest.LogCaptureFixture
) -> None:
    from _upstream import Upstream

    upstream = Upstream(script=[reply], reported_usage=usage)  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, "caderno.model"), pytest.raises(ModelError) as caught:
        await _complete(upstream)
    assert str(caught.value) == NOT_EXPECTED
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "model call to" in caplog.text and LEAKED not in caplog.text  # the detail is logged, scrubbed


# -- retries: a 429 or a 5xx is tried again, within a budget and the turn's deadline --------------

#: Retries as the default policy makes them, with waits short enough for a test.
QUICK = RetryPolicy(first_delay=0.01, max_delay=0.02)


def _refused(status: int, retry_after: str | None = None, said: str = '{"error": {"message": "slow down"}}') -> object:
    """The upstream answers ``status``, with ``Retry-After`` when given."""
    from fastapi import Response

    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return lambda body: Response(said, status_code=status, media_type="application/json", headers=headers)


@asynccontextmanager
async def _model(upstream: object, retry: RetryPolicy = QUICK) -> AsyncIterator[OpenAIChatModel]:
    from _upstream import serving

    async with serving(upstream.app()) as base:  # type: ignore[attr-defined]
        model = OpenAIChatModel(model="m", base_url=f"{base}/v1", api_key="sk-key-of-the-test-0123456789", retry=retry)
        try:
            yield model
        finally:
            await model.aclose()


async def test_a_429_then_an_answer_stores_one_turn_from_two_upstream_requests(memory: caderno.Memory) -> None:
    from _upstream import Upstream, text

    upstream = Upstream(script=[_refused(429, "0"), text("Amsterdam in May")])  # type: ignore[list-item]
    async with _model(upstream, RetryPolicy()) as model:  # the default policy: Retry-After: 0 waits nothing
        result = await AgentChat(model=model, memory=memory).ask(messages="where?", resource_id="r", thread_id="t")
    assert result.reply.content == "Amsterdam in May"
    assert len(upstream.requests) == 2 and upstream.requests[0] == upstream.requests[1]
    stored = await memory.get_messages(resource_id="r", thread_id="t")
    assert [(m.role, m.content) for m in stored] == [("user", "where?"), ("assistant", "Amsterdam in May")]


@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_failures_past_the_attempts_are_the_fixed_sentence(status: int, caplog: pytest.LogCaptureFixture) -> None:
    from _upstream import Upstream

    upstream = Upstream(script=[_refused(status, said=f'"{LEAKED}"')] * 5)  # type: ignore[list-item]
    with caplog.at_level(logging.INFO, "caderno.model"), pytest.raises(ModelError) as caught:
        async with _model(upstream) as model:
            await model.complete([Message.user("oi")], [])
    assert str(caught.value) == f"the model call failed: HTTP {status} from the upstream"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert len(upstream.requests) == RETRY_ATTEMPTS
    assert caplog.text.count("retry ") == RETRY_ATTEMPTS - 1 and LEAKED not in caplog.text


async def test_retries_stop_at_the_budget() -> None:
    from _upstream import Upstream

    upstream = Upstream(script=[_refused(500)] * 50)  # type: ignore[list-item]
    policy = RetryPolicy(attempts=50, budget=0.5, first_delay=0.2, max_delay=0.2)
    started = time.monotonic()
    with pytest.raises(ModelError, match="^the model call failed: HTTP 500 from the upstream$"):
        async with _model(upstream, policy) as model:
            await model.complete([Message.user("oi")], [])
    assert time.monotonic() - started < 0.5 + 5  # no wait ended past the budget (5 s: a slow machine's requests)
    assert 2 <= len(upstream.requests) < 50


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_a_request_the_upstream_refuses_is_never_retried(status: int) -> None:
    from _upstream import Upstream, text

    upstream = Upstream(script=[_refused(status), text("never read")])  # type: ignore[list-item]
    with pytest.raises(ModelError, match=f"^the model call failed: HTTP {status} from the upstream$"):
        async with _model(upstream) as model:
            await model.complete([Message.user("oi")], [])
    assert len(upstream.requests) == 1


async def test_retry_after_is_honoured_as_seconds_and_as_a_date() -> None:
    from _upstream import Upstream, text

    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=1), usegmt=True)
    upstream = Upstream(script=[_refused(503, "0.3"), _refused(429, soon), text("done")])  # type: ignore[list-item]
    started = time.monotonic()
    async with _model(upstream, RetryPolicy(attempts=3, first_delay=0.0, max_delay=0.0)) as model:
        reply = await model.complete([Message.user("oi")], [])
    assert reply.content == "done" and len(upstream.requests) == 3
    # 0.3 s asked, then a date about a second away (HTTP dates are whole seconds: at least 0.3 + 0): the
    # backoff alone (0 s here) would not have waited at all.
    assert time.monotonic() - started >= 0.3


async def test_a_retry_after_longer_than_the_cap_ends_the_call_at_once() -> None:
    from _upstream import Upstream, text

    upstream = Upstream(script=[_refused(429, str(int(RETRY_AFTER_MAX) + 1)), text("never read")])  # type: ignore[list-item]
    started = time.monotonic()
    with pytest.raises(ModelError, match="HTTP 429 from the upstream"):
        async with _model(upstream, RetryPolicy()) as model:
            await model.complete([Message.user("oi")], [])
    assert len(upstream.requests) == 1 and time.monotonic() - started < RETRY_AFTER_MAX


async def test_no_wait_outlives_the_turns_deadline(memory: caderno.Memory) -> None:
    """A 429 asking for 5 s in a turn of 2 s fails in the upstream's words, at once, not by the turn's timeout."""
    from _upstream import Upstream, text

    upstream = Upstream(script=[_refused(429, "5"), text("too late")])  # type: ignore[list-item]
    chat_started = time.monotonic()
    async with _model(upstream, RetryPolicy()) as model:
        chat = AgentChat(model=model, memory=memory, settings=ChatSettings(turn_timeout=2))
        with pytest.raises(ModelError, match="^the model call failed: HTTP 429 from the upstream$"):
            await chat.ask(messages="where?", resource_id="r", thread_id="t")
    assert len(upstream.requests) == 1 and time.monotonic() - chat_started < 2
    assert await memory.get_messages(resource_id="r", thread_id="t") == []


async def test_an_unreachable_upstream_is_tried_again_then_the_fixed_sentence(caplog: pytest.LogCaptureFixture) -> None:
    model = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", timeout=2, retry=QUICK)
    try:
        with caplog.at_level(logging.INFO, "caderno.model"), pytest.raises(ModelError) as caught:
            await model.complete([Message.user("oi")], [])
    finally:
        await model.aclose()
    assert str(caught.value) == "the model call failed: the upstream could not be reached"
    assert caplog.text.count("retry ") == RETRY_ATTEMPTS - 1


def test_retry_after_values() -> None:
    assert _retry_after("2") == 2.0 and _retry_after(" 0 ") == 0.0 and _retry_after("-3") == 0.0
    assert _retry_after(None) is None and _retry_after("soon") is None and _retry_after("nan") is None
    past = email.utils.format_datetime(datetime(2001, 1, 1, tzinfo=UTC), usegmt=True)
    assert _retry_after(past) == 0.0
    later = _retry_after(email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True))
    assert later is not None and 55 < later <= 60


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"attempts": True}, {"budget": -1}, {"first_delay": "1"}])
def test_a_retry_policy_out_of_range_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        RetryPolicy(**bad)  # type: ignore[arg-type]
