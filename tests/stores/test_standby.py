"""Reads from a hot standby (``?read_replica=``), writes and fresh reads from the primary.

The fixture makes a primary and a streaming standby of it
(``pg_basebackup -R``). Where a read was answered is proven by pausing the
standby's replay (``pg_wal_replay_pause()``): a write made on the primary
afterwards is invisible there, so a read that misses it came from the
standby, and one that sees it came from the primary.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import quote

import pytest
from _pg import Replicated, pg_schema, replicated

import caderno
from caderno import Message
from caderno.core.clock import new_id, utcnow
from caderno.core.errors import UsageError
from caderno.core.records import ApiKey
from caderno.stores import _replica, ops, postgres

pytestmark = pytest.mark.postgres

#: A password the standby's URL carries (trust authentication ignores it): it must never be shown.
SECRET = "s3cret-standby-pw"


@pytest.fixture
def primary_url(standby: Replicated) -> Iterator[str]:
    """A fresh schema on the primary (replicated to the standby), without a replica."""
    with pg_schema(standby.primary_url) as url:
        yield url


def _with_replica(url: str, standby: Replicated, *, password: str | None = None) -> str:
    replica = standby.standby_url
    if password is not None:
        replica = replica.replace("postgres@", f"postgres:{password}@")
    return f"{url}&read_replica={quote(replica, safe='')}"


def _lsn(url: str, sql: str) -> int:
    import psycopg

    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        return int(conn.execute(sql).fetchone()[0])


def caught_up(standby: Replicated) -> None:
    """Wait until the standby has replayed everything the primary has written so far.

    The flushed position, not the insert one: after a segment switch (a base
    backup ends with one) the insert position counts the next page's header,
    which no replay reaches until the primary writes again.
    """
    target = _lsn(standby.primary_url, "SELECT pg_current_wal_flush_lsn() - '0/0'")
    deadline = time.monotonic() + 30
    while _lsn(standby.standby_url, "SELECT pg_last_wal_replay_lsn() - '0/0'") < target:
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.02)


@contextmanager
def replay_paused(standby: Replicated) -> Iterator[None]:
    """The standby replays nothing until the block ends (what the primary writes meanwhile is not there)."""
    import psycopg

    caught_up(standby)
    with psycopg.connect(standby.standby_url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            while conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] != "paused":
                time.sleep(0.01)
            yield
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    caught_up(standby)


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[caderno.Memory]:
    async with caderno.connect(url, embedder=None) as memory:
        yield memory


async def texts(memory: caderno.Memory, thread: str = "t") -> list[str]:
    return [m.content for m in await memory.get_messages(resource_id="r", thread_id=thread)]


def say(text: str) -> list[Message]:
    return [Message.user(text)]


async def test_reads_go_to_the_standby_and_a_memory_reads_its_own_writes_from_the_primary(
    primary_url: str, standby: Replicated
) -> None:
    url = _with_replica(primary_url, standby)
    async with opened(primary_url) as direct, opened(url) as writer, opened(url) as reader:
        await writer.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        caught_up(standby)
        assert await texts(reader) == ["one"]
        with replay_paused(standby):
            await writer.append_messages(resource_id="r", thread_id="t", messages=say("two"))
            # The writer reads what it wrote at once: the primary answers it.
            assert await texts(writer) == ["one", "two"]
            # Another Memory, which wrote nothing, reads the standby: the write is not there yet.
            assert await texts(reader) == ["one"]
            # A read of several operations (one snapshot) goes the same way.
            thread, messages = await reader.batch(
                [ops.GetThread(resource_id="r", thread_id="t"), ops.ReadThread(resource_id="r", thread_id="t")]
            )
            assert thread is not None and [m.content for m in messages] == ["one"]
        assert await texts(reader) == ["one", "two"]
        with replay_paused(standby):
            # The standby has replayed the writer's writes: its reads of "r" go there again.
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("three"))
            assert await texts(writer) == ["one", "two"]
            assert await texts(direct) == ["one", "two", "three"]


async def test_writes_go_to_the_primary_and_each_is_read_back_at_once(primary_url: str, standby: Replicated) -> None:
    """A write sent to the standby would fail there (it is read-only); here every one lands, and reads follow it."""
    async with opened(primary_url) as direct, opened(_with_replica(primary_url, standby)) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        caught_up(standby)
        with replay_paused(standby):
            await memory.append_messages(resource_id="r", thread_id="t", messages=say("two"))
            assert await texts(memory) == ["one", "two"]
            await memory.update_working_memory(resource_id="r", patch={"city": "Amsterdam"})
            assert await memory.get_working_memory(resource_id="r") == {"city": "Amsterdam"}
            await memory.delete_thread(resource_id="r", thread_id="t")
            assert await texts(memory) == []
            assert await texts(direct) == []


async def test_key_lookups_and_other_global_reads_stay_on_the_primary(primary_url: str, standby: Replicated) -> None:
    key = ApiKey(id=new_id(), name="app", resources=("r",), created_at=utcnow())
    async with opened(primary_url) as direct, opened(_with_replica(primary_url, standby)) as reader:
        await direct.batch([ops.CreateKey(key=key, token_hash="h1")])
        await direct.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        with replay_paused(standby):
            await direct.batch([ops.RevokeKey(key_id=key.id, now=utcnow())])
            await direct.append_messages(resource_id="other", thread_id="t", messages=say("hi"))
            # Revocation holds at once, even for a Memory that never wrote anything.
            assert await reader.batch([ops.FindKey(token_hash="h1")]) == [None]
            assert await reader.list_resources() == ["other", "r"]


async def test_a_write_that_names_no_resource_holds_back_every_read_of_that_memory(
    primary_url: str, standby: Replicated
) -> None:
    key = ApiKey(id=new_id(), name="app", resources=("r",), created_at=utcnow())
    async with opened(primary_url) as direct, opened(_with_replica(primary_url, standby)) as memory:
        await direct.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        caught_up(standby)
        with replay_paused(standby):
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("two"))
            assert await texts(memory) == ["one"]  # the standby
            await memory.batch([ops.CreateKey(key=key, token_hash="h2")])
            assert await texts(memory) == ["one", "two"]  # the primary, until the standby passes the key


async def test_a_stopped_standby_sends_reads_to_the_primary_logged_once_without_its_password(
    primary_url: str, standby: Replicated, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "STANDBY_RETRY_SECONDS", 0.2)
    caplog.set_level(logging.DEBUG)
    url = _with_replica(primary_url, standby, password=SECRET)
    async with opened(primary_url) as direct, opened(url) as reader:
        assert SECRET not in reader.store.url and "read_replica=" in reader.store.url
        await direct.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        caught_up(standby)
        assert await texts(reader) == ["one"]
        standby.stop_standby()
        try:
            for n in range(2, 5):
                await direct.append_messages(resource_id="r", thread_id="t", messages=say(f"n{n}"))
                assert (await texts(reader))[-1] == f"n{n}"  # only the primary has it: the standby is down
                await asyncio.sleep(0.25)  # past the retry delay: each read tries the standby again
        finally:
            standby.start_standby()
        warnings = [r for r in caplog.records if r.name == postgres.__name__ and r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "read replica postgresql://postgres:***@127.0.0.1" in warnings[0].getMessage()
        # Back: reads go to the standby again (one that misses a write made while replay is paused).
        caught_up(standby)
        await asyncio.sleep(0.25)
        with replay_paused(standby):
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("late"))
            assert "late" not in await texts(reader)
    assert any("answers again" in r.getMessage() for r in caplog.records)
    assert not [r.getMessage() for r in caplog.records if SECRET in r.getMessage()]


@pytest.mark.parametrize(
    ("replica", "message"),
    [
        ("mysql://u:" + SECRET + "@h/db", "read_replica must be a postgresql:// URL"),
        ("postgresql://u:" + SECRET + "@h/db?schema=other", "read_replica's URL cannot set schema"),
        ("postgresql://u:" + SECRET + "@h/db?pooler=always", "pooler must be one of none, transaction"),
    ],
    ids=["other-scheme", "schema", "pooler"],
)
def test_a_bad_replica_url_is_refused_without_its_password(replica: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        postgres.PostgresStore(f"postgresql://u@h/db?read_replica={quote(replica, safe='')}")
    assert SECRET not in str(caught.value)


def test_the_store_url_shows_the_replica_without_its_password() -> None:
    replica = quote(f"postgresql://reader:{SECRET}@standby:5432/db", safe="")
    store = postgres.PostgresStore(f"postgresql://app:pw1234@primary/db?schema=s&read_replica={replica}")
    assert store.url == "postgresql://app:***@primary/db?schema=s&read_replica=postgresql://reader:***@standby:5432/db"
    assert store._replica == f"postgresql://reader:{SECRET}@standby:5432/db"


# -- retries, lag and promotion ----------------------------------------------------------------


def _app(url: str, model: caderno.ScriptedModel) -> tuple[Any, caderno.Memory]:
    from caderno.memory.adapters.connect import open_store
    from caderno.server import create_app
    from caderno.server.routes import default_routers

    memory = caderno.Memory(open_store(url), embedder=None)
    return create_app(memory, model=model, background=False, routers=default_routers()), memory


async def test_a_keyed_retry_through_another_server_answers_the_stored_turn_while_the_standby_lags(
    primary_url: str, standby: Replicated
) -> None:
    """Server B never wrote the resource, so it read the key's turn on the standby, which had not replayed it:
    the append was refused as a duplicate id and the retry answered 400 for a turn that was stored."""
    pytest.importorskip("uvicorn")
    import httpx
    from _serving import serving_app

    from caderno.server.proxy import THREAD_HEADER

    url = _with_replica(primary_url, standby)
    model_a = caderno.ScriptedModel([Message.assistant("resposta")])
    model_b = caderno.ScriptedModel([Message.assistant("outra resposta")])
    (app_a, memory_a), (app_b, _) = _app(url, model_a), _app(url, model_b)
    turn = {"messages": [{"role": "user", "content": "oi"}, {"role": "assistant", "content": "olá"}]}
    chat = {"model": "x", "messages": [{"role": "user", "content": "tudo bem?"}]}
    async with (
        serving_app(app_a) as (host_a, port_a),
        serving_app(app_b) as (host_b, port_b),
        opened(primary_url) as direct,
    ):
        token, _ = await memory_a.keys.create(resources=["r"])
        await direct.append_messages(resource_id="r", thread_id="t", messages=say("antes"))
        caught_up(standby)
        answers: dict[str, list[httpx.Response]] = {"append": [], "chat": []}
        with replay_paused(standby):
            for base in (f"http://{host_a}:{port_a}", f"http://{host_b}:{port_b}"):
                headers = {"authorization": f"Bearer {token}"}
                async with httpx.AsyncClient(base_url=base, headers=headers) as http:
                    answers["append"].append(
                        await http.post(
                            "/v1/resources/r/threads/t/messages", json=turn, headers={"Idempotency-Key": "k-1"}
                        )
                    )
                    answers["chat"].append(
                        await http.post(
                            "/v1/chat/completions", json=chat, headers={THREAD_HEADER: "c", "Idempotency-Key": "k-2"}
                        )
                    )
            stored = await texts(direct)
            chatted = await texts(direct, "c")
    first, retry = answers["append"]
    assert first.status_code == 201, first.text
    assert retry.status_code == 201, retry.text
    assert retry.json() == first.json()
    assert stored == ["antes", "oi", "olá"]
    said, again = answers["chat"]
    assert said.status_code == again.status_code == 200, again.text
    assert again.json()["id"] == said.json()["id"]
    assert again.json()["choices"][0]["message"]["content"] == "resposta"
    assert model_b.requests == []  # the retry called no model
    assert chatted == ["tudo bem?", "resposta"]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == postgres.__name__ and r.levelno >= logging.WARNING]


async def _until(condition: Callable[[], Awaitable[bool]], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.fixture
def quick_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standby's state re-read every 0.1 s, a lag of 0.5 s too much, a failed standby tried again after 0.2 s."""
    monkeypatch.setattr(_replica, "STANDBY_CHECK_SECONDS", 0.1)
    monkeypatch.setattr(_replica, "STANDBY_MAX_LAG_SECONDS", 0.5)
    monkeypatch.setattr(postgres, "STANDBY_RETRY_SECONDS", 0.2)


