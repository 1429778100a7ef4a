"""Model adapters. A model is anything with ``async complete(messages, tools)``.

``ScriptedModel`` replays assistant messages and records every request, for
tests and the demo. ``OpenAIChatModel`` speaks the OpenAI chat-completions
wire format (OpenAI, Ollama, vLLM, OpenRouter, LM Studio).

A model may also stream: ``stream(messages, tools)`` yields ``Delta`` pieces
as the upstream sends them, then the whole reply as one ``Message``.
``stream_reply`` gives that shape for every model, so the memory proxy can
forward an upstream's text as it comes (a model that cannot stream answers in
one piece).

A failed upstream call raises ``ModelError`` in caderno's own words ("the
model call failed: HTTP 401 from the upstream"): the message reaches HTTP
clients of the memory proxy, and an upstream's answer may quote the API key
it refused, while the URL may hold a password or an internal address. What
the upstream said goes to the ``caderno.model`` log, scrubbed. An answer of
another shape (its ``usage`` counts included) is "the upstream's answer is
not in the expected format", never the parser's own words. ``content`` as a
list of text parts, which some OpenAI-compatible servers send (whole or
streamed), is read as the parts' text joined.

``OpenAIChatModel`` retries what a retry can cure, as the official ``openai``
client does: an HTTP 429 or 5xx answer, and a connection that failed or was
cut before the answer (``RetryPolicy``). It waits with exponential backoff and
full jitter, or what the upstream's ``Retry-After`` asks (in seconds or as an
HTTP date, capped); it stops when the attempts are spent, when the next wait
would end past ``RetryPolicy.budget`` seconds from the first request, or past
the turn's own deadline (``turn_deadline``, which ``AgentChat`` sets from its
``turn_timeout``). Then the last failure is raised in the same fixed words. A
stream is retried only before its first piece: after that, the client has
already read part of the reply. Any other 4xx (a bad key, a bad request) and a
read timeout are never retried: the same request would fail the same way, or
wait the whole timeout again.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import inspect
import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.clock import new_id
from ..core.errors import InternalSignal, MissingExtra, ModelError, UsageError
from ..core.jsonvalue import check_json
from ..core.messages import Message, ToolCall, check_text
from ..core.redact import redact_library_logs, redact_text, redact_url, secrets_of
from .function_tools import ToolSpec

if TYPE_CHECKING:
    import httpx

__all__ = [
    "SETTINGS",
    "Delta",
    "Model",
    "ModelRequest",
    "OpenAIChatModel",
    "RetryPolicy",
    "ScriptedModel",
    "call_model",
    "check_settings",
    "stream_reply",
    "turn_deadline",
    "wire_call",
]

log = logging.getLogger("caderno.model")

#: Characters of an upstream's error body kept in the server log: enough for its
#: message, not a whole HTML error page.
LOGGED_BODY_CHARS = 500
#: The chat-completions fields a caller may pass through to the model for a turn (``settings``): they
#: shape each answer (sampling, length, format) without changing what the conversation holds.
SETTINGS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
)
#: Bounds of the numeric settings, as the OpenAI API takes them.
_RANGES = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
#: Attempts of one model call, the first included: two retries, as the official ``openai`` client makes
#: by default. A third retry rarely finds an overloaded upstream recovered and holds the turn longer.
RETRY_ATTEMPTS = 3
#: Longest a model call goes on retrying, in seconds from its first request: a quarter of the turn's
#: default deadline (``AgentChat``'s ``TURN_TIMEOUT``, 120 s), which leaves the rest to the turn's
#: other steps. No wait starts that would end past it, nor past the turn's own deadline.
RETRY_BUDGET = 30.0
#: The first backoff's ceiling, in seconds (then doubled each retry, up to ``RETRY_MAX_DELAY``): the
#: ``openai`` client's values, which clear a rate limiter's one-second window on the second try.
RETRY_FIRST_DELAY = 0.5
RETRY_MAX_DELAY = 8.0
#: Most seconds of an upstream's ``Retry-After`` that are waited: OpenAI asks for a few seconds; a
#: longer ask (a daily quota spent) will not clear within a turn, and the call fails at once instead.
RETRY_AFTER_MAX = 20.0
#: HTTP statuses worth another try: rate limited, and the upstream's own failures (overloaded, a
#: gateway in front of it that lost it). Any other 4xx says the request itself is wrong.
RETRY_STATUSES = frozenset({429, *range(500, 600)})
#: Most stop sequences (the OpenAI API's own limit) and the characters of each.
MAX_STOPS, MAX_STOP_CHARS = 4, 1000
#: Largest ``response_format`` (a JSON schema, serialized): real schemas are a few kilobytes.
MAX_FORMAT_BYTES = 64 * 1024


def check_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The model settings of a turn, checked (``SETTINGS``; ``None`` values left out).

    Raises:
        UsageError: an unknown setting, or a value the model API would refuse (out of range, wrong type).
    """
    checked: dict[str, Any] = {}
    for name, value in (settings or {}).items():
        if name not in SETTINGS:
            raise UsageError(f"unknown model setting {name!r:.80}; known: {', '.join(SETTINGS)}")
        if value is None:
            continue
        if name in _RANGES:
            low, high = _RANGES[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise UsageError(f"{name} is a number from {low:g} to {high:g}, not {value!r:.80}")
        elif name in ("max_tokens", "max_completion_tokens", "seed"):
            least = 0 if name == "seed" else 1
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**63:
                raise UsageError(f"{name} is a whole number of at least {least}, not {value!r:.80}")
        elif name == "stop":
            stops = [value] if isinstance(value, str) else value
            if (
                not isinstance(stops, list)
                or len(stops) > MAX_STOPS
                or not all(isinstance(x, str) and 0 < len(x) <= MAX_STOP_CHARS for x in stops)
            ):
                raise UsageError(f"stop is text or a list of at most {MAX_STOPS} texts")
            for x in stops:
                check_text(x, "stop")
        elif name == "response_format":
            if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
                raise UsageError("response_format is an object whose type is text, json_object or json_schema")
            check_json(value, "response_format", max_bytes=MAX_FORMAT_BYTES)
        checked[name] = value
    return checked


@runtime_checkable
class Model(Protocol):
    """Given the prompt messages and tool specs, return one assistant message."""

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Delta:
    """A piece of a streamed reply: text, or a piece of one tool call."""

    content: str = ""
    """A piece of the reply's text."""
    call_index: int | None = None
    """Which tool call of the reply this piece belongs to (the model's index); ``None`` for text."""
    call_id: str | None = None
    """The call's id, on the piece where it first arrives (its first, when the upstream sends one)."""
    call_name: str | None = None
    """The tool's name, on the piece where it first arrives (its first)."""
    arguments: str = ""
    """A piece of the call's JSON arguments text."""


async def stream_reply(
    model: Model, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None = None
) -> AsyncIterator[Delta | Message]:
    """The model's reply as it arrives: ``Delta`` pieces, then the whole reply as one assistant ``Message``.

    The ``Message`` comes last, exactly once. A model with a ``stream(messages,
    tools)`` method (an async iterator of the same ``Delta | Message`` items) is
    streamed; any other model's ``complete`` is awaited and its reply given as
    one ``Delta`` for the text (none when it is empty), one per tool call, then
    the ``Message``. ``settings`` (see ``call_model``) go with the call.

    Raises:
        ModelError: the model failed, or its stream broke the order above.
    """
    stream = getattr(model, "stream", None)
    if not callable(stream):
        reply = await call_model(model, messages, tools, settings)
        for delta in _pieces(reply):
            yield delta
        yield reply
        return
    items = stream(messages, tools, **_given(settings))
    replied = False
    try:
        async for item in items:
            if replied:
                raise ModelError("the model's stream went on after its whole reply")
            if isinstance(item, Message):
                replied = True
            elif not isinstance(item, Delta):
                raise ModelError(f"the model's stream gave a {type(item).__name__}, not a Delta or a Message")
            yield item
    finally:
        # Closed here, not by the garbage collector: an HTTP stream left open holds its connection.
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()
    if not replied:
        raise ModelError("the model's stream ended without its whole reply")


async def call_model(
    model: Model, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None = None
) -> Message:
    """``model.complete``, with the turn's ``settings`` (``check_settings``) when there are any.

    A model takes them as the keyword ``settings`` (``OpenAIChatModel`` puts them in its request);
    a model without that keyword is called as before when a turn has none.
    """
    return await model.complete(messages, tools, **_given(settings))


def _given(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"settings": dict(settings)} if settings else {}


def _pieces(reply: Message) -> list[Delta]:
    """A finished reply as the pieces a stream of it would have given: its text, then each tool call whole."""
    pieces = [Delta(content=reply.content)] if reply.content else []
    for i, c in enumerate(reply.tool_calls or ()):
        pieces.append(
            Delta(call_index=i, call_id=c.id, call_name=c.name, arguments=wire_call(c)["function"]["arguments"])
        )
    return pieces


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """One call a ``ScriptedModel`` received."""

    messages: list[Message]
    """The full prompt, system blocks included."""
    tools: list[ToolSpec]
    """The tools offered."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The turn's model settings (``check_settings``), if any."""

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

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None = None
    ) -> Message:
        self.requests.append(ModelRequest(messages=list(messages), tools=list(tools), settings=dict(settings or {})))
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


def wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as the chat-completions wire writes it (arguments as JSON text, as the model sent them)."""
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _to_wire(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [wire_call(c) for c in m.tool_calls]
        out["content"] = m.content or None
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out


def _shown(value: Any) -> str:
    """``value`` as JSON for the log, cut to ``LOGGED_BODY_CHARS``."""
    return json.dumps(value)[:LOGGED_BODY_CHARS]


def _text_of(content: Any) -> str:
    """A reply's text: text as it is, or a list of text parts joined (as some OpenAI-compatible servers send).

    Raises:
        _Malformed: any other shape (the model's output, never the client's fault: a 502, not a 400).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str) for part in content
    ):
        return "".join(part["text"] for part in content)
    raise _Malformed(f"content that is neither text nor a list of text parts: {_shown(content)}")


def _from_wire(message: Any) -> Message:
    """The reply of a chat-completion message. Raises ``_Malformed`` for a message of the wrong shape."""
    if not isinstance(message, dict):
        raise _Malformed(f"a message that is not an object: {_shown(message)}")
    wire_calls = message.get("tool_calls") or []
    if not isinstance(wire_calls, list):
        raise _Malformed(f"tool_calls that are not a list: {_shown(wire_calls)}")
    calls = []
    for call in wire_calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not all(
            v is None or isinstance(v, str) for v in (call.get("id"), fn.get("name"), fn.get("arguments"))
        ):
            raise _Malformed(f"a tool call of the wrong shape: {_shown(call)}")
        raw = fn.get("arguments") or ""
        try:
            args: Any = json.loads(raw) if raw.strip() else {}
        except ValueError:  # not JSON, or an integer past Python's digit limit
            args = raw  # kept as text; the tool layer reports it to the model
        calls.append(ToolCall(id=call.get("id") or new_id(), name=fn.get("name") or "", arguments=args))
    return Message.assistant(_text_of(message.get("content")), tool_calls=calls or None)


