"""Processes killed with SIGKILL at random points of every kind of write.

Each scenario runs a child process that writes in a loop and prints
``begin <tag>`` before each call and ``ack <tag>`` once it returned. The
parent kills it at a random moment, then checks that the database (or the
notebook directory) opens cleanly, that every acknowledged write is there,
and that nothing is half there:

- appends: concurrent batches on several threads; a batch is all its
  messages, adjacent and in order, or none of them;
- working-memory patches, plain and compare-and-swap: a key is present iff
  its patch was acknowledged or in flight, and the patch log agrees;
- ``import_resource`` of a sizeable export: the resource equals the export,
  or holds nothing;
- ``erase_resource`` of a sizeable resource: erased completely, or untouched;
- migrations of a fresh database (SQLite file, PostgreSQL schema) and of an
  older agent's SQLite file: the next open finds the latest schema and, for
  the older file, every one of its messages;
- notebook writes (filesystem only): the file parses and holds every
  acknowledged entry.

``CADERNO_CRASH_KILLS`` sets the number of kills per scenario and backend
(a long run: ``CADERNO_CRASH_KILLS=100 pytest tests/reliability/test_crash.py``);
``CADERNO_CRASH_SEED`` replays one run's kill delays.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _pg import pg_schema

import caderno
from caderno import Message

#: One xdist worker runs the module, in order: ``test_zz_summary`` reads what the others counted.
pytestmark = pytest.mark.xdist_group("crash")

KILLS = int(os.environ.get("CADERNO_CRASH_KILLS", "3"))
SEED = int(os.environ.get("CADERNO_CRASH_SEED", "20261202"))
SRC = Path(__file__).resolve().parents[2] / "src"

#: Size of the resource imported and erased: big enough that a kill lands
#: inside the transaction often (an import takes ~0.1 s on SQLite).
SEED_THREADS, SEED_MESSAGES, SEED_FACTS = 4, 400, 40
#: Rows of the older agent's ``messages`` table: its migration takes ~0.2 s.
LEGACY_MESSAGES = 4000

SURVIVED: dict[str, int] = {k: 0 for k in ("appends", "patches", "imports", "erases", "migrations", "notebook")}
PROBLEMS: list[str] = []


def python_env() -> dict[str, str]:
    # Not imported from tests/conftest.py: with a conftest.py in this folder
    # too, ``import conftest`` would find whichever was loaded last.
    return {**os.environ, "PYTHONPATH": str(SRC)}


def expect(condition: object, problem: str) -> None:
    """Assert, and count the failure for the summary line."""
    if not condition:
        PROBLEMS.append(problem)
        raise AssertionError(problem)


def rng_for(scenario: str, url: str) -> random.Random:
    backend = "postgres" if url.startswith("postgres") else "sqlite"
    return random.Random(f"{SEED}-{scenario}-{backend}")


PRELUDE = textwrap.dedent(
    """
    import asyncio, json, os, sys, threading
    import caderno
    from caderno import Message

    def say(*words):
        # One write(2) per line: a kill never leaves half an ack behind.
        os.write(1, (" ".join(str(w) for w in words) + "\\n").encode())
    """
)


class Child:
    """A child process run until a random moment, then killed with SIGKILL."""

    def __init__(self, body: str, *args: str) -> None:
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.acked = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(body), *args],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Read stdout as it comes: a full pipe would stall the child, and
        # the kill would then land on a blocked print instead of a write.
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "ready":
                self.ready.set()
            elif line:
                self.lines.append(line)
                if line.startswith("ack "):
                    self.acked.set()

    def kill_after(self, delay: float, *, once_acked: bool = False) -> None:
        """SIGKILL ``delay`` seconds after the child is ready (``once_acked``: after its first acknowledged write).

        ``once_acked`` is for a scenario's first kill while nothing has been acknowledged yet: on a loaded
        machine a child can still be starting when a short random delay runs out, and a scenario whose
        kills all land before any write finished checks nothing.
        """
        started = self.acked if once_acked else self.ready
        deadline = time.monotonic() + 60
        while not started.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                what = "acknowledged nothing" if once_acked and self.ready.is_set() else "never got ready"
                raise AssertionError(f"child {what}: {self._stderr()}")
        time.sleep(delay)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)
        self.reader.join(timeout=60)
        expect(
            self.proc.returncode == -signal.SIGKILL,
            f"child ended on its own ({self.proc.returncode}): {self._stderr()}",
        )

    def _stderr(self) -> str:
        return self.proc.stderr.read()[-2000:] if self.proc.stderr else ""

    def tags(self, word: str) -> list[str]:
        return [line.split(" ", 1)[1] for line in self.lines if line.startswith(word + " ")]


def pg_parts(url: str) -> tuple[str, str]:
    base, _, schema = url.partition("?schema=")
    return base, schema


def applied_migrations(url: str) -> set[str]:
    if url.startswith("postgres"):
        import psycopg

        base, schema = pg_parts(url)
        with psycopg.connect(base, autocommit=True) as conn:
            return {r[0] for r in conn.execute(f'SELECT name FROM "{schema}".schema_migrations')}
    conn = sqlite3.connect(url)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    finally:
        conn.close()
    from caderno.stores._sqlite_schema import MIGRATIONS

    expect(version == len(MIGRATIONS), f"{url}: user_version {version}, latest is {len(MIGRATIONS)}")
    return names


def latest_migrations(url: str) -> set[str]:
    if url.startswith("postgres"):
        from caderno.stores._postgres_schema import MIGRATIONS as PG

        return {name for name, _ in PG}
    from caderno.stores._sqlite_schema import MIGRATIONS

    return {name for name, _ in MIGRATIONS}


def opened(url: str, check: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """Open the database as a fresh process would, run ``check(memory, *args)``, close it."""

    async def run() -> Any:
        try:
            memory = await caderno.connect(url, embedder=None, **options)
        except Exception as exc:
            expect(False, f"{url} does not open after a kill: {exc!r}")
        try:
            return await check(memory, *args)
        finally:
            await memory.close()

    return asyncio.run(run())


# -- (a) appends ---------------------------------------------------------------------------------

BATCH = 5

APPENDS = """
    async def writer(memory, run, w):
        for i in range(10**9):
            tag = f"r{run}w{w}n{i}"
            thread = f"t{(w + i) % 6}"  # writers meet on the same threads
            say("begin", tag)
            await memory.append_messages(resource_id="casa", thread_id=thread,
                                         messages=[Message.user(f"{tag}#{j}") for j in range({batch})])
            say("ack", tag)

    async def main(url, run):
        async with caderno.connect(url, embedder=None) as memory:
            say("ready")
            await asyncio.gather(*(writer(memory, run, w) for w in range(4)))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """.replace("{batch}", str(BATCH))


def test_appends_whole_or_absent(shared_url: str) -> None:
    rng, acked, begun = rng_for("appends", shared_url), set(), set()
    for run in range(KILLS):
        child = Child(APPENDS, shared_url, str(run))
        child.kill_after(rng.uniform(0.0, 0.5), once_acked=not acked)
        acked |= set(child.tags("ack"))
        begun |= set(child.tags("begin"))
        opened(shared_url, check_appends, acked, begun)
        SURVIVED["appends"] += 1
    expect(acked, "no append was acknowledged: the kill window is too short")


async def check_appends(memory: caderno.Memory, acked: set[str], begun: set[str]) -> None:
    stored: dict[str, list[str]] = {}
    for thread in range(6):
        messages = await memory.get_messages(resource_id="casa", thread_id=f"t{thread}")
        contents = [m.content for m in messages]
        for k, content in enumerate(contents):
            tag, j = content.split("#")
            if j == "0":
                batch = contents[k : k + BATCH]
                expect(batch == [f"{tag}#{n}" for n in range(BATCH)], f"append {tag} partial: {batch}")
            stored.setdefault(tag, []).append(content)
    for tag, contents in stored.items():
        expect(len(contents) == BATCH, f"append {tag} stored {len(contents)} of {BATCH} messages")
    lost = acked - set(stored)
    expect(not lost, f"acknowledged appends lost (seed {SEED}): {sorted(lost)[:5]}")
    expect(set(stored) <= begun, f"appends nobody made: {sorted(set(stored) - begun)[:5]}")


# -- (b) working-memory patches ---------------------------------------------------------------------

PATCHES = """
    async def plain(memory, run, w):
        for i in range(10**9):
            tag = f"r{run}p{w}n{i}"
            say("begin", tag)
            await memory.update_working_memory(resource_id="casa", patch={"keys": {tag: True}})
            say("ack", tag)

    async def swap(memory, run, w):
        for i in range(10**9):
            tag = f"r{run}c{w}n{i}"
            say("begin", tag)
            while True:  # read, merge, write with expected_version; retry on a conflict
                state = await memory.working_memory.state(resource_id="casa")
                try:
                    await memory.update_working_memory(resource_id="casa", patch={"keys": {tag: True}},
                                                       expected_version=state.version if state else 0)
                    break
                except caderno.Conflict:
                    continue
            say("ack", tag)

    async def main(url, run):
        async with caderno.connect(url, embedder=None) as memory:
            say("ready")
            await asyncio.gather(plain(memory, run, 0), plain(memory, run, 1), swap(memory, run, 0), swap(memory, run, 1))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """


def test_patches_present_iff_acknowledged_or_in_flight(shared_url: str) -> None:
    rng, acked, begun = rng_for("patches", shared_url), set(), set()
    for run in range(KILLS):
        child = Child(PATCHES, shared_url, str(run))
        child.kill_after(rng.uniform(0.0, 0.5), once_acked=not acked)
        acked |= set(child.tags("ack"))
        begun |= set(child.tags("begin"))
        opened(shared_url, check_patches, acked, begun)
        SURVIVED["patches"] += 1
    expect(acked, "no patch was acknowledged: the kill window is too short")


async def check_patches(memory: caderno.Memory, acked: set[str], begun: set[str]) -> None:
    state = await memory.working_memory.state(resource_id="casa")
    log = await memory.working_memory.log(resource_id="casa")
    keys = set(state.data.get("keys", {})) if state else set()
    lost = acked - keys
    expect(not lost, f"acknowledged patches lost (seed {SEED}): {sorted(lost)[:5]}")
    expect(keys <= begun, f"patch keys nobody wrote: {sorted(keys - begun)[:5]}")
    logged = [k for entry in log for k in entry["patch"]["keys"]]
    expect(sorted(logged) == sorted(keys), "working-memory log and data disagree")
    expect([e["version"] for e in log] == list(range(1, len(log) + 1)), "log versions not 1..n")
    expect(state is None or state.version == len(log), f"version {state and state.version}, log {len(log)}")


# -- (c) imports and (d) erases -----------------------------------------------------------------------


def seed_export(url: str) -> dict[str, Any]:
    """A sizeable resource: threads of messages, facts with history, a patched working memory."""

    async def build(memory: caderno.Memory) -> dict[str, Any]:
        for t in range(SEED_THREADS):
            await memory.append_messages(
                resource_id="origem",
                thread_id=f"t{t}",
                messages=[Message.user(f"message {t}/{i}: " + "conteúdo " * 10) for i in range(SEED_MESSAGES)],
            )
        for i in range(SEED_FACTS):
            for value in ("old", "new"):
                await memory.facts.remember(resource_id="origem", category="c", key=f"k{i}", value=f"{value} {i}")
            await memory.update_working_memory(resource_id="origem", patch={f"k{i}": i})
        return await memory.export_resource(resource_id="origem")

    return opened(url, build)


def as_resource(dump: dict[str, Any], rid: str) -> dict[str, Any]:
    copied = copy.deepcopy(dump)
    copied["resource_id"] = rid
    return copied


def empty(rid: str) -> dict[str, Any]:
    from caderno.stores.export import new_dump

    return new_dump(rid)


IMPORTS = """
    async def main(url, path, run):
        dump = json.loads(open(path).read())
        async with caderno.connect(url, embedder=None) as memory:
            say("ready")
            for i in range(10**9):
                rid = f"imp{run}n{i}"
                dump["resource_id"] = rid
                say("begin", rid)
                await memory.import_resource(dump)
                say("ack", rid)

    asyncio.run(main(*sys.argv[1:]))
    """


def import_time(url: str, dump: dict[str, Any]) -> float:
    """Seconds one import of ``dump`` takes on ``url`` (the kill window is drawn over a few of them)."""

    async def timed(memory: caderno.Memory) -> float:
        started = time.perf_counter()
        await memory.import_resource(as_resource(dump, "calibration"))
        return time.perf_counter() - started

    return float(opened(url, timed))


def test_imports_whole_or_nothing(shared_url: str, tmp_path: Path) -> None:
    rng, dump = rng_for("imports", shared_url), seed_export(shared_url)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(dump))
    # Long enough for a child to start and finish an import or two, so kills
    # land before, inside and between imports on every backend (an import
    # on PostgreSQL re-indexes each message's context: ~4x what it took before).
    window = 0.6 + 2 * import_time(shared_url, dump)
    imported, in_flight_whole, in_flight = 0, 0, 0
    for run in range(KILLS):
        child = Child(IMPORTS, shared_url, str(path), str(run))
        child.kill_after(rng.uniform(0.0, window), once_acked=not imported)
        acked, begun = set(child.tags("ack")), child.tags("begin")
        whole = opened(shared_url, check_imports, dump, acked, begun)
        imported += len(acked)
        in_flight += len(begun) - len(acked)
        in_flight_whole += whole - len(acked)
        SURVIVED["imports"] += 1
    expect(imported, "no import finished: the kill window is too short")
    print(f"\nimports: {imported} acknowledged, {in_flight} in flight at a kill ({in_flight_whole} of them committed)")


async def check_imports(memory: caderno.Memory, dump: dict[str, Any], acked: set[str], begun: list[str]) -> int:
    whole = 0
    for rid in begun:
        got = await memory.export_resource(resource_id=rid)
        if rid in acked:
            expect(got == as_resource(dump, rid), f"acknowledged import {rid} differs from the export")
        else:
            expect(got in (as_resource(dump, rid), empty(rid)), f"import {rid} partial (seed {SEED})")
        whole += got != empty(rid)
    return whole


ERASES = """
    async def main(url, run, count):
        async with caderno.connect(url, embedder=None) as memory:
            say("ready")
            for i in range(int(count)):
                rid = f"era{run}n{i}"
                say("begin", rid)
                await memory.erase_resource(resource_id=rid)
                say("ack", rid)
            say("done")
            await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
    """

ERASE_COUNT = 4


def test_erases_complete_or_not_started(shared_url: str) -> None:
    rng, dump, in_flight = rng_for("erases", shared_url), seed_export(shared_url), 0
    for run in range(KILLS):
        opened(shared_url, fill_erasable, dump, run)
        child = Child(ERASES, shared_url, str(run), str(ERASE_COUNT))
        child.kill_after(rng.uniform(0.0, 0.15))  # four erases take ~0.12 s on SQLite
        acked, begun = set(child.tags("ack")), set(child.tags("begin"))
        opened(shared_url, check_erases, dump, run, acked, begun)
        in_flight += len(begun - acked)
        SURVIVED["erases"] += 1
    print(f"\nerases: {KILLS} kills, {in_flight} with an erase in flight")


async def fill_erasable(memory: caderno.Memory, dump: dict[str, Any], run: int) -> None:
    for i in range(ERASE_COUNT):
        await memory.import_resource(as_resource(dump, f"era{run}n{i}"))


async def check_erases(
    memory: caderno.Memory, dump: dict[str, Any], run: int, acked: set[str], begun: set[str]
) -> None:
    for i in range(ERASE_COUNT):
        rid = f"era{run}n{i}"
        got = await memory.export_resource(resource_id=rid)
        if rid in acked:
            expect(got == empty(rid), f"acknowledged erase of {rid} left data behind")
        elif rid in begun:
            expect(got in (empty(rid), as_resource(dump, rid)), f"erase of {rid} half done (seed {SEED})")
        else:
            expect(got == as_resource(dump, rid), f"{rid} changed though never erased")


# -- (e) migrations ----------------------------------------------------------------------------------

MIGRATE = """
    import time

    async def main(url, legacy):
        options = {"import_from": "aidaemon", "legacy_resource_id": "casa"} if legacy == "1" else {}
        say("ready")
        start = time.monotonic()
        memory = await caderno.connect(url, embedder=None, **options)
        say("opened", time.monotonic() - start)
        await memory.close()
        await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
    """


def open_time(url: str, legacy: bool = False) -> float:
    """How long the child takes to migrate ``url`` (the kill window is drawn over it)."""
    child = Child(MIGRATE, url, "1" if legacy else "0")
    deadline = time.monotonic() + 60
    while not child.tags("opened") and time.monotonic() < deadline and child.proc.poll() is None:
        time.sleep(0.01)
    child.proc.kill()
    child.proc.wait()
    (seconds,) = child.tags("opened") or ["nan"]
    expect(seconds != "nan", f"calibration child never opened {url}: {child._stderr()}")
    return float(seconds)


def kill_migration(url: str, window: float, rng: random.Random, legacy: bool = False) -> bool:
    """Kill a child somewhere in its first open of ``url``; True if it had not finished."""
    child = Child(MIGRATE, url, "1" if legacy else "0")
    child.kill_after(rng.uniform(0.0, window))
    return not child.tags("opened")


def test_fresh_database_migrations(shared_url: str, tmp_path: Path) -> None:
    rng, midway = rng_for("migrations", shared_url), 0
    postgres = shared_url.startswith("postgres")
    window = 1.3 * open_time(shared_url if postgres else str(tmp_path / "calibrate.db"))
    for run in range(KILLS):
        if postgres:
            with pg_schema() as url:
                midway += kill_migration(url, window, rng)
                opened(url, lambda memory: asyncio.sleep(0))
                expect(applied_migrations(url) == latest_migrations(url), "schema not at the latest migration")
        else:
            url = str(tmp_path / f"fresh{run}.db")
            midway += kill_migration(url, window, rng)

            async def usable(memory: caderno.Memory) -> None:
                await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("oi")])

            opened(url, usable)
            expect(applied_migrations(url) == latest_migrations(url), "schema not at the latest migration")
        SURVIVED["migrations"] += 1
    print(f"\nmigrations: {KILLS} kills, {midway} before the open finished (window {window:.3f} s)")


def older_agent_db(path: Path) -> None:
    """An older agent's file (see tests/stores/test_legacy_database.py), with many messages."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        PRAGMA user_version = 7;
        CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
            content TEXT, tool_call_id TEXT, tool_name TEXT, tool_calls_json TEXT, created_at TEXT NOT NULL,
            importance REAL DEFAULT 0.5, consolidated_at TEXT);
        CREATE TABLE facts (id INTEGER PRIMARY KEY, category TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            source TEXT DEFAULT '', created_at TEXT, updated_at TEXT, UNIQUE (category, key));
        """
    )
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, created_at) VALUES (?,?,?,?,?)",
        [
            (f"m{i}", f"s{i % 8}", "user" if i % 2 else "assistant", f"message {i} " + "x" * 60, "2026-05-01 10:00:00")
            for i in range(LEGACY_MESSAGES)
        ],
    )
    conn.executemany("INSERT INTO facts (category, key, value) VALUES ('c', ?, ?)", [(f"k{i}", "v") for i in range(50)])
    conn.commit()
    conn.close()


def sqlite_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_older_sqlite_database_migration(tmp_path: Path) -> None:
    rng, midway = random.Random(f"{SEED}-legacy"), 0
    older_agent_db(tmp_path / "calibrate.db")
    window = 1.3 * open_time(str(tmp_path / "calibrate.db"), legacy=True)
    for run in range(KILLS):
        path = tmp_path / f"older{run}.db"
        older_agent_db(path)
        before = sqlite_tables(path)
        midway += kill_migration(str(path), window, rng, legacy=True)
        after = sqlite_tables(path)
        expect(
            after == before or ("schema_migrations" in after and "messages" not in after),
            f"older database half migrated (seed {SEED}): {sorted(after)}",
        )

        async def check(memory: caderno.Memory) -> None:
            stored = [m for s in range(8) for m in await memory.get_messages(resource_id="casa", thread_id=f"s{s}")]
            expect(len(stored) == LEGACY_MESSAGES, f"{len(stored)} of {LEGACY_MESSAGES} older messages moved")
            expect(len(await memory.facts.list(resource_id="casa")) == 50, "older facts lost")

        opened(str(path), check, import_from="aidaemon", legacy_resource_id="casa")
        expect(applied_migrations(str(path)) == latest_migrations(str(path)), "schema not at the latest migration")
        SURVIVED["migrations"] += 1
    print(f"\nolder-database migrations: {KILLS} kills, {midway} before the open finished (window {window:.3f} s)")


# -- (f) notebook --------------------------------------------------------------------------------------

NOTEBOOK = """
    def writer(directory, run, w):
        notebook = caderno.Notebook(directory, memory_char_limit=1_000_000)
        for i in range(10**9):
            tag = f"note r{run}w{w}n{i}"
            say("begin", tag)
            notebook.add("memory", tag)
            say("ack", tag)

    say("ready")
    for w in range(2):  # two writers: the lock must merge, never overwrite
        threading.Thread(target=writer, args=(sys.argv[1], sys.argv[2], w), daemon=True).start()
    threading.Event().wait()
    """


def test_notebook_files_parse_and_hold_every_acknowledged_entry(tmp_path: Path) -> None:
    rng, acked, begun, strays = random.Random(f"{SEED}-notebook"), set(), set(), 0
    directory = tmp_path / "notebook"
    for run in range(KILLS):
        child = Child(NOTEBOOK, str(directory), str(run))
        child.kill_after(rng.uniform(0.0, 0.5), once_acked=not acked)
        acked |= set(child.tags("ack"))
        begun |= set(child.tags("begin"))
        file = directory / "MEMORY.md"
        raw = file.read_bytes().decode("utf-8") if file.exists() else "\n"  # whole UTF-8 text, never torn
        notebook = caderno.Notebook(directory, memory_char_limit=1_000_000).load()
        entries = notebook.entries("memory")
        expect(len(entries) == len(set(entries)) and raw.endswith("\n"), "MEMORY.md torn or duplicated")
        lost = acked - set(entries)
        expect(not lost, f"acknowledged notebook entries lost (seed {SEED}): {sorted(lost)[:5]}")
        expect(set(entries) <= begun, f"notebook entries nobody wrote: {sorted(set(entries) - begun)[:5]}")
        # A kill between mkstemp and rename leaves a temp file: harmless, not read.
        strays = len(list(directory.glob(".MEMORY.md.*.tmp")))
        SURVIVED["notebook"] += 1
    expect(acked, "no notebook entry was acknowledged: the kill window is too short")
    print(f"\nnotebook: {len(acked)} entries acknowledged, {strays} stray temp files left by kills")


def test_zz_summary() -> None:
    from conftest import record_figure

    record_figure(
        "crash",
        "crash: {kills} kills survived (appends {appends}, patches {patches}, imports {imports}, erases {erases}, "
        "migrations {migrations}, notebook {notebook}), {problems} lost or partial (seed " + str(SEED) + ")",
        kills=sum(SURVIVED.values()),
        problems=len(PROBLEMS),
        **SURVIVED,
    )
    assert not PROBLEMS, PROBLEMS
