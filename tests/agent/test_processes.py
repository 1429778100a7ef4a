"""Monday in one process, Wednesday in another: the same SQLite file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import python_env

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import caderno
    from caderno import AgentChat, Message, ScriptedModel, ToolCall
    from caderno.examples.household import BudgetTool, WorkingMemory

    R = "casa-gabriel"
    step, db = sys.argv[1], sys.argv[2]

    def call(name, args, id):
        return Message.assistant(tool_calls=[ToolCall(id=id, name=name, arguments=args)])

    STEPS = {
        "1": [call("budget_total", {"month": "2026-06"}, "c1"), Message.assistant("Gastaram R$ 6.778,30.")],
        "2": [call("update_working_memory", {"patch": {"activeGoals": [
                {"name": "Amsterdam", "target": "EUR 6000", "deadline": "2026-09-01", "savedInTarget": "EUR 500"}]}}, "c2"),
              Message.assistant("Anotado.")],
        "3": [Message.assistant("Sim, Amsterdam.")],
    }
    THREAD = {"1": "thread-1", "2": "thread-1", "3": "thread-2"}

    async def main():
        async with caderno.connect(db, working_memory_schema=WorkingMemory) as memory:
            if step == "2":
                await memory.update_working_memory(resource_id=R, patch={
                    "members": ["Gabriel", "esposa"], "currencyPreferred": "BRL", "monthlyIncomeBRL": 14000,
                    "activeGoals": []})
            model = ScriptedModel(STEPS[step])
            chat = AgentChat(model=model, memory=memory, tools=[BudgetTool()])
            await chat.ask(messages=f"pergunta {step}", resource_id=R, thread_id=THREAD[step])
            print(json.dumps({"prompt": [[m.role, m.content] for m in model.requests[0].messages],
                              "wm": await memory.get_working_memory(resource_id=R)}))

    asyncio.run(main())
    """
)


def run_step(step: str, db: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, step, str(db)], env=python_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_three_turns_in_three_processes(tmp_path: Path) -> None:
    db = tmp_path / "casa.db"
    first = run_step("1", db)
    assert [r for r, _ in first["prompt"]] == ["system", "system", "user"] and first["wm"] is None
    second = run_step("2", db)
    text = "\n".join(c for _, c in second["prompt"])
    assert "pergunta 1" in text and "Gastaram R$ 6.778,30." in text and '"monthlyIncomeBRL": 14000' in text
    assert second["wm"]["activeGoals"][0]["name"] == "Amsterdam" and second["wm"]["monthlyIncomeBRL"] == 14000
    third = run_step("3", db)
    assert [r for r, _ in third["prompt"]] == ["system", "system", "user"]
    assert '"name": "Amsterdam"' in third["prompt"][1][1]
