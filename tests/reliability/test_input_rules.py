"""Each way bad input used to get in, refused the same way on every backend, with nothing changed.

One test per item of the hostile-input list: JSON that is not JSON, text
rules beyond ``content``, caches that handed out their own objects, limits
that differed by backend, and imports that trusted their input.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import caderno
from caderno import Message, ToolCall
from caderno.core.errors import CadernoError, InvalidPatch, UsageError
from caderno.core.jsonvalue import MAX_MESSAGES_PER_APPEND


async def snapshot(memory: caderno.Memory, resource: str = "casa") -> str:
    return json.dumps(await memory.export_resource(resource_id=resource), sort_keys=True)


@pytest.fixture
async def seeded(memory: caderno.Memory) -> caderno.Memory:
    await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("oi")])
    await memory.update_working_memory(resource_id="casa", patch={"a": 1})
    await memory.facts.remember(resource_id="casa", category="home", key="city", value="Curitiba")
    return memory


def deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "patch",
    [
        {"a": float("nan")},
        {"a": float("inf")},
        {"a": [float("-inf")]},
        {1: "a", "1": "b"},
        {"deep": deep(100_000)},
        {"t": ("a", "b")},
        {"s": {1, 2}},
        {"x": "nul\x00here"},
    ],
    ids=["nan", "inf", "-inf", "int-key", "100k-deep", "tuple", "set", "nul"],
)
async def test_patches_that_are_not_json_are_refused(seeded: caderno.Memory, patch: Any) -> None:
    before = await snapshot(seeded)
    with pytest.raises(InvalidPatch):
        await seeded.update_working_memory(resource_id="casa", patch=patch)
    assert await snapshot(seeded) == before


@pytest.mark.parametrize(
    "message",
    [
        Message.user("x", metadata={"n": float("nan")}),
        Message.user("x", metadata={1: "a"}),  # type: ignore[dict-item]
        Message.user("x", metadata={"d": deep(10_000)}),
        Message.user("x", name="bad\x00name"),
        Message.user("x", name="\ud800"),
        Message.tool("x", tool_call_id="c\x00"),
        Message.assistant(tool_calls=[ToolCall(id="c1", name="t", arguments={"v": float("inf")})]),
        Message.assistant(tool_calls=[ToolCall(id="c\x00", name="t", arguments={})]),
        Message.user("x", id=""),
        Message.user("x", id="i" * 5000),
        Message.user("y" * 1_000_001),
    ],
    ids=[
        "meta-nan",
        "meta-int-key",
        "meta-deep",
        "name-nul",
        "name-surrogate",
        "call-id-nul",
        "args-inf",
        "tool-call-id-nul",
        "empty-id",
        "5000-id",
        "huge-content",
    ],
)
async def test_text_and_json_rules_cover_every_field(seeded: caderno.Memory, message: Message) -> None:
    before = await snapshot(seeded)
    with pytest.raises(UsageError):
        await seeded.append_messages(resource_id="casa", thread_id="t", messages=[message])
    assert await snapshot(seeded) == before


async def test_returned_and_passed_objects_are_not_the_stored_ones(memory: caderno.Memory) -> None:
    meta = {"tags": ["a"]}
    (stored,) = await memory.append_messages(
        resource_id="casa", thread_id="t", messages=[Message.user("oi", metadata=meta)]
    )
    meta["tags"].append("changed by the caller")
    assert stored.metadata is not None
    stored.metadata["tags"].append("changed on the returned copy")
    (read,) = await memory.get_messages(resource_id="casa", thread_id="t")
    assert read.metadata == {"tags": ["a"]}
    assert read.metadata is not None
    read.metadata["tags"].clear()
    assert (await memory.get_messages(resource_id="casa", thread_id="t"))[0].metadata == {"tags": ["a"]}
    patch = {"goal": {"name": "Amsterdam"}}
    state = await memory.update_working_memory(resource_id="casa", patch=patch)
    patch["goal"]["name"] = "changed"
    state.data["goal"]["name"] = "changed too"
    assert await memory.get_working_memory(resource_id="casa") == {"goal": {"name": "Amsterdam"}}


async def test_the_same_limits_on_every_backend(memory: caderno.Memory) -> None:
    many = [Message.user(f"m{i}") for i in range(MAX_MESSAGES_PER_APPEND)]
    stored = await memory.append_messages(resource_id="casa", thread_id="big", messages=many)  # 10,000 at once
    assert len(stored) == MAX_MESSAGES_PER_APPEND
    assert [m.seq for m in stored] == sorted(m.seq for m in stored)
    with pytest.raises(UsageError, match="the limit is"):
        await memory.append_messages(
            resource_id="casa", thread_id="big", messages=[Message.user("x")] * (MAX_MESSAGES_PER_APPEND + 1)
        )
    assert len(await memory.get_messages(resource_id="casa", thread_id="big")) == MAX_MESSAGES_PER_APPEND
    for bad in ({"message_range": (-1, -1)}, {"message_range": "2"}, {"top": 0}, {"query": None}):
        kwargs: dict[str, Any] = {"resource_id": "casa", "query": "m1", **bad}
        with pytest.raises(UsageError):
            await memory.recall(**kwargs)


def mutations(dump: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Broken copies of a real export, each a way an import used to get in or blow up."""
    out = []

    def change(name: str, fn: Any) -> None:
        bad = copy.deepcopy(dump)
        fn(bad)
        out.append((name, bad))

    msg = ("threads", 0, "messages", 0)

    def at(d: Any, path: tuple[Any, ...]) -> Any:
        for p in path:
            d = d[p]
        return d

    change("threads-not-list", lambda d: d.update(threads="x"))
    change("message-not-object", lambda d: at(d, msg[:3]).__setitem__(0, 5))
    change("message-id-empty", lambda d: at(d, msg).__setitem__("id", ""))
    change("message-id-nul", lambda d: at(d, msg).__setitem__("id", "a\x00b"))
    change("message-id-5000", lambda d: at(d, msg).__setitem__("id", "i" * 5000))
    change("message-id-int", lambda d: at(d, msg).__setitem__("id", 12))
    change("message-role", lambda d: at(d, msg).__setitem__("role", "robot"))
    change("message-created-garbage", lambda d: at(d, msg).__setitem__("created_at", "yesterday-ish"))
    change("message-metadata-nan", lambda d: at(d, msg).__setitem__("metadata", {"x": float("nan")}))
    change("name-nul", lambda d: at(d, msg).__setitem__("name", "a\x00"))
    change("thread-created-garbage", lambda d: d["threads"][0].__setitem__("created_at", "not a time"))
    change("thread-id-int", lambda d: d["threads"][0].__setitem__("id", 7))
    change("wm-version-negative", lambda d: d["working_memory"].__setitem__("version", -3))
    change("wm-data-list", lambda d: d["working_memory"].__setitem__("data", [1]))
    change("wm-version-huge-float", lambda d: d["working_memory"].__setitem__("version", 1e400))
    change("fact-source-unknown", lambda d: d["facts"][0].__setitem__("source", "oracle"))
    change("fact-value-nul", lambda d: d["facts"][0].__setitem__("value", "a\x00"))
    change("fact-created-garbage", lambda d: d["facts"][0].__setitem__("updated_at", "garbage"))
    change("facts-not-list", lambda d: d.update(facts={"a": 1}))
    change("duplicate-message-id", lambda d: at(d, msg[:3]).append(copy.deepcopy(at(d, msg))))
    change("deep", lambda d: d["threads"][0]["metadata"].update(x=deep(100_000)))
    change("unknown-section", lambda d: d.update(surprise=[]))
    return out


