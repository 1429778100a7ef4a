"""Schedules that used to be 500s, refused through the other ways in: Python, the model's tool, the CLI, an import.

Each is a ``UsageError`` (the tool: an error the model reads; the CLI: one
line and a non-zero exit) and nothing is stored, on every backend.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.core.errors import UsageError
from conftest import python_env

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

#: (schedule, time zone, words of the refusal)
HOSTILE = [
    ("in 99999999999999999999 minutes", "UTC", "a one-shot runs within"),
    ("daqui a 999999999999 dias", "UTC", "a one-shot runs within"),
    ("0 0 31 2 *", "UTC", "never fires"),
    ("daily at 9", "A" * 10_000, "an IANA name has at most 64"),
]


@pytest.mark.parametrize(("schedule", "zone", "words"), HOSTILE, ids=["minutes", "dias", "feb31", "zone"])
async def test_python_refuses_with_a_usage_error(memory: caderno.Memory, schedule: str, zone: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        await memory.tasks.add(resource_id="casa", name="x", schedule=schedule, prompt="p", timezone=zone, now=NOW)
    assert await memory.tasks.list(resource_id="casa") == []


@pytest.mark.parametrize(("schedule", "words"), [(s, w) for s, z, w in HOSTILE if z == "UTC"])
async def test_the_models_tool_gets_the_sentence(memory: caderno.Memory, schedule: str, words: str) -> None:
    args = {"action": "create", "name": "x", "schedule": schedule, "prompt": "veja"}
    model = ScriptedModel(
        [Message.assistant(tool_calls=[ToolCall(id="c", name="schedule", arguments=args)]), Message.assistant("ok")]
    )
    chat = AgentChat(model=model, memory=memory, schedule_tool=True, settings=ChatSettings(clock=lambda: NOW))
    result = await chat.ask(messages="agende", resource_id="casa", thread_id="t")
    (record,) = result.tool_calls
    assert record.result is None and words in (record.error or ""), record.error
    assert await memory.tasks.list(resource_id="casa") == []


async def test_agent_chat_refuses_a_hostile_zone(memory: caderno.Memory) -> None:
    with pytest.raises(UsageError, match="an IANA name has at most 64"):
        AgentChat(
            model=ScriptedModel([]), memory=memory, schedule_tool=True, settings=ChatSettings(timezone="A" * 10_000)
        )


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(command, env=python_env(), capture_output=True, text=True, timeout=60)


def test_the_cli_prints_one_line_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    for schedule, zone, words in HOSTILE:
        done = _cli(db, "tasks", "add", "casa", "x", schedule, "p", "--timezone", zone)
        assert done.returncode != 0
        assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
    listed = _cli(db, "tasks", "list", "casa", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_the_cli_import_names_the_missing_next_run_at(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    assert _cli(db, "tasks", "add", "casa", "lembrete", "daily at 9", "p").returncode == 0
    exported = _cli(db, "export", "casa")
    assert exported.returncode == 0, exported.stderr
    dump: dict[str, Any] = json.loads(exported.stdout)
    dump["resource_id"] = "novo"
    del dump["scheduled_tasks"][0]["next_run_at"]
    path = tmp_path / "novo.json"
    path.write_text(json.dumps(dump), encoding="utf-8")
    done = _cli(db, "import", str(path))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "scheduled_tasks[0].next_run_at is missing" in done.stderr
    listed = _cli(db, "tasks", "list", "novo", "--json")
    assert json.loads(listed.stdout) == []
