"""The API's responses that are a record as it is are built from the record (``schemas.from_record``).

A field added to ``ScheduledTask`` (or ``Fact``, ``ApiKey``, ``Thread``) is in
the OpenAPI document without writing it twice; the TypeScript client's test
(``clients/typescript``, ``openapi.test.ts``) holds the document itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import caderno
from caderno.core.messages import Thread
from caderno.core.records import ApiKey, Fact, ScheduledTask
from caderno.memory.adapters.connect import open_store
from caderno.server import schemas as s

PAIRS = [(s.ThreadOut, Thread), (s.FactOut, Fact), (s.TaskOut, ScheduledTask), (s.ApiKeyOut, ApiKey)]


@pytest.mark.parametrize(("schema", "record"), PAIRS, ids=lambda x: x.__name__)
def test_the_schema_has_the_record_fields_in_order(schema: Any, record: Any) -> None:
    fields = dataclasses.fields(record)
    assert list(schema.model_fields) == [f.name for f in fields]
    required = {f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert {name for name, info in schema.model_fields.items() if info.is_required()} == required


def test_a_field_added_to_a_record_is_in_its_schema() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown:
        id: str
        tags: tuple[str, ...] = ()
        notes: list[str] = dataclasses.field(default_factory=list)

    @s.from_record(Grown)
    class GrownOut(s.BaseModel):
        """A grown record."""

    assert GrownOut.__name__ == "GrownOut" and GrownOut.__doc__ == "A grown record."
    out = GrownOut.model_validate(Grown(id="a", tags=("x",)), from_attributes=True)
    assert out.model_dump() == {"id": "a", "tags": ("x",), "notes": []}


def test_the_openapi_document_names_them_as_before() -> None:
    from caderno.server import create_app
    from caderno.server.routes import default_routers

    app = create_app(
        caderno.Memory(open_store("memory://"), embedder=None), background=False, routers=default_routers()
    )
    components = app.openapi()["components"]["schemas"]
    task = components["TaskOut"]
    assert list(task["properties"]) == [f.name for f in dataclasses.fields(ScheduledTask)]
    assert task["required"] == [
        "id", "resource_id", "name", "cron_expr", "original_schedule", "prompt", "source", "is_oneshot"
    ]  # fmt: skip
    assert task["properties"]["is_trusted"] == {"type": "boolean", "title": "Is Trusted", "default": False}
    assert components["ApiKeyOut"]["description"] == "A key's record (never its token)."
    assert components["ApiKeyOut"]["properties"]["resources"] == {
        "items": {"type": "string"},
        "type": "array",
        "title": "Resources",
    }
