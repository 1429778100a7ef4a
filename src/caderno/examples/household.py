"""The household example: a couple's budget, income and savings goals.

* ``WorkingMemory`` — the shape of the couple's working memory;
* ``BudgetTool`` — ``budget_total(month)`` over a small ledger;
* ``HouseholdModel`` — a small deterministic model for the demo. It reads
  only what it receives: the user's words and the working-memory block in
  its prompt. Take the working memory away and its answer changes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

from ..agent.chat import RECALL_HEADER, WM_HEADER
from ..agent.tools import ToolSpec, tool
from ..messages import Message, ToolCall

__all__ = ["BudgetTool", "Goal", "HouseholdModel", "WorkingMemory", "read_working_memory"]


class Goal(BaseModel):
    """A savings goal."""

    name: str
    target: str = Field(description="Amount with currency, e.g. 'EUR 6000'.")
    deadline: str = Field(description="ISO date, e.g. '2026-09-01'.")
    savedInTarget: str | None = Field(default=None, description="Saved so far, in the target's currency.")


class WorkingMemory(BaseModel):
    """What the agent keeps about the household between conversations."""

    members: list[str] = []
    currencyPreferred: str | None = None
    monthlyIncomeBRL: float | None = None
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


def read_working_memory(messages: list[Message]) -> dict[str, Any] | None:
    """The working memory as shown in a prompt's system block, or None."""
    for m in messages:
        if m.role == "system" and m.content.startswith(WM_HEADER):
            found = re.search(r"```json\n(.*?)\n```", m.content, re.S)
            return json.loads(found.group(1)) if found else None
    return None


def _number(text: str) -> float:
    """'14.000' or '14,000.50' or '6.000' (Brazilian thousands) -> float."""
    text = text.strip()
    if re.fullmatch(r"\d{1,3}(\.\d{3})+(,\d+)?", text):
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
        patch = self._patch_from(text)
        if patch:
            return Message.assistant(
                tool_calls=[ToolCall(id=f"call_{n}", name="update_working_memory", arguments={"patch": patch})]
            )
        goal = re.search(r"meta (?:de |do |da |para )?([A-ZÀ-Ú][\wÀ-ú]+)", text)
        if goal:
            return Message.assistant(self._about_goal(goal.group(1), read_working_memory(messages)))
        if re.search(r"gast", text, re.I):
            return Message.assistant(self._from_recall(messages))
        return Message.assistant("Não entendi. Pode me contar de outro jeito?")

    def _patch_from(self, text: str) -> dict[str, Any]:
        patch: dict[str, Any] = {}
        income = re.search(r"(?:ganhamos|renda|recebemos)[^R]*R\$\s*([\d.,]+)", text, re.I)
        if income:
            patch["monthlyIncomeBRL"] = _number(income.group(1))
            patch["currencyPreferred"] = "BRL"
        members = re.search(r"[Ss]omos (?:o |a )?(\w+) e (?:a |o |minha |meu )?(\w+)", text)
        if members:
            patch["members"] = [members.group(1), members.group(2)]
        goal = re.search(r"para (?:a |o )?([A-ZÀ-Ú][\wÀ-ú]+)[^E]*EUR\s*([\d.,]+)[^\d]*(\d{4}-\d{2}-\d{2})", text)
        if goal:
            saved = re.search(r"guardamos EUR\s*([\d.,]+)", text, re.I)
            patch["activeGoals"] = [
                {
                    "name": goal.group(1),
                    "target": f"EUR {_number(goal.group(2))}",
                    "deadline": goal.group(3),
                    "savedInTarget": f"EUR {_number(saved.group(1))}" if saved else "EUR 0",
                }
            ]
        return patch

    def _after_tool(self, result: Message) -> Message:
        try:
            data = json.loads(result.content)
        except json.JSONDecodeError:
            return Message.assistant(f"Não consegui usar a ferramenta: {result.content}")
        if result.name == "budget_total":
            parts = ", ".join(f"{k} {_brl(v)}" for k, v in data["by_category"].items())
            return Message.assistant(f"Em {data['month']} vocês gastaram {_brl(data['total'])} ({parts}).")
        wm = data.get("working_memory") or {}
        goals = ", ".join(f"{g['name']} ({g['target']} até {g['deadline']})" for g in wm.get("activeGoals", []))
        income = wm.get("monthlyIncomeBRL")
        return Message.assistant(
            "Anotado! "
            + (f"Renda de {_brl(income)} por mês. " if income else "")
            + (f"Metas: {goals}." if goals else "")
        )

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
