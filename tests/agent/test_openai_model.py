"""OpenAIChatModel against a local HTTP server speaking chat completions."""

from __future__ import annotations

import json
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
