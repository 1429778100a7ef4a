"""The OpenAI Responses API in front of the memory proxy's turns: ``POST /v1/responses``.

An application built on the Responses API (the OpenAI Agents SDK's
``OpenAIResponsesModel``, ``client.responses.create``) gets durable memory by
pointing its ``base_url`` at ``caderno serve`` with a caderno key. Each
request is one step of a ``caderno.server.proxy`` turn: the same memory, the
same server-side memory tools, the same client tools, bounds, retries and
streaming; only the wire format differs. Read that module's docstring first.

Which conversation: the header ``X-Caderno-Thread``, else ``conversation``
(its id), else the thread of ``previous_response_id``, else ``user``, else a
new thread with a fresh id. The resource is the proxy's (the key's own, or
``X-Caderno-Resource``). A header or ``conversation`` naming another thread
than ``previous_response_id``'s is a 400.

Response ids name their thread: ``resp_<the thread id in URL-safe base64,
no padding>_<the reply's message id>``, so ``previous_response_id`` alone
continues the conversation. It must name a thread of the key's resource; a
response of another resource, one that never existed and a malformed id
are the same 404. A streamed response gets its id when its stream opens
(every event of a stream carries one id), before its reply exists: its last
part is a fresh id, not the reply's.

Limits of the mapping:

- **No forks.** A caderno thread is one line of messages: continuing from
  an older response of a thread continues the thread from its newest turn,
  not from that response.
- **Input is the proxy's rule.** Items up to the last assistant item
  (``message`` with role ``assistant``, or ``function_call``) are the history
  the client resends and are not stored again; the ``user`` messages and
  ``function_call_output`` items after it are the turn's new messages.
  ``system`` and ``developer`` messages, after ``instructions``, are the
  turn's instructions (not stored). ``reasoning`` items are skipped.
- **``store`` is ignored**: caderno stores every turn (that is what it is
  for), and the upstream is always called with ``store: false`` (the history
  is caderno's, not the provider's).

Streaming (``stream: true``): Responses events, each with its ``type`` and
``sequence_number`` (and an ``event:`` line): ``response.created``,
``response.in_progress``, then per output item ``output_item.added``, its
text (``content_part.added``, ``output_text.delta``…, ``output_text.done``,
``content_part.done``) or its call's ``function_call_arguments.delta``… and
``.done``, ``output_item.done``, and last ``response.completed`` with the
whole response and its usage. A streamed message's text is all the text the
model wrote in the turn, text written before a memory tool call included
(answered whole, it is the last reply's). An error after the stream began
is a ``response.failed`` event (``response.error``: the problem's type as
``code``, its detail as ``message``; nothing is stored); one before it is a
normal problem response.

Not supported (each a clear 400): content other than text (images, files,
audio), items other than messages, function calls, their outputs and
reasoning (``item_reference``, built-in tool calls), tools other than
functions, ``background``, ``prompt`` templates. Model settings go with
every model call of the turn, in chat-completions terms: ``temperature``,
``top_p``, ``max_output_tokens`` (as ``max_tokens``) and ``text.format``
(as ``response_format``). Ignored: ``model`` (the server's configured model
answers), ``tool_choice``, ``parallel_tool_calls``, ``include``,
``truncation``, ``reasoning``; ``metadata`` is echoed, not stored, within
OpenAI's own bounds (``MAX_METADATA_PAIRS`` string pairs, keys of
``MAX_METADATA_KEY`` and values of ``MAX_METADATA_VALUE`` characters: a 400
``invalid-request`` otherwise, before any model call), and streamed only in
the response objects of ``response.created`` and the last event (15 MB of
metadata used to come back as 45.6 MB, once per response event).
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from ..agent.models import Delta, check_settings, wire_call
from ..core.clock import new_id
from ..core.errors import KeyReused, NotFound, UsageError
from ..core.messages import Message, ToolCall, ToolSpec
from ..core.validate import check_id
from ..stores import ops
from .auth import CurrentKey
from .proxy_turn import (
    RESOURCE_HEADER,
    THREAD_HEADER,
    ClientReadableErrors,
    ProxyTurn,
    check_instructions,
    check_size,
    client_tool,
    content_text,
    key_reused,
    no_model,
    resource_for,
    sse,
    stream_error,
    usage_of,
)

if TYPE_CHECKING:
    from ..agent.chat import ChatResult

__all__ = ["ResponsesRequest", "response_id", "router", "thread_of"]

router = APIRouter(route_class=ClientReadableErrors)

_ID_PREFIX = "resp_"
_INSTRUCTION_ROLES = ("system", "developer")
_TEXT_PARTS = ("input_text", "output_text")
_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")


class ResponsesRequest(BaseModel):
    """The fields of a Responses API request the endpoint reads; others are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    input: str | list[Any]
    """Text (one user message) or input items (see the module docstring for what is stored)."""
    instructions: str | None = None
    """The turn's system prompt, in place of caderno's default one (with any system items after it)."""
    tools: list[Any] | None = None
    """The client's function tools: offered to the model, run by the client."""
    stream: bool = False
    """Answer as Responses server-sent events, as the upstream produces them."""
    previous_response_id: str | None = None
    """A response of the conversation to continue (its thread)."""
    conversation: str | dict[str, Any] | None = None
    """The thread (an id, or ``{"id": ...}``), when the header ``X-Caderno-Thread`` is absent."""
    user: str | None = None
    """The thread, when neither the header, ``conversation`` nor ``previous_response_id`` names one."""
    model: str | None = None
    """Ignored: the server's configured model answers."""
    store: bool | None = None
    """Ignored: caderno stores every turn."""
    tool_choice: Any = None
    """Ignored (echoed): the model decides which tools to call."""
    parallel_tool_calls: bool | None = None
    """Ignored (echoed)."""
    metadata: Any = None
    """Echoed in the response, not stored (``check_metadata``: OpenAI's limits)."""
    background: bool | None = None
    """Only false: the answer comes in this request."""
    prompt: Any = None
    """Refused: caderno keeps no prompt templates."""


