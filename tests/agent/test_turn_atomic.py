"""One turn, one transaction: two round trips, all or nothing, on any memory.

The round trips are counted with a wrapper around a real store (every
``batch`` call is one trip to the database), never with timing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.core.errors import ModelError, Unsupported, UsageError
from caderno.memory.adapters.connect import open_store
from caderno.stores import ops


class Counting:
    """A store that counts the batches it is given, over a real one."""

    def __init__(self, inner: Any, supports: frozenset[type[ops.Op[Any]]] | None = None) -> None:
        self.inner = inner
        self.supports = supports if supports is not None else inner.supports
        self.batches: list[list[str]] = []

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        self.batches.append([type(op).__name__ for op in batch])
        return await self.inner.batch(batch)


def tool_turn(tag: str) -> list[Any]:
    """The model patches working memory, saves a fact, then answers."""
    return [
        Message.assistant(
            tool_calls=[
                ToolCall(id=f"wm-{tag}", name="update_working_memory", arguments={"patch": {"turns": {tag: True}}}),
                ToolCall(id=f"f-{tag}", name="remember_fact", arguments={"category": "t", "key": tag, "value": tag}),
            ]
        ),
        Message.assistant(f"noted {tag}"),
    ]


async def test_a_turn_makes_three_round_trips(db_url: str) -> None:
    """The thread's turn lease, the turn's reads in one snapshot, then its writes (lease checked and given back)."""
    store = Counting(open_store(db_url))
    async with caderno.Memory(store, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("earlier")])
        await memory.facts.remember(resource_id="r", category="home", key="city", value="Curitiba")
        chat = AgentChat(model=ScriptedModel(tool_turn("a")), memory=memory)
        store.batches.clear()
        result = await chat.ask(messages="remember a", resource_id="r", thread_id="t")
        trips = list(store.batches)[:3]  # background consolidation may start before ask returns
        assert trips == [
            ["ClaimTurn"],
            # The context providers' reads, in their order (caderno.agent.context): summaries, history,
            # working memory, facts.
            ["ReadSummaries", "ReadThread", "ReadWorkingMemory", "ReadFacts"],
            ["ClaimTurn", "Append", "PatchWorkingMemory", "UpsertFact", "ReleaseTurn"],
        ]
        assert result.working_memory is not None and result.working_memory.data == {"turns": {"a": True}}
        assert [f.key for f in await memory.facts.list(resource_id="r", category="t")] == ["a"]
        assert result.reply.metadata["usage"]["model_calls"] == 2


async def test_a_failed_turn_stores_nothing(memory: caderno.Memory) -> None:
    async def fails(messages: list[Message], tools: list[Any]) -> Message:
        raise RuntimeError("model down")

    before = await memory.export_resource(resource_id="r")
    chat = AgentChat(model=ScriptedModel([tool_turn("x")[0], fails]), memory=memory)
    with pytest.raises(ModelError, match="model down"):
        await chat.ask(messages="remember x", resource_id="r", thread_id="t")
    assert await memory.export_resource(resource_id="r") == before  # no messages, no patch, no fact


async def test_max_steps_stores_nothing(memory: caderno.Memory) -> None:
    chat = AgentChat(model=ScriptedModel(tool_turn("y")[:1] * 3), memory=memory, settings=ChatSettings(max_steps=1))
    with pytest.raises(ModelError, match="max_steps"):
        await chat.ask(messages="remember y", resource_id="r", thread_id="t")
    assert await memory.facts.list(resource_id="r") == []
    assert await memory.get_working_memory(resource_id="r") is None


async def test_a_patch_that_no_longer_validates_fails_the_whole_turn(db_url: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 10}}}
    async with caderno.connect(db_url, embedder=None, working_memory_schema=schema) as memory:
        await memory.update_working_memory(resource_id="r", patch={"n": 1})
        stored = await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("hi")])
        # The commit re-validates every patch against the stored state inside the transaction.
        with pytest.raises(caderno.InvalidPatch):
            await memory.turns.commit(
                resource_id="r", thread_id="t", messages=[Message.user("x")], patches=[({"n": 99}, "tool")]
            )
        assert await memory.get_messages(resource_id="r", thread_id="t") == stored
        assert await memory.get_working_memory(resource_id="r") == {"n": 1}


class DictMemory:
    """The four methods of ``caderno.AgentMemory`` over plain dicts: nothing else."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, str], list[Message]] = {}
        self.wm: dict[str, dict[str, Any]] = {}

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        msgs = self.threads.get((resource_id, thread_id), [])
        return list(msgs if limit is None else msgs[-limit:])

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        self.threads.setdefault((resource_id, thread_id), []).extend(messages)
        return list(messages)

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        return self.wm.get(resource_id)

    async def update_working_memory(
        self, *, resource_id: str, patch: dict[str, Any], expected_version: int | None = None
    ) -> dict[str, Any]:
        self.wm[resource_id] = {**self.wm.get(resource_id, {}), **patch}
        return self.wm[resource_id]


