"""Round trips to PostgreSQL per AgentChat turn, counted from libpq's own protocol trace.

Each round trip ends with the server's ReadyForQuery message, which libpq's
trace (``PQtrace``, on every connection the store opens) records. A turn is
``AgentChat.ask`` with a scripted model (one reply, no tool), a database
notebook, and automatic recall on or off, on a fresh schema seeded with five
earlier conversations. Background embedding is stopped while turns are
counted (its claims are not the turn's).

Rows: reads of a batch pipelined (the store's default: independent reads go
out together, round by round) and one statement at a time (the same store
with the pipelined runner replaced by a sequential one), so the difference
is the pipeline's alone.

Run:  .venv/bin/python bench/round_trips.py [--pg URL] [--turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg
from _common import drop_schema, pg_schema_url

_traced: list[list[Any]] = []  # [pgconn, file] of every connection opened
_trace_dir = Path(tempfile.mkdtemp(prefix="caderno-rt-"))
_connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]


async def _connect_traced(cls: Any, *args: Any, **kw: Any) -> Any:
    conn = await _connect(cls, *args, **kw)
    f = (_trace_dir / uuid.uuid4().hex).open("a")  # noqa: SIM115 - libpq writes to it for the connection's life
    conn.pgconn.trace(f.fileno())
    conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
    _traced.append([conn.pgconn, f])
    return conn


def round_trips() -> int:
    """Round trips so far on every traced connection (libpq buffers its trace: untrace flushes, then trace again)."""
    for item in _traced:
        pgconn, f = item
        try:
            pgconn.untrace()
        except psycopg.Error:
            pass
        f.close()
        item[1] = again = Path(f.name).open("a")  # noqa: SIM115 - libpq writes to it until the next count
        try:
            pgconn.trace(again.fileno())
            pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        except psycopg.Error:  # a closed connection
            pass
    return sum(
        1
        for p in _trace_dir.iterdir()
        for line in p.read_text().splitlines()
        if line.startswith("B\t") and "ReadyForQuery" in line
    )


async def measure(url: str, *, recall: bool, pipelined: bool, turns: int) -> list[int]:
    import caderno
    from caderno import Message
    from caderno.agent.chat import AgentChat
    from caderno.agent.models import ScriptedModel
    from caderno.stores import postgres
    from caderno.stores._sql import run_plan

    pipelined_runner = postgres._run_pipelined
    if not pipelined:

        async def one_at_a_time(conn: Any, plans: list[Any]) -> list[Any]:
            return [await run_plan(p, functools.partial(postgres._execute, conn)) for p in plans]

        postgres._run_pipelined = one_at_a_time  # type: ignore[assignment]
    memory = await caderno.connect(url) if recall else await caderno.connect(url, embedder=None)
    try:
        for i in range(5):
            said = [Message.user(f"guardamos para Amsterdam, conversa {i}"), Message.assistant("anotado")]
            await memory.append_messages(resource_id="casa", thread_id=f"antes-{i}", messages=said)
        await memory.flush()
        memory.indexer.elsewhere = lambda: None  # no background embedding while turns are counted
        replies = [Message.assistant(f"resposta {n}") for n in range(turns + 1)]
        chat = AgentChat(model=ScriptedModel(replies), memory=memory, recall=recall, consolidate=False, notebook=True)
        await chat.ask(messages="oi", resource_id="casa", thread_id="agora")  # the conversation's first turn
        counts = []
        for n in range(turns):
            before = round_trips()
            await chat.ask(messages=f"e a meta de Amsterdam, lembra? ({n})", resource_id="casa", thread_id="agora")
            counts.append(round_trips() - before)
        return counts
    finally:
        await memory.close()
        postgres._run_pipelined = pipelined_runner


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test")
    ap.add_argument("--turns", type=int, default=5, help="turns counted per row (after the conversation's first)")
    args = ap.parse_args()
    probe = pg_schema_url(args.pg)
    if probe is None:
        sys.exit(f"PostgreSQL is not reachable at {args.pg}")
    drop_schema(args.pg, probe[1])
    psycopg.AsyncConnection.connect = classmethod(_connect_traced)  # type: ignore[method-assign, assignment]
    print(f"round trips per AgentChat turn on PostgreSQL (median of {args.turns} turns; notebook in the database)")
    print()
    print("| automatic recall | reads pipelined | one statement at a time | pipelined / one at a time |")
    print("|---|---:|---:|---:|")
    for recall in (False, True):
        row = {}
        for pipelined in (True, False):
            made = pg_schema_url(args.pg)
            assert made is not None
            url, name = made
            try:
                row[pipelined] = statistics.median(
                    await measure(url, recall=recall, pipelined=pipelined, turns=args.turns)
                )
            finally:
                drop_schema(args.pg, name)
        print(f"| {'on' if recall else 'off'} | {row[True]:g} | {row[False]:g} | {row[True] / row[False]:.2f}× |")


if __name__ == "__main__":
    asyncio.run(main())
