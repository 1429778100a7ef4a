"""Turn overhead: caderno's AgentChat vs the OpenAI Agents SDK Runner.

Workload (one process, one run, same machine, same durability): the same
two-step turn — the model calls one tool (a small budget lookup), then
replies — SESSIONS conversations x TURNS turns, round-robin (turn 1 of every
conversation, then turn 2, ...), after WARMUP untimed turns on other
conversations.

Contenders:
  * caderno ``AgentChat`` on ``caderno.connect(sqlite file, embedder=None)``,
    recall off (its defaults otherwise: facts, recall tool, consolidation);
  * the same with automatic recall on (``recall=True``) and the real local
    embedder, on a database pre-seeded with earlier conversations of each
    user, the embedding queue drained before timing;
  * the same again with the conversation's previous turn not yet embedded
    (no background embedding, no flush between turns): each turn's recall
    embeds those messages first (``Indexer.embed_pending``), timed;
  * the OpenAI Agents SDK ``Runner.run`` with ``SQLiteSession`` (package
    ``openai-agents``), tracing off (caderno traces nothing either).

Both sides use a file SQLite database in a temp dir with WAL and
synchronous=FULL (caderno's default; the SDK session sets WAL itself and is
given synchronous=FULL explicitly here). Each side's model is a scripted
fake that answers a tool call on the first call of a turn and text on the
second; the time spent inside it is subtracted, so "overhead" is
everything but the model: loading history, building the prompt, running the
tool, storing the turn.

caderno's background work (consolidation; embeddings when recall is on) is
awaited between turns, outside the timed window: the figures are the
request path. ``--overlap`` leaves it running during the next turns instead.

Run:  .venv/bin/python bench/turn_overhead.py [--sessions 50 --turns 10 --profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import pct

import caderno
from caderno import Message
from caderno.agent.chat import AgentChat
from caderno.core.messages import ToolCall

CATEGORIES = ["mercado", "aluguel", "transporte", "lazer", "saúde", "educação", "restaurantes", "viagens"]
BUDGETS = {c: 300 + 150 * i for i, c in enumerate(CATEGORIES)}
REPLY = "Você ainda tem saldo nessa categoria este mês; quer que eu ajuste o orçamento?"


async def budget(category: str) -> dict[str, Any]:
    """Look up this month's budget for a spending category.

    Args:
        category: the spending category, e.g. mercado.
    """
    limit = BUDGETS.get(category, 500)
    return {"category": category, "limit": limit, "spent": limit // 3, "currency": "BRL"}


def question(session: int, turn: int) -> tuple[str, str]:
    category = CATEGORIES[(session + turn) % len(CATEGORIES)]
    return category, f"Quanto ainda posso gastar com {category} este mês? (pergunta {turn})"


class Stopwatch:
    """Time spent inside the fake model, summed; read and reset around each turn."""

    def __init__(self) -> None:
        self.spent = 0.0


# -- caderno ----------------------------------------------------------------------------


class CadernoFakeModel:
    """A scripted model for an endless conversation: tool call after a user message, else a reply."""

    def __init__(self, watch: Stopwatch) -> None:
        self.watch = watch

    async def complete(self, messages: list[Message], tools: list[Any]) -> Message:
        t0 = time.perf_counter()
        last = messages[-1]
        if last.role == "user":
            category = last.content.split(" com ", 1)[1].split(" ", 1)[0]
            call = ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name="budget", arguments={"category": category})
            reply = Message.assistant("", tool_calls=[call])
        else:
            reply = Message.assistant(REPLY)
        self.watch.spent += time.perf_counter() - t0
        return reply


SEED = [
    "Meu aluguel subiu para R$ 2.800 a partir de março.",
    "Combinamos de guardar R$ 1.000 por mês para a viagem a Lisboa em dezembro.",
    "O plano de saúde da Ana custa R$ 640 e vence todo dia 10.",
    "Gastei R$ 450 no mercado na última semana, acima do que eu queria.",
    "A escola das crianças aumentou a mensalidade para R$ 1.900.",
    "Quero cortar restaurantes para no máximo R$ 400 por mês.",
    "O carro precisa de revisão em junho, uns R$ 1.200.",
    "Recebi um bônus de R$ 5.000 e quero investir metade.",
]


async def seed(memory: Any, sessions: int, threads: int = 2) -> None:
    for s in range(sessions):
        for t in range(threads):
            msgs = []
            for k, text in enumerate(SEED):
                msgs.append(Message.user(f"{text} ({s}.{t}.{k})"))
                msgs.append(Message.assistant(f"Anotado: {text.lower()}"))
            await memory.append_messages(resource_id=f"user-{s}", thread_id=f"old-{s}-{t}", messages=msgs)


async def run_caderno(
    path: Path,
    sessions: int,
    turns: int,
    warmup: int,
    *,
    recall: bool,
    overlap: bool,
    consolidate: bool = True,
    pending: bool = False,
) -> list[float]:
    """``pending``: no background embedding and no flush between turns, so each turn's recall first
    embeds what the conversation's previous turn stored (``Indexer.embed_pending``), inside the timed turn."""
    watch = Stopwatch()
    memory = await (caderno.connect(str(path)) if recall else caderno.connect(str(path), embedder=None))
    if recall:
        await seed(memory, sessions)
        await seed(memory, warmup)
        await memory.flush()
    if pending:
        memory.indexer.elsewhere = lambda: None  # nobody embeds in the background: the recall does
    chat = AgentChat(
        model=CadernoFakeModel(watch), memory=memory, tools=[budget], recall=recall, consolidate=consolidate
    )

    async def turn(s: int, t: int, prefix: str) -> None:
        _, text = question(s, t)
        result = await chat.ask(messages=text, resource_id=f"user-{s}", thread_id=f"{prefix}-{s}")
        assert result.reply.content == REPLY and len(result.tool_calls) == 1, result

    lat = await timed_turns(turn, watch, sessions, turns, warmup, settle=None if overlap or pending else memory.flush)
    await memory.close()
    return lat


