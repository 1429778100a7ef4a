"""Ids are names, never paths: one rule, refused the same way by every entry, on every backend.

An id that reaches a URL (resource, thread, message, task, fact category and
key) is never ``.`` or ``..`` and holds no ``/``, ``\\`` or control
character: a browser resolves such a segment before sending it, so a stored
``../../bob`` once turned the inspector's "Delete message" into "erase
resource bob". The rule applies where an id is created or written; reads and
deletes stay permissive, so a database written before the rule still works
and its odd ids can be renamed or removed (see the README).
"""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _legacy import legacy_append, legacy_fact

import caderno
from caderno import Message
from caderno.core.errors import NotFound, UsageError
from caderno.core.validate import NAME_RULE
from caderno.memory.engines.task_rules import build_task
from caderno.stores import ops
from conftest import python_env

#: Ids a browser would resolve, or that hide a control character (C0, DEL, C1).
HOSTILE = [
    "..",
    ".",
    "../../bob",
    "../../../keys/k1",
    "a/b",
    "tab\there",
    "del\x7f",
    "c1\x85",
    "rlo\u202ebob",
    "zw\u200bsp",
]
HOSTILE_IDS = ["dotdot", "dot", "up-to-bob", "up-to-keys", "slash", "tab", "del", "c1", "bidi-override", "zero-width"]
#: Names that only look odd: each is one URL segment once encoded, and is kept.
ODD_BUT_NAMES = ["...", "a..b", ".hidden", "back\\slash", "résumé", "%2E%2E", "a b"]


async def everything(memory: caderno.Memory) -> str:
    """Every resource's export and every key, as one comparable text."""
    resources = await memory.list_resources()
    dumps = {r: await memory.export_resource(resource_id=r) for r in resources}
    for dump in dumps.values():
        for task in dump["scheduled_tasks"]:
            task.pop("next_run_at", None)
    keys = [(k.id, k.resources, k.admin, str(k.revoked_at)) for k in await memory.keys.list()]
    return json.dumps({"resources": resources, "dumps": dumps, "keys": keys}, sort_keys=True, default=str)


def writes(bad: str) -> list[tuple[str, Callable[[caderno.Memory], Awaitable[Any]]]]:
    """Every way the Python API creates or writes an id, each given ``bad`` in one place."""
    user = [Message.user("oi")]
    return [
        ("append resource", lambda m: m.append_messages(resource_id=bad, thread_id="t", messages=user)),
        ("append thread", lambda m: m.append_messages(resource_id="casa", thread_id=bad, messages=user)),
        (
            "append message id",
            lambda m: m.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("oi", id=bad)]),
        ),
        ("turns.commit thread", lambda m: m.turns.commit(resource_id="casa", thread_id=bad, messages=user)),
        ("threads.create resource", lambda m: m.threads.create(resource_id=bad, thread_id="t2")),
        ("threads.create thread", lambda m: m.threads.create(resource_id="casa", thread_id=bad)),
        ("threads.update thread", lambda m: m.threads.update(resource_id="casa", thread_id=bad, title="x")),
        ("working memory resource", lambda m: m.update_working_memory(resource_id=bad, patch={"a": 1})),
        ("fact resource", lambda m: m.facts.remember(resource_id=bad, category="home", key="city", value="x")),
        ("fact category", lambda m: m.facts.remember(resource_id="casa", category=bad, key="city", value="x")),
        ("fact key", lambda m: m.facts.remember(resource_id="casa", category="home", key=bad, value="x")),
        ("task resource", lambda m: m.tasks.add(resource_id=bad, name="n", schedule="daily at 9am", prompt="p")),
        ("task name", lambda m: m.tasks.add(resource_id="casa", name=bad, schedule="daily at 9am", prompt="p")),
        (
            "task thread",
            lambda m: m.tasks.add(resource_id="casa", name="n", schedule="daily at 9am", prompt="p", thread_id=bad),
        ),
        ("prefix resource", lambda m: m.prefixes.allow_always(resource_id=bad, prefix="git status")),
        ("key resource", lambda m: m.keys.create(resources=[bad])),
    ]


@pytest.fixture
async def seeded(memory: caderno.Memory) -> caderno.Memory:
    await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("oi")])
    await memory.update_working_memory(resource_id="casa", patch={"a": 1})
    await memory.facts.remember(resource_id="casa", category="home", key="city", value="Curitiba")
    await memory.tasks.add(resource_id="casa", name="brief", schedule="daily at 9am", prompt="Brief me.")
    await memory.keys.create(resources=["casa"], name="casa key")
    return memory