def _count(usage: dict[str, Any], name: str) -> int | None:
    """A token count of ``usage``: a whole number of at least 0, or ``None`` when not sent."""
    value = usage.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(f"usage whose {name} is not a count: {_shown(usage)}")
    return value


def _with_usage(reply: Message, usage: Any) -> Message:
    """``reply`` with the upstream's token counts in ``metadata["usage"]``, when it sent them.

    Raises:
        _Malformed: counts that are not whole numbers (their text goes to the log, never to a client).
    """
    if usage is None:
        return reply
    if not isinstance(usage, dict):
        raise _Malformed(f"usage that is not an object: {_shown(usage)}")
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    if prompt is None:  # servers that count only a total: nothing to sum
        return reply
    # The model's own count: AgentChat sums it into the turn's usage.
    counted = {"prompt_tokens": prompt, "completion_tokens": completion or 0}
    return reply.with_(metadata={**(reply.metadata or {}), "usage": counted})


class _Malformed(InternalSignal):
    """An answer (or an event of the upstream's stream) of the wrong shape (says why, for the log)."""

    said = "the upstream's answer is not in the expected format"


class _ErrorEvent(_Malformed):
    """An error the upstream reported in its stream, after the answer began (its words go to the log)."""

    said = "the upstream reported an error while answering"


