"""The blocking API (``caderno.connect_sync``): a script's calls, threads, a running loop, close.

Every backend: memory://, a SQLite file, PostgreSQL (through PgBouncer where
installed) and pgvector. The slice at the end runs the conformance suite's
core promises (history, working-memory compare-and-swap, facts, recall,
resources) through ``SyncMemory`` instead of ``Memory``.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import caderno
from caderno import Message, SyncMemory, connect_sync
from caderno.core.errors import Conflict, NotFound, UsageError
from caderno.memory.adapters.sync import blocking_class
from conftest import python_env

R, T = "casa-gabriel", "thread-1"
#: Bound on any wait for another thread in these tests (each one normally ends in milliseconds).
WAIT_SECONDS = 30.0


def _sync_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "caderno-sync")


# -- the surface -------------------------------------------------------------------------


def test_every_coroutine_method_of_memory_has_a_blocking_twin_with_its_signature() -> None:
    lifecycle = {"open", "close", "__aenter__", "__aexit__"}  # SyncMemory opens on connect and closes itself
    names = {n for n, _ in inspect.getmembers(caderno.Memory, inspect.iscoroutinefunction)}
    public = {n for n in names if not n.startswith("_")} - lifecycle
    missing = sorted(n for n in public if not callable(getattr(SyncMemory, n, None)))
    assert missing == []
    for name in public:
        blocking, original = getattr(SyncMemory, name), getattr(caderno.Memory, name)
        assert not inspect.iscoroutinefunction(blocking), name
        assert inspect.signature(blocking) == inspect.signature(original), name
        assert blocking.__doc__ == original.__doc__, name


def test_parts_have_blocking_classes_listing_their_methods() -> None:
    from caderno.memory.parts.facts import Facts

    made = blocking_class(Facts)
    assert made is blocking_class(Facts)
    assert inspect.signature(made.remember) == inspect.signature(Facts.remember)
    assert not inspect.iscoroutinefunction(made.remember)


# -- a script's use, on every backend ----------------------------------------------------------


def test_a_script_appends_reads_patches_remembers_and_recalls(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        stored = memory.append_messages(
            resource_id=R,
            thread_id=T,
            messages=[Message.user("I love hiking in the Alps"), Message.assistant("Noted: hiking, Alps.")],
        )
        assert [m.position for m in stored] == [1, 2]
        assert memory.get_messages(resource_id=R, thread_id=T) == stored
        assert memory.get_messages(resource_id=R, thread_id=T, limit=1) == stored[1:]

        assert memory.get_working_memory(resource_id=R) is None
        state = memory.update_working_memory(resource_id=R, patch={"trip": {"where": "Alps"}})
        assert state.version == 1
        assert memory.get_working_memory(resource_id=R) == {"trip": {"where": "Alps"}}

        memory.facts.remember(resource_id=R, category="likes", key="sport", value="hiking")
        assert [f.value for f in memory.facts.list(resource_id=R)] == ["hiking"]
        assert [t.id for t in memory.threads.list(resource_id=R)] == [T]

        memory.flush()
        hits = memory.recall(resource_id=R, query="mountains", recent=0, salient=0, lexical=0)
        assert "I love hiking in the Alps" in [h.message.content for h in hits]
    assert memory.closed


def test_a_plain_python_script_uses_it_with_no_asyncio(tmp_path: Path) -> None:
    db = tmp_path / "script.db"
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import caderno
            from caderno import Message

            with caderno.connect_sync({str(db)!r}) as memory:
                memory.append_messages(resource_id="ana", thread_id="t1", messages=[Message.user("I love hiking in the Alps")])
                memory.update_working_memory(resource_id="ana", patch={{"city": "Porto"}})
                memory.flush()
                hits = memory.recall(resource_id="ana", query="mountains")
                print(len(memory.get_messages(resource_id="ana", thread_id="t1")), memory.get_working_memory(resource_id="ana"))
                print([h.message.content for h in hits])
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], env=python_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1 {'city': 'Porto'}", "['I love hiking in the Alps']"]
    with connect_sync(db) as memory:  # this process sees what the script stored
        assert [m.content for m in memory.get_messages(resource_id="ana", thread_id="t1")] == [
            "I love hiking in the Alps"
        ]


# -- threads ---------------------------------------------------------------------------------


def test_two_threads_appending_to_one_thread_lose_nothing(db_url: str) -> None:
    turns = 40
    failures: list[BaseException] = []

    def append(who: str) -> None:
        try:
            for i in range(turns):
                memory.append_messages(
                    resource_id=R,
                    thread_id=T,
                    messages=[Message.user(f"{who}-q{i}"), Message.assistant(f"{who}-a{i}")],
                )
        except BaseException as exc:  # reported below: a thread's exception is otherwise lost
            failures.append(exc)

    with connect_sync(db_url) as memory:
        workers = [threading.Thread(target=append, args=(who,)) for who in ("left", "right")]
        for w in workers:
            w.start()
        for w in workers:
            w.join(WAIT_SECONDS)
        assert not any(w.is_alive() for w in workers) and failures == []
        got = [m.content for m in memory.get_messages(resource_id=R, thread_id=T)]
    assert len(got) == 4 * turns
    assert sorted(got) == sorted(f"{who}-{k}{i}" for who in ("left", "right") for k in "qa" for i in range(turns))
    for k in range(0, len(got), 2):  # each call's pair stays together
        assert got[k + 1] == got[k].replace("-q", "-a")


def test_close_from_another_thread_ends_a_call_in_flight_and_refuses_later_calls(tmp_path: Path) -> None:
    before = _sync_threads()
    memory = connect_sync(tmp_path / "c.db")
    memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("oi")])
    outcome: list[BaseException | None] = []

    def forever() -> None:
        try:
            memory.run_background()  # never returns on its own
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=forever)
    worker.start()
    deadline = time.monotonic() + WAIT_SECONDS
    while not memory._portal._calls:  # the call is running on the loop
        assert time.monotonic() < deadline, "run_background never started"
        time.sleep(0.01)

    closer = threading.Thread(target=memory.close)
    closer.start()
    closer.join(WAIT_SECONDS)
    worker.join(WAIT_SECONDS)
    assert not closer.is_alive() and not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], UsageError)
    assert "closed while the call was running" in str(outcome[0])
    assert memory.closed
    with pytest.raises(UsageError, match="this SyncMemory is closed"):
        memory.get_messages(resource_id=R, thread_id=T)
    memory.close()  # again: nothing to do
    assert _sync_threads() == before
    with connect_sync(tmp_path / "c.db") as again:  # what was stored before the close is there
        assert [m.content for m in again.get_messages(resource_id=R, thread_id=T)] == ["oi"]


# -- inside a running event loop ---------------------------------------------------------------


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[SyncMemory]:
    with connect_sync(tmp_path / "opened.db") as memory:
        memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("before")])
        yield memory


async def test_inside_a_running_loop_it_refuses_and_points_to_connect(tmp_path: Path, opened: SyncMemory) -> None:
    before = _sync_threads()
    with pytest.raises(UsageError, match=r"running an event loop.*await caderno\.connect\(url\)"):
        connect_sync(tmp_path / "other.db")
    assert not (tmp_path / "other.db").exists() and _sync_threads() == before
    with pytest.raises(UsageError, match=r"^Memory\.append_messages blocks, and this thread is running an event loop"):
        opened.append_messages(resource_id=R, thread_id=T, messages=[Message.user("inside")])
    with pytest.raises(UsageError, match="running an event loop"):
        opened.facts.list(resource_id=R)
    with pytest.raises(UsageError, match="running an event loop"):
        opened.close()
    assert not opened.closed


def test_a_refused_call_changed_nothing(opened: SyncMemory) -> None:
    import asyncio

    async def inside() -> None:
        with pytest.raises(UsageError):
            opened.append_messages(resource_id=R, thread_id=T, messages=[Message.user("inside")])

    asyncio.run(inside())
    assert [m.content for m in opened.get_messages(resource_id=R, thread_id=T)] == ["before"]


def test_a_bad_url_fails_at_connect_and_leaves_no_thread() -> None:
    before = _sync_threads()
    with pytest.raises(UsageError, match="unsupported database URL scheme"):
        connect_sync("mysql://nowhere/db")
    assert _sync_threads() == before


# -- a slice of the conformance suite, through SyncMemory ---------------------------------------


def test_conformance_history_pages_and_ownership(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        stored = memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(5)])
        assert [m.position for m in stored] == [1, 2, 3, 4, 5]
        assert [m.content for m in memory.get_messages(resource_id=R, thread_id=T, limit=2)] == ["m3", "m4"]
        assert [m.content for m in memory.get_messages(resource_id=R, thread_id=T, before=3, limit=5)] == ["m0", "m1"]
        assert memory.get_messages(resource_id="someone-else", thread_id=T) == []
        with pytest.raises(NotFound):
            memory.delete_thread(resource_id="someone-else", thread_id=T)
        with pytest.raises(UsageError):
            memory.get_messages(resource_id=R, thread_id=T, limit=-1)
        memory.delete_thread(resource_id=R, thread_id=T)
        assert memory.list_threads(resource_id=R) == []


def test_conformance_working_memory_compare_and_swap(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        first = memory.update_working_memory(resource_id=R, patch={"a": 1, "b": {"c": 2}})
        second = memory.update_working_memory(
            resource_id=R, patch={"b": {"c": None, "d": 3}}, expected_version=first.version
        )
        assert second.version == first.version + 1
        with pytest.raises(Conflict):
            memory.update_working_memory(resource_id=R, patch={"a": 9}, expected_version=first.version)
        assert memory.get_working_memory(resource_id=R) == {"a": 1, "b": {"d": 3}}
        assert [e["version"] for e in memory.working_memory.log(resource_id=R)][-1] == second.version


def test_conformance_facts_history_and_forget(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        memory.facts.remember(resource_id=R, category="home", key="city", value="Porto")
        memory.facts.remember(resource_id=R, category="home", key="city", value="Lisboa")
        assert [f.value for f in memory.facts.list(resource_id=R)] == ["Lisboa"]
        assert [h["value"] for h in memory.facts.history(resource_id=R, category="home", key="city")] == ["Porto"]
        memory.facts.forget(resource_id=R, category="home", key="city")
        with pytest.raises(NotFound):
            memory.facts.forget(resource_id=R, category="home", key="city")
        assert memory.facts.list(resource_id=R) == []


def test_conformance_recall_by_meaning_and_by_word(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        memory.append_messages(
            resource_id=R,
            thread_id="viagem",
            messages=[Message.user("We decided the Lisbon trip happens in May, with a budget of EUR 3000.")],
        )
        memory.append_messages(
            resource_id=R, thread_id="carro", messages=[Message.user("The car needs new tyres before winter.")]
        )
        memory.flush()
        by_meaning = memory.recall(resource_id=R, query="holiday in Portugal", recent=0, salient=0, lexical=0, top=1)
        assert [h.thread_id for h in by_meaning] == ["viagem"]
        by_word = memory.recall(resource_id=R, query="tyres", recent=0, salient=0, relevant=0)
        assert [h.thread_id for h in by_word] == ["carro"]


def test_conformance_export_erase_import_round_trip(db_url: str) -> None:
    with connect_sync(db_url) as memory:
        memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("oi"), Message.assistant("olá")])
        memory.update_working_memory(resource_id=R, patch={"x": 1})
        dump = memory.export_resource(resource_id=R)
        memory.erase_resource(resource_id=R)
        assert memory.list_resources() == []
        memory.import_resource(dump)
        assert memory.list_resources() == [R]
        assert [m.content for m in memory.get_messages(resource_id=R, thread_id=T)] == ["oi", "olá"]
        assert memory.get_working_memory(resource_id=R) == {"x": 1}
