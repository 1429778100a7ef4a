"""The README's main job: `caderno demo`, Monday and Wednesday in two processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import python_env


def caderno(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caderno.cli", "--db", str(db), *args],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_remembers_on_wednesday_from_what_it_received(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    out = caderno("demo", db=db)
    assert out.returncode == 0, out.stderr
    monday, wednesday = out.stdout.split("quarta-feira")
    assert "update_working_memory" in monday
    assert '"name": "Amsterdam"' in wednesday  # the block the model received is printed
    assert "Lembro sim! A meta Amsterdam é juntar EUR 6000 até 2026-09-01" in wednesday
    assert "R$ 14.000,00" in wednesday
    # June's spending lives only in Monday's thread: recall brings it to Wednesday's prompt.
    assert "Remembered from earlier conversations" in wednesday
    assert "Pelo que conversamos em" in wednesday and "R$ 6.778,30" in wednesday.split("gasto de junho?")[1]
    # Take the goal out of working memory: Wednesday's answer changes with it.
    assert caderno("wm", "patch", "casa-gabriel", '{"activeGoals": null}', db=db).returncode == 0
    again = caderno("demo", "--day", "wednesday", db=db)
    assert again.returncode == 0, again.stderr
    assert "Não tenho nenhuma meta de Amsterdam anotada" in again.stdout
    assert "Lembro sim" not in again.stdout