async def test_a_standby_that_lags_past_the_bound_is_skipped_until_it_catches_up(
    primary_url: str, standby: Replicated, caplog: pytest.LogCaptureFixture, quick_checks: None
) -> None:
    caplog.set_level(logging.INFO)
    url = _with_replica(primary_url, standby)
    async with opened(primary_url) as direct, opened(url) as reader, opened(url) as writer:
        await direct.append_messages(resource_id="r", thread_id="t", messages=say("one"))
        caught_up(standby)
        assert await texts(reader) == ["one"]
        with replay_paused(standby):
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("two"))
            started = time.monotonic()
            await _until(lambda: _sees(reader, "two"), "a lagging standby kept answering")
            # Not before the bound: the standby answered while it was less than 0.5 s behind.
            assert time.monotonic() - started >= 0.5 - 0.1
            await writer.append_messages(resource_id="r", thread_id="t", messages=say("three"))
            assert await texts(writer) == ["one", "two", "three"]  # read your writes holds
            for _ in range(5):
                assert await texts(reader) == ["one", "two", "three"]  # every read: the primary
        lagging = _warnings(caplog)
        assert len(lagging) == 1 and "behind the primary" in lagging[0], lagging
        # Caught up: reads go to the standby again (one that misses a write made while replay is paused).
        await _until(lambda: _read_then_logged(reader, caplog, "caught up"), "the standby was never read again")
        with replay_paused(standby):
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("late"))
            assert "late" not in await texts(reader)


