"""What only the SQLite backend has: settings, files, migrations, cache, processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _migrations import sqlite_migrated_up_to

import caderno
from caderno import Message
from caderno.core.errors import SchemaTooNew, StorageError
from caderno.stores.sqlite import SQLiteStore
from conftest import python_env


async def test_pragmas_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    assert not path.exists()
    async with caderno.connect(f"sqlite:///{path}") as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("x")])
        store = memory.store
        assert isinstance(store, SQLiteStore)
        w = store._writer
        assert w.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert w.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert w.execute("PRAGMA secure_delete").fetchone()[0] == 1
        assert w.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert w.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
        tables = {r[0] for r in w.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"resources", "threads", "events", "working_memory_log", "schema_migrations"} <= tables
    async with caderno.connect(f"sqlite:///{path}?synchronous=normal") as memory:
        await memory.get_messages(resource_id="r", thread_id="t")
        assert memory.store._writer.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


async def test_reader_pool_is_bounded(tmp_path: Path) -> None:
    async with caderno.connect(tmp_path / "c.db", cache_messages=0) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("x")])
        await asyncio.gather(*(memory.get_messages(resource_id="r", thread_id="t") for _ in range(50)))
        assert 1 <= len(memory.store._readers) <= 5


async def test_erase_leaves_no_trace_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    # Lowercase and one token: exactly what the full-text index would keep.
    marker = "marcadorunico7f3a9c"
    async with caderno.connect(path) as memory:
        await memory.append_messages(resource_id="keep", thread_id="t", messages=[Message.user("outro texto")])
        await memory.append_messages(resource_id="gone", thread_id="t", messages=[Message.user(f"o {marker} aqui")])
        await memory.append_messages(resource_id="gone", thread_id="t", messages=[Message.user(marker * 50)])
        await memory.update_working_memory(resource_id="gone", patch={"segredo": marker})
        await memory.erase_resource(resource_id="gone")
    # The files after close. (While open: tests/reliability's erasure checks. The test once ran its own
    # checkpoint here, on the writer connection from the test's thread: "database table is locked"
    # whenever the background embedding was using it.)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("c.db"))
    assert marker.encode() not in data
    assert b"outro texto" in data


async def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    tmp_path = tmp_path / "d"
    tmp_path.mkdir()
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, not a database\n" * 10)
    before = path.read_bytes()
    with pytest.raises(StorageError, match="is not a SQLite database"):
        await caderno.connect(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


async def test_a_newer_schema_is_refused_not_downgraded(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("x")])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.execute("INSERT INTO schema_migrations VALUES ('0099_future', 'later')")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer"):
        await caderno.connect(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 1


def _legacy_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        """CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
           content TEXT, tool_call_id TEXT, tool_name TEXT, tool_calls_json TEXT, created_at TEXT NOT NULL,
           importance REAL DEFAULT 0.5, embedding BLOB, embedding_error TEXT, consolidated_at TEXT)"""
    )
    calls = json.dumps(
        [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "budget_total", "arguments": '{"month": "2026-06"}'},
            }
        ]
    )
    rows = [
        # inserted out of order on purpose; created_at then id decides.
        ("m3", "s1", "tool", '{"total": 10}', "call_9", "budget_total", None, "2026-05-01T10:00:02Z", 0.3, None),
        ("m1", "s1", "user", "quanto gastamos?", None, None, None, "2026-05-01T10:00:00Z", 0.9, None),
        ("m2", "s1", "assistant", "", None, None, calls, "2026-05-01T10:00:01Z", 0.5, "2026-05-02T00:00:00Z"),
        ("m4b", "s1", "assistant", "R$ 10", None, None, None, "2026-05-01T10:00:03Z", 0.5, None),
        ("m4a", "s1", "user", "obrigado", None, None, None, "2026-05-01T10:00:03Z", 0.5, None),
        ("x1", "s2", "user", "outra sessão", None, None, None, "2026-05-03T09:00:00Z", 0.5, None),
    ]
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_name, tool_calls_json, "
        "created_at, importance, consolidated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    conn.commit()
    conn.close()


async def test_legacy_messages_table_is_migrated_once(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    _legacy_db(path)
    for _ in range(2):  # a second import must not duplicate anything
        async with caderno.connect(path, import_from="aidaemon", legacy_resource_id="casa") as memory:
            got = await memory.get_messages(resource_id="casa", thread_id="s1")
            assert [m.id for m in got] == ["m1", "m2", "m3", "m4a", "m4b"]
            assert got[0].importance == 0.9
            assert got[1].tool_calls and got[1].tool_calls[0].arguments == {"month": "2026-06"}
            assert got[2].tool_call_id == "call_9" and got[2].name == "budget_total"
            assert [t.id for t in await memory.list_threads(resource_id="casa")] == ["s2", "s1"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='messages'").fetchone() is None
    # aidaemon's consolidated_at ("facts extracted") is kept aside, not as caderno's (a summary covers it).
    consolidated, metadata = conn.execute("SELECT consolidated_at, metadata FROM events WHERE id='m2'").fetchone()
    assert consolidated is None
    assert json.loads(metadata)["legacy"]["facts_extracted_at"] == "2026-05-02T00:00:00.000000+00:00"


async def test_legacy_migration_after_a_half_finished_run_does_not_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    _legacy_db(path)
    # Simulate an earlier run that created the new schema and copied one row,
    # then died before dropping the old table.
    async with caderno.connect(tmp_path / "scratch.db"):
        pass
    conn = sqlite_migrated_up_to(path, "0001_core")
    conn.execute("INSERT INTO threads VALUES ('default', 's1', NULL, NULL, 'x')")
    conn.execute(
        "INSERT INTO events (id, resource_id, thread_id, role, content, created_at) "
        "VALUES ('m1', 'default', 's1', 'user', 'quanto gastamos?', '2026-05-01T10:00:00.000000+00:00')"
    )
    conn.close()
    async with caderno.connect(path, import_from="aidaemon") as memory:
        got = await memory.get_messages(resource_id="default", thread_id="s1")
        assert [m.id for m in got] == ["m1", "m2", "m3", "m4a", "m4b"]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=python_env(), capture_output=True, text=True, timeout=120
    )


async def test_cache_never_hides_another_process_write(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("first")])
        assert len(await memory.get_messages(resource_id="r", thread_id="t", limit=20)) == 1
        assert len(await memory.get_messages(resource_id="r", thread_id="t", limit=20)) == 1
        assert memory.store.cache.hits >= 1  # the second read came from the cache
        proc = _run(
            f"""
            import asyncio, caderno
            async def main():
                async with caderno.connect({str(path)!r}) as m:
                    await m.append_messages(resource_id="r", thread_id="t", messages=[caderno.Message.user("second")])
            asyncio.run(main())
            """
        )
        assert proc.returncode == 0, proc.stderr
        got = await memory.get_messages(resource_id="r", thread_id="t", limit=20)
        assert [m.content for m in got] == ["first", "second"]


async def test_two_processes_patch_different_keys_both_land(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path) as memory:
        await memory.update_working_memory(resource_id="r", patch={"start": True})
    code = """
        import asyncio, sys, caderno
        async def main(tag):
            async with caderno.connect({path!r}) as m:
                for i in range(25):
                    await m.update_working_memory(resource_id="r", patch={{f"{{tag}}{{i}}": i}})
        asyncio.run(main(sys.argv[1]))
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code.format(path=str(path))), tag],
            env=python_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    async with caderno.connect(path) as memory:
        state = await memory.working_memory.state(resource_id="r")
        assert state is not None and state.version == 51
        assert set(state.data) == {"start"} | {f"{t}{i}" for t in "ab" for i in range(25)}


