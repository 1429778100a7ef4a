"""Prompt size over a 1,000-turn conversation, with and without summaries.

A scripted household conversation (tool calls every third turn) runs twice
through AgentChat on a SQLite file:

* **with summaries** — a token budget (``max_context_tokens``) and a
  consolidation pass after each turn (extractive summariser, no LLM);
* **without** — the whole history every turn, no budget, no summaries.

It prints the prompt tokens of the final model call of sample turns, the
number of summaries written, and the time spent summarising, and draws the
curve to docs/context_growth.png.

Run:  .venv/bin/python bench/context_growth.py [--turns 1000] [--budget 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

import caderno
from caderno import AgentChat, ChatSettings, Message, ToolCall
from caderno.examples.household import BudgetTool
from caderno.memory.parts.consolidation import ConsolidationSettings

PLACES = ["Mercado Central", "Padaria Real", "Farmácia São João", "Posto Shell", "Feira do Bairro", "Cinema Roxy"]
TOPICS = [
    "we paid R$ {n},00 at {p} on 2026-{m:02d}-{d:02d}",
    "remember that the school trip costs R$ {n} and is due on 2026-{m:02d}-{d:02d}",
    "we decided to cut {p} spending to R$ {n} per month from now on",
    "Ana asked whether we can afford R$ {n} for the new bike before 2026-{m:02d}-{d:02d}",
    "the electricity bill came at R$ {n},40, higher than last month",
]


class ScriptedHousehold:
    """A deterministic model: a budget lookup every third turn, then a short reply."""

    async def complete(self, messages: list[Message], tools: list) -> Message:
        last = messages[-1]
        if last.role == "tool":
            total = json.loads(last.content)["total"]
            return Message.assistant(f"The total for that month is R$ {total}. Anything else to log?")
        n = int(last.content.split("#")[1].split(":")[0])
        if n % 3 == 0:
            month = f"2026-0{5 + n % 2}"
            return Message.assistant(tool_calls=[ToolCall(id=f"c{n}", name="budget_total", arguments={"month": month})])
        return Message.assistant(f"Logged item #{n}. I will keep the monthly totals up to date.")


def user_text(n: int, rng: random.Random) -> str:
    topic = rng.choice(TOPICS).format(
        n=rng.randint(20, 900), p=rng.choice(PLACES), m=rng.randint(1, 12), d=rng.randint(1, 28)
    )
    return f"Item #{n}: {topic}."


async def run(turns: int, budget: int | None, db: Path) -> dict:
    rng = random.Random(7)
    settings = ConsolidationSettings(
        summarize_after_tokens=budget // 2 if budget else 10**9, keep_recent_tokens=budget // 4 if budget else 0
    )
    tokens, summarise_s = [], 0.0
    async with caderno.connect(db, embedder=None, consolidation=settings, synchronous="NORMAL") as memory:
        chat = AgentChat(
            model=ScriptedHousehold(),
            memory=memory,
            tools=[BudgetTool()],
            consolidate=False,
            recall_tool=False,
            settings=ChatSettings(history_limit=100_000, max_context_tokens=budget, reply_reserve=512, facts=0),
        )
        for n in range(1, turns + 1):
            result = await chat.ask(messages=user_text(n, rng), resource_id="casa", thread_id="long")
            tokens.append(result.usage["total"])
            if budget:
                t0 = time.perf_counter()
                await memory.consolidation.run(resource_id="casa")
                summarise_s += time.perf_counter() - t0
        summaries = await memory.consolidation.summaries(resource_id="casa", thread_id="long")
    return {
        "tokens": tokens,
        "summaries": len(summaries),
        "merged": sum(1 for _, m in summaries if m),
        "seconds": summarise_s,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--plot", type=Path, default=Path(__file__).parent.parent / "docs" / "context_growth.png")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with_ = await run(args.turns, args.budget, Path(tmp) / "with.db")
        without = await run(args.turns, None, Path(tmp) / "without.db")
    print(f"{args.turns} turns, budget {args.budget} tokens (reply reserve 512), extractive summaries")
    print()
    print("| turn | prompt tokens with summaries | prompt tokens, whole history |")
    print("|---:|---:|---:|")
    for n in sorted({1, 10, 50, *range(100, args.turns + 1, 100)}):
        if n <= args.turns:
            print(f"| {n} | {with_['tokens'][n - 1]:,} | {without['tokens'][n - 1]:,} |")
    print()
    print(
        f"with summaries: max {max(with_['tokens']):,} tokens (budget {args.budget - 512:,} after the reserve), "
        f"{with_['summaries']} summaries written ({with_['merged']} merged into later ones), "
        f"{with_['seconds']:.2f} s summarising in total ({with_['seconds'] / max(1, with_['summaries']) * 1e3:.1f} ms a summary)"
    )
    print(f"whole history: {without['tokens'][-1]:,} tokens at turn {args.turns}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'caderno[bench]'); no plot")
        return
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    x = range(1, args.turns + 1)
    ax.plot(x, without["tokens"], label="whole history (no summaries)", color="#c0392b")
    ax.plot(x, with_["tokens"], label="caderno: budget + summaries", color="#2471a3")
    ax.axhline(args.budget - 512, color="#2471a3", linestyle=":", linewidth=1, label="budget minus reply reserve")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens")
    ax.set_title(f"Prompt size over {args.turns} turns")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    asyncio.run(main())