async def _sees(memory: caderno.Memory, text: str) -> bool:
    return text in await texts(memory)


async def _read_then_logged(memory: caderno.Memory, caplog: pytest.LogCaptureFixture, words: str) -> bool:
    await texts(memory)  # a read is what looks at the standby again
    return any(words in r.getMessage() for r in caplog.records)


async def test_a_promoted_standby_is_left_alone_loudly_and_read_again_once_it_is_a_standby(
    caplog: pytest.LogCaptureFixture, quick_checks: None
) -> None:
    """After ``promote`` the store kept reading the promoted server, frozen at the promotion, and logged nothing.

    A pair of its own: the session's standby is shared by the other tests.
    """
    caplog.set_level(logging.INFO)
    with replicated() as pair, pg_schema(pair.primary_url) as primary:
        async with opened(primary) as direct, opened(_with_replica(primary, pair)) as reader:
            await direct.append_messages(resource_id="r", thread_id="t", messages=say("one"))
            caught_up(pair)
            assert await texts(reader) == ["one"]
            pair.promote_standby()
            for n in range(20):  # each read after the first checks: none is stale
                await direct.append_messages(resource_id="r", thread_id="t", messages=say(f"n{n}"))
                await _until(lambda n=n: _sees(reader, f"n{n}"), "the promoted server answered")  # type: ignore[misc]
                if n >= 5:
                    assert (await texts(reader))[-1] == f"n{n}"
                await asyncio.sleep(0.02)
            promoted = _warnings(caplog)
            assert len(promoted) == 1 and "pg_is_in_recovery() is false" in promoted[0], promoted
            pair.remake_standby()
            caught_up(pair)
            await _until(lambda: _read_then_logged(reader, caplog, "answers again"), "the new standby was never read")
            with replay_paused(pair):
                await direct.append_messages(resource_id="r", thread_id="t", messages=say("late"))
                assert "late" not in await texts(reader)
        assert len(_warnings(caplog)) == 1