# -- OpenAI Agents SDK --------------------------------------------------------------------


async def run_agents_sdk(path: Path, sessions: int, turns: int, warmup: int) -> list[float]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.memory import SQLiteSession
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class DurableSession(SQLiteSession):
        """SQLiteSession with synchronous=FULL set explicitly (it sets WAL only)."""

        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)
            conn.execute("PRAGMA synchronous=FULL")

    watch = Stopwatch()

    class FakeModel(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            last = input[-1] if isinstance(input, list) else {"role": "user", "content": input}
            if last.get("type") == "function_call_output":
                text = ResponseOutputText(type="output_text", text=REPLY, annotations=[])
                out: Any = ResponseOutputMessage(
                    id=f"msg_{uuid.uuid4().hex[:12]}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            else:
                category = str(last["content"]).split(" com ", 1)[1].split(" ", 1)[0]
                out = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{uuid.uuid4().hex[:12]}",
                    call_id=f"call_{uuid.uuid4().hex[:12]}",
                    name="budget",
                    arguments=json.dumps({"category": category}),
                )
            response = ModelResponse(output=[out], usage=Usage(), response_id=None)
            watch.spent += time.perf_counter() - t0
            return response

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            # The SDK's Model interface has it; the bench runs Runner.run, which never streams.
            raise NotImplementedError("the turn-overhead bench does not stream")

    agent = Agent(
        name="assistant", instructions="You are a helpful assistant.", model=FakeModel(), tools=[function_tool(budget)]
    )
    config = RunConfig(tracing_disabled=True)
    open_sessions: dict[str, Any] = {}

    async def turn(s: int, t: int, prefix: str) -> None:
        key = f"{prefix}-{s}"
        session = open_sessions.get(key)
        if session is None:
            session = open_sessions[key] = DurableSession(key, path)
        _, text = question(s, t)
        result = await Runner.run(agent, text, session=session, run_config=config)
        assert result.final_output == REPLY, result.final_output

    lat = await timed_turns(turn, watch, sessions, turns, warmup, settle=None)
    probe = sqlite3.connect(path)
    mode = probe.execute("PRAGMA journal_mode").fetchone()[0]
    probe.close()
    sync = open_sessions["s-0"]._get_connection().execute("PRAGMA synchronous").fetchone()[0]
    assert (mode, sync) == ("wal", 2), (mode, sync)
    for session in open_sessions.values():
        session.close()
    return lat


# -- shared -------------------------------------------------------------------------------


async def timed_turns(
    turn: Callable[[int, int, str], Awaitable[None]],
    watch: Stopwatch,
    sessions: int,
    turns: int,
    warmup: int,
    settle: Callable[[], Awaitable[None]] | None,
) -> list[float]:
    """Per-turn wall time minus the time inside the model, in seconds (warm-up turns untimed)."""
    for w in range(warmup):
        await turn(w, 0, "warm")
        if settle:
            await settle()
    lat = []
    for t in range(turns):
        for s in range(sessions):
            watch.spent = 0.0
            t0 = time.perf_counter()
            await turn(s, t, "s")
            lat.append(time.perf_counter() - t0 - watch.spent)
            if settle:
                await settle()
    return lat


async def profile_caderno(path: Path, turns: int) -> str:
    watch = Stopwatch()
    memory = await caderno.connect(str(path), embedder=None)
    chat = AgentChat(model=CadernoFakeModel(watch), memory=memory, tools=[budget])
    for s in range(5):  # warm caches and the schema outside the profile
        await chat.ask(messages=question(s, 0)[1], resource_id=f"user-{s}", thread_id=f"warm-{s}")
    await memory.flush()
    prof = cProfile.Profile()
    prof.enable()
    for t in range(turns):
        s = t % 10
        await chat.ask(messages=question(s, t)[1], resource_id=f"user-{s}", thread_id=f"p-{s}")
    prof.disable()
    await memory.close()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    raw = stats.stats  # type: ignore[attr-defined]
    idle = sum(tt for (_, _, fn), (_, _, tt, _, _) in raw.items() if fn.endswith("of 'select.epoll' objects>"))
    total = stats.total_tt  # type: ignore[attr-defined]
    out.write(
        f"{total / turns * 1e3:.2f} ms a turn under the profiler, {idle / turns * 1e3:.2f} ms of it with the event loop "
        "idle (waiting on the SQLite thread: queries, commits, fsync)\n"
    )
    # The event loop's own frames are left out: they wrap everything and say nothing.
    stats.sort_stats("cumulative").print_stats(r"^(?!.*(asyncio|selectors|turn_overhead|_contextvars))", 15)
    return out.getvalue()


def row(name: str, lat: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "turns": len(lat),
        "p50_ms": pct(lat, 0.50) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "mean_ms": statistics.fmean(lat) * 1e3,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=10, help="untimed turns on other conversations, per contender")
    ap.add_argument("--overlap", action="store_true", help="let caderno's background work overlap the next turns")
    ap.add_argument("--skip-recall", action="store_true", help="no recall-on row (skips loading the embedder)")
    ap.add_argument("--profile", action="store_true", help="cProfile caderno's recall-off turn, top 15 cumulative")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    w = (args.sessions, args.turns, args.warmup)
    print(
        f"workload: {args.sessions} conversations x {args.turns} turns (tool call + reply), {args.warmup} warm-up "
        f"turns; WAL, synchronous=FULL; python {sys.version.split()[0]}"
    )
    print()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rows.append(row("openai-agents Runner + SQLiteSession", await run_agents_sdk(d / "a.db", *w)))
        rows.append(
            row("caderno AgentChat, recall off", await run_caderno(d / "c.db", *w, recall=False, overlap=args.overlap))
        )
        rows.append(
            row(
                "caderno AgentChat, recall off, consolidate off",
                await run_caderno(d / "c2.db", *w, recall=False, overlap=args.overlap, consolidate=False),
            )
        )
        if not args.skip_recall:
            rows.append(
                row(
                    "caderno AgentChat, recall on", await run_caderno(d / "r.db", *w, recall=True, overlap=args.overlap)
                )
            )
            rows.append(
                row(
                    "caderno AgentChat, recall on, previous turn pending",
                    await run_caderno(d / "rp.db", *w, recall=True, overlap=False, pending=True),
                )
            )
        profile = await profile_caderno(d / "p.db", 100) if args.profile else None
    peer = rows[0]
    print("| path | turns | overhead p50 ms | p99 ms | mean ms | vs peer p50 |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['name']} | {r['turns']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['mean_ms']:.2f} "
            f"| {r['p50_ms'] / peer['p50_ms']:.2f}× |"
        )
    print()
    print("Overhead = wall time of the turn minus the time inside the fake model. Ratio <1: less than the peer.")
    off = rows[1]
    ratio = off["p50_ms"] / peer["p50_ms"]
    print(f"caderno recall off: {ratio:.2f}× the peer's p50 — target ≤ 0.5×: {'met' if ratio <= 0.5 else 'missed'}")
    if not args.skip_recall:
        on = rows[-2]
        print(
            f"caderno recall on: p50 {on['p50_ms']:.2f} ms ({on['p50_ms'] / peer['p50_ms']:.2f}× the peer), "
            f"+{on['p50_ms'] - off['p50_ms']:.2f} ms over recall off"
        )
    if profile:
        print()
        print("cProfile of 100 caderno turns, recall off (the SQLite worker thread is not profiled):")
        print(profile)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
