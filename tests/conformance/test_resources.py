"""Erase, export/import and bad input — on every backend."""

from __future__ import annotations

import pytest

import caderno
from caderno import Message, ToolCall
from caderno.core.errors import UsageError

R = "casa-gabriel"


async def _seed(memory: caderno.Memory, rid: str = R) -> None:
    await memory.append_messages(
        resource_id=rid, thread_id="t1", messages=[Message.user("oi 🙂"), Message.assistant("olá")]
    )
    await memory.append_messages(
        resource_id=rid,
        thread_id="t2",
        messages=[
            Message.user("total?"),
            Message.assistant("", tool_calls=[ToolCall(id="c1", name="budget_total", arguments={"month": "2026-06"})]),
            Message.tool("1234", tool_call_id="c1", name="budget_total"),
            Message.assistant("R$ 1.234"),
        ],
    )
    await memory.update_working_memory(resource_id=rid, patch={"monthlyIncomeBRL": 14000})
    await memory.facts.remember(resource_id=rid, category="finance", key="income", value="R$ 14,000")
    await memory.facts.remember(resource_id=rid, category="finance", key="income", value="R$ 15,000", source="user")


async def test_erase_removes_everything_of_that_resource_only(memory: caderno.Memory) -> None:
    await _seed(memory, "a")
    await _seed(memory, "b")
    await memory.erase_resource(resource_id="a")
    assert await memory.list_threads(resource_id="a") == []
    assert await memory.get_messages(resource_id="a", thread_id="t1") == []
    assert await memory.get_working_memory(resource_id="a") is None
    assert (await memory.export_resource(resource_id="a"))["working_memory_log"] == []
    assert len(await memory.list_threads(resource_id="b")) == 2
    assert await memory.get_working_memory(resource_id="b") == {"monthlyIncomeBRL": 14000}


async def test_export_import_restores_ids_and_order(memory: caderno.Memory, tmp_path) -> None:
    await _seed(memory)
    dump = await memory.export_resource(resource_id=R)
    import json

    dump = json.loads(json.dumps(dump))  # really JSON-able
    before = {t: await memory.get_messages(resource_id=R, thread_id=t) for t in ("t1", "t2")}
    async with caderno.connect(f"sqlite:///{tmp_path / 'restored.db'}") as other:
        await other.import_resource(dump)
        for t, msgs in before.items():
            got = await other.get_messages(resource_id=R, thread_id=t)
            assert [m.with_(seq=None) for m in got] == [m.with_(seq=None) for m in msgs]
        state = await other.working_memory.state(resource_id=R)
        assert state and state.data == {"monthlyIncomeBRL": 14000} and state.version == 1
        (fact,) = await other.facts.list(resource_id=R)
        assert (fact.value, fact.source) == ("R$ 15,000", "user")
        history = await other.facts.history(resource_id=R, category="finance", key="income")
        assert [h["value"] for h in history] == ["R$ 14,000"]
        # Importing twice is refused and changes nothing.
        with pytest.raises(UsageError, match="already holds data"):
            await other.import_resource(dump)
        assert len(await other.get_messages(resource_id=R, thread_id="t2")) == 4
    # And back into the same backend after an erase.
    await memory.erase_resource(resource_id=R)
    await memory.import_resource(dump)
    assert [m.id for m in await memory.get_messages(resource_id=R, thread_id="t2")] == [m.id for m in before["t2"]]
    assert [f.value for f in await memory.facts.list(resource_id=R)] == ["R$ 15,000"]
    assert (await memory.export_resource(resource_id=R))["fact_history"] == dump["fact_history"]


@pytest.mark.core
async def test_import_rejects_what_is_not_an_export(memory: caderno.Memory) -> None:
    for bad in (
        {},
        {"format": "other"},
        {"format": "caderno.resource", "version": 99, "resource_id": R, "threads": []},
    ):
        with pytest.raises(UsageError):
            await memory.import_resource(bad)
    assert await memory.list_threads(resource_id=R) == []


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"resource_id": "", "thread_id": "t"}, "resource_id must be a non-empty"),
        ({"resource_id": "r", "thread_id": ""}, "thread_id must be a non-empty"),
        ({"resource_id": "r" * 257, "thread_id": "t"}, "limit is 256"),
        ({"resource_id": "r", "thread_id": "t\x00"}, "NUL"),
        ({"resource_id": None, "thread_id": "t"}, "resource_id"),
    ],
)
@pytest.mark.core
async def test_bad_ids_are_refused_and_nothing_is_written(memory: caderno.Memory, kwargs: dict, match: str) -> None:
    await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("kept")])
    with pytest.raises(UsageError, match=match):
        await memory.append_messages(messages=[Message.user("x")], **kwargs)
    assert [m.content for m in await memory.get_messages(resource_id="r", thread_id="t")] == ["kept"]


@pytest.mark.core
@pytest.mark.parametrize("content,match", [("nul \x00 byte", "NUL"), ("lone \ud800 surrogate", "lone surrogate")])
async def test_unstorable_text_is_refused_clearly(memory: caderno.Memory, content: str, match: str) -> None:
    await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("kept")])
    with pytest.raises(UsageError, match=match):
        await memory.append_messages(resource_id=R, thread_id="t", messages=[Message.user("ok"), Message.user(content)])
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id="t")] == ["kept"]


def test_message_constructors_refuse_bad_shapes() -> None:
    with pytest.raises(UsageError, match="unknown role 'robot'"):
        Message(role="robot", content="x")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="tool_call_id"):
        Message(role="tool", content="x")
    with pytest.raises(UsageError, match="only assistant"):
        Message(role="user", content="x", tool_calls=(ToolCall(id="1", name="f"),))
    with pytest.raises(UsageError, match="importance"):
        Message.user("x", importance=1.5)


def test_message_json_round_trip_is_lossless() -> None:
    import json

    m = Message.assistant(
        "emoji 😀 and empty tool args",
        tool_calls=[ToolCall(id="c", name="f", arguments={"nested": {"a": [1, 2, {"b": None}]}, "s": ""})],
        metadata={"k": "ç"},
        importance=0.3,
    )
    assert Message.from_dict(json.loads(json.dumps(m.to_dict()))) == m