async def test_imports_are_validated_field_by_field(seeded: caderno.Memory) -> None:
    dump = await seeded.export_resource(resource_id="casa")
    dump["threads"][0]["metadata"] = {}
    await seeded.erase_resource(resource_id="casa")
    for name, bad in mutations(dump):
        before = await snapshot(seeded)
        with pytest.raises(UsageError) as refused:
            await seeded.import_resource(bad)
        assert isinstance(refused.value, CadernoError), name
        assert await snapshot(seeded) == before, name
        assert await seeded.list_threads(resource_id="casa") == [], name
    await seeded.import_resource(dump)  # the unbroken export still goes in
    assert len(await seeded.get_messages(resource_id="casa", thread_id="t")) == 1


async def test_an_import_into_a_resource_holding_only_facts_is_refused(memory: caderno.Memory) -> None:
    dump = caderno.stores.export.new_dump("casa")
    await memory.facts.remember(resource_id="casa", category="home", key="city", value="Curitiba")
    before = await snapshot(memory)
    with pytest.raises(UsageError, match="already holds data"):
        await memory.import_resource(dump)
    assert await snapshot(memory) == before


@pytest.mark.parametrize("version", [10**5000, "v" * 10_000, 2], ids=["5000-digits", "10000-chars", "2"])
def test_an_export_of_another_version_is_refused_without_echoing_it_whole(version: object) -> None:
    """Found by the import fuzzer: a version of 5,000 digits made the refusal itself raise ValueError."""
    from caderno.core.errors import UsageError
    from caderno.memory.engines.dump import check_dump
    from caderno.stores.export import FORMAT

    with pytest.raises(UsageError, match="unsupported export version") as refused:
        check_dump({"format": FORMAT, "version": version})
    assert len(str(refused.value)) < 200
