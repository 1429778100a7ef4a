"""Streamed replies: ``OpenAIChatModel.stream`` against the scripted upstream on loopback, and ``stream_reply``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _upstream import Reply, Upstream, calls, events, refuse, serving, text, usage_of  # noqa: E402

from caderno import Message, ScriptedModel, ToolCall  # noqa: E402
from caderno.agent.models import Delta, OpenAIChatModel, RetryPolicy, stream_reply  # noqa: E402
from caderno.core.errors import ModelError  # noqa: E402

KEY = "sk-upstream-secret-0123456789"
TEXT = "Amsterdam in May: tulips, canals and a long, slow lunch by the water."


@asynccontextmanager
async def served(upstream: Upstream) -> AsyncIterator[OpenAIChatModel]:
    async with serving(upstream.app()) as base:
        model = OpenAIChatModel(model="up-1", base_url=f"{base}/v1", api_key=KEY, timeout=10)
        try:
            yield model
        finally:
            await model.aclose()


def unchained(exc: BaseException) -> bool:
    """No earlier error shows in the traceback: a chained httpx error would name the URL, password included."""
    return exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


async def collect(model: OpenAIChatModel) -> list[Delta | Message]:
    return [item async for item in model.stream([Message.user("plan my trip")], [])]


async def both(*reply: Reply, **options: object) -> tuple[list[Delta | Message], Message, Upstream]:
    """The streamed items and ``complete``'s answer for the same scripted reply."""
    upstream = Upstream(script=[*reply, *reply], **options)  # type: ignore[arg-type]
    async with served(upstream) as model:
        items = await collect(model)
        whole = await model.complete([Message.user("plan my trip")], [])
    return items, whole, upstream


async def test_text_arrives_in_order_and_the_reply_is_what_complete_gives() -> None:
    items, whole, upstream = await both(text(TEXT))
    *deltas, last = items
    assert all(isinstance(d, Delta) and d.call_index is None for d in deltas)
    assert len(deltas) == -(-len(TEXT) // upstream.piece)  # one per chunk the upstream sent: nothing buffered
    assert "".join(d.content for d in deltas if isinstance(d, Delta)) == TEXT
    assert last == whole == Message.assistant(TEXT, metadata=last.metadata)
    streamed, plain = upstream.requests
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in streamed.items() if k not in ("stream", "stream_options")} == plain


async def test_two_tool_calls_in_pieces_are_put_back_together() -> None:
    first, second = {"patch": {"goal": "Amsterdam", "month": "May"}}, {"query": "tulip season"}
    reply = calls(("update_working_memory", first, "call_a"), ("recall", second, "call_b"), content="Let me note that.")
    items, whole, _ = await both(reply, piece=5)
    *deltas, last = items
    assert isinstance(last, Message)
    assert last.tool_calls == (
        ToolCall(id="call_a", name="update_working_memory", arguments=first),
        ToolCall(id="call_b", name="recall", arguments=second),
    )
    assert last.content == "Let me note that."
    assert last == whole
    pieces = [d for d in deltas if isinstance(d, Delta) and d.call_index is not None]
    assert len([d for d in pieces if d.call_index == 0]) > 2  # the arguments came in several pieces
    for index, (call_id, name, arguments) in enumerate(
        [("call_a", "update_working_memory", first), ("call_b", "recall", second)]
    ):
        mine = [d for d in pieces if d.call_index == index]
        assert (mine[0].call_id, mine[0].call_name) == (call_id, name)
        assert all(d.call_id is None and d.call_name is None for d in mine[1:])
        assert json.loads("".join(d.arguments for d in mine)) == arguments


async def test_calls_without_an_index_are_told_apart_by_their_ids() -> None:
    """Some servers leave ``index`` out of a call's pieces: a new id starts the next call."""

    def piece(**call: object) -> str:
        return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})

    stream = events(
        piece(id="c1", function={"name": "recall", "arguments": '{"query": '}),
        piece(function={"arguments": '"tulips"}'}),
        piece(id="c2", function={"name": "memory", "arguments": "{}"}),
        "[DONE]",
    )
    async with served(Upstream(script=[stream])) as model:
        *deltas, last = await collect(model)
    assert [d.call_index for d in deltas if isinstance(d, Delta)] == [0, 0, 1]
    assert isinstance(last, Message) and last.tool_calls == (
        ToolCall(id="c1", name="recall", arguments={"query": "tulips"}),
        ToolCall(id="c2", name="memory"),
    )


