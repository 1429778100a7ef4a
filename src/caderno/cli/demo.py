"""``caderno demo``: Monday and Wednesday, two processes, one SQLite file.

Monday a couple tells the agent what they spend, earn and save for; the
process ends. Wednesday a new process opens the same file and, in a new
thread, asks "e a meta de Amsterdam, lembra?". The model answers from the
working-memory block it received — shown on screen — not from a script.
Then it is asked about June's spending, which only Monday's thread holds:
automatic recall (local embeddings and full text) brings it into the prompt.
Last, "dá para chegar em Amsterdam?": the model calls ``evaluate_goal`` with
the goal, income, savings rate and euro rate from its working-memory block
and the date from its instructions (the demo's calendar, never a clock).
On Monday the goal itself was added through the ``goals`` tool, whose
patch the model then applied with ``update_working_memory``.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from ..agent.chat import RECALL_HEADER, WM_HEADER, AgentChat, RecallSettings
from ..examples.household import BudgetTool, GoalTool, HouseholdModel, WorkingMemory
from ..memory.adapters.connect import connect

RESOURCE = "casa-gabriel"

MONDAY = [
    "Quanto gastamos em 2026-06?",
    "Somos Gabriel e esposa. Ganhamos R$ 14.000 por mês e estamos juntando para Amsterdam: "
    "EUR 6.000 até 2026-09-01. Já guardamos EUR 500.",
    "O euro está a R$ 6,20 e conseguimos guardar 30% da renda todo mês.",
]
WEDNESDAY = "e a meta de Amsterdam, lembra?"
WEDNESDAY_RECALL = "E quanto foi mesmo o gasto de junho?"
WEDNESDAY_FEASIBILITY = "dá para chegar em Amsterdam?"

# The story's calendar: the model learns the date from its instructions. Fixed, not the clock's: the
# goal's deadline and June's spending are the story's, and a date that moves would change its answers.
MONDAY_DATE = "2026-06-15"
WEDNESDAY_DATE = "2026-06-17"
#: Said before the story: "today" in it is the story's date, while the stored messages carry the real time.
STORY_DATES = (
    f"(a história se passa em datas fixas: segunda {MONDAY_DATE} e quarta {WEDNESDAY_DATE} são o 'hoje' "
    "que o agente lê nas instruções; as mensagens guardadas levam a data e hora reais)"
)


def self_command() -> str:
    """The command that runs this caderno again from the user's shell, exactly as it can be typed.

    ``caderno`` when that name on PATH is this very program; else the full path
    of the program that runs now (``.venv/bin/caderno`` when the virtual
    environment is not active, where a bare ``caderno`` is "command not
    found"); else this Python with ``-m caderno.cli``.
    """
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if program is not None and program.stem == "caderno" and program.is_file():
        found = shutil.which("caderno")
        if found is not None and Path(found).resolve() == program.resolve():
            return "caderno"
        return shlex.quote(str(program.absolute()))
    return f"{shlex.quote(sys.executable)} -m caderno.cli"


def _chat(memory: object, model: HouseholdModel, *, today: str, recall: bool = False) -> AgentChat:
    return AgentChat(
        model=model,
        memory=memory,  # type: ignore[arg-type]
        tools=[BudgetTool(), GoalTool()],
        instructions=f"Você é o assistente financeiro da casa. Responda em português. Hoje é {today}.",
        recall=RecallSettings(top=3) if recall else None,
    )


async def monday(db: str, echo: Callable[[str], None]) -> None:
    async with connect(db, working_memory_schema=WorkingMemory) as memory:
        await memory.erase_resource(resource_id=RESOURCE)  # a clean story on every run
        chat = _chat(memory, HouseholdModel(), today=MONDAY_DATE)
        echo("── segunda-feira, à noite (processo 1, thread 'segunda') ──")
        for text in MONDAY:
            result = await chat.ask(messages=text, resource_id=RESOURCE, thread_id="segunda")
            echo(f"  casal:   {text}")
            for call in result.tool_calls:
                echo(f"  (ferramenta {call.name} {call.args})")
            echo(f"  agente:  {result.reply.content}")
        await memory.flush()  # embed Monday's messages (local model) before the process ends


async def wednesday(db: str, echo: Callable[[str], None]) -> None:
    async with connect(db, working_memory_schema=WorkingMemory) as memory:
        model = HouseholdModel()
        chat = _chat(memory, model, today=WEDNESDAY_DATE)
        result = await chat.ask(messages=WEDNESDAY, resource_id=RESOURCE, thread_id="quarta")
        echo("── quarta-feira (processo 2, thread nova 'quarta') ──")
        echo("  o bloco de memória que o modelo recebeu:")
        for m in model.requests[0]:
            if m.role == "system" and m.content.startswith(WM_HEADER):
                block = m.content.split("\nIts JSON shape:")[0]
                echo("    " + block.replace("\n", "\n    "))
        echo(f"  casal:   {WEDNESDAY}")
        echo(f"  agente:  {result.reply.content}")
        echo("")
        model2 = HouseholdModel()
        result2 = await _chat(memory, model2, today=WEDNESDAY_DATE, recall=True).ask(
            messages=WEDNESDAY_RECALL, resource_id=RESOURCE, thread_id="quarta"
        )
        recalled = next((m.content for m in model2.requests[0] if m.content.startswith(RECALL_HEADER)), None)
        echo("  o que a memória de longo prazo (busca local por sentido e por palavras) trouxe:")
        echo("    " + (recalled or "(nada)").replace("\n", "\n    "))
        echo(f"  casal:   {WEDNESDAY_RECALL}")
        echo(f"  agente:  {result2.reply.content}")
        echo("")
        result3 = await _chat(memory, HouseholdModel(), today=WEDNESDAY_DATE).ask(
            messages=WEDNESDAY_FEASIBILITY, resource_id=RESOURCE, thread_id="quarta"
        )
        echo(f"  casal:   {WEDNESDAY_FEASIBILITY}")
        for call in result3.tool_calls:
            echo(f"  (ferramenta {call.name} {call.args})")
        echo(f"  agente:  {result3.reply.content}")