@pytest.mark.parametrize("bad", HOSTILE, ids=HOSTILE_IDS)
async def test_every_write_refuses_an_id_that_is_a_path(seeded: caderno.Memory, bad: str) -> None:
    before = await everything(seeded)
    for what, write in writes(bad):
        with pytest.raises(UsageError) as refused:
            await write(seeded)
            pytest.fail(f"{what} took {bad!r}")
        assert f"{bad!r} is not a valid name: {NAME_RULE}" in str(refused.value), what
    assert await everything(seeded) == before


async def test_names_that_only_look_odd_are_kept(memory: caderno.Memory) -> None:
    for name in ODD_BUT_NAMES:
        await memory.append_messages(resource_id=name, thread_id=name, messages=[Message.user("oi", id=name)])
        await memory.facts.remember(resource_id=name, category=name, key=name, value="v")
        await memory.tasks.add(resource_id=name, name=name, schedule="daily at 9am", prompt="p")
        [stored] = await memory.get_messages(resource_id=name, thread_id=name)
        assert stored.id == name
    assert sorted(await memory.list_resources()) == sorted(ODD_BUT_NAMES)


def poisoned(dump: dict[str, Any], bad: str) -> list[tuple[str, dict[str, Any]]]:
    """The export with ``bad`` in each place that holds a URL id, one place at a time."""

    def put(where: str, change: Callable[[dict[str, Any]], None]) -> tuple[str, dict[str, Any]]:
        copied = copy.deepcopy(dump)
        change(copied)
        return where, copied

    def set_(path: list[Any], value: Any = bad) -> Callable[[dict[str, Any]], None]:
        def change(d: dict[str, Any]) -> None:
            for step in path[:-1]:
                d = d[step]
            d[path[-1]] = value

        return change

    return [
        put("resource_id", set_(["resource_id"])),
        put("thread id", set_(["threads", 1, "id"])),
        put("message id", set_(["threads", 1, "messages", 0, "id"])),
        put("fact category", set_(["facts", 0, "category"])),
        put("fact key", set_(["facts", 0, "key"])),
        put("fact history key", set_(["fact_history", 0, "key"])),
        put("message log message", set_(["message_log", 0, "message_id"])),
        put("message log thread", set_(["message_log", 0, "thread_id"])),
        put("task name", set_(["scheduled_tasks", 0, "name"])),
        put("task thread", set_(["scheduled_tasks", 0, "thread_id"])),
    ]


async def test_an_import_holding_a_path_id_anywhere_is_refused_whole(seeded: caderno.Memory) -> None:
    await seeded.append_messages(resource_id="casa", thread_id="u", messages=[Message.user("two"), Message.user("x")])
    await seeded.facts.remember(resource_id="casa", category="home", key="city", value="Lisboa")  # a history entry
    await seeded.messages.pop(resource_id="casa", thread_id="u", reason="a log entry")
    dump = await seeded.export_resource(resource_id="casa")
    dump["resource_id"] = "casa-copy"
    assert len(dump["threads"]) == 2 and dump["fact_history"] and dump["message_log"]
    before = await everything(seeded)
    for bad in ("..", "../../bob", "a/b\x85"):
        for where, doc in poisoned(dump, bad):
            with pytest.raises(UsageError, match="not a valid name") as refused:
                await seeded.import_resource(doc)
            assert NAME_RULE in str(refused.value), where
            assert await everything(seeded) == before, where
    await seeded.import_resource(dump)  # the same document, unpoisoned, goes in
    assert len((await seeded.export_resource(resource_id="casa-copy"))["threads"]) == 2


# -- a database written before the rule --------------------------------------------------------