async def test_cancelled_append_is_all_or_nothing(tmp_path: Path) -> None:
    async with caderno.connect(tmp_path / "c.db") as memory:
        task = asyncio.create_task(
            memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user(str(i)) for i in range(500)])
        )
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)
        assert len(await memory.get_messages(resource_id="r", thread_id="t")) in (0, 500)


async def test_append_after_another_connection_deleted_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with caderno.connect(path) as a, caderno.connect(path) as b:
        await a.append_messages(resource_id="r", thread_id="t", messages=[Message.user("1")])
        await b.erase_resource(resource_id="r")
        await a.append_messages(resource_id="r", thread_id="t", messages=[Message.user("2")])
        assert [m.content for m in await b.get_messages(resource_id="r", thread_id="t")] == ["2"]
        assert [t.id for t in await b.list_threads(resource_id="r")] == ["t"]


async def test_concurrent_appends_share_commits_and_fail_alone(tmp_path: Path) -> None:
    """Group commit: one failing append (a duplicate id) leaves the others that shared its commit."""
    async with caderno.connect(tmp_path / "g.db", embedder=None) as memory:
        (first,) = await memory.append_messages(resource_id="r", thread_id="t0", messages=[Message.user("first")])
        duplicate = Message.user("dup", id=first.id)

        async def append(i: int) -> str:
            msgs = [duplicate] if i == 7 else [Message.user(f"m{i}"), Message.assistant(f"a{i}")]
            try:
                await memory.append_messages(resource_id="r", thread_id=f"t{i}", messages=msgs)
                return "ok"
            except caderno.UsageError:
                return "refused"

        outcomes = await asyncio.gather(*(append(i) for i in range(1, 33)))
        assert outcomes.count("refused") == 1 and outcomes[6] == "refused"
        assert memory.store._group_writer.largest_group > 1  # type: ignore[attr-defined]  # they did share
        for i in range(1, 33):
            got = [m.content for m in await memory.get_messages(resource_id="r", thread_id=f"t{i}")]
            assert got == ([] if i == 7 else [f"m{i}", f"a{i}"])


async def test_full_text_finds_a_message_as_soon_as_its_append_returns(tmp_path: Path) -> None:
    """Read-your-writes for lexical recall, although full text is indexed in batches."""
    from caderno.stores.sqlite import FTS_BATCH

    async with caderno.connect(tmp_path / "f.db", embedder=None) as memory:
        for i in range(3):  # fewer than a batch: nothing indexed by the writer yet
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user(f"filler {i}")])
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("the zanzibar budget")])
        hits = await memory.recall(resource_id="r", query="zanzibar", recent=0, salient=0, relevant=0, top=1)
        assert [h.message.content for h in hits] == ["the zanzibar budget"]
        many = [Message.user(f"bulk {i} quokka") for i in range(FTS_BATCH + 5)]
        await memory.append_messages(resource_id="r", thread_id="t", messages=many)
        hits = await memory.recall(resource_id="r", query="quokka", recent=0, salient=0, relevant=0, lexical=3)
        assert len(hits) == 3
        edited = await memory.messages.edit(resource_id="r", message_id=hits[0].message.id or "", content="wombat now")
        assert [
            h.message.id
            for h in await memory.recall(resource_id="r", query="wombat", recent=0, salient=0, relevant=0, top=1)
        ] == [edited.id]
