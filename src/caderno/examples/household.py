"""The household example: a couple's budget, income and savings goals.

* ``WorkingMemory`` — the shape of the couple's working memory (members as
  ``{"name": ...}``, income, savings rate, euro rate, goals with ISO
  deadlines);
* ``BudgetTool`` — ``budget_total(month)`` over a small ledger;
* ``GoalTool`` — ``goals(action, goals, goal)`` lists, adds or updates a goal
  and returns the merge patch for ``update_working_memory``;
  ``evaluate_goal(...)`` runs ``evaluate``: months left, the monthly saving
  needed, and whether it fits the income;
* ``HouseholdModel`` — a small deterministic model for the demo. It reads
  only what it receives: the user's words and the working-memory block in
  its prompt. Take the working memory away and its answer changes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from ..agent.chat import RECALL_HEADER, WM_HEADER
from ..agent.function_tools import ToolSpec, tool
from ..core.errors import UsageError
from ..core.messages import Message, ToolCall

__all__ = [
    "DEFAULT_SAVINGS_RATE",
    "BudgetTool",
    "Feasibility",
    "Goal",
    "GoalChange",
    "GoalTool",
    "HouseholdModel",
    "Member",
    "WorkingMemory",
    "change_goals",
    "evaluate",
    "household_income",
    "read_working_memory",
]


def _iso_date(value: str) -> str:
    """'2026-09-01' stays as written; anything else (or 2026-02-30) is refused."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError(f"{value!r} is not an ISO date (yyyy-mm-dd)")
    date.fromisoformat(value)  # raises on 2026-02-30
    return value


# Validated as a date, stored as the string it was written as: working memory
# keeps the JSON the model sent (see caderno.memory.parts.working_memory.make_validator).
IsoDate = Annotated[str, AfterValidator(_iso_date), Field(json_schema_extra={"format": "date"})]


class Member(BaseModel):
    """A person of the household."""

    name: str
    monthlyIncomeBRL: float | None = Field(default=None, ge=0, description="This person's monthly income, if known.")


class Goal(BaseModel):
    """A savings goal."""

    name: str
    target: str = Field(description="Amount with currency, e.g. 'EUR 6000' or 'BRL 20000'.")
    deadline: IsoDate = Field(description="ISO date, e.g. '2026-09-01'.")
    savedInTarget: str | None = Field(default=None, description="Saved so far, in the target's currency.")


class GoalChange(BaseModel):
    """A goal to add (every field but savedInTarget), or the fields of one to update (by name)."""

    name: str
    target: str | None = None
    deadline: IsoDate | None = None
    savedInTarget: str | None = None


class WorkingMemory(BaseModel):
    """What the agent keeps about the household between conversations."""

    # A bare name is still read: working memories written before members
    # became objects hold ["Gabriel", "esposa"].
    members: list[Member | str] = []
    currencyPreferred: str | None = None
    monthlyIncomeBRL: float | None = Field(default=None, ge=0, description="The household's monthly income.")
    savingsRate: float | None = Field(
        default=None, gt=0, le=1, description="Share of the income the household can save each month, e.g. 0.3."
    )
    eurToBrl: float | None = Field(default=None, gt=0, description="Reais per euro, for goals in euros, e.g. 6.2.")
    activeGoals: list[Goal] = []


DEFAULT_LEDGER: dict[str, list[tuple[str, float]]] = {
    "2026-05": [("aluguel", 4200.0), ("mercado", 1850.4), ("transporte", 610.0)],
    "2026-06": [("aluguel", 4200.0), ("mercado", 1732.9), ("transporte", 655.5), ("farmácia", 189.9)],
}


