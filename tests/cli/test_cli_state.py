"""``caderno tasks|facts|macros|prefixes`` and the worker's scheduling, in a real subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import python_env

ARGV = [sys.executable, "-m", "caderno.cli"]


def cli(*args: str, db: Path | None = None, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*ARGV]
    if db is not None:
        argv += ["--db", str(db)]
    if config is not None:
        argv += ["--config", str(config)]
    return subprocess.run([*argv, *args], env=python_env(), capture_output=True, text=True, timeout=60)


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> bool:
    return (
        out.returncode == 1
        and out.stderr.count("\n") == 1
        and "Traceback" not in out.stderr
        and all(w in out.stderr for w in words)
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "c.db"


def write_config(path: Path, db: Path, tasks: list[dict[str, str]], *, model: bool = False) -> Path:
    lines = ["[database]", f'url = "{db}"', ""]
    if model:
        lines += ["[model]", 'base_url = "http://127.0.0.1:9/v1"', 'model = "nobody"', ""]
    for t in tasks:
        lines.append("[[scheduled_tasks]]")
        lines += [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in t.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def tasks_of(db: Path, resource: str | None = None) -> list[dict]:
    out = cli("tasks", "list", *([resource] if resource else []), "--json", db=db)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_task_round_trip_with_a_portuguese_schedule(db: Path) -> None:
    added = cli(
        "tasks", "add", "casa", "bom-dia", "todo dia às 9h", "Bom dia! O que temos hoje?",
        "--timezone", "America/Sao_Paulo", db=db,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "cron 0 9 * * * (America/Sao_Paulo)" in added.stdout
    assert "next run: " in added.stdout and "09:00 America/Sao_Paulo" in added.stdout
    once = cli("tasks", "add", "outra", "lembrete", "in 2 hours", "Ligar para o banco", "--trusted", "--json", db=db)
    assert json.loads(once.stdout)["is_oneshot"] and json.loads(once.stdout)["is_trusted"]

    assert [t["name"] for t in tasks_of(db)] == ["bom-dia", "lembrete"]
    (task,) = tasks_of(db, "casa")
    assert (task["cron_expr"], task["original_schedule"], task["thread_id"], task["source"]) == (
        "0 9 * * *",
        "todo dia às 9h",
        "task:bom-dia",
        "tool",
    )
    assert task["next_run_at"].endswith("12:00:00+00:00")  # 09:00 in São Paulo is 12:00 UTC
    human = cli("tasks", "list", "casa", db=db)
    assert human.returncode == 0 and "bom-dia" in human.stdout and "lembrete" not in human.stdout

    paused = cli("tasks", "pause", "casa", "bom-dia", db=db)
    assert paused.returncode == 0 and "(paused)" in paused.stdout
    assert tasks_of(db, "casa")[0]["is_paused"] is True
    resumed = cli("tasks", "resume", "casa", "bom-dia", "--json", db=db)
    assert json.loads(resumed.stdout)["is_paused"] is False

    again = cli("tasks", "add", "casa", "bom-dia", "daily", "x", db=db)
    assert again.returncode == 1 and "bom-dia" in again.stderr
    assert cli("tasks", "delete", "casa", "bom-dia", db=db).returncode == 0
    assert tasks_of(db, "casa") == []
    assert one_line_error(cli("tasks", "delete", "casa", "bom-dia", db=db), "no task named 'bom-dia'")
    assert one_line_error(cli("tasks", "pause", "casa", "bom-dia", db=db), "no task named 'bom-dia'")
    assert cli("tasks", "list", "casa", db=db).stdout.strip() == "(no scheduled tasks for casa)"


def test_bad_schedule_and_time_zone_are_one_line(db: Path) -> None:
    out = cli("tasks", "add", "casa", "x", "never", "prompt", db=db)
    assert one_line_error(out, "'never'", "Accepted:", "daily at 9am", "todo dia às 9h")
    zone = cli("tasks", "add", "casa", "x", "daily", "prompt", "--timezone", "Mars/Olympus", db=db)
    assert one_line_error(zone, "unknown time zone")
    assert tasks_of(db) == []


def test_tasks_sync_follows_the_config_file(db: Path, tmp_path: Path) -> None:
    entry = {"resource": "casa", "name": "resumo", "schedule": "toda segunda às 8", "prompt": "Resuma a semana."}
    other = {"resource": "casa", "name": "manual", "schedule": "daily", "prompt": "do not touch"}
    config = write_config(tmp_path / "caderno.toml", db, [entry, other])
    # A tool-made task already holds one of the names: sync leaves it alone.
    assert cli("tasks", "add", "casa", "manual", "hourly", "tool-made", db=db).returncode == 0

    first = cli("tasks", "sync", config=config)  # the database comes from [database] url
    assert first.returncode == 0, first.stderr
    assert "1 added, 0 updated, 0 deleted, 1 skipped" in first.stdout
    by_name = {t["name"]: t for t in tasks_of(db, "casa")}
    assert by_name["resumo"]["source"] == "config" and by_name["resumo"]["cron_expr"] == "0 8 * * 1"
    assert (by_name["manual"]["source"], by_name["manual"]["prompt"]) == ("tool", "tool-made")

    write_config(config, db, [{**entry, "prompt": "Resuma os gastos."}, other])
    assert json.loads(cli("tasks", "sync", "--json", config=config).stdout) == {
        "added": 0,
        "updated": 1,
        "deleted": 0,
        "skipped": 1,
    }
    write_config(config, db, [])
    removed = cli("tasks", "sync", config=config)
    assert "0 added, 0 updated, 1 deleted, 0 skipped" in removed.stdout
    assert [(t["name"], t["source"]) for t in tasks_of(db)] == [("manual", "tool")]


def test_config_errors_are_one_line(db: Path, tmp_path: Path) -> None:
    assert one_line_error(cli("tasks", "sync", db=db), "needs a config file")
    assert one_line_error(cli("tasks", "list", config=tmp_path / "missing.toml"), "does not exist")
    bad = write_config(
        tmp_path / "bad.toml", db, [{"resource": "casa", "name": "x", "schedule": "never", "prompt": "p"}]
    )
    assert one_line_error(cli("tasks", "sync", config=bad), "entry 1", "'never'")
    assert not db.exists()  # a refused config wrote nothing, not even an empty database


def test_run_due_without_a_model_says_where_to_set_one(db: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path / "caderno.toml", db, [])
    out = cli("tasks", "run-due", config=config)
    assert one_line_error(out, "set [model] in caderno.toml")
    assert one_line_error(cli("tasks", "run-due", db=db), "set [model] in caderno.toml")
    assert one_line_error(cli("tasks", "run-due", "--now", "2025-01-01T09:00", db=db), "time zone offset")


def test_facts_add_list_history_forget(db: Path) -> None:
    assert cli("facts", "add", "casa", "Finance", "income", "R$ 14.000", db=db).returncode == 0
    changed = cli("facts", "add", "casa", "finance", "income", "R$ 15.000", "--json", db=db)
    assert (json.loads(changed.stdout)["value"], json.loads(changed.stdout)["source"]) == ("R$ 15.000", "user")
    assert cli("facts", "add", "casa", "travel", "goal", "Lisboa em maio", db=db).returncode == 0

    listed = json.loads(cli("facts", "list", "casa", "--json", db=db).stdout)
    assert {(f["category"], f["key"], f["value"]) for f in listed} == {
        ("finance", "income", "R$ 15.000"),
        ("travel", "goal", "Lisboa em maio"),
    }
    only = json.loads(cli("facts", "list", "casa", "--category", "travel", "--json", db=db).stdout)
    assert [f["key"] for f in only] == ["goal"]
    human = cli("facts", "list", "casa", db=db)
    assert "R$ 15.000" in human.stdout and "Lisboa em maio" in human.stdout
    history = json.loads(cli("facts", "history", "casa", "finance", "income", "--json", db=db).stdout)
    assert [h["value"] for h in history] == ["R$ 14.000"]

    assert cli("facts", "forget", "casa", "finance", "income", db=db).returncode == 0
    assert [f["key"] for f in json.loads(cli("facts", "list", "casa", "--json", db=db).stdout)] == ["goal"]
    assert one_line_error(cli("facts", "forget", "casa", "finance", "income", db=db), "no fact finance/income")
    assert one_line_error(cli("facts", "add", "casa", "finance", "x", " ", db=db), "non-empty")


def test_prefixes_allow_check_revoke(db: Path) -> None:
    assert cli("prefixes", "allow", "casa", "ls", db=db).returncode == 0
    assert cli("prefixes", "allow", "casa", "git  status", db=db).returncode == 0
    assert json.loads(cli("prefixes", "list", "casa", "--json", db=db).stdout) == ["git status", "ls"]
    for command, answer in [
        ("ls -la", "allowed"),
        ("git status -s", "allowed"),
        ("lsblk", "not allowed"),
        ("ls; rm -rf /", "not allowed"),
        ("git stash", "not allowed"),
    ]:
        out = cli("prefixes", "check", "casa", command, db=db)
        assert (out.returncode, out.stdout.strip()) == (0, answer), command
    assert json.loads(cli("prefixes", "check", "outra", "ls", "--json", db=db).stdout) == {
        "command": "ls",
        "allowed": False,
    }
    assert one_line_error(cli("prefixes", "allow", "casa", "ls && rm", db=db))

    assert cli("prefixes", "revoke", "casa", "ls", db=db).returncode == 0
    assert cli("prefixes", "check", "casa", "ls -la", db=db).stdout.strip() == "not allowed"
    assert one_line_error(cli("prefixes", "revoke", "casa", "ls", db=db), "no approved prefix 'ls'")
    assert cli("prefixes", "list", "casa", db=db).stdout.strip() == "git status"


def test_macros_list_of_an_empty_resource(db: Path) -> None:
    assert one_line_error(cli("macros", "list", "casa", db=db), "no database at")  # a read creates nothing
    assert cli("facts", "add", "other", "c", "k", "v", db=db).returncode == 0
    assert json.loads(cli("macros", "list", "casa", "--json", db=db).stdout) == []
    human = cli("macros", "list", "casa", db=db)
    assert human.returncode == 0 and "macros of casa" in human.stdout and "next tool" in human.stdout


def test_run_due_with_a_model_and_nothing_due(db: Path, tmp_path: Path) -> None:
    # Nothing is due, so the (unreachable) model is never called.
    config = write_config(tmp_path / "caderno.toml", db, [], model=True)
    assert cli("tasks", "add", "casa", "later", "daily at 9", "p", db=db).returncode == 0
    out = cli("tasks", "run-due", "--now", "2020-01-01T00:00:00Z", config=config)
    assert (out.returncode, out.stdout.strip()) == (0, "(no tasks due)"), out.stderr
    assert json.loads(cli("tasks", "run-due", "--json", config=config).stdout) == []


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "model"])
def test_worker_syncs_config_tasks_and_stops_on_sigterm(db: Path, tmp_path: Path, model: bool) -> None:
    entry = {"resource": "casa", "name": "resumo", "schedule": "daily at 8", "prompt": "Resuma."}
    config = write_config(tmp_path / "caderno.toml", db, [entry], model=model)
    proc = subprocess.Popen(
        [*ARGV, "--config", str(config), "worker"], env=python_env(), stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not (db.exists() and tasks_of(db)) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.3)
        assert [t["name"] for t in tasks_of(db)] == ["resumo"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "1 added" in err and "caderno worker stopped" in err
    assert ("running due tasks every 30 s" in err) is model
    assert ("set [model] in caderno.toml" in err) is not model
