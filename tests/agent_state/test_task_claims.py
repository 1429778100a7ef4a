"""A claim of due tasks is a lease with a token: a batch may outlast it, and a one-shot fires once.

Two workers on one database (a SQLite file, a PostgreSQL schema): this
process's ``Memory`` objects, and a child process stopped mid-batch.
Before claims were renewed, a batch whose tasks outlasted the claim's lease
let the other worker re-claim the one-shots still waiting and fire them
again (7 tasks of ~110 s against a 600 s lease: the 7th stored twice).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel
from caderno.agent.scheduler import TaskRun, run_due
from caderno.core.clock import utcnow
from conftest import python_env

#: The claim's lease in these tests, and how long each task's turn takes:
#: a batch of ``TASKS`` outlasts the lease several times over.
LEASE = 1.0
THINK = 0.6
TASKS = 4
#: How long the workers may take to fire every task (generous: it is a bound, not a wait).
DEADLINE = 60.0


def slow_model(asked: list[str]) -> ScriptedModel:
    async def answer(messages: list[Message], tools: list[Any]) -> Message:
        asked.append(messages[-1].content)
        await asyncio.sleep(THINK)
        return Message.assistant("feito: " + messages[-1].content)

    return ScriptedModel([answer] * 100)


async def add_one_shots(memory: caderno.Memory, count: int) -> None:
    """One-shots due an hour ago: the workers run on the wall clock, as a claim's lease does."""
    made = utcnow() - timedelta(hours=3)
    for i in range(count):
        await memory.tasks.add(resource_id="casa", name=f"t{i}", schedule="in 2 hours", prompt=f"tarefa {i}", now=made)


async def turns_stored(memory: caderno.Memory, count: int) -> list[list[str]]:
    return [
        [m.content for m in await memory.get_messages(resource_id="casa", thread_id=f"task:t{i}")] for i in range(count)
    ]


async def test_two_workers_fire_each_one_shot_once_when_a_batch_outlasts_its_lease(shared_url: str) -> None:
    async with (
        await caderno.connect(shared_url, embedder=None) as a,
        await caderno.connect(shared_url, embedder=None) as b,
    ):
        await add_one_shots(a, TASKS)
        asked: list[str] = []
        fired: list[TaskRun] = []

        async def worker(memory: caderno.Memory) -> None:
            chat = AgentChat(model=slow_model(asked), memory=memory, consolidate=False)
            deadline = time.monotonic() + DEADLINE
            while await memory.tasks.list(resource_id="casa") and time.monotonic() < deadline:
                fired.extend(await run_due(memory, chat, lease_seconds=LEASE))
                await asyncio.sleep(0.05)  # the next poll

        await asyncio.gather(worker(a), worker(b))
        assert await a.tasks.list(resource_id="casa") == []  # every one-shot fired and deleted itself
        assert Counter(asked) == {f"tarefa {i}": 1 for i in range(TASKS)}  # each asked of the model once
        assert sorted(r.task.name for r in fired) == [f"t{i}" for i in range(TASKS)]
        assert await turns_stored(a, TASKS) == [[f"tarefa {i}", f"feito: tarefa {i}"] for i in range(TASKS)]


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    import caderno
    from caderno import AgentChat, Message, ScriptedModel
    from caderno.agent.scheduler import run_due

    url, lease, think = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])

    async def answer(messages, tools):
        print("asked " + messages[-1].content, flush=True)
        await asyncio.sleep(think)  # a stop longer than this is a stall past it
        return Message.assistant("feito: " + messages[-1].content)

    async def main():
        async with caderno.connect(url, embedder=None) as memory:
            chat = AgentChat(model=ScriptedModel([answer] * 10), memory=memory, consolidate=False)
            runs = await run_due(memory, chat, lease_seconds=lease)
            print("ran " + " ".join(r.task.name for r in runs), flush=True)

    asyncio.run(main())
    """
)


async def test_a_worker_stopped_past_its_claim_runs_nothing_another_re_claimed(shared_url: str) -> None:
    """A claims two one-shots and is stopped mid-way through the first; B re-claims and fires both.

    Continued, A must not start the second (the check before each task), its
    first turn is refused by the thread's turn lease, and its finish leaves
    B's claim alone: each task's turn is stored once and the second is asked
    of a model once. Before: A ran the second too (no check) and stored it
    again.
    """
    async with await caderno.connect(shared_url, embedder=None) as b:
        await add_one_shots(b, 2)
        a = subprocess.Popen(
            [sys.executable, "-c", WORKER, shared_url, str(LEASE), str(THINK)],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert a.stdout is not None
            line = await asyncio.to_thread(a.stdout.readline)
            assert line.strip() == "asked tarefa 0", (line, a.stderr.read() if a.poll() is not None else "")
            os.kill(a.pid, signal.SIGSTOP)  # A holds the claim of both and runs the first
            b.turns.lease_seconds = LEASE  # so B's turn on t0 waits only for A's short turn lease too
            asked: list[str] = []
            chat = AgentChat(model=slow_model(asked), memory=b, consolidate=False, settings=ChatSettings(turn_wait=30))
            fired: list[TaskRun] = []
            deadline = time.monotonic() + DEADLINE
            while len(fired) < 2 and time.monotonic() < deadline:  # polls until A's claim has run out
                fired += await run_due(b, chat, lease_seconds=LEASE)
                await asyncio.sleep(0.05)
            assert sorted(r.task.name for r in fired) == ["t0", "t1"] and all(r.error is None for r in fired)
            os.kill(a.pid, signal.SIGCONT)
            out, err = await asyncio.to_thread(a.communicate, timeout=60)
        finally:
            if a.poll() is None:
                os.kill(a.pid, signal.SIGCONT)
                a.kill()
                a.wait(timeout=30)
        assert a.returncode == 0, err
        said = out.splitlines()
        assert "asked tarefa 1" not in said, said  # A never started the task B had re-claimed
        assert await b.tasks.list(resource_id="casa") == []
        assert await turns_stored(b, 2) == [["tarefa 0", "feito: tarefa 0"], ["tarefa 1", "feito: tarefa 1"]]