class BudgetTool:
    """The couple's ledger, offered to the model as tools."""

    def __init__(self, ledger: dict[str, list[tuple[str, float]]] | None = None) -> None:
        self.ledger = DEFAULT_LEDGER if ledger is None else ledger

    @tool
    def budget_total(self, month: str) -> dict[str, Any]:
        """Total household spending in a month, with the amount per category.

        Args:
            month: The month as YYYY-MM, e.g. "2026-06".
        """
        if not re.fullmatch(r"\d{4}-\d{2}", month):
            raise ValueError(f"month must look like YYYY-MM, got {month!r}")
        items = self.ledger.get(month, [])
        return {
            "month": month,
            "currency": "BRL",
            "total": round(sum(v for _, v in items), 2),
            "by_category": {k: v for k, v in items},
        }


# -- goals: changed through working memory, weighed against the income -------------

DEFAULT_SAVINGS_RATE = 0.2
"""Share of income assumed saveable when the household has not said: the "20" of the 50/30/20 budgeting rule."""


def change_goals(goals: list[Goal], action: str, goal: GoalChange | None = None) -> list[Goal]:
    """The goals list after listing, adding or updating one (the input is not changed).

    Args:
        goals: the current goals.
        action: "list" (sorted by deadline), "add" or "update" (by name, case-insensitive).
        goal: the goal to add, or the name and changed fields of the one to update.

    Raises:
        UsageError: a missing or duplicate goal, or an add without target or deadline.
    """
    by_name = {g.name.casefold(): i for i, g in enumerate(goals)}
    if action == "list":
        return sorted(goals, key=lambda g: g.deadline)
    if goal is None:
        raise UsageError(f"'{action}' needs the goal")
    found = by_name.get(goal.name.casefold())
    if action == "add":
        if found is not None:
            raise UsageError(f"there is already a goal named {goals[found].name!r}; use action 'update'")
        if goal.target is None or goal.deadline is None:
            raise UsageError("a new goal needs a target (e.g. 'EUR 6000') and a deadline (yyyy-mm-dd)")
        return [*goals, Goal.model_validate(goal.model_dump(exclude_none=True))]
    if action == "update":
        if found is None:
            names = ", ".join(g.name for g in goals) or "none"
            raise UsageError(f"no goal named {goal.name!r} (goals: {names})")
        changed = goals[found].model_copy(update=goal.model_dump(exclude_none=True, exclude={"name"}))
        return [changed if i == found else g for i, g in enumerate(goals)]
    raise UsageError(f"unknown action {action!r}; use list, add or update")


@dataclass(frozen=True, kw_only=True, slots=True)
class Feasibility:
    """Whether a goal fits the household's savings, as ``evaluate`` computed it."""

    goal: str
    """The goal's name."""
    today: str
    """The day the evaluation was made for (yyyy-mm-dd)."""
    deadline: str
    """The goal's deadline (yyyy-mm-dd)."""
    currency: str
    """The target's currency, "EUR" or "BRL"."""
    remaining: float
    """Still to save, in the target's currency (0 when reached)."""
    remaining_brl: float
    """The same in reais."""
    months_left: int
    """Whole calendar months from today to the deadline (0 when under a month or past)."""
    monthly_needed_brl: float
    """What must be saved each month: ``remaining_brl`` over ``max(months_left, 1)``."""
    monthly_capacity_brl: float
    """What the household can save a month: income times savings rate."""
    savings_rate: float
    """The rate used."""
    savings_rate_assumed: bool
    """True when the household gave no rate and ``DEFAULT_SAVINGS_RATE`` was used."""
    fits: bool
    """True when the goal is reached, or the deadline is ahead and the monthly need fits the capacity."""
    months_needed: int | None
    """Months of saving at capacity to reach the goal (``None`` when nothing can be saved)."""
    reachable_by: str | None
    """The month (yyyy-mm) the goal is reached at capacity, from today."""


