"""OpenAIChatModel against a local HTTP server speaking chat completions."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import caderno
from caderno import AgentChat, Message, OpenAIChatModel
from caderno.core.errors import ModelError
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
    chat = AgentChat(model=model, tools=[BudgetTool()], max_steps=2)
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
