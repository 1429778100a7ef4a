"""One household turn in code: python examples/household/run.py [DB]."""

import asyncio
import sys

import caderno
from caderno.examples.household import BudgetTool, HouseholdModel, WorkingMemory


async def main(db: str) -> None:
    async with caderno.connect(db, working_memory_schema=WorkingMemory) as memory:
        chat = caderno.AgentChat(model=HouseholdModel(), memory=memory, tools=[BudgetTool()])
        result = await chat.ask(messages="Quanto gastamos em 2026-05?", resource_id="casa", thread_id="t1")
        print(result.reply.content)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "casa.db"))
