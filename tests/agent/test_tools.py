"""Tools: schema from the signature, validation before the call."""

from __future__ import annotations

import asyncio

import pytest

from caderno import Tool, tool
from caderno.agent.function_tools import collect_tools
from caderno.core.errors import InvalidToolArguments, UsageError
from caderno.examples.household import BudgetTool


def convert(amount: float, currency: str = "BRL", *, round_to: int | None = None) -> float:
    """Convert an amount.

    Args:
        amount: How much, in the source currency.
        currency: Target currency code,
            three letters.
        round_to: Decimal places.
    """
    return amount


async def slow_echo(text: str) -> str:
    """Echo back, asynchronously."""
    await asyncio.sleep(0)
    return text


def test_schema_is_derived_from_signature_and_docstring() -> None:
    spec = Tool(convert).spec
    assert spec.name == "convert" and spec.description == "Convert an amount."
    params = spec.parameters
    assert params["required"] == ["amount"]
    assert params["properties"]["amount"]["type"] == "number"
    assert params["properties"]["amount"]["description"] == "How much, in the source currency."
    assert params["properties"]["currency"]["description"] == "Target currency code, three letters."
    assert params["properties"]["currency"]["default"] == "BRL"
    assert params["additionalProperties"] is False


async def test_validation_and_sync_async_calls() -> None:
    assert await Tool(convert).run({"amount": "12.5"}) == 12.5
    assert await Tool(slow_echo).run('{"text": "oi"}') == "oi"
    with pytest.raises(InvalidToolArguments, match="amount"):
        await Tool(convert).run({"amount": "muito"})
    with pytest.raises(InvalidToolArguments, match="amount: Field required"):
        await Tool(convert).run({})
    with pytest.raises(InvalidToolArguments, match="not valid JSON"):
        await Tool(convert).run("{amount: 1")
    with pytest.raises(InvalidToolArguments, match="must be a JSON object"):
        await Tool(convert).run([1])
    with pytest.raises(InvalidToolArguments, match="surprise: Extra inputs"):
        await Tool(convert).run({"amount": 1, "surprise": True})


def test_an_instance_contributes_its_marked_methods() -> None:
    tools = collect_tools([BudgetTool(), convert])
    assert [t.name for t in tools] == ["budget_total", "convert"]
    assert tools[0].spec.parameters["properties"]["month"]["description"].startswith("The month as YYYY-MM")


def test_decorator_can_rename_and_duplicates_are_refused() -> None:
    renamed = tool(name="converter", description="Converts.")(convert)
    (t,) = collect_tools([renamed])
    assert (t.name, t.description) == ("converter", "Converts.")
    with pytest.raises(UsageError, match="share the name"):
        collect_tools([convert, convert])