def evaluate(
    goal: Goal | Mapping[str, Any],
    today: date | str,
    *,
    monthly_income_brl: float,
    savings_rate: float | None = None,
    eur_to_brl: float | None = None,
) -> Feasibility:
    """Months left, the monthly saving a goal needs, and whether it fits the income.

    ``today`` is an argument, never read from a clock. A goal in euros is
    converted with ``eur_to_brl`` (kept in working memory as ``eurToBrl``).

    Raises:
        UsageError: a goal in euros without a rate, an amount that cannot be read, or a bad rate.
    """
    goal = goal if isinstance(goal, Goal) else Goal.model_validate(dict(goal))
    try:
        day = date.fromisoformat(_iso_date(today)) if isinstance(today, str) else today
    except ValueError as exc:
        raise UsageError(f"today: {exc}") from None
    deadline = date.fromisoformat(goal.deadline)
    currency, target = _amount(goal.target)
    saved_currency, saved = _amount(goal.savedInTarget) if goal.savedInTarget else (currency, 0.0)
    if saved_currency != currency:
        raise UsageError(f"goal {goal.name!r}: savedInTarget is in {saved_currency}, the target in {currency}")
    if currency == "EUR" and not eur_to_brl:
        raise UsageError(f"goal {goal.name!r} is in euros: give eur_to_brl (reais per euro)")
    rate = 1.0 if currency == "BRL" else float(eur_to_brl or 0)
    share = DEFAULT_SAVINGS_RATE if savings_rate is None else savings_rate
    if not 0 < share <= 1 or monthly_income_brl < 0:
        raise UsageError("savings_rate must be in (0, 1] and the income not negative")
    remaining = max(0.0, target - saved)
    months_left = max(0, (deadline.year - day.year) * 12 + deadline.month - day.month - (deadline.day < day.day))
    needed = remaining * rate / max(months_left, 1)
    capacity = monthly_income_brl * share
    months_needed = math.ceil(remaining * rate / capacity - 1e-9) if capacity > 0 else None
    return Feasibility(
        goal=goal.name,
        today=day.isoformat(),
        deadline=goal.deadline,
        currency=currency,
        remaining=round(remaining, 2),
        remaining_brl=round(remaining * rate, 2),
        months_left=months_left,
        monthly_needed_brl=round(needed, 2),
        monthly_capacity_brl=round(capacity, 2),
        savings_rate=share,
        savings_rate_assumed=savings_rate is None,
        fits=remaining == 0 or (deadline >= day and needed <= capacity + 0.005),
        months_needed=months_needed,
        reachable_by=_add_months(day, months_needed) if months_needed is not None else None,
    )


def household_income(working_memory: Mapping[str, Any] | None) -> float | None:
    """The household's monthly income: ``monthlyIncomeBRL``, else the sum of the members' incomes."""
    wm = working_memory or {}
    if wm.get("monthlyIncomeBRL") is not None:
        return float(wm["monthlyIncomeBRL"])
    incomes = [
        m["monthlyIncomeBRL"] for m in wm.get("members", []) if isinstance(m, dict) and m.get("monthlyIncomeBRL")
    ]
    return float(sum(incomes)) if incomes else None


class GoalTool:
    """Savings goals as tools: ``goals`` changes the list, ``evaluate_goal`` weighs one.

    Both see only their arguments: the model copies the goals, income and
    rates from the working-memory block it received. ``goals`` stores
    nothing; it returns the merge patch to apply with
    ``update_working_memory``, so every change to working memory still goes
    through that one validated, transactional path.
    """

    @tool
    def goals(
        self, action: Literal["list", "add", "update"], goals: list[Goal], goal: GoalChange | None = None
    ) -> dict[str, Any]:
        """List, add or update a savings goal. Nothing is stored: apply the returned patch with update_working_memory.

        Args:
            action: "list", "add" or "update".
            goals: The current activeGoals, copied from the working memory ([] if none).
            goal: For add, the new goal; for update, its name and only the fields that change.
        """
        changed = [g.model_dump(exclude_none=True) for g in change_goals(goals, action, goal)]
        if action == "list":
            return {"goals": changed}
        return {"goals": changed, "patch": {"activeGoals": changed}, "next": "apply patch with update_working_memory"}

    @tool
    def evaluate_goal(
        self,
        goal: Goal,
        today: str,
        monthly_income_brl: float,
        savings_rate: float | None = None,
        eur_to_brl: float | None = None,
    ) -> dict[str, Any]:
        """Whether a savings goal fits: months left, saving needed per month, and what the income allows.

        Args:
            goal: The goal, copied from the working memory.
            today: Today's date, yyyy-mm-dd.
            monthly_income_brl: The household's monthly income in reais.
            savings_rate: Share of the income they can save (savingsRate), e.g. 0.3; 0.2 if unknown.
            eur_to_brl: Reais per euro (eurToBrl), needed for goals in euros.
        """
        result = evaluate(
            goal, today, monthly_income_brl=monthly_income_brl, savings_rate=savings_rate, eur_to_brl=eur_to_brl
        )
        return asdict(result)