async def test_usage_lands_in_metadata() -> None:
    items, whole, upstream = await both(text(TEXT))
    reported = usage_of(upstream.requests[0], {"content": TEXT})
    expected = {"prompt_tokens": reported["prompt_tokens"], "completion_tokens": reported["completion_tokens"]}
    assert items[-1].metadata == whole.metadata == {"usage": expected}  # type: ignore[union-attr]

    items, whole, _ = await both(text(TEXT), usage=False)
    assert items[-1].metadata is None and whole.metadata is None  # type: ignore[union-attr]


async def test_the_first_piece_arrives_while_the_upstream_is_still_answering() -> None:
    upstream = Upstream(script=[text(TEXT)], hold=asyncio.Event())
    assert upstream.hold is not None
    async with served(upstream) as model:
        stream = model.stream([Message.user("plan my trip")], [])
        try:
            first = await asyncio.wait_for(anext(stream), timeout=5)
            assert isinstance(first, Delta) and first.content == TEXT[: upstream.piece]
            assert upstream.finished == []
        finally:
            upstream.hold.set()
        rest = [item async for item in stream]
    assert len(upstream.finished) == 1
    assert isinstance(rest[-1], Message) and rest[-1].content == TEXT


@pytest.mark.parametrize("status", [500, 401])
async def test_http_errors_are_model_errors_in_caderno_words(status: int, caplog: pytest.LogCaptureFixture) -> None:
    said = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}. upstream-body-marker"}})
    async with served(Upstream(script=[refuse(status, said)])) as model:
        with caplog.at_level(logging.WARNING, "caderno.model"), pytest.raises(ModelError) as caught:
            await collect(model)
    assert str(caught.value) == f"the model call failed: HTTP {status} from the upstream"
    assert unchained(caught.value)
    assert "upstream-body-marker" in caplog.text and KEY not in caplog.text  # the body is logged, scrubbed


GOOD = '{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}'
"""A well-formed first chunk: an event that breaks after it fails the stream all the same."""


@pytest.mark.parametrize(
    "data,said",
    [
        ([GOOD, "{not json"], "not in the expected format"),
        ([GOOD, '{"choices": [{"index": 0, "delta": "oops"}]}'], "not in the expected format"),
        (
            [GOOD, '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "x"}]}}]}'],
            "not in the expected format",
        ),
        (['{"choices": [], "usage": {"prompt_tokens": 3}}', "[DONE]"], "not in the expected format"),
        ([], "not in the expected format"),
        ([GOOD, '{"error": {"message": "overloaded upstream-body-marker"}}'], "reported an error"),
    ],
    ids=["not-json", "delta-not-object", "index-not-int", "no-choice", "empty", "error-event"],
)
async def test_a_broken_stream_is_a_model_error(data: list[str], said: str, caplog: pytest.LogCaptureFixture) -> None:
    async with served(Upstream(script=[events(*data)])) as model:
        with caplog.at_level(logging.WARNING, "caderno.model"), pytest.raises(ModelError, match=said) as caught:
            await collect(model)
    assert str(caught.value).startswith("the model call failed: ") and "{" not in str(caught.value)
    assert "model call to" in caplog.text and unchained(caught.value)


async def test_an_upstream_that_will_not_stream_is_read_whole() -> None:
    reply = calls(("recall", {"query": "tulips"}, "call_r"), content=TEXT)
    items, whole, upstream = await both(reply, streams=False)
    assert items == [
        Delta(content=TEXT),
        Delta(call_index=0, call_id="call_r", call_name="recall", arguments='{"query": "tulips"}'),
        whole,
    ]
    assert upstream.requests[0]["stream"] is True
    assert whole.metadata and "usage" in whole.metadata


async def test_an_unreachable_upstream_is_a_model_error() -> None:
    model = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", timeout=2)
    try:
        with pytest.raises(ModelError, match="could not be reached") as caught:
            await collect(model)
        assert "127.0.0.1" not in str(caught.value) and unchained(caught.value)
    finally:
        await model.aclose()


async def test_a_slow_upstream_is_a_model_error() -> None:
    upstream = Upstream(script=[text(TEXT)], pause=1.0)
    async with serving(upstream.app()) as base:
        model = OpenAIChatModel(model="m", base_url=f"{base}/v1", timeout=0.3)
        try:
            with pytest.raises(ModelError, match="did not answer in time"):
                await collect(model)
        finally:
            await model.aclose()


async def test_stream_reply_streams_a_model_that_can() -> None:
    upstream = Upstream(script=[text(TEXT)])
    async with served(upstream) as model:
        items = [item async for item in stream_reply(model, [Message.user("hi")], [])]
    assert len(items) > 2 and "".join(d.content for d in items if isinstance(d, Delta)) == TEXT
    assert isinstance(items[-1], Message) and upstream.requests[0]["stream"] is True


