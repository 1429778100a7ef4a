"""Processes killed at random points of many turns: each turn is all there or not at all.

A child process runs turns in a loop (the model patches working memory,
saves a fact, answers) and prints each turn's tag once ``ask`` returned.
The parent kills it with SIGKILL at a random moment, several times, then
checks every turn: its five messages, its patch and its fact are all
stored or all absent, every acknowledged turn is there, and the database
opens cleanly. ``CADERNO_CRASH_KILLS`` sets the number of kills (a longer
run: ``CADERNO_CRASH_KILLS=200 pytest tests/test_turn_crash.py``).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import caderno
from conftest import python_env

KILLS = int(os.environ.get("CADERNO_CRASH_KILLS", "5"))

CHILD = textwrap.dedent(
    """
    import asyncio, sys, caderno
    from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall

    def turn(tag):
        return [
            Message.assistant(tool_calls=[
                ToolCall(id="wm-" + tag, name="update_working_memory", arguments={"patch": {"turns": {tag: True}}}),
                ToolCall(id="f-" + tag, name="remember_fact", arguments={"category": "t", "key": tag, "value": tag}),
            ]),
            Message.assistant("noted " + tag),
        ]

    async def main(url, run):
        async with caderno.connect(url, embedder=None) as memory:
            print("ready", flush=True)
            for i in range(100000):
                tag = f"r{run}n{i}"
                chat = AgentChat(
                    model=ScriptedModel(turn(tag)), memory=memory, consolidate=False, settings=ChatSettings(facts=50)
                )
                await chat.ask(messages="turn " + tag, resource_id="casa", thread_id="t")
                print(tag, flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_turns_survive_sigkill_whole_or_not_at_all(shared_url: str) -> None:
    rng = random.Random(20261201)
    acked: set[str] = set()
    for run in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, shared_url, str(run)],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        first = ""
        if not acked:
            # Until a turn is known finished: kills that all land before the first turn ends (a loaded
            # machine) check nothing. Later runs are killed at any point, the first turn's included.
            first = child.stdout.readline().strip()
            assert first, child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0.02, 0.4))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        acked.update(line.strip() for line in [first, *out.splitlines()] if line.strip())

    async def check() -> tuple[int, int]:
        async with caderno.connect(shared_url, embedder=None) as memory:  # opens cleanly after every kill
            messages = await memory.get_messages(resource_id="casa", thread_id="t")
            wm = (await memory.get_working_memory(resource_id="casa")) or {}
            facts = {f.key for f in await memory.facts.list(resource_id="casa", category="t")}
        by_tag: dict[str, list[str]] = {}
        tag = None
        for m in messages:
            if m.role == "user":
                tag = m.content.removeprefix("turn ")
            by_tag.setdefault(tag or "?", []).append(m.role)
        patched = set(wm.get("turns", {}))
        for t in set(by_tag) | patched | facts:
            assert by_tag.get(t) == ["user", "assistant", "tool", "tool", "assistant"], (t, by_tag.get(t))
            assert t in patched and t in facts, f"turn {t}: messages stored but patch={t in patched} fact={t in facts}"
        assert acked <= set(by_tag), f"acknowledged turns lost: {sorted(acked - set(by_tag))[:5]}"
        return len(by_tag), len(acked)

    stored, acknowledged = asyncio.run(check())
    assert stored >= acknowledged > 0
    print(f"\nturn crash: {KILLS} kills, {stored} turns whole, {acknowledged} acknowledged, 0 partial")