def _amount(text: str) -> tuple[str, float]:
    """'EUR 6000' / 'EUR 6.000' / 'R$ 20.000' / 'BRL 1500,50' -> (currency, amount)."""
    found = re.fullmatch(r"\s*(EUR|€|BRL|R\$)\s*([\d.,]+)\s*", text, re.I)
    if not found:
        raise UsageError(f"cannot read the amount {text!r}; write it like 'EUR 6000' or 'BRL 20000'")
    currency = "EUR" if found.group(1).upper() in ("EUR", "€") else "BRL"
    return currency, float(_number(found.group(2)))


def _add_months(day: date, months: int) -> str:
    index = day.year * 12 + day.month - 1 + months
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def read_working_memory(messages: list[Message]) -> dict[str, Any] | None:
    """The working memory as shown in a prompt's system block, or None."""
    for m in messages:
        if m.role == "system" and m.content.startswith(WM_HEADER):
            found = re.search(r"```json\n(.*?)\n```", m.content, re.S)
            return json.loads(found.group(1)) if found else None
    return None


def _number(text: str) -> float:
    """'14.000' or '14,000.50' or '6.000' (Brazilian thousands) or '6,20' (decimal comma) -> float."""
    text = text.strip()
    if re.fullmatch(r"\d{1,3}(\.\d{3})+(,\d+)?|\d+,\d{1,2}", text):
        text = text.replace(".", "").replace(",", ".")
    else:
        text = text.replace(",", "")
    value = float(text)
    return int(value) if value.is_integer() else value


def _brl(value: float) -> str:
    return f"R$ {value:,.2f}".replace(",", "X").replace(".", ",").replace("X", ".")


