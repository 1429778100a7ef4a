"""Scheduled tasks end to end: due tasks run AgentChat in their thread, once, on every backend."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.agent.config import load_config
from caderno.agent.scheduler import run_due
from caderno.core.errors import UsageError
from caderno.memory.parts.state import TASK_BATCH
from conftest import python_env

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def echo_model() -> ScriptedModel:
    """Answers every prompt with what it was asked (as many times as needed)."""

    def answer(messages: list[Message], tools: list[Any]) -> Message:
        return Message.assistant("done: " + messages[-1].content)

    return ScriptedModel([answer] * 100)


async def test_due_tasks_run_once_in_their_thread(memory: caderno.Memory) -> None:
    await memory.tasks.add(resource_id="casa", name="resumo", schedule="daily at 9", prompt="resuma o dia", now=NOW)
    await memory.tasks.add(resource_id="casa", name="lembrete", schedule="in 2 hours", prompt="pague a luz", now=NOW)
    await memory.tasks.add(resource_id="casa", name="pausada", schedule="hourly", prompt="nunca", now=NOW)
    await memory.tasks.pause(resource_id="casa", name="pausada")
    chat = AgentChat(model=echo_model(), memory=memory)

    assert await run_due(memory, chat, now=NOW + timedelta(minutes=30)) == []  # nothing due yet
    five_days_later = NOW + timedelta(days=5)
    runs = await run_due(memory, chat, now=five_days_later)
    assert sorted(r.task.name for r in runs) == ["lembrete", "resumo"]  # missed days fire once, not five times
    assert all(r.error is None for r in runs)
    thread = await memory.get_messages(resource_id="casa", thread_id="task:resumo")
    assert [m.content for m in thread] == ["resuma o dia", "done: resuma o dia"]
    assert await run_due(memory, chat, now=five_days_later) == []  # the same moment fires nothing again

    tasks = {t.name: t for t in await memory.tasks.list(resource_id="casa")}
    assert set(tasks) == {"resumo", "pausada"}  # the one-shot deleted itself after it fired
    assert tasks["resumo"].last_run_at == five_days_later
    assert tasks["resumo"].next_run_at == datetime(2026, 12, 6, 9, 0, tzinfo=UTC)  # the next slot after the run
    later = await run_due(memory, chat, now=NOW + timedelta(days=30))
    assert [r.task.name for r in later] == ["resumo"]  # the paused task never fires

    await memory.tasks.resume(resource_id="casa", name="pausada", now=NOW + timedelta(days=30))
    again = await run_due(memory, chat, now=NOW + timedelta(days=30, hours=1))
    assert sorted(r.task.name for r in again) == ["pausada", "resumo"]  # both due at 09:00 again


async def test_a_failed_run_still_counts_and_is_reported(memory: caderno.Memory) -> None:
    await memory.tasks.add(resource_id="casa", name="quebra", schedule="hourly", prompt="x", now=NOW)
    chat = AgentChat(model=ScriptedModel([]), memory=memory)  # no steps: the model fails
    (run,) = await run_due(memory, chat, now=NOW + timedelta(hours=1))
    assert run.result is None and "ModelError" in (run.error or "")
    assert await run_due(memory, chat, now=NOW + timedelta(hours=1)) == []


async def test_bad_schedules_and_zones_are_refused(memory: caderno.Memory) -> None:
    with pytest.raises(UsageError, match="never"):
        await memory.tasks.add(resource_id="casa", name="n", schedule="never", prompt="p", now=NOW)
    with pytest.raises(UsageError, match="unknown time zone"):
        await memory.tasks.add(resource_id="casa", name="n", schedule="daily", prompt="p", timezone="Mars/Olympus")
    with pytest.raises(UsageError, match="prompt"):
        await memory.tasks.add(resource_id="casa", name="n", schedule="daily", prompt="  ")
    assert await memory.tasks.list(resource_id="casa") == []


async def test_config_tasks_sync_by_name_and_never_touch_tool_tasks(tmp_path: Path, memory: caderno.Memory) -> None:
    await memory.tasks.add(resource_id="casa", name="manual", schedule="hourly", prompt="tool-made", now=NOW)
    path = tmp_path / "caderno.toml"
    path.write_text(
        textwrap.dedent(
            """
            [[scheduled_tasks]]
            resource = "casa"
            name = "semanal"
            schedule = "toda segunda às 8"
            prompt = "Resuma os gastos da semana."
            timezone = "America/Sao_Paulo"

            [[scheduled_tasks]]
            resource = "casa"
            name = "manual"
            schedule = "daily"
            prompt = "config wants this name"
            """
        ),
        encoding="utf-8",
    )
    config = load_config(path)
    assert await memory.tasks.sync_config(config.tasks(now=NOW), now=NOW) == {
        "added": 1,
        "updated": 0,
        "deleted": 0,
        "skipped": 1,
    }
    tasks = {t.name: t for t in await memory.tasks.list(resource_id="casa")}
    assert tasks["semanal"].cron_expr == "0 8 * * 1" and tasks["semanal"].source == "config"
    assert tasks["manual"].prompt == "tool-made"
    path.write_text("", encoding="utf-8")
    assert (await memory.tasks.sync_config(load_config(path).tasks(), now=NOW))["deleted"] == 1
    assert [t.name for t in await memory.tasks.list(resource_id="casa")] == ["manual"]


def test_config_errors_name_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "caderno.toml"
    path.write_text('[[scheduled_tasks]]\nresource = "casa"\nname = "x"\nschedule = "daily at 25:00"\nprompt = "p"\n')
    with pytest.raises(UsageError, match="entry 1"):
        load_config(path).tasks()
    path.write_text('[[scheduled_tasks]]\nresource = "casa"\nnmae = "typo"\n')
    with pytest.raises(UsageError, match="unknown key"):
        load_config(path)


async def test_the_schedule_tool_is_committed_with_the_turn(memory: caderno.Memory) -> None:
    create = ToolCall(
        id="s1",
        name="schedule",
        arguments={"action": "create", "name": "contas", "schedule": "todo dia às 9h", "prompt": "Veja as contas."},
    )
    model = ScriptedModel([Message.assistant(tool_calls=[create]), Message.assistant("Agendado.")])
    chat = AgentChat(
        model=model,
        memory=memory,
        schedule_tool=True,
        settings=ChatSettings(timezone="America/Sao_Paulo", clock=lambda: NOW),
    )
    result = await chat.ask(messages="me lembre todo dia às 9h", resource_id="casa", thread_id="t")
    assert result.tool_calls[0].result["task"]["cron"] == "0 9 * * *"
    (task,) = await memory.tasks.list(resource_id="casa")
    assert (task.name, task.timezone, task.source) == ("contas", "America/Sao_Paulo", "tool")
    assert task.next_run_at == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 09:00 in São Paulo

    async def fails(messages: list[Message], tools: list[Any]) -> Message:
        raise RuntimeError("down")

    delete = ToolCall(id="s2", name="schedule", arguments={"action": "delete", "name": "contas"})
    chat = AgentChat(
        model=ScriptedModel([Message.assistant(tool_calls=[delete]), fails]), memory=memory, schedule_tool=True
    )
    with pytest.raises(caderno.core.errors.ModelError):
        await chat.ask(messages="apague", resource_id="casa", thread_id="t")
    assert [t.name for t in await memory.tasks.list(resource_id="casa")] == ["contas"]  # a failed turn changed nothing


WORKER = textwrap.dedent(
    """
    import asyncio, sys, caderno
    from datetime import datetime
    from caderno import AgentChat, Message, ScriptedModel
    from caderno.agent.scheduler import run_due

    async def main(url, now):
        async with caderno.connect(url, embedder=None) as memory:
            model = ScriptedModel([lambda m, t: Message.assistant("ok")] * 1000)
            chat = AgentChat(model=model, memory=memory, consolidate=False)
            fired = 0
            for _ in range(50):
                runs = await run_due(memory, chat, now=datetime.fromisoformat(now))
                fired += len(runs)
            print(fired)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_several_workers_never_fire_a_task_twice(shared_url: str) -> None:
    async def seed() -> None:
        async with caderno.connect(shared_url, embedder=None) as memory:
            for i in range(24):
                await memory.tasks.add(
                    resource_id=f"casa-{i % 3}", name=f"t{i}", schedule="daily at 7", prompt=f"tarefa {i}", now=NOW
                )

    asyncio.run(seed())
    moment = (NOW + timedelta(days=1)).isoformat()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, shared_url, moment], env=python_env(), stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    fired = [int(w.communicate(timeout=180)[0].strip()) for w in workers]
    assert all(w.returncode == 0 for w in workers)
    assert sum(fired) == 24, fired

    async def check() -> None:
        async with caderno.connect(shared_url, embedder=None) as memory:
            for i in range(24):
                thread = await memory.get_messages(resource_id=f"casa-{i % 3}", thread_id=f"task:t{i}")
                assert [m.content for m in thread] == [f"tarefa {i}", "ok"]  # ran exactly once

    asyncio.run(check())