async def test_stream_reply_gives_a_complete_only_model_in_one_piece() -> None:
    reply = Message.assistant(
        "Noted.", tool_calls=[ToolCall(id="c1", name="recall", arguments={"q": "x"}), ToolCall(id="c2", name="memory")]
    )
    scripted = ScriptedModel([reply, Message.assistant("")])
    items = [item async for item in stream_reply(scripted, [Message.user("hi")], [])]
    assert items == [
        Delta(content="Noted."),
        Delta(call_index=0, call_id="c1", call_name="recall", arguments='{"q": "x"}'),
        Delta(call_index=1, call_id="c2", call_name="memory", arguments="{}"),
        reply,
    ]
    assert [item async for item in stream_reply(scripted, [], [])] == [Message.assistant("")]
    assert len(scripted.requests) == 2


class _Streams:
    """A model whose stream breaks the contract in one of two ways."""

    def __init__(self, items: list[Delta | Message]) -> None:
        self.items = items

    async def complete(self, messages: list[Message], tools: list[object]) -> Message:
        raise AssertionError("a model that streams is streamed")

    async def stream(self, messages: list[Message], tools: list[object]) -> AsyncIterator[Delta | Message]:
        for item in self.items:
            yield item


@pytest.mark.parametrize(
    "items,said",
    [
        ([Delta(content="a")], "without its whole reply"),
        ([Message.assistant("a"), Delta(content="b")], "after its whole reply"),
    ],
)
async def test_stream_reply_holds_a_stream_to_its_order(items: list[Delta | Message], said: str) -> None:
    with pytest.raises(ModelError, match=said):
        [item async for item in stream_reply(_Streams(items), [], [])]  # type: ignore[arg-type]


async def test_streamed_text_parts_are_joined_piece_by_piece() -> None:
    """A delta's ``content`` as a list of text parts (some servers stream it so) is text, not a client error."""
    from _upstream import parts

    items, whole, upstream = await both(parts("Amsterdam ", "in May", ": tulips"), piece=1)
    *deltas, last = items
    assert [d.content for d in deltas if isinstance(d, Delta)] == ["Amsterdam ", "in May", ": tulips"]
    assert last == whole == Message.assistant("Amsterdam in May: tulips", metadata=last.metadata)
    assert upstream.requests[0]["stream"] is True


#: What an upstream might put where a count goes: a key-shaped secret, which must reach no client.
LEAKED = "sk-UPSTREAMSECRET0123456789abcdef"


@pytest.mark.parametrize(
    "reply,usage",
    [
        ({"text": "a"}, None),
        ([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}], None),
        ("oi", {"prompt_tokens": 3, "completion_tokens": LEAKED}),
        ("oi", [LEAKED]),
    ],
    ids=["content-object", "content-image-part", "usage-count-a-secret", "usage-not-object"],
)
async def test_a_streamed_answer_of_another_shape_is_the_fixed_sentence(
    reply: object, usage: object, caplog: pytest.LogCaptureFixture
) -> None:
    from _upstream import content

    async with served(Upstream(script=[content(reply)], reported_usage=usage)) as model:
        with caplog.at_level(logging.WARNING, "caderno.model"), pytest.raises(ModelError) as caught:
            await collect(model)
    assert str(caught.value) == "the model call failed: the upstream's answer is not in the expected format"
    assert unchained(caught.value) and "model call to" in caplog.text and LEAKED not in caplog.text


# -- retries: only before the first piece --------------------------------------------------------


async def test_a_503_before_the_stream_began_is_tried_again() -> None:
    from fastapi import Response

    busy = Response('{"error": "busy"}', status_code=503, media_type="application/json", headers={"Retry-After": "0"})
    upstream = Upstream(script=[lambda body: busy, text(TEXT)])
    async with served(upstream) as model:
        items = await collect(model)
    assert isinstance(items[-1], Message) and items[-1].content == TEXT
    assert len(upstream.requests) == 2 and upstream.requests[0] == upstream.requests[1]


async def test_a_stream_cut_after_its_first_piece_is_not_tried_again() -> None:
    """The client has read part of the reply: a second request would start it over, so none is made."""
    requests = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        requests += 1
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\n"
        writer.write(head + f"data: {GOOD}\n\n".encode())
        await writer.drain()
        writer.close()  # cut: far fewer bytes than the length promised

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = OpenAIChatModel(model="m", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(first_delay=0.01))
    got: list[Delta | Message] = []
    try:
        with pytest.raises(ModelError, match="could not be reached") as caught:
            async for item in model.stream([Message.user("oi")], []):
                got.append(item)
    finally:
        await model.aclose()
        server.close()
        await server.wait_closed()
    assert got == [Delta(content="Hi")] and requests == 1 and unchained(caught.value)