class HouseholdModel:
    """A deterministic stand-in for an LLM, for the demo (Portuguese replies)."""

    def __init__(self) -> None:
        self.requests: list[list[Message]] = []

    async def complete(self, messages: list[Message], tools: list[ToolSpec]) -> Message:
        self.requests.append(list(messages))
        last = messages[-1]
        if last.role == "tool":
            return self._after_tool(last)
        text = last.content
        n = len(self.requests)
        month = re.search(r"\b(20\d\d-\d\d)\b", text)
        if month and re.search(r"gast", text, re.I):
            return Message.assistant(
                tool_calls=[ToolCall(id=f"call_{n}", name="budget_total", arguments={"month": month.group(1)})]
            )
        patch, goal = self._patch_from(text)
        if patch or goal:
            calls = []
            if patch:
                calls.append(ToolCall(id=f"call_{n}", name="update_working_memory", arguments={"patch": patch}))
            if goal:
                # The goal goes through the goals tool, which returns the patch to apply (see _after_tool).
                current = (read_working_memory(messages) or {}).get("activeGoals", [])
                args = {"action": "add", "goals": current, "goal": goal}
                calls.append(ToolCall(id=f"call_{n}_goal", name="goals", arguments=args))
            return Message.assistant(tool_calls=calls)
        trip = re.search(
            r"(?:d[áa] (?:para|pra)|conseguimos|vamos conseguir) (?:chegar|ir|viajar)(?: em| a| ao| para| pra)? "
            r"([A-ZÀ-Ú][\wÀ-ú]+)",
            text,
        )
        if trip:
            return self._feasibility(trip.group(1), messages, n)
        asked = re.search(r"meta (?:de |do |da |para )?([A-ZÀ-Ú][\wÀ-ú]+)", text)
        if asked:
            return Message.assistant(self._about_goal(asked.group(1), read_working_memory(messages)))
        if re.search(r"gast", text, re.I):
            return Message.assistant(self._from_recall(messages))
        return Message.assistant("Não entendi. Pode me contar de outro jeito?")

    def _patch_from(self, text: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A working-memory patch from what the couple said, and a goal to add, if any."""
        patch: dict[str, Any] = {}
        income = re.search(r"(?:ganhamos|renda|recebemos)[^R]*R\$\s*([\d.,]+)", text, re.I)
        if income:
            patch["monthlyIncomeBRL"] = _number(income.group(1))
            patch["currencyPreferred"] = "BRL"
        members = re.search(r"[Ss]omos (?:o |a )?(\w+) e (?:a |o |minha |meu )?(\w+)", text)
        if members:
            patch["members"] = [{"name": members.group(1)}, {"name": members.group(2)}]
        euro = re.search(r"euro (?:está|esta|custa|vale)(?: a| em)? R\$\s*(\d+(?:,\d+)?)", text, re.I)
        if euro:
            patch["eurToBrl"] = _number(euro.group(1))
        share = re.search(r"(\d{1,3})\s*% da renda", text)
        if share:
            patch["savingsRate"] = int(share.group(1)) / 100
        found = re.search(r"para (?:a |o )?([A-ZÀ-Ú][\wÀ-ú]+)[^E]*EUR\s*([\d.,]+)[^\d]*(\d{4}-\d{2}-\d{2})", text)
        goal = None
        if found:
            saved = re.search(r"guardamos EUR\s*([\d.,]+)", text, re.I)
            goal = {
                "name": found.group(1),
                "target": f"EUR {_number(found.group(2))}",
                "deadline": found.group(3),
                "savedInTarget": f"EUR {_number(saved.group(1))}" if saved else "EUR 0",
            }
        return patch, goal

    def _feasibility(self, name: str, messages: list[Message], n: int) -> Message:
        """Call evaluate_goal with what the prompt holds: the goal, the income and rates, today's date."""
        wm = read_working_memory(messages) or {}
        goal = next((g for g in wm.get("activeGoals", []) if g.get("name", "").lower() == name.lower()), None)
        if goal is None:
            return Message.assistant(f"Não tenho nenhuma meta de {name} anotada. Quer me contar os detalhes?")
        income = household_income(wm)
        if income is None:
            return Message.assistant("Para saber se dá, preciso da renda de vocês. Quanto ganham por mês?")
        today = next((m for m in (re.search(r"Hoje é (\d{4}-\d{2}-\d{2})", x.content) for x in messages) if m), None)
        if today is None:
            return Message.assistant("Que dia é hoje? Preciso da data para contar os meses até o prazo.")
        args = {
            "goal": goal,
            "today": today.group(1),
            "monthly_income_brl": income,
            "savings_rate": wm.get("savingsRate"),
            "eur_to_brl": wm.get("eurToBrl"),
        }
        return Message.assistant(tool_calls=[ToolCall(id=f"call_{n}", name="evaluate_goal", arguments=args)])

    def _after_tool(self, result: Message) -> Message:
        try:
            data = json.loads(result.content)
        except json.JSONDecodeError:
            return Message.assistant(f"Não consegui usar a ferramenta: {result.content}")
        if result.name == "budget_total":
            parts = ", ".join(f"{k} {_brl(v)}" for k, v in data["by_category"].items())
            return Message.assistant(f"Em {data['month']} vocês gastaram {_brl(data['total'])} ({parts}).")
        if result.name == "goals":
            call = ToolCall(
                id=f"{result.tool_call_id}_wm", name="update_working_memory", arguments={"patch": data["patch"]}
            )
            return Message.assistant(tool_calls=[call])
        if result.name == "evaluate_goal":
            return Message.assistant(_feasibility_answer(data))
        wm = data.get("working_memory") or {}
        goals = ", ".join(f"{g['name']} ({g['target']} até {g['deadline']})" for g in wm.get("activeGoals", []))
        income = wm.get("monthlyIncomeBRL")
        extra = []
        if wm.get("eurToBrl"):
            extra.append(f"Câmbio: {_brl(wm['eurToBrl'])} por euro.")
        if wm.get("savingsRate"):
            extra.append(f"Poupança: {wm['savingsRate']:.0%} da renda.")
        said = [f"Renda de {_brl(income)} por mês." if income else "", f"Metas: {goals}." if goals else "", *extra]
        return Message.assistant(" ".join(["Anotado!", *(x for x in said if x)]))

    def _from_recall(self, messages: list[Message]) -> str:
        """Answer a spending question from the "Remembered from earlier conversations" block."""
        block = next((m.content for m in messages if m.role == "system" and m.content.startswith(RECALL_HEADER)), "")
        for line in block.splitlines():
            found = re.search(r"\[(\d{4}-\d{2}-\d{2}), thread '([^']+)'\] assistant: (.*gastaram.*)", line)
            if found:
                return f"Pelo que conversamos em {found.group(1)} (conversa '{found.group(2)}'): {found.group(3)}"
        return "Não encontrei esse gasto nas nossas conversas anteriores."

    def _about_goal(self, name: str, wm: dict[str, Any] | None) -> str:
        goals = (wm or {}).get("activeGoals") or []
        goal = next((g for g in goals if g.get("name", "").lower() == name.lower()), None)
        if goal is None:
            return f"Não tenho nenhuma meta de {name} anotada. Quer me contar os detalhes?"
        answer = f"Lembro sim! A meta {goal['name']} é juntar {goal['target']} até {goal['deadline']}"
        if goal.get("savedInTarget"):
            answer += f"; vocês já guardaram {goal['savedInTarget']}"
        income = (wm or {}).get("monthlyIncomeBRL")
        if income:
            answer += f". Com a renda de {_brl(income)} por mês, dá para planejar o quanto separar."
        return answer + ("" if answer.endswith(".") else ".")


def _feasibility_answer(f: dict[str, Any]) -> str:
    """The evaluate_goal result, told in Portuguese."""
    if f["remaining"] == 0:
        return f"Já dá: a meta {f['goal']} está coberta pelo que vocês guardaram."
    left = f"faltam {f['currency']} {f['remaining']:g} ({_brl(f['remaining_brl'])})"
    share = f"{f['savings_rate']:.0%}" + (
        " (uma estimativa; quanto vocês conseguem guardar?)" if f["savings_rate_assumed"] else ""
    )
    capacity = f"vocês conseguem guardar {_brl(f['monthly_capacity_brl'])} por mês ({share} da renda)"
    if f["fits"]:
        return (
            f"Dá, sim! Para {f['goal']} {left} até {f['deadline']}: {_brl(f['monthly_needed_brl'])} por mês "
            f"em {f['months_left']} meses, e {capacity}."
        )
    when = (
        f" Guardando isso, chegam lá em {f['months_needed']} meses, por volta de {f['reachable_by']}."
        if f["months_needed"]
        else ""
    )
    return (
        f"Do jeito que está, não dá: para {f['goal']} {left} até {f['deadline']}, "
        f"{_brl(f['monthly_needed_brl'])} por mês em {f['months_left']} meses, mas {capacity}.{when}"
    )