async def test_agent_chat_runs_on_any_four_method_memory(caplog: pytest.LogCaptureFixture) -> None:
    mem = DictMemory()
    assert isinstance(mem, caderno.AgentMemory)
    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[ToolCall(id="c1", name="update_working_memory", arguments={"patch": {"goal": "Amsterdam"}})]
            ),
            Message.assistant("Anotado."),
            lambda messages, tools: Message.assistant("A meta é " + json.dumps(mem.wm["casa"]["goal"])),
        ]
    )
    with caplog.at_level("INFO", logger="caderno.agent"):
        chat = AgentChat(model=model, memory=mem, recall=True)
    assert "recall, facts, summaries and consolidation are off" in caplog.text
    assert [s.name for s in chat.tool_specs] == ["update_working_memory"]
    await chat.ask(messages="meta: Amsterdam", resource_id="casa", thread_id="seg")
    result = await chat.ask(messages="e a meta?", resource_id="casa", thread_id="qua")
    assert result.reply.content == 'A meta é "Amsterdam"'
    assert mem.wm == {"casa": {"goal": "Amsterdam"}}
    assert [m.role for m in mem.threads[("casa", "seg")]] == ["user", "assistant"]  # the design's turn: no tool steps
    prompt = "\n".join(m.content for m in model.requests[-1].messages if m.role == "system")
    assert '"goal": "Amsterdam"' in prompt  # working memory reached the next conversation


async def test_a_store_with_only_the_core_operations() -> None:
    store = Counting(open_store("memory://"), supports=ops.CORE)
    memory = caderno.Memory(store, embedder=DEFAULT_EMBEDDER)
    await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])
    assert [m.content for m in await memory.get_messages(resource_id="r", thread_id="t")] == ["oi"]
    await memory.update_working_memory(resource_id="r", patch={"a": 1})
    assert (await memory.export_resource(resource_id="r"))["working_memory"]["data"] == {"a": 1}
    assert memory.embedder is None  # nowhere to keep vectors
    for call in (
        memory.facts.list(resource_id="r"),
        memory.consolidation.run(resource_id="r"),
        memory.recall(resource_id="r", query="oi", thread_id="t"),
    ):
        with pytest.raises(Unsupported, match="does not support"):
            await call
    chat = AgentChat(model=ScriptedModel([Message.assistant("ok")]), memory=memory, recall=True)
    assert [s.name for s in chat.tool_specs] == ["update_working_memory"]  # no recall, no facts
    await chat.ask(messages="hi", resource_id="r", thread_id="t")
    assert len(await memory.get_messages(resource_id="r", thread_id="t")) == 3


DEFAULT_EMBEDDER = caderno.memory.facade.DEFAULT


def test_an_object_without_batch_is_not_a_store() -> None:
    class Old:
        async def append(self, *args: Any) -> None: ...

    assert not isinstance(Old(), caderno.Store)
    with pytest.raises(UsageError, match="must implement caderno.Store"):
        caderno.Memory(Old(), embedder=None)  # type: ignore[arg-type]


async def test_sqlite_in_memory_url_is_refused_with_a_pointer() -> None:
    with pytest.raises(UsageError, match="memory://"):
        await caderno.connect("sqlite:///:memory:", embedder=None)


async def test_unknown_tool_error_lists_every_offered_tool(memory: caderno.Memory) -> None:
    model = ScriptedModel(
        [
            Message.assistant(tool_calls=[ToolCall(id="c", name="nope", arguments={})]),
            Message.assistant("ok"),
        ]
    )
    chat = AgentChat(model=model, memory=memory)
    result = await chat.ask(messages="hi", resource_id="r", thread_id="t")
    error = result.tool_calls[0].error or ""
    assert "recall" in error and "remember_fact" in error and "update_working_memory" in error


async def test_cancelled_turn_stores_nothing(memory: caderno.Memory) -> None:
    started = asyncio.Event()

    async def slow(messages: list[Message], tools: list[Any]) -> Message:
        started.set()
        await asyncio.sleep(60)
        return Message.assistant("late")

    chat = AgentChat(model=ScriptedModel([tool_turn("c")[0], slow]), memory=memory)
    task = asyncio.create_task(chat.ask(messages="remember c", resource_id="r", thread_id="t"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await memory.get_messages(resource_id="r", thread_id="t") == []
    assert await memory.facts.list(resource_id="r") == []
