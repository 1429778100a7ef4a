"""Model adapters. A model is anything with ``async complete(messages, tools)``.

``ScriptedModel`` replays assistant messages and records every request, for
tests and the demo. ``OpenAIChatModel`` speaks the OpenAI chat-completions
wire format (OpenAI, Ollama, vLLM, OpenRouter, LM Studio).

A failed upstream call raises ``ModelError`` in caderno's own words ("the
model call failed: HTTP 401 from the upstream"): the message reaches HTTP
clients of the memory proxy, and an upstream's answer may quote the API key
it refused, while the URL may hold a password or an internal address. What
the upstream said goes to the ``caderno.model`` log, scrubbed.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.clock import new_id
from ..core.errors import MissingExtra, ModelError
from ..core.messages import Message, ToolCall
from ..core.redact import redact_text, redact_url, secrets_of
from .function_tools import ToolSpec

__all__ = ["Model", "ModelRequest", "OpenAIChatModel", "ScriptedModel"]

log = logging.getLogger("caderno.model")

#: Characters of an upstream's error body kept in the server log: enough for its
#: message, not a whole HTML error page.
LOGGED_BODY_CHARS = 500


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
        except ValueError:  # not JSON, or an integer past Python's digit limit
            args = raw  # kept as text; the tool layer reports it to the model
        calls.append(ToolCall(id=call.get("id") or new_id(), name=fn.get("name") or "", arguments=args))
    return Message.assistant(message.get("content") or "", tool_calls=calls or None)


class OpenAIChatModel:
    """OpenAI-compatible chat completions with tool calling (extra ``openai``).

    Every request says ``"store": false``: the history is caderno's, so the
    provider is asked not to keep its own copy (servers that do not know the
    field ignore it).

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
        # What a log line must never show: the key and every form of the URL's password.
        self._secrets = [s for s in (key, *secrets_of(self.base_url)) if s]
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)

    def _fail(self, said: str, detail: str) -> ModelError:
        """A ``ModelError`` a client may read; ``detail`` (the upstream's words) goes to the log, scrubbed."""
        where = redact_text(redact_url(self.base_url), self._secrets)
        log.warning("model call to %s failed: %s", where, redact_text(detail, self._secrets))
        return ModelError(f"the model call failed: {said}")

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message:
        import httpx

        # ``store: false``: caderno owns the conversation, so the provider keeps no copy of it.
        body: dict[str, Any] = {"model": self.model, "messages": [_to_wire(m) for m in messages], "store": False}
        if tools:
            body["tools"] = [t.to_openai() for t in tools]
        # ``from None`` throughout: a chained httpx error names the URL, password included.
        try:
            response = await self._client.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise self._fail("the upstream did not answer in time", f"{type(exc).__name__}: {exc}") from None
        except httpx.HTTPError as exc:
            raise self._fail("the upstream could not be reached", f"{type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            said = f"HTTP {response.status_code} from the upstream"
            raise self._fail(said, f"HTTP {response.status_code}: {response.text[:LOGGED_BODY_CHARS]}") from None
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            said = "the upstream's answer is not in the expected format"
            raise self._fail(said, f"{exc!r} in {response.text[:LOGGED_BODY_CHARS]}") from None
        reply = _from_wire(message)
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            # The model's own count: AgentChat sums it into the turn's usage.
            counted = {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": int(usage.get("completion_tokens") or 0)}
            reply = reply.with_(metadata={**(reply.metadata or {}), "usage": counted})
        return reply

    async def aclose(self) -> None:
        await self._client.aclose()