#: OpenAI's own bounds on a response's ``metadata`` ("up to 16 key-value pairs;
#: keys are strings with a maximum length of 64 characters, values strings with a
#: maximum length of 512"): a client written for OpenAI fits them, and the echo
#: stays under 10 KB however often a stream repeats it.
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512


def check_metadata(metadata: Any) -> None:
    """Refuse ``metadata`` past OpenAI's bounds (see ``MAX_METADATA_PAIRS``).

    Raises:
        UsageError: naming the bound (a 400 ``invalid-request``, before any model call).
    """
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise UsageError(f"metadata must be an object of strings, not {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_PAIRS:
        raise UsageError(f"metadata has {len(metadata)} pairs; the limit is {MAX_METADATA_PAIRS}")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise UsageError(f"a metadata key is {len(key)} characters long; the limit is {MAX_METADATA_KEY}")
        if not isinstance(value, str):
            raise UsageError(f"metadata values must be strings, not {type(value).__name__} (key {key[:64]!r})")
        if len(value) > MAX_METADATA_VALUE:
            raise UsageError(
                f"metadata value of {key!r} is {len(value)} characters long; the limit is {MAX_METADATA_VALUE}"
            )


@router.post("/v1/responses", tags=["proxy"], summary="OpenAI Responses API with memory")
async def create_response(body: ResponsesRequest, request: Request, key: CurrentKey) -> Response:
    """One step of the conversation the request names, answered as a ``response`` object."""
    check_metadata(body.metadata)
    model = request.app.state.model
    if model is None:
        return no_model()
    resource_id = resource_for(key, request.headers.get(RESOURCE_HEADER))
    if body.background:
        raise UsageError("background responses are not supported: the answer comes in the request")
    if body.prompt is not None:
        raise UsageError("prompt templates are not supported: send the prompt as `instructions`")
    items: list[Any] = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    tools = [_function_tool(t, i) for i, t in enumerate(body.tools or [])]
    too_large = check_size(_chars(items) + len(body.instructions or ""), tools)
    if too_large is not None:
        return too_large
    system, new = split_items(items)
    instructions = "\n\n".join(s for s in [body.instructions, *system] if s) or None
    too_long = check_instructions(instructions)
    if too_long is not None:
        return too_long
    thread_id = await _thread_for(body, request, resource_id)
    turn = ProxyTurn.start(
        request,
        model,
        messages=new,
        resource_id=resource_id,
        thread_id=thread_id,
        instructions=instructions,
        client_tools=tools,
        stream=body.stream,
        settings=_settings(body),
    )
    name = str(getattr(model, "model", None) or body.model or "caderno")
    try:
        if not body.stream:
            result = await turn.result()
            created = result.reply.created_at.timestamp() if result.reply.created_at else time.time()
            shell = _shell(body, response_id(thread_id, result.reply.id or new_id()), name, thread_id, int(created))
            return JSONResponse(shell | _completed(_output(result), result))
        first = await turn.first_pieces()
    except KeyReused as exc:
        return key_reused(exc)
    shell = _shell(body, response_id(thread_id, new_id()), name, thread_id, int(time.time()))
    return StreamingResponse(_events(turn, first, shell), media_type="text/event-stream")


def _settings(body: ResponsesRequest) -> dict[str, Any]:
    """The request's model settings in chat-completions terms, checked: sampling, length, the text format."""
    extra = body.model_extra or {}
    settings = {"temperature": extra.get("temperature"), "top_p": extra.get("top_p")}
    settings["max_tokens"] = extra.get("max_output_tokens")
    text = extra.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        # The Responses API puts the schema's fields beside its type; chat completions nests them.
        form = {"type": "json_schema", "json_schema": {k: v for k, v in form.items() if k != "type"}}
    settings["response_format"] = form
    return check_settings(settings)


def response_id(thread_id: str, message_id: str) -> str:
    """The id of a response of ``thread_id``: the thread in URL-safe base64 (no padding), then a message id."""
    encoded = base64.urlsafe_b64encode(thread_id.encode()).decode().rstrip("=")
    return f"{_ID_PREFIX}{encoded}_{message_id}"


def thread_of(response: str) -> str | None:
    """The thread a response id names, or ``None`` when it is not one of ``response_id``'s ids."""
    if not response.startswith(_ID_PREFIX):
        return None
    encoded, sep, message_id = response[len(_ID_PREFIX) :].rpartition("_")
    if not sep or not encoded or not message_id:
        return None
    try:
        thread = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        check_id(thread, "thread id")
    except ValueError:  # binascii.Error, UnicodeDecodeError and UsageError all are
        return None
    # One spelling per thread: an id that decodes but is not how ours are written is not ours.
    return thread if response_id(thread, message_id) == response else None


async def _thread_for(body: ResponsesRequest, request: Request, resource_id: str) -> str:
    """The turn's thread (see the module docstring); ``previous_response_id``, when sent, is checked first.

    Raises:
        NotFound: ``previous_response_id`` names no thread of the resource.
        UsageError: a malformed thread id, or a header or ``conversation`` naming another
            thread than ``previous_response_id``.
    """
    named = request.headers.get(THREAD_HEADER)
    where = THREAD_HEADER
    if not named and body.conversation is not None:
        conversation = body.conversation
        named = conversation.get("id") if isinstance(conversation, dict) else conversation
        where = "conversation"
        if not isinstance(named, str) or not named:
            raise UsageError("conversation is a thread id, or an object with one as its `id`")
    if named:
        check_id(named, "thread id")
    previous = body.previous_response_id
    if previous is not None:
        thread = thread_of(previous)
        memory = request.app.state.memory
        if thread is None or await memory.run(ops.GetThread(resource_id=resource_id, thread_id=thread)) is None:
            raise NotFound(f"previous response {previous!r:.200} not found", resource_id=resource_id)
        if named and named != thread:
            raise UsageError(f"previous_response_id belongs to another conversation than the one {where} names")
        return thread
    if named:
        return named
    if body.user:
        return check_id(body.user, "thread id")
    return new_id()


def _function_tool(tool: Any, index: int) -> ToolSpec:
    """A Responses function tool (``{"type": "function", "name", "description", "parameters"}``)."""
    where = f"tools[{index}]"
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise UsageError(f"{where}: the proxy passes function tools only, not {kind!r}")
    return client_tool(tool.get("name"), tool.get("description"), tool.get("parameters"), where)


def split_items(items: list[Any]) -> tuple[list[str], list[Message]]:
    """The request's system texts (its system and developer messages) and the turn's new messages.

    The new messages are the user messages and function call outputs after
    the last assistant item (an assistant message or a function call): what
    came before is the stored history the client resends.

    Raises:
        UsageError: nothing new to answer, an unknown item type or role, or non-text content.
    """
    system: list[str] = []
    last_assistant = -1
    kinds = [_kind(item, i) for i, item in enumerate(items)]
    for i, kind in enumerate(kinds):
        if kind in _INSTRUCTION_ROLES:
            system.append(_text(items[i].get("content"), i))
        elif kind in ("assistant", "function_call"):
            last_assistant = i
    new: list[Message] = []
    for i in range(last_assistant + 1, len(items)):
        if kinds[i] == "user":
            new.append(Message.user(_text(items[i].get("content"), i)))
        elif kinds[i] == "function_call_output":
            call_id = items[i].get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise UsageError(f"input[{i}]: a function_call_output needs the call_id of the call it answers")
            output = _text(items[i].get("output"), i)
            new.append(Message.tool(output, tool_call_id=check_id(call_id, "call_id")))
    if not new:
        raise UsageError("no new user message or function_call_output after the last assistant item: nothing to answer")
    return system, new


def _kind(item: Any, index: int) -> str:
    """An input item's kind: a message's role, or the item's type."""
    if not isinstance(item, dict):
        raise UsageError(f"input[{index}]: an input item is an object, not {type(item).__name__}")
    kind = item.get("type", "message")
    if kind not in _ITEM_TYPES:
        raise UsageError(
            f"input[{index}]: the proxy takes message, function_call, function_call_output and reasoning items,"
            f" not {kind!r:.80}"
        )
    if kind != "message":
        return str(kind)
    role = item.get("role")
    if role not in ("user", "assistant", *_INSTRUCTION_ROLES):
        raise UsageError(f"input[{index}]: unknown role {role!r:.80}")
    return str(role)


def _text(content: Any, index: int) -> str:
    """An item's text: a string, or the text parts of a content array."""
    return content_text(content, f"input[{index}]", _TEXT_PARTS)


def _chars(items: list[Any]) -> int:
    """Characters of the items' text (counted before anything is built)."""
    total = 0
    for item in items:
        if not isinstance(item, dict):
            continue
        for value in (item.get("content"), item.get("output"), item.get("arguments")):
            for part in value if isinstance(value, list) else [value]:
                text = part.get("text") if isinstance(part, dict) else part
                total += len(text) if isinstance(text, str) else 0
    return total


def _shell(body: ResponsesRequest, rid: str, model: str, thread_id: str, created: int) -> dict[str, Any]:
    """A ``response`` object without its outcome: what the request asked, echoed as OpenAI does."""
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.instructions,
        "model": model,
        "output": [],
        "parallel_tool_calls": body.parallel_tool_calls if body.parallel_tool_calls is not None else True,
        "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
        "tools": body.tools or [],
        "previous_response_id": body.previous_response_id,
        "conversation": {"id": thread_id} if body.conversation is not None else None,
        "metadata": body.metadata or {},
        "text": {"format": {"type": "text"}},
        "temperature": None,
        "top_p": None,
        "max_output_tokens": None,
        "background": False,
        "truncation": "disabled",
        "user": body.user,
        "usage": None,
    }