async def test_a_flooding_resource_does_not_starve_another(memory: caderno.Memory) -> None:
    """Before: 40 due tasks of one resource took every claim of 10, first come; the other's task waited."""
    for i in range(40):  # every one due before the other resource's task
        await memory.tasks.add(resource_id="flood", name=f"f{i:02}", schedule="every minute", prompt="x", now=NOW)
    await memory.tasks.add(
        resource_id="quiet", name="mine", schedule="every minute", prompt="y", now=NOW + timedelta(seconds=30)
    )
    await memory.tasks.add(
        resource_id="third", name="also", schedule="every minute", prompt="z", now=NOW + timedelta(seconds=30)
    )
    now = NOW + timedelta(minutes=5)
    first = await memory.tasks.claim_due(now=now)
    assert len(first) == TASK_BATCH
    # Round robin: every resource's first due task before anyone's second.
    assert {t.resource_id for t in first[:3]} == {"flood", "quiet", "third"}
    assert [t.resource_id for t in first[3:]] == ["flood"] * (TASK_BATCH - 3)
    # The rest of the flood is still claimable, and none twice.
    rest = [t.name for t in await memory.tasks.claim_due(now=now, limit=100)]
    assert len(rest) == 40 - (TASK_BATCH - 2) and not set(rest) & {t.name for t in first}


async def test_a_quiet_resource_runs_in_every_poll_of_a_flood(memory: caderno.Memory) -> None:
    for i in range(40):
        await memory.tasks.add(resource_id="flood", name=f"f{i:02}", schedule="every minute", prompt="x", now=NOW)
    await memory.tasks.add(resource_id="quiet", name="mine", schedule="every minute", prompt="y", now=NOW)
    chat = AgentChat(model=echo_model(), memory=memory)
    for minute in range(1, 5):  # four polls a minute apart, as in the attack (which ran it once)
        runs = await run_due(memory, chat, now=NOW + timedelta(minutes=minute))
        assert "quiet" in {r.task.resource_id for r in runs}, minute
    thread = await memory.get_messages(resource_id="quiet", thread_id="task:mine")
    assert [m.content for m in thread if m.role == "user"] == ["y"] * 4
