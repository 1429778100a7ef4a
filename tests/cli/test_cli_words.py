"""The command line as people type it: options anywhere, hints that run as printed, caderno's own words."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

import caderno
from caderno import Message
from caderno.cli.common import hoist_global_options
from caderno.cli.main import main
from conftest import python_env

CLI = [sys.executable, "-m", "caderno.cli"]


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env or python_env(), capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"

    async def seed() -> None:
        async with caderno.connect(path) as memory:
            await memory.append_messages(resource_id="casa", thread_id="t1", messages=[Message.user("oi")])

    asyncio.run(seed())
    return path


@pytest.mark.parametrize(
    "where",
    [
        lambda db: ["--db", str(db), "threads", "list", "casa", "--json"],
        lambda db: ["threads", "list", "casa", "--db", str(db), "--json"],
        lambda db: ["threads", "--db", str(db), "list", "casa", "--json"],
        lambda db: ["threads", "list", "--json", f"--db={db}", "casa"],
    ],
    ids=["before", "after", "between", "equals-form"],
)
def test_db_is_taken_before_or_after_the_command(db: Path, where: object) -> None:
    out = run(*where(db))  # type: ignore[operator]
    assert out.returncode == 0, out.stderr
    assert [t["id"] for t in json.loads(out.stdout)] == ["t1"]


def test_db_and_config_come_from_the_environment(db: Path, tmp_path: Path) -> None:
    env = python_env() | {"CADERNO_DB": str(db)}
    out = run("threads", "list", "casa", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert [t["id"] for t in json.loads(out.stdout)] == ["t1"]
    config = tmp_path / "caderno.toml"
    config.write_text(f'[database]\nurl = "{db}"\n')
    env = python_env() | {"CADERNO_CONFIG": str(config)}
    out = run("threads", "list", "casa", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert [t["id"] for t in json.loads(out.stdout)] == ["t1"]
    out = run("threads", "list", "casa", "--json", "--config", str(config))  # after the command too
    assert out.returncode == 0, out.stderr
    assert [t["id"] for t in json.loads(out.stdout)] == ["t1"]


def test_a_commands_own_option_of_the_same_name_stays_its_own() -> None:
    ctx = click.Context(main)
    assert hoist_global_options(main, ctx, ["serve", "--config", "s.toml", "--db", "x.db"]) == [
        "--db",
        "x.db",
        "serve",
        "--config",
        "s.toml",
    ]
    after_dashes = ["recall", "casa", "--", "--db", "x"]
    assert hoist_global_options(main, ctx, after_dashes) == after_dashes


def test_exit_status_is_1_for_a_caderno_error_and_2_for_a_usage_error(tmp_path: Path) -> None:
    missing = run("threads", "list", "casa", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 1 and missing.stderr.startswith("caderno: error: no database at")
    assert not (tmp_path / "none.db").exists()
    usage = run("threads", "list", "casa", "--nope")
    assert usage.returncode == 2 and "No such option" in usage.stderr
    assert "Exit status:" in run("--help").stdout and "2  a usage error" in run("--help").stdout


def test_counts_agree_with_their_nouns(db: Path, tmp_path: Path) -> None:
    exported = tmp_path / "casa.json"
    assert run("export", "casa", "-o", str(exported), "--db", str(db)).returncode == 0
    out = run("import", str(exported), "--db", str(tmp_path / "other.db"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "imported casa (1 thread)"


def test_notes_read_the_database_notebook_when_a_database_is_given(db: Path) -> None:
    out = run("notes", "show", "--db", str(db))
    assert out.returncode == 1
    assert "belongs to a resource: add --resource NAME" in out.stderr
    added = run("notes", "add", "memory", "prefers window seats", "--resource", "casa", "--db", str(db))
    assert added.returncode == 0, added.stderr
    assert "memory: 1 entry," in added.stdout, added.stdout  # not "1 entries"
    shown = run("notes", "show", "--resource", "casa", "--json", "--db", str(db))
    assert json.loads(shown.stdout)["memory"] == ["prefers window seats"]


def test_memory_is_documented_as_the_journals() -> None:
    out = run("memory", "--help")
    assert out.returncode == 0 and "The journals" in out.stdout and "design's name" in out.stdout


def test_help_is_in_caderno_words() -> None:
    def helps(command: click.Command, path: str) -> list[tuple[str, str]]:
        found = [(path, command.get_help(click.Context(command, info_name=path)))]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += helps(sub, f"{path} {name}")
        return found

    for path, text in helps(main, "caderno"):
        assert "``" not in text and "caderno.agent" not in text and "=True" not in text, (path, text)


def test_the_demos_parting_hint_runs_as_printed_without_the_venv_on_path(tmp_path: Path) -> None:
    program = Path(sys.executable).with_name("caderno")
    assert program.is_file(), "the install puts the caderno console script beside this Python"
    env = python_env() | {"PATH": "/usr/bin:/bin"}  # the virtual environment not active
    demo = subprocess.run(
        [str(program), "--db", "d.db", "demo"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert demo.returncode == 0, demo.stderr
    assert "datas fixas" in demo.stdout  # "today" in the story is said to be the story's date
    hint = demo.stdout.strip().splitlines()[-1].split(": ", 1)[1]
    assert hint.startswith(str(program))
    again = subprocess.run(shlex.split(hint), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "segunda" in again.stdout and "quarta" in again.stdout
