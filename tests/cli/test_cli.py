"""The CLI in a real subprocess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import caderno
from caderno import Message
from conftest import python_env


def cli(*args: str, db: Path, env_db: bool = False) -> subprocess.CompletedProcess[str]:
    env = python_env()
    argv = [sys.executable, "-m", "caderno.cli"]
    if env_db:
        env["CADERNO_DB"] = str(db)
    else:
        argv += ["--db", str(db)]
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"

    async def seed() -> None:
        async with caderno.connect(path) as memory:
            await memory.append_messages(
                resource_id="casa",
                thread_id="t1",
                messages=[Message.user("a meta de Amsterdam"), Message.assistant("EUR 6000")],
            )
            await memory.update_working_memory(resource_id="casa", patch={"monthlyIncomeBRL": 14000})

    asyncio.run(seed())
    return path


def test_threads_list_and_show(db: Path) -> None:
    out = cli("threads", "list", "casa", db=db)
    assert out.returncode == 0 and "t1" in out.stdout
    listed = json.loads(cli("threads", "list", "casa", "--json", db=db).stdout)
    assert listed[0]["id"] == "t1" and listed[0]["message_count"] == 2
    shown = cli("threads", "show", "casa", "t1", db=db, env_db=True)
    assert "a meta de Amsterdam" in shown.stdout and "EUR 6000" in shown.stdout
    last = json.loads(cli("threads", "show", "casa", "t1", "--limit", "1", "--json", db=db).stdout)
    assert [m["content"] for m in last] == ["EUR 6000"]


def test_wm_show_and_patch(db: Path) -> None:
    out = cli("wm", "patch", "casa", '{"currencyPreferred": "BRL"}', db=db)
    assert out.returncode == 0 and "version 2" in out.stdout
    state = json.loads(cli("wm", "show", "casa", "--json", db=db).stdout)
    assert state == {"data": {"monthlyIncomeBRL": 14000, "currencyPreferred": "BRL"}, "version": 2}
    assert "14000" in cli("wm", "show", "casa", db=db).stdout


@pytest.mark.parametrize(
    "patch,message",
    [
        ("{not json", "PATCH is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"text"', "must be a JSON object"),
    ],
)
def test_bad_patch_is_one_line_and_writes_nothing(db: Path, patch: str, message: str) -> None:
    out = cli("wm", "patch", "casa", patch, db=db)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and message in out.stderr and "Traceback" not in out.stderr
    assert json.loads(cli("wm", "show", "casa", "--json", db=db).stdout)["version"] == 1


def test_export_import_and_erase(db: Path, tmp_path: Path) -> None:
    dump = tmp_path / "casa.json"
    assert cli("export", "casa", "-o", str(dump), db=db).returncode == 0
    assert json.loads(dump.read_text())["resource_id"] == "casa"
    refused = cli("erase", "casa", db=db)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert cli("erase", "casa", "--yes", db=db).returncode == 0
    assert json.loads(cli("threads", "list", "casa", "--json", db=db).stdout) == []
    assert cli("import", str(dump), db=db).returncode == 0
    again = cli("import", str(dump), db=db)
    assert again.returncode == 1 and "already holds data" in again.stderr
    assert [m["content"] for m in json.loads(cli("threads", "show", "casa", "t1", "--json", db=db).stdout)] == [
        "a meta de Amsterdam",
        "EUR 6000",
    ]


def test_import_of_invalid_json_is_refused(db: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    out = cli("import", str(bad), db=db)
    assert out.returncode == 1 and "is not valid JSON" in out.stderr


def test_not_a_database_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    path.write_text("hello")
    out = cli("threads", "list", "casa", db=path)
    assert out.returncode == 1 and "is not a SQLite database" in out.stderr and "Traceback" not in out.stderr
    assert path.read_text() == "hello"


def test_recall_and_reindex(tmp_path: Path) -> None:
    db = tmp_path / "r.db"

    async def seed() -> None:
        async with caderno.connect(db, embedder=None) as memory:  # leaves the embedding to the CLI
            await memory.append_messages(
                resource_id="casa",
                thread_id="viagem",
                messages=[Message.user("We decided the Lisbon trip is in May, budget EUR 3000.")],
            )
            await memory.append_messages(
                resource_id="casa", thread_id="jantar", messages=[Message.user("Risotto for dinner tonight.")]
            )

    asyncio.run(seed())
    out = cli("recall", "casa", "money for the Portugal holiday", "--json", db=db)
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert hits[0]["message"]["content"].startswith("We decided the Lisbon trip") and "relevant" in hits[0]["reasons"]
    human = cli("recall", "casa", "Lisbon", "--thread", "jantar", db=db)
    assert "Lisbon" in human.stdout and "lexical" in human.stdout
    bad = cli("recall", "casa", "x", "--scope", "thread", db=db)
    assert bad.returncode == 1 and "needs a thread_id" in bad.stderr
    again = cli("reindex", "casa", db=db)
    assert again.returncode == 0 and "re-embedded 2 message(s)" in again.stdout


def test_consolidate_and_threads_show_marks(tmp_path: Path) -> None:
    db = tmp_path / "long.db"

    async def seed() -> None:
        async with caderno.connect(db, embedder=None) as memory:
            # Another resource writes first: every number shown must be t's own.
            await memory.append_messages(
                resource_id="vizinho", thread_id="t", messages=[Message.user("not yours")] * 9
            )
            for i in range(60):
                await memory.append_messages(
                    resource_id="casa",
                    thread_id="t",
                    messages=[
                        Message.user(f"Item {i}: we paid R$ {i}0,00 at Mercado Central for the weekly groceries."),
                        Message.assistant(f"Logged item {i}; the running total for the month is updated."),
                    ],
                )

    asyncio.run(seed())
    out = cli("consolidate", "casa", "--json", db=db)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["summaries"] == 1
    shown = cli("threads", "show", "casa", "t", db=db).stdout
    assert "summary of #1–#" in shown and "(extractive)" in shown and "(summarised)" in shown
    raw = cli("threads", "show", "casa", "t", "--raw", db=db).stdout
    assert "summary of" not in raw and "(summarised)" not in raw and raw.count("Mercado Central") == 60
    assert "user #1 " in shown and "assistant #120 " in shown and "#121" not in shown
    items = json.loads(cli("threads", "show", "casa", "t", "--json", db=db).stdout)
    assert sum(1 for i in items if i.get("summary")) == 1
    assert any(i.get("consolidated") for i in items) and not all(i.get("consolidated", True) for i in items)
    assert all("seq" not in i for i in items)
    (summary,) = [i for i in items if i.get("summary")]
    first, last = summary["metadata"]["span"]
    assert first == 1 and "covers" not in summary["metadata"]
    messages = [i for i in items if not i.get("summary")]
    assert [i["position"] for i in messages] == list(range(1, 121))
    assert [i["consolidated"] for i in messages] == [p <= last for p in range(1, 121)]
    # The summary stands where the span it covers begins, as in the inspector.
    assert items.index(summary) == first - 1 == 0


def test_threads_create_and_update(db: Path) -> None:
    made = cli(
        "threads", "create", "casa", "viagem", "--title", "Lisboa", "--metadata", '{"mes": "maio"}', "--json", db=db
    )
    assert made.returncode == 0, made.stderr
    assert {k: json.loads(made.stdout)[k] for k in ("id", "title", "metadata", "message_count")} == {
        "id": "viagem",
        "title": "Lisboa",
        "metadata": {"mes": "maio"},
        "message_count": 0,
    }
    again = cli("threads", "create", "casa", "viagem", db=db)
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "already has a thread" in again.stderr
    anonymous = cli("threads", "create", "casa", db=db)
    assert anonymous.returncode == 0 and anonymous.stdout.startswith("created thread ")

    def viagem() -> dict:
        listed = json.loads(cli("threads", "list", "casa", "--json", db=db).stdout)
        return next(t for t in listed if t["id"] == "viagem")

    assert cli("threads", "update", "casa", "viagem", "--title", "Porto", db=db).returncode == 0
    assert (listed := viagem())["title"] == "Porto" and listed["metadata"] == {"mes": "maio"}
    assert cli("threads", "update", "casa", "viagem", "--metadata", "null", db=db).returncode == 0
    assert (listed := viagem())["title"] == "Porto" and listed["metadata"] is None
    cleared = cli("threads", "update", "casa", "viagem", "--clear-title", "--json", db=db)
    assert json.loads(cleared.stdout)["title"] is None
    for args, message in [
        ((), "nothing to change"),
        (("--title", "x", "--clear-title"), "not both"),
        (("--metadata", "{oops"), "--metadata is not valid JSON"),
        (("--metadata", "[1]"), "metadata must be a JSON object"),
    ]:
        out = cli("threads", "update", "casa", "viagem", *args, db=db)
        assert out.returncode == 1 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    missing = cli("threads", "update", "outra-casa", "viagem", "--title", "x", db=db)
    assert missing.returncode == 1 and "has no thread 'viagem'" in missing.stderr
    assert viagem()["title"] is None


def test_messages_pop_edit_delete_and_log(db: Path) -> None:
    first, second = json.loads(cli("threads", "show", "casa", "t1", "--json", db=db).stdout)
    edited = cli("messages", "edit", "casa", first["id"], "a meta de Lisboa", "--reason", "typo", db=db)
    assert edited.returncode == 0 and "a meta de Lisboa" in edited.stdout
    assert (first["position"], second["position"]) == (1, 2) and "seq" not in first
    popped = json.loads(cli("messages", "pop", "casa", "t1", "--json", db=db).stdout)
    assert (popped["id"], popped["content"], popped["position"]) == (second["id"], "EUR 6000", 2)
    assert "seq" not in popped
    shown = json.loads(cli("threads", "show", "casa", "t1", "--json", db=db).stdout)
    assert [m["content"] for m in shown] == ["a meta de Lisboa"]
    deleted = cli("messages", "delete", "casa", first["id"], "--reason", "privacy", db=db)
    assert deleted.returncode == 0 and "deleted user message #1 " in deleted.stdout
    empty = cli("messages", "pop", "casa", "t1", db=db)
    assert empty.returncode == 0 and "nothing popped" in empty.stdout
    assert json.loads(cli("messages", "pop", "casa", "t1", "--json", db=db).stdout) is None
    log = json.loads(cli("messages", "log", "casa", "--json", db=db).stdout)
    assert [(e["action"], e["old_content"], e["actor"], e["reason"]) for e in log] == [
        ("edit", "a meta de Amsterdam", "cli", "typo"),
        ("pop", None, "cli", None),
        ("delete", None, "cli", "privacy"),
    ]
    only = json.loads(cli("messages", "log", "casa", "--message", second["id"], "--json", db=db).stdout)
    assert [e["action"] for e in only] == ["pop"]
    human = cli("messages", "log", "casa", db=db)
    assert human.returncode == 0 and all(w in human.stdout for w in ("Amsterdam", "privacy", "edit", "pop", "delete"))
    for verb in (("edit", "casa", first["id"], "x"), ("delete", "outra-casa", second["id"])):
        out = cli("messages", *verb, db=db)
        assert out.returncode == 1 and out.stderr.count("\n") == 1 and "has no message" in out.stderr
    assert len(json.loads(cli("messages", "log", "casa", "--json", db=db).stdout)) == 3


def test_export_is_private_and_never_written_through_a_planted_link(db: Path, tmp_path: Path) -> None:
    """An export holds the whole resource: 0600 even over an older 0644 export, and a link is refused."""
    dump = tmp_path / "casa.json"
    dump.write_text("old export\n")
    dump.chmod(0o644)
    assert cli("export", "casa", "-o", str(dump), db=db).returncode == 0
    assert dump.stat().st_mode & 0o777 == 0o600 and "Amsterdam" in dump.read_text()
    target = tmp_path / "elsewhere.txt"
    target.write_text("not yours\n")
    link = tmp_path / "planted.json"
    link.symlink_to(target)
    out = cli("export", "casa", "-o", str(link), db=db)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"caderno: error: cannot write {link}: it is a symbolic link, and caderno never writes an export through one"
    )
    assert target.read_text() == "not yours\n" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left behind
