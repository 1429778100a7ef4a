"""The catalog itself: schemas the validator can enforce, bindings that offer what it says, the table in docs/guides/agents.md."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import AgentChat, Notebook, ScriptedModel
from caderno.agent.task_tools import SCHEDULE
from caderno.core.errors import UsageError
from caderno.tools.base import SCHEMA_KEYWORDS, ToolDef, check_arguments, check_value
from caderno.tools.catalog import CATALOG, offered, table
from caderno.tools.recall import RECALL, RECALL_TOP
from caderno.tools.working_memory import UPDATE_WORKING_MEMORY

ALL: tuple[ToolDef[Any], ...] = (*CATALOG, SCHEDULE)
#: The page that shows the catalog's table (the README's text moved to the docs site).
TOOLS_PAGE = Path(__file__).parents[2] / "docs" / "guides" / "agents.md"


@pytest.mark.parametrize("tool", ALL, ids=lambda t: t.name)
def test_each_schema_is_one_the_validator_enforces(tool: ToolDef[Any]) -> None:
    schema = tool.parameters
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema.get("required", ())) <= set(schema["properties"])
    for arg, prop in schema["properties"].items():
        assert set(prop) <= SCHEMA_KEYWORDS, (arg, sorted(set(prop) - SCHEMA_KEYWORDS))
        if "default" in prop:
            assert check_value(arg, prop, prop["default"]) == prop["default"]
    assert tool.offered and (tool.why == "") == (len(tool.offered) == 3), tool.name
    assert len(tool.description) > 40


def test_names_are_unique() -> None:
    names = [t.name for t in ALL]
    assert len(names) == len(set(names))


def test_the_validator_reads_the_schema() -> None:
    parse = UPDATE_WORKING_MEMORY.parse
    assert parse({"patch": {"a": 1}}).expected_version is None
    assert parse('{"patch": {"a": 1}, "expected_version": null}').patch == {"a": 1}
    assert parse({"patch": '{"a": [1]}'}).patch == {"a": [1]}  # an object sent as its JSON text
    assert RECALL.parse({"query": "x"}).top == RECALL_TOP  # the schema's default
    for arguments, sentence in [
        ({"patch": {}, "expected_version": True}, "'expected_version' must be an integer, not a boolean"),
        ({"patch": {}, "expected_version": 1.0}, "'expected_version' must be an integer, not a number"),
        ("", "update_working_memory needs 'patch'"),
        ("null", "the arguments must be a JSON object, not null"),
    ]:
        with pytest.raises(UsageError) as refused:
            parse(arguments)
        assert str(refused.value).startswith(sentence), str(refused.value)
    with pytest.raises(UsageError, match="'query' is empty"):
        RECALL.parse({"query": " \n"})


def test_check_arguments_fills_what_was_not_sent() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 3}}}
    assert check_arguments("t", schema, {}) == {"a": None, "b": 3}


async def test_each_interface_offers_what_the_catalog_says(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("agents")
    from mcp import Client

    from caderno.integrations.mcp import build_server, stdio_pick
    from caderno.integrations.openai_agents import memory_tools

    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}", embedder=None) as memory:
        chat = AgentChat(
            model=ScriptedModel(), memory=memory, notebook=Notebook(tmp_path / "nb"), schedule_tool=True
        )
        assert [s.name for s in chat.tool_specs] == [t.name for t in (*offered("agent"), SCHEDULE)]
        async with Client(build_server(memory, stdio_pick("casa"))) as client:
            listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == [t.name for t in offered("mcp")]
        for served, tool in zip(listed, offered("mcp"), strict=True):
            assert served.description == tool.description
            assert {k: v for k, v in served.input_schema["properties"].items() if k != "resource"} == (
                tool.parameters["properties"]
            )
            assert bool(served.annotations and served.annotations.read_only_hint) == (tool.effect == "read")
            assert bool(served.annotations and served.annotations.destructive_hint) == (tool.effect == "delete")
        sdk = memory_tools(memory, "casa", notebook=tmp_path)
        assert [t.name for t in sdk] == [t.name for t in offered("openai-agents")]


@pytest.mark.parametrize("tool", ALL, ids=lambda t: t.name)
def test_strict_means_the_sdk_takes_the_schema_as_it_is(tool: ToolDef[Any]) -> None:
    """``strict`` is true exactly when the SDK's strict conversion would not change what the tool accepts."""
    pytest.importorskip("agents")
    from agents.exceptions import UserError
    from agents.strict_schema import ensure_strict_json_schema

    schema = copy.deepcopy(tool.parameters)  # the conversion edits its argument
    try:
        converted = ensure_strict_json_schema(schema)
    except UserError:  # a free-form object (the patch): no strict form at all
        converted = None
    as_is = {"required": [], **tool.parameters}  # no arguments: strict mode spells out "required": []
    assert (converted == as_is) is tool.strict


def test_the_docs_show_the_catalog() -> None:
    assert table(ALL) in TOOLS_PAGE.read_text()