@dataclass
class _Accumulated:
    """What a chat-completion stream has said so far, gathered into the shape of a whole answer."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    last_call: int | None = None
    usage: Any = None
    choices: int = 0
    """Chunks that carried the reply's choice: none means the stream held no reply."""

    def add(self, chunk: Any) -> list[Delta]:
        """Take one chunk in; return its pieces. Raises ``_Malformed`` for a chunk of the wrong shape."""
        if not isinstance(chunk, dict):
            raise _Malformed(f"a chunk that is not an object: {type(chunk).__name__}")
        if chunk.get("error") is not None:  # how OpenAI and OpenRouter report a failure after the stream began
            raise _ErrorEvent(f"an error in the stream: {json.dumps(chunk['error'])}")
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise _Malformed(f"choices that are not a list: {json.dumps(choices)}")
        deltas: list[Delta] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # one choice is asked for; another index is not this reply
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise _Malformed(f"a delta that is not an object: {json.dumps(delta)}")
            self.choices += 1
            content = _text_of(delta.get("content"))
            if content:
                self.text.append(content)
                deltas.append(Delta(content=content))
            calls = delta.get("tool_calls") or []
            if not isinstance(calls, list):
                raise _Malformed(f"tool_calls that are not a list: {json.dumps(calls)}")
            deltas += [d for piece in calls if (d := self._call_piece(piece)) is not None]
        return deltas

    def _call_piece(self, piece: Any) -> Delta | None:
        if not isinstance(piece, dict):
            raise _Malformed(f"a tool call piece that is not an object: {json.dumps(piece)}")
        fn = piece.get("function") or {}
        if not isinstance(fn, dict):
            raise _Malformed(f"a tool call piece of the wrong shape: {json.dumps(piece)}")
        call_id, name, arguments = piece.get("id"), fn.get("name"), fn.get("arguments")
        if not all(v is None or isinstance(v, str) for v in (call_id, name, arguments)):
            raise _Malformed(f"a tool call piece of the wrong shape: {json.dumps(piece)}")
        index = piece.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            if index is not None:
                raise _Malformed(f"a tool call index that is not an integer: {json.dumps(piece)}")
            # Some servers leave the index out: a new id starts the next call, anything else goes on the last.
            known = any(c["id"] == call_id for c in self.calls.values())
            if self.last_call is None or (call_id and not known):
                index = max(self.calls, default=-1) + 1
            else:
                index = self.last_call
        self.last_call = index
        call = self.calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
        )
        new_id = call_id if call_id and call["id"] is None else None
        new_name = name if name and call["function"]["name"] is None else None
        if new_id:
            call["id"] = new_id
        if new_name:
            call["function"]["name"] = new_name
        if arguments:
            call["function"]["arguments"] += arguments
        if new_id is None and new_name is None and not arguments:
            return None
        return Delta(call_index=index, call_id=new_id, call_name=new_name, arguments=arguments or "")

    def message(self) -> dict[str, Any]:
        """The whole answer's message, as a non-streamed answer would have carried it."""
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            out["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How ``OpenAIChatModel`` retries a call that failed in a way a retry can cure (see the module docstring)."""

    attempts: int = RETRY_ATTEMPTS
    """Attempts of one call, the first included (1: never retry)."""
    budget: float = RETRY_BUDGET
    """Seconds from the first request past which no wait may end."""
    first_delay: float = RETRY_FIRST_DELAY
    """Ceiling of the first backoff, in seconds; doubled each retry up to ``max_delay``, jittered below it."""
    max_delay: float = RETRY_MAX_DELAY
    """Largest backoff ceiling, in seconds."""
    retry_after_max: float = RETRY_AFTER_MAX
    """Most seconds of ``Retry-After`` honoured; a longer ask ends the retries."""

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise UsageError(f"a model call makes at least 1 attempt, not {self.attempts!r}")
        for name in ("budget", "first_delay", "max_delay", "retry_after_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise UsageError(
                    f"the retry {name.replace('_', ' ')} is a number of seconds of at least 0, not {value!r}"
                )

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the first): full jitter under a doubling ceiling.

        Full jitter (a uniform draw from zero to the ceiling) spreads the retries
        of many clients that failed at once, so they do not return together.
        """
        return random.uniform(0.0, min(self.max_delay, self.first_delay * 2 ** (retry - 1)))


_DEADLINE: ContextVar[float | None] = ContextVar("caderno_model_deadline", default=None)


@contextlib.contextmanager
def turn_deadline(seconds: float | None) -> Iterator[None]:
    """Model calls made inside start no retry wait that would end more than ``seconds`` from now.

    ``AgentChat`` wraps each turn in it with its ``turn_timeout``, so a retrying
    model call gives up in its own words (the upstream's last failure) rather
    than being cut by the turn's deadline in the middle of a wait. ``None``: no
    deadline beyond the retry budget. An inner deadline never extends an outer one.
    """
    if seconds is None:
        yield
        return
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _retry_after(value: str | None) -> float | None:
    """The seconds an upstream's ``Retry-After`` asks for (seconds, or an HTTP date); ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


class _Retry(InternalSignal):
    """A failure worth another try: the error a client reads if none is left, and the wait the upstream asked for."""

    def __init__(self, error: ModelError, asked: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.asked = asked


class OpenAIChatModel:
    """OpenAI-compatible chat completions with tool calling (extra ``openai``).

    Every request says ``"store": false``: the history is caderno's, so the
    provider is asked not to keep its own copy (servers that do not know the
    field ignore it).

    Args:
        model: model name, e.g. ``"gpt-4o-mini"`` or ``"llama3.1"``.
        base_url: API root (default ``OPENAI_BASE_URL`` or the OpenAI API).
        api_key: bearer token (default ``OPENAI_API_KEY``; local servers need none).
        timeout: seconds per request (while streaming: the longest wait for the next piece).
        retry: when and how long to retry a 429, a 5xx or a failed connection (``RetryPolicy()``:
            ``RETRY_ATTEMPTS`` attempts within ``RETRY_BUDGET`` seconds; ``RetryPolicy(attempts=1)``: never).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise MissingExtra("openai", "httpx") from None
        self.model = model
        self.retry = retry if retry is not None else RetryPolicy()
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # What a log line must never show: the key and every form of the URL's password.
        self._secrets = [s for s in (key, *secrets_of(self.base_url)) if s]
        # httpx logs each request's whole URL (the password in it) at info: its logger masks them too.
        redact_library_logs(self._secrets)
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)

    def _fail(self, said: str, detail: str) -> ModelError:
        """A ``ModelError`` a client may read; ``detail`` (the upstream's words) goes to the log, scrubbed."""
        log.warning("model call to %s failed: %s", self._where(), redact_text(detail, self._secrets))
        return ModelError(f"the model call failed: {said}")

    def _transport_failure(self, exc: Exception) -> ModelError:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return self._fail("the upstream did not answer in time", f"{type(exc).__name__}: {exc}")
        return self._fail("the upstream could not be reached", f"{type(exc).__name__}: {exc}")

    def _body(
        self, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # ``store: false``: caderno owns the conversation, so the provider keeps no copy of it.
        body: dict[str, Any] = {**(settings or {}), "model": self.model, "messages": [_to_wire(m) for m in messages]}
        body["store"] = False
        if tools:
            body["tools"] = [t.to_openai() for t in tools]
        return body

    def _status_error(self, response: httpx.Response, body: str) -> ModelError:
        """The error of an HTTP error status; ``body`` (what the upstream said) goes to the log."""
        said = f"HTTP {response.status_code} from the upstream"
        return self._fail(said, f"HTTP {response.status_code}: {body[:LOGGED_BODY_CHARS]}")

    def _answer(self, response: httpx.Response) -> Message:
        """A whole (non-streamed) chat-completion answer as the reply."""
        try:
            data = response.json()
            return _with_usage(_from_wire(data["choices"][0]["message"]), data.get("usage"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, _Malformed) as exc:
            raise self._fail(_Malformed.said, f"{exc!r} in {response.text[:LOGGED_BODY_CHARS]}") from None

    def _reply(self, seen: _Accumulated) -> Message:
        """The whole reply of a stream once it ended."""
        try:
            return _with_usage(_from_wire(seen.message()), seen.usage)
        except _Malformed as exc:
            raise self._fail(exc.said, str(exc)[:LOGGED_BODY_CHARS]) from None

    async def _send(self, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        """POST ``body``, retried by ``self.retry``; the response has a status below 400.

        A streamed response has only its headers read: its caller reads the
        body and closes it. What a client reads when the retries end is the
        last failure, in the same fixed words as a call that is never retried.
        """
        import httpx

        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(body, stream=stream)
            except _Retry as failed:
                wait = self._wait(failed, attempt, started)
                if wait is None:
                    raise failed.error from None
                log.info(
                    "model call to %s: retry %d of %d in %.2f s", self._where(), attempt, self.retry.attempts - 1, wait
                )
                await asyncio.sleep(wait)
            except httpx.HTTPError as exc:  # a failure no retry cures (a read timeout, a bad URL)
                raise self._transport_failure(exc) from None

    async def _attempt(self, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        """One request. Raises ``_Retry`` for a failure worth another try, ``ModelError`` for one that is not."""
        import httpx

        # ``from None`` throughout: a chained httpx error names the URL, password included.
        try:
            request = self._client.build_request("POST", "/chat/completions", json=body)
            response = await self._client.send(request, stream=stream)
        except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ConnectTimeout) as exc:
            # Refused, reset or closed before an answer: nothing was answered, so asking again is safe.
            raise _Retry(self._transport_failure(exc)) from None
        if response.status_code < 400:
            return response
        try:
            said = (await response.aread()).decode("utf-8", "replace")
        except httpx.HTTPError:
            said = "(its body was cut)"  # the status says enough; the body would only have gone to the log
        finally:
            await response.aclose()
        error = self._status_error(response, said)
        if response.status_code in RETRY_STATUSES:
            raise _Retry(error, _retry_after(response.headers.get("retry-after")))
        raise error

    def _wait(self, failed: _Retry, attempt: int, started: float) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` when the call must give up now."""
        policy = self.retry
        if attempt >= policy.attempts:
            return None
        if failed.asked is not None:
            if failed.asked > policy.retry_after_max:
                return None  # the upstream will not be ready within a turn
            wait = failed.asked
        else:
            wait = policy.backoff(attempt)
        end = time.monotonic() + wait
        deadline = _DEADLINE.get()
        if end > started + policy.budget or (deadline is not None and end >= deadline):
            return None
        return wait

    def _where(self) -> str:
        return redact_text(redact_url(self.base_url), self._secrets)

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None = None
    ) -> Message:
        """One answer; ``settings`` (``check_settings``: temperature, max_tokens, response_format…) go in the request."""
        response = await self._send(self._body(messages, tools, settings), stream=False)
        return self._answer(response)

    async def stream(
        self, messages: list[Message], tools: list[ToolSpec], settings: Mapping[str, Any] | None = None
    ) -> AsyncIterator[Delta | Message]:
        """The reply as the upstream streams it: a ``Delta`` per piece, then the whole reply as a ``Message``.

        The same request as ``complete`` with ``"stream": true`` (and the usage
        asked for), read event by event. An upstream that answers with one JSON
        object instead is read as a whole answer. Retried as ``complete`` is, only
        until the upstream has accepted the request: never once a piece has come.

        Raises:
            ModelError: as ``complete`` does, and for a stream that is malformed or ends without a reply.
        """
        import httpx

        body = self._body(messages, tools, settings) | {"stream": True, "stream_options": {"include_usage": True}}
        seen = _Accumulated()
        response = await self._send(body, stream=True)
        # ``from None`` throughout: a chained httpx error names the URL, password included.
        try:
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "application/json" or kind.endswith("+json"):
                await response.aread()
                reply = self._answer(response)
                for delta in _pieces(reply):
                    yield delta
                yield reply
                return
            async for data in _events(response):
                if data == "[DONE]":
                    break
                try:
                    deltas = seen.add(json.loads(data))
                except ValueError as exc:
                    raise self._fail(_Malformed.said, f"{exc!r} in the event {data[:LOGGED_BODY_CHARS]}") from None
                except _Malformed as exc:
                    raise self._fail(exc.said, f"{exc} (the event: {data[:LOGGED_BODY_CHARS]})") from None
                for delta in deltas:
                    yield delta
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc) from None
        finally:
            await response.aclose()
        if not seen.choices:
            raise self._fail(_Malformed.said, "the stream ended without any choice")
        yield self._reply(seen)

    async def aclose(self) -> None:
        await self._client.aclose()


async def _events(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each server-sent event, as it arrives (comments, ids and event names skipped)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:  # a last event the stream did not close with a blank line
        yield "\n".join(data)
