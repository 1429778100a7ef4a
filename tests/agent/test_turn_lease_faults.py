"""The turn lease under real process faults: a SIGKILLed holder, a SIGSTOPped one.

Process A (a child) starts a turn and is killed or stopped while its model
works; this process is B, on the same SQLite file or PostgreSQL schema.

* Killed: its thread is free again within the README's bound (10 s, from
  ``TURN_LEASE`` = 9 s), so B's turn on it proceeds without waiting 30 s.
* Stopped past its lease: B takes the thread and answers, then gives the
  thread back or still holds it when A is continued; A's turn stores
  nothing (``ThreadBusy``) and the thread holds B's turn alone. Before the
  commit's lease check was a fence (an upsert that re-created a lease B had
  given back), A's turn was stored after B's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel
from caderno.memory.parts.turns import TURN_LEASE
from conftest import python_env

#: The README's bound on how soon a killed holder's thread is free again.
FREE_WITHIN = 10.0
#: A's lease in the SIGSTOP tests: short, so they stop A only a few seconds.
STOPPED_LEASE = 1.5

HOLDER = textwrap.dedent(
    """
    import asyncio, json, sys
    import caderno
    from caderno import AgentChat, Message, ScriptedModel
    from caderno.core.errors import ThreadBusy

    url, lease, think = sys.argv[1], sys.argv[2], float(sys.argv[3])

    async def step(messages, tools):
        print("in-model", flush=True)
        await asyncio.sleep(think)  # a stop longer than this is a stall past it
        return Message.assistant("resposta A")

    async def main():
        async with caderno.connect(url, embedder=None) as memory:
            if lease != "default":
                memory.turns.lease_seconds = float(lease)
            chat = AgentChat(model=ScriptedModel([step]), memory=memory, consolidate=False)
            try:
                await chat.ask(messages="pergunta A", resource_id="casa", thread_id="t")
                print(json.dumps({"outcome": "stored"}), flush=True)
            except ThreadBusy as exc:
                print(json.dumps({"outcome": "ThreadBusy", "detail": str(exc)}), flush=True)

    asyncio.run(main())
    """
)


@contextmanager
def holder(url: str, *, lease: str, think: float) -> Iterator[subprocess.Popen[str]]:
    """Process A, once its turn holds the thread and waits on its model."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, lease, str(think)],
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "in-model", (line, child.stderr.read() if child.poll() is not None else "")
        yield child
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        child.wait(timeout=30)


def outcome(child: subprocess.Popen[str]) -> dict[str, Any]:
    """A's last line: what its turn came to."""
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


async def contents(url: str) -> list[str]:
    async with await caderno.connect(url, embedder=None) as memory:
        return [m.content for m in await memory.get_messages(resource_id="casa", thread_id="t")]


async def test_a_killed_holders_thread_is_free_within_ten_seconds(shared_url: str) -> None:
    """Failed with the 30 s lease: B's turn waited for the dead holder's lease 30 s."""
    assert TURN_LEASE < FREE_WITHIN
    with holder(shared_url, lease="default", think=3600) as a:
        a.kill()  # SIGKILL: no release, no rollback of anything but its own process
        killed = time.monotonic()
        a.wait(timeout=30)
        async with await caderno.connect(shared_url, embedder=None) as b:
            chat = AgentChat(
                model=ScriptedModel([Message.assistant("resposta B")]),
                memory=b,
                consolidate=False,
                settings=ChatSettings(turn_wait=3 * FREE_WITHIN),  # generous: the assertion is on the time it took
            )
            result = await chat.ask(messages="pergunta B", resource_id="casa", thread_id="t")
            took = time.monotonic() - killed
    assert result.reply.content == "resposta B"
    assert took < FREE_WITHIN, f"the killed holder's thread was free only after {took:.1f} s"
    assert await contents(shared_url) == ["pergunta B", "resposta B"]  # nothing of the killed turn


@pytest.mark.parametrize("b_state", ["released", "still holding"])
async def test_a_stopped_turn_stores_nothing_after_another_took_its_thread(shared_url: str, b_state: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def b_step(messages: list[Message], tools: list[Any]) -> Message:
        started.set()
        if b_state == "still holding":
            await release.wait()
        return Message.assistant("resposta B")

    with holder(shared_url, lease=str(STOPPED_LEASE), think=STOPPED_LEASE) as a:
        os.kill(a.pid, signal.SIGSTOP)  # mid-turn: a GC pause, a VM migration, an operator's ^Z
        async with await caderno.connect(shared_url, embedder=None) as b:
            chat = AgentChat(
                model=ScriptedModel([b_step]), memory=b, consolidate=False, settings=ChatSettings(turn_wait=30)
            )
            b_turn = asyncio.create_task(chat.ask(messages="pergunta B", resource_id="casa", thread_id="t"))
            await asyncio.wait_for(started.wait(), timeout=30)  # A's lease ran out: B holds the thread
            if b_state == "released":
                await b_turn
            os.kill(a.pid, signal.SIGCONT)  # A's model answers now, after A's lease was taken over
            a_said = await asyncio.to_thread(outcome, a)
            release.set()
            await b_turn
    assert a_said["outcome"] == "ThreadBusy", a_said
    assert "nothing of this turn was stored" in a_said["detail"]
    assert await contents(shared_url) == ["pergunta B", "resposta B"]
