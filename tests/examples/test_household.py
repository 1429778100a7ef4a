"""The household example: its working-memory shape, the goal tools, and the model's use of them."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import ValidationError

from caderno.agent.function_tools import collect_tools
from caderno.core.errors import UsageError
from caderno.core.messages import Message
from caderno.examples.household import (
    DEFAULT_SAVINGS_RATE,
    Goal,
    GoalChange,
    GoalTool,
    HouseholdModel,
    WorkingMemory,
    change_goals,
    evaluate,
    household_income,
)

AMSTERDAM = {"name": "Amsterdam", "target": "EUR 6000", "deadline": "2026-09-01", "savedInTarget": "EUR 500"}


def test_working_memory_shape() -> None:
    WorkingMemory.model_validate({"members": [{"name": "Gabriel"}, {"name": "esposa"}]})
    WorkingMemory.model_validate({"members": ["Gabriel", "esposa"]})  # older memories still read
    wm = WorkingMemory.model_validate({"activeGoals": [AMSTERDAM], "savingsRate": 0.3, "eurToBrl": 6.2})
    assert wm.activeGoals[0].deadline == "2026-09-01"  # stored as the string
    for bad in ("2026-9-1", "01/09/2026", "2026-02-30", "20260901"):
        with pytest.raises(ValidationError, match="deadline"):
            WorkingMemory.model_validate({"activeGoals": [{**AMSTERDAM, "deadline": bad}]})
    with pytest.raises(ValidationError):
        WorkingMemory.model_validate({"savingsRate": 1.5})
    assert WorkingMemory.model_json_schema()["$defs"]["Goal"]["properties"]["deadline"]["format"] == "date"


def test_change_goals_lists_adds_and_updates() -> None:
    goals = [Goal(**AMSTERDAM)]
    added = change_goals(goals, "add", GoalChange(name="Carro", target="BRL 20000", deadline="2026-07-01"))
    assert [g.name for g in added] == ["Amsterdam", "Carro"] and [g.name for g in goals] == ["Amsterdam"]
    assert [g.name for g in change_goals(added, "list")] == ["Carro", "Amsterdam"]  # by deadline
    updated = change_goals(added, "update", GoalChange(name="amsterdam", savedInTarget="EUR 900"))
    assert updated[0].savedInTarget == "EUR 900" and updated[0].target == "EUR 6000"
    with pytest.raises(UsageError, match="already a goal"):
        change_goals(goals, "add", GoalChange(name="AMSTERDAM", target="EUR 1", deadline="2027-01-01"))
    with pytest.raises(UsageError, match="needs a target"):
        change_goals(goals, "add", GoalChange(name="Lisboa"))
    with pytest.raises(UsageError, match="no goal named 'Lisboa' \\(goals: Amsterdam\\)"):
        change_goals(goals, "update", GoalChange(name="Lisboa", target="EUR 1"))


async def test_goal_tool_returns_the_patch_for_update_working_memory() -> None:
    tools = {t.name: t for t in collect_tools([GoalTool()])}
    assert set(tools) == {"goals", "evaluate_goal"}
    out = await tools["goals"].run({"action": "add", "goals": [], "goal": AMSTERDAM})
    assert out["patch"] == {"activeGoals": [AMSTERDAM]} and "update_working_memory" in out["next"]
    WorkingMemory.model_validate(out["patch"])  # the patch fits the schema it will be checked against
    listed = await tools["goals"].run({"action": "list", "goals": [AMSTERDAM]})
    assert listed == {"goals": [AMSTERDAM]}
    with pytest.raises(UsageError):
        await tools["goals"].run({"action": "update", "goals": [], "goal": {"name": "X", "target": "EUR 1"}})


def test_evaluate_amsterdam_does_not_fit_the_savings() -> None:
    f = evaluate(AMSTERDAM, date(2026, 6, 17), monthly_income_brl=14000, savings_rate=0.3, eur_to_brl=6.2)
    assert (f.remaining, f.remaining_brl, f.months_left) == (5500, 34100, 2)
    assert (f.monthly_needed_brl, f.monthly_capacity_brl, f.fits) == (17050, 4200, False)
    assert (f.months_needed, f.reachable_by) == (9, "2027-03")
    # today is an argument, never a clock: a year earlier it fits.
    early = evaluate(AMSTERDAM, "2025-06-17", monthly_income_brl=14000, savings_rate=0.3, eur_to_brl=6.2)
    assert early.months_left == 14 and early.fits and early.monthly_needed_brl == round(34100 / 14, 2)


def test_evaluate_edges() -> None:
    brl = {"name": "Carro", "target": "BRL 20.000", "deadline": "2026-12-01"}
    f = evaluate(brl, "2026-06-01", monthly_income_brl=14000)
    assert f.savings_rate == DEFAULT_SAVINGS_RATE and f.savings_rate_assumed and f.months_left == 6
    assert f.fits is False and f.monthly_needed_brl == round(20000 / 6, 2)
    reached = evaluate({**brl, "savedInTarget": "BRL 20000"}, "2026-06-01", monthly_income_brl=0, savings_rate=0.1)
    assert reached.fits and reached.remaining == 0
    past = evaluate(brl, "2027-01-01", monthly_income_brl=1e6, savings_rate=1)
    assert past.months_left == 0 and not past.fits
    with pytest.raises(UsageError, match="eur_to_brl"):
        evaluate(AMSTERDAM, "2026-06-17", monthly_income_brl=14000)
    with pytest.raises(UsageError, match="cannot read the amount"):
        evaluate({**brl, "target": "vinte mil"}, "2026-06-01", monthly_income_brl=1)
    with pytest.raises(UsageError, match="today"):
        evaluate(brl, "17/06/2026", monthly_income_brl=1)


def test_household_income() -> None:
    assert household_income({"monthlyIncomeBRL": 14000}) == 14000
    assert (
        household_income(
            {"members": [{"name": "a", "monthlyIncomeBRL": 9000}, {"name": "b", "monthlyIncomeBRL": 5000}]}
        )
        == 14000
    )
    assert household_income({"members": ["a"]}) is None and household_income(None) is None


def _prompt(wm: str | None, text: str, today: str = "2026-06-17") -> list[Message]:
    msgs = [Message.system(f"Você é o assistente. Hoje é {today}.")]
    if wm is not None:
        msgs.append(Message.system(f"WORKING MEMORY (version 1):\n```json\n{wm}\n```"))
    return [*msgs, Message.user(text)]


async def test_model_evaluates_from_what_it_received() -> None:
    import json

    wm = json.dumps({"activeGoals": [AMSTERDAM], "monthlyIncomeBRL": 14000, "savingsRate": 0.3, "eurToBrl": 6.2})
    reply = await HouseholdModel().complete(_prompt(wm, "dá para chegar em Amsterdam?"), [])
    (call,) = reply.tool_calls
    assert call.name == "evaluate_goal" and call.arguments["today"] == "2026-06-17"
    assert call.arguments["goal"] == AMSTERDAM and call.arguments["eur_to_brl"] == 6.2
    missing = await HouseholdModel().complete(_prompt(None, "dá para chegar em Amsterdam?"), [])
    assert "Não tenho nenhuma meta de Amsterdam anotada" in missing.content