async def test_legacy_ids_read_rename_and_delete_on_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    async with caderno.connect(url, embedder=None) as memory:
        await legacy_append(memory, resource_id="carol", thread_id="../../bob", messages=[("..", "one"), (".", "two")])
        await legacy_append(memory, resource_id="carol", thread_id="fine", messages=[("../../../keys/k1", "three")])
        await legacy_append(memory, resource_id="..", thread_id="t", messages=[(None, "in resource ..")])
        await legacy_fact(memory, resource_id="carol", category="a/b", key="..", value="v")
        task = build_task(resource_id="carol", name="brief", schedule="daily at 9am", prompt="p")
        await memory.run(ops.PutTask(task=replace(task, name="../x"), create=True))
    with sqlite3.connect(tmp_path / "old.db") as conn:  # the rows are in the file, as an old caderno left them
        held = {row[0] for row in conn.execute("SELECT id FROM events")}
    assert {"..", ".", "../../../keys/k1"} <= held

    async with caderno.connect(url, embedder=None) as memory:
        # Reads work.
        assert {t.id for t in await memory.list_threads(resource_id="carol")} == {"../../bob", "fine"}
        old = await memory.get_messages(resource_id="carol", thread_id="../../bob")
        assert [(m.id, m.content) for m in old] == [("..", "one"), (".", "two")]
        assert [f.key for f in await memory.facts.list(resource_id="carol", category="a/b")] == [".."]
        assert (await memory.tasks.get(resource_id="carol", name="../x")).prompt == "p"
        assert "../../bob" in json.dumps(await memory.export_resource(resource_id="carol"))
        # Writes to them are refused, with the rule.
        with pytest.raises(UsageError, match="not a valid name"):
            await memory.append_messages(resource_id="carol", thread_id="../../bob", messages=[Message.user("more")])
        # Rename: copy the messages to a new thread (new ids), then delete the old thread.
        await memory.append_messages(
            resource_id="carol", thread_id="from-bob", messages=[m.with_(id=None) for m in old]
        )
        await memory.delete_thread(resource_id="carol", thread_id="../../bob")
        assert [m.content for m in await memory.get_messages(resource_id="carol", thread_id="from-bob")] == [
            "one",
            "two",
        ]
        assert {t.id for t in await memory.list_threads(resource_id="carol")} == {"from-bob", "fine"}
        # Deletes work.
        await memory.messages.delete(resource_id="carol", message_id="../../../keys/k1")
        assert await memory.get_messages(resource_id="carol", thread_id="fine") == []
        await memory.facts.forget(resource_id="carol", category="a/b", key="..")
        await memory.tasks.delete(resource_id="carol", name="../x")
        await memory.erase_resource(resource_id="..")
        assert await memory.list_resources() == ["carol"]
        with pytest.raises(NotFound):
            await memory.tasks.get(resource_id="carol", name="../x")


# -- the other entries: the CLI and MCP in real subprocesses, the importers ------------------------


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(argv, env=python_env(), capture_output=True, text=True, timeout=120)


async def test_the_cli_refuses_path_ids_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    assert cli(db, "threads", "create", "casa", "ok").returncode == 0
    dumped = cli(db, "export", "casa").stdout
    for args in (
        ("threads", "create", "casa", "../../bob"),
        ("threads", "create", "..", "t"),
        ("facts", "add", "casa", "a/b", "k", "v"),
        ("tasks", "add", "casa", "..", "daily at 9am", "p"),
        ("mcp", "--resource", "../../bob"),
    ):
        done = cli(db, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and NAME_RULE in done.stderr and "Traceback" not in done.stderr, args
    assert cli(db, "export", "casa").stdout == dumped
    async with caderno.connect(f"sqlite:///{db}", embedder=None) as memory:
        assert await memory.list_resources() == ["casa"]


async def test_mcp_tools_refuse_path_ids(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    db = tmp_path / "mcp.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "caderno.cli", "--db", str(db), "mcp", "--resource", "casa"],
        env=python_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for arguments in ({"category": "a/b", "key": "k", "value": "v"}, {"category": "c", "key": "..", "value": "v"}):
            result = await session.call_tool("remember_fact", arguments)
            text = "".join(part.text for part in result.content)
            assert result.is_error and NAME_RULE in text and "Traceback" not in text, text
    async with caderno.connect(f"sqlite:///{db}", embedder=None) as memory:
        assert await memory.facts.list(resource_id="casa") == []


MASTRA = Path(__file__).parents[1] / "integrations" / "fixtures" / "mastra.sqlite"


async def test_a_mastra_database_with_a_path_id_is_refused_whole(tmp_path: Path) -> None:
    from caderno.integrations.importers import import_mastra

    source = tmp_path / "mastra.sqlite"
    source.write_bytes(MASTRA.read_bytes())
    with sqlite3.connect(source) as conn:  # the second thread (by time) gets a hostile id
        conn.execute("UPDATE mastra_messages SET thread_id = '../../bob' WHERE thread_id = 'thread-weather'")
        conn.execute("UPDATE mastra_threads SET id = '../../bob' WHERE id = 'thread-weather'")
    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}", embedder=None) as memory:
        with pytest.raises(UsageError, match="not a valid name"):
            await import_mastra(memory, source)
        assert await memory.list_resources() == []
        with pytest.raises(UsageError, match="not a valid name"):
            await import_mastra(memory, MASTRA, resource_id="..")
        assert await memory.list_resources() == []


async def test_an_agents_sdk_file_with_a_path_session_is_refused_whole(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import SQLiteSession

    from caderno.integrations.importers import import_openai_agents

    source = tmp_path / "agents.sqlite"
    for sid in ("s1", "../../bob"):
        session = SQLiteSession(sid, source)
        try:
            await session.add_items([{"role": "user", "content": f"hello from {sid}"}])
        finally:
            session.close()
    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}", embedder=None) as memory:
        with pytest.raises(UsageError, match="not a valid name"):
            await import_openai_agents(memory, source, resource_id="ana")
        assert await memory.list_resources() == []