def _completed(output: list[dict[str, Any]], result: ChatResult) -> dict[str, Any]:
    """A response's outcome: completed, with its output and the turn's usage."""
    return {"status": "completed", "completed_at": int(time.time()), "output": output, "usage": _usage(result.reply)}


def _usage(reply: Message) -> dict[str, Any]:
    """The turn's tokens in the Responses names (every model call of the turn, summed)."""
    usage = usage_of(reply)
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["total_tokens"],
    }


def _output(result: ChatResult) -> list[dict[str, Any]]:
    """The turn's answer as output items: the text as one message, then each call of the client's tools."""
    items = [_message(f"msg_{result.reply.id}", result.reply.content)] if result.reply.content else []
    return items + [_call(c.id, c.name, _arguments(c)) for c in result.pending]


def _message(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [_part(text)] if status == "completed" else [],
    }


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _call(call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def _arguments(call: ToolCall) -> str:
    arguments: str = wire_call(call)["function"]["arguments"]
    return arguments


async def _events(turn: ProxyTurn, first: list[Delta], shell: dict[str, Any]) -> AsyncIterator[str]:
    """The turn as Responses server-sent events, as the model produces them, ending in ``response.completed``."""
    out = _Output()
    yield out.event("response.created", response=shell)
    # The metadata was in response.created; a stream repeats it only in its last response object.
    yield out.event("response.in_progress", response={k: v for k, v in shell.items() if k != "metadata"})
    try:
        async for piece in turn.pieces(first):
            for event in out.add(piece):
                yield event
        result = await turn.result()
    except Exception as exc:  # after the first event the status is sent: the failure is an event
        error = stream_error(exc)
        failed = {
            "status": "failed",
            "output": out.items,
            "error": {"code": error["type"], "message": error["message"]},
        }
        yield out.event("response.failed", response=shell | failed)
        return
    for event in out.finish():
        yield event
    yield out.event("response.completed", response=shell | _completed(out.items, result))


class _Output:
    """A streamed response's output items as they grow, and the events that tell the client.

    Text goes to a message item, open until a call starts or the turn ends.
    A call's item opens once its id is known (an upstream may send the id
    after the first piece) and closes at the end, so the pieces of several
    calls may interleave.
    """

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.sequence = 0
        self.text_at: int | None = None
        self.calls: dict[int, int] = {}
        """A client call's index in the reply -> its output index."""
        self.held: dict[int, list[Delta]] = {}
        """Pieces of calls whose id has not arrived yet."""

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\n{sse(data)}"

    def add(self, piece: Delta) -> list[str]:
        if piece.call_index is None:
            return self._text(piece.content) if piece.content else []
        events = self._close_text()
        at = self.calls.get(piece.call_index)
        if at is not None:
            return events + self._arguments(at, piece.arguments)
        held = self.held.setdefault(piece.call_index, [])
        held.append(piece)
        call_id = next((p.call_id for p in held if p.call_id), None)
        name = next((p.call_name for p in held if p.call_name), None)
        if call_id is None or name is None:
            return events
        del self.held[piece.call_index]
        return events + self._open_call(piece.call_index, call_id, name, "".join(p.arguments for p in held))

    def finish(self) -> list[str]:
        """Close every open item (a call whose id never came cannot be in a stored reply: the turn failed)."""
        events = self._close_text()
        for at in self.calls.values():
            item = self.items[at]
            events.append(self._for(at, "response.function_call_arguments.done", arguments=item["arguments"]))
            item["status"] = "completed"
            events.append(self.event("response.output_item.done", output_index=at, item=item))
        self.calls = {}
        return events

    def _text(self, text: str) -> list[str]:
        events = []
        if self.text_at is None:
            self.text_at = len(self.items)
            self.items.append(_message(f"msg_{new_id()}", "", status="in_progress"))
            events.append(self.event("response.output_item.added", output_index=self.text_at, item=self.items[-1]))
            self.items[-1]["content"] = [_part("")]
            events.append(self._for(self.text_at, "response.content_part.added", content_index=0, part=_part("")))
        self.items[self.text_at]["content"][0]["text"] += text
        events.append(self._for(self.text_at, "response.output_text.delta", content_index=0, delta=text, logprobs=[]))
        return events

    def _close_text(self) -> list[str]:
        at = self.text_at
        if at is None:
            return []
        self.text_at = None
        item = self.items[at]
        part = item["content"][0]
        item["status"] = "completed"
        return [
            self._for(at, "response.output_text.done", content_index=0, text=part["text"], logprobs=[]),
            self._for(at, "response.content_part.done", content_index=0, part=part),
            self.event("response.output_item.done", output_index=at, item=item),
        ]

    def _open_call(self, index: int, call_id: str, name: str, arguments: str) -> list[str]:
        at = self.calls[index] = len(self.items)
        self.items.append(_call(call_id, name, "", status="in_progress"))
        return [self.event("response.output_item.added", output_index=at, item=self.items[at])] + self._arguments(
            at, arguments
        )

    def _arguments(self, at: int, piece: str) -> list[str]:
        if not piece:
            return []
        self.items[at]["arguments"] += piece
        return [self._for(at, "response.function_call_arguments.delta", delta=piece)]

    def _for(self, at: int, kind: str, **fields: Any) -> str:
        """An event about output item ``at``."""
        return self.event(kind, item_id=self.items[at]["id"], output_index=at, **fields)
