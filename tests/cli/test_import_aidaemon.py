"""``caderno import-from aidaemon``: aidaemon's database imported in place, in a real subprocess.

Until it runs, every other command refuses the file with one line naming
it (``tests/stores/test_aidaemon_import.py`` has the store's side).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _aidaemon import two_sessions_database

from conftest import python_env


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caderno.cli", *args], env=python_env(), capture_output=True, text=True, timeout=120
    )


def test_other_commands_refuse_the_file_until_it_is_imported(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    two_sessions_database(path)
    refused = cli("--db", str(path), "threads", "list", "casa")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"caderno import-from aidaemon {path} --resource NAME" in refused.stderr

    out = cli("import-from", "aidaemon", str(path), "--resource", "casa")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"imported aidaemon's {path} into casa: ")
    assert "7 from events" in out.stdout and "legacy_events 5" in out.stdout
    assert "caderno reindex casa" in out.stdout

    threads = json.loads(cli("--db", str(path), "threads", "list", "casa", "--json").stdout)
    assert sorted(t["id"] for t in threads) == ["slack:C1", "telegram:100"]


def test_a_second_run_imports_nothing_and_db_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    two_sessions_database(path)
    first = cli("--db", str(path), "import-from", "aidaemon", "--resource", "casa", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["resource_id"] == "casa" and report["moved"]["events"] == 7 and report["path"] == str(path)
    again = cli("import-from", "aidaemon", str(path), "--resource", "casa")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"nothing of aidaemon's to import in {path}")


def test_a_missing_file_or_a_server_url_is_one_line(tmp_path: Path) -> None:
    missing = cli("import-from", "aidaemon", str(tmp_path / "absent.db"), "--resource", "casa")
    assert missing.returncode == 1 and "no database at" in missing.stderr
    assert not (tmp_path / "absent.db").exists()
    url = cli("--db", "postgresql://u@localhost/db", "import-from", "aidaemon", "--resource", "casa")
    assert url.returncode == 1 and "imports a SQLite file in place" in url.stderr
