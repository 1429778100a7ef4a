"""Working memory: merge patch, CAS, validation, audit — on every backend."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

import caderno
from caderno.core.errors import Conflict, InvalidPatch

R = "casa-gabriel"


@pytest.mark.core
async def test_merge_patch_semantics(memory: caderno.Memory) -> None:
    assert await memory.get_working_memory(resource_id=R) is None
    s1 = await memory.update_working_memory(
        resource_id=R, patch={"members": ["Gabriel", "esposa"], "income": 14000, "prefs": {"currency": "BRL", "x": 1}}
    )
    assert s1.version == 1
    s2 = await memory.update_working_memory(resource_id=R, patch={"members": ["Gabriel"], "prefs": {"x": None}})
    assert s2.version == 2
    assert await memory.get_working_memory(resource_id=R) == {
        "members": ["Gabriel"],
        "income": 14000,
        "prefs": {"currency": "BRL"},
    }


@pytest.mark.core
async def test_compare_and_swap(memory: caderno.Memory) -> None:
    await memory.update_working_memory(resource_id=R, patch={"a": 1}, expected_version=0)
    with pytest.raises(Conflict) as exc:
        await memory.update_working_memory(resource_id=R, patch={"a": 2}, expected_version=0)
    assert exc.value.expected == 0 and exc.value.actual == 1
    assert await memory.get_working_memory(resource_id=R) == {"a": 1}
    state = await memory.update_working_memory(resource_id=R, patch={"a": 3}, expected_version=1)
    assert state.version == 2 and state.data == {"a": 3}


@pytest.mark.core
@pytest.mark.parametrize("bad", [[1, 2], "not json", "[]", 42, None, {"x": {1, 2}}])
async def test_patch_that_is_not_an_object_is_refused(memory: caderno.Memory, bad: object) -> None:
    await memory.update_working_memory(resource_id=R, patch={"keep": True})
    with pytest.raises(InvalidPatch) as exc:
        await memory.update_working_memory(resource_id=R, patch=bad)  # type: ignore[arg-type]
    assert "JSON" in str(exc.value)
    state = await memory.working_memory.state(resource_id=R)
    assert state and state.data == {"keep": True} and state.version == 1


@pytest.mark.core
async def test_concurrent_patches_of_different_keys_all_land(memory: caderno.Memory) -> None:
    await asyncio.gather(*(memory.update_working_memory(resource_id=R, patch={f"k{i}": i}) for i in range(30)))
    state = await memory.working_memory.state(resource_id=R)
    assert state and state.version == 30 and state.data == {f"k{i}": i for i in range(30)}


class Household(BaseModel):
    members: list[str] = []
    monthlyIncomeBRL: int | None = None


async def test_schema_validation_writes_nothing_on_failure(db_url: str) -> None:
    for schema in (Household, {"type": "object", "properties": {"monthlyIncomeBRL": {"type": "integer"}}}):
        async with caderno.connect(db_url, working_memory_schema=schema) as memory:
            rid = f"r-{type(schema).__name__}"
            await memory.update_working_memory(resource_id=rid, patch={"monthlyIncomeBRL": 14000})
            with pytest.raises(InvalidPatch) as exc:
                await memory.update_working_memory(resource_id=rid, patch={"monthlyIncomeBRL": "muito"})
            assert "monthlyIncomeBRL" in str(exc.value)
            state = await memory.working_memory.state(resource_id=rid)
            assert state and state.version == 1 and state.data == {"monthlyIncomeBRL": 14000}
            dump = await memory.export_resource(resource_id=rid)
            assert len(dump["working_memory_log"]) == 1


@pytest.mark.core
async def test_every_patch_is_logged(memory: caderno.Memory) -> None:
    await memory.update_working_memory(resource_id=R, patch={"a": 1}, source="tool")
    await memory.update_working_memory(resource_id=R, patch={"a": None, "b": [1]}, source="cli")
    log = (await memory.export_resource(resource_id=R))["working_memory_log"]
    assert [(e["version"], e["patch"], e["source"]) for e in log] == [
        (1, {"a": 1}, "tool"),
        (2, {"a": None, "b": [1]}, "cli"),
    ]
    assert all(e["created_at"] for e in log)


@pytest.mark.core
async def test_working_memory_is_per_resource(memory: caderno.Memory) -> None:
    await memory.update_working_memory(resource_id="a", patch={"who": "a"})
    assert await memory.get_working_memory(resource_id="b") is None
