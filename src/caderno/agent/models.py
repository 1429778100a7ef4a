"""Model adapters. A model is anything with ``async complete(messages, tools)``.

``ScriptedModel`` replays assistant messages and records every request, for
tests and the demo. ``OpenAIChatModel`` speaks the OpenAI chat-completions
wire format (OpenAI, Ollama, vLLM, OpenRouter, LM Studio).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._time import new_id
from ..errors import MissingExtra, ModelError
from ..messages import Message, ToolCall
from .tools import ToolSpec

__all__ = ["Model", "ModelRequest", "OpenAIChatModel", "ScriptedModel"]


@runtime_checkable
class Model(Protocol):
    """Given the prompt messages and tool specs, return one assistant message."""

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """One call a ``ScriptedModel`` received."""

    messages: list[Message]
    """The full prompt, system blocks included."""
    tools: list[ToolSpec]
    """The tools offered."""

    def text(self) -> str:
        """Every message's content joined, for easy assertions."""
        return "\n".join(m.content for m in self.messages)


Step = Message | Callable[[list[Message], list[ToolSpec]], Any]


class ScriptedModel:
    """Replays the given steps in order and records every request.

    A step is an assistant ``Message`` or a function ``(messages, tools) ->
    Message`` (sync or async) that can build its answer from the prompt.
    """

    def __init__(self, steps: Sequence[Step] = ()) -> None:
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message:
        self.requests.append(ModelRequest(messages=list(messages), tools=list(tools)))
        if len(self.requests) > len(self.steps):
            raise ModelError(
                f"ScriptedModel ran out of steps: request {len(self.requests)} but only {len(self.steps)} scripted"
            )
        step = self.steps[len(self.requests) - 1]
        if isinstance(step, Message):
            return step
        result = step(list(messages), list(tools))
        if inspect.isawaitable(result):
            result = await result
        return result


def _to_wire(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
                },
            }
            for c in m.tool_calls
        ]
        out["content"] = m.content or None
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out


def _from_wire(message: dict[str, Any]) -> Message:
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        raw = fn.get("arguments") or ""
        try:
            args: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            args = raw  # kept as text; the tool layer reports it to the model
        calls.append(ToolCall(id=call.get("id") or new_id(), name=fn.get("name") or "", arguments=args))
    return Message.assistant(message.get("content") or "", tool_calls=calls or None)


class OpenAIChatModel:
    """OpenAI-compatible chat completions with tool calling (extra ``openai``).

    Args:
        model: model name, e.g. ``"gpt-4o-mini"`` or ``"llama3.1"``.
        base_url: API root (default ``OPENAI_BASE_URL`` or the OpenAI API).
        api_key: bearer token (default ``OPENAI_API_KEY``; local servers need none).
        timeout: seconds per request.
    """

    def __init__(
        self, *, model: str, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise MissingExtra("openai", "httpx") from None
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": [_to_wire(m) for m in messages]}
        if tools:
            body["tools"] = [t.to_openai() for t in tools]
        try:
            response = await self._client.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise ModelError(f"chat completion request to {self.base_url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise ModelError(f"chat completion failed with HTTP {response.status_code}: {response.text[:500]}")
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"chat completion answer is not in the expected format: {exc!r}") from exc
        reply = _from_wire(message)
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            # The model's own count: AgentChat sums it into the turn's usage.
            counted = {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": int(usage.get("completion_tokens") or 0)}
            reply = reply.with_(metadata={**(reply.metadata or {}), "usage": counted})
        return reply

    async def aclose(self) -> None:
        await self._client.aclose()
