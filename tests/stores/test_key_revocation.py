"""PostgreSQL: a revoked key stops working on every server, within a bound, even when its notice is lost.

Real PostgreSQL, real stores, a real ``caderno serve`` and the real CLI.
Between a store and the server sits ``FreezingProxy``, a TCP proxy of this
file that can freeze one connection: it stops forwarding both ways and
closes nothing, as a NAT or load balancer does when it forgets an idle
session. Only the store's LISTEN session (``application_name`` is
``caderno-keys``) is frozen; its pool keeps working.

- Two spellings of one schema (``?schema=public`` and none, in a database
  of the test's own, where ``public`` is the default) share key notices.
- A frozen listener: the heartbeat does not come back, the key cache is
  off at once, and the revoked key is refused within heartbeat interval +
  timeout; a fresh listener brings the cache back.
- Everything else failing (heartbeats so rare they never run): the cached
  key's maximum age still bounds it.
- ``caderno serve`` behind the proxy with the default bounds: the revoked key
  gets 401 within ``KEY_HEARTBEAT_SECONDS + KEY_HEARTBEAT_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from _pg import PG_URL, pg_schema, require_postgres

import caderno
from caderno.memory.parts.state import hash_token
from caderno.stores.postgres import KEY_HEARTBEAT_SECONDS, KEY_HEARTBEAT_TIMEOUT, PostgresStore

pytestmark = pytest.mark.postgres

#: Short heartbeats for the store-level tests (seconds): the bound they show is their sum.
BEAT, BEAT_TIMEOUT = 0.2, 0.3
#: What a loaded two-core test machine may add to any bound measured here (seconds): polling,
#: the revoking commit's round trip, a busy event loop.
SLACK = 1.5
#: The same where nothing else could end the wait (the cache's maximum age set to an hour): the
#: test tells the mechanism at work from its absence by seconds against an hour, so it can give a
#: machine under ``stress-ng`` more (1.5 s ran out there once).
LOADED_SLACK = 8.0


# -- the freezing proxy ------------------------------------------------------------------------


@dataclass
class Link:
    """One proxied connection."""

    upstream_port: int
    """The proxy's port towards PostgreSQL: ``client_port`` in ``pg_stat_activity``."""
    flowing: asyncio.Event = field(default_factory=asyncio.Event)


class FreezingProxy:
    """A TCP proxy to PostgreSQL on its own thread and event loop (the test may block on a subprocess meanwhile)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.links: list[Link] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="freezing-proxy", daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    def __enter__(self) -> FreezingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{self.port}"))

    def freeze(self, link: Link) -> None:
        self._loop.call_soon_threadsafe(link.flowing.clear)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _stop(self) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        link = Link(upstream_port=up_writer.get_extra_info("sockname")[1])
        link.flowing.set()
        self.links.append(link)
        self._writers += [writer, up_writer]
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(link, source, sink))
            self._tasks.add(task)

    @staticmethod
    async def _pipe(link: Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Forward while the link flows; frozen, hold what arrives and close nothing (a forgotten NAT entry)."""
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                await link.flowing.wait()
                sink.write(data)
                await sink.drain()
            if link.flowing.is_set():
                sink.close()


async def _listener_link(proxy: FreezingProxy) -> Link:
    """The proxied connection that is a store's live LISTEN session, once it has listened.

    A frozen one stays in ``pg_stat_activity``: the server never learns it is cut.
    """
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while True:
            ports = [link.upstream_port for link in proxy.links if link.flowing.is_set()]
            row = await (
                await conn.execute(
                    "SELECT client_port FROM pg_stat_activity WHERE application_name = 'caderno-keys' "
                    "AND state = 'idle' AND query LIKE 'LISTEN%%' AND client_port = ANY(%s)",
                    (ports,),
                )
            ).fetchone()
            if row is not None:
                return next(link for link in proxy.links if link.upstream_port == row[0])
            assert time.monotonic() < deadline, "no key listener came through the proxy"
            await asyncio.sleep(0.02)


async def _within(check: Callable[[], Awaitable[bool]], seconds: float) -> float | None:
    """Poll ``check()`` until true; the seconds it took, or None past ``seconds``."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > seconds:
            return None
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def _live(store: PostgresStore) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return store._keys_live

    return check


def _refused(memory: Any, token: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await memory.keys.verify(token) is None

    return check


@pytest.fixture
def short_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PostgresStore, "key_heartbeat_seconds", BEAT)
    monkeypatch.setattr(PostgresStore, "key_heartbeat_timeout", BEAT_TIMEOUT)
    monkeypatch.setattr(PostgresStore, "key_listen_retry", 0.1)


# -- one schema, two spellings ------------------------------------------------------------------


@contextlib.contextmanager
def _own_database() -> Iterator[str]:
    """A fresh database (its ``public`` schema is the default one), dropped afterwards."""
    require_postgres()
    import psycopg

    name = f"caderno_rev_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(PG_URL)._replace(path=f"/{name}", query=""))
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def test_a_revocation_reaches_a_server_that_spells_the_schema_otherwise() -> None:
    with _own_database() as url:
        named = await caderno.connect(f"{url}?schema=public", embedder=None)  # as `caderno keys revoke` was run
        unnamed = await caderno.connect(url, embedder=None)  # as `caderno serve` was started
        try:
            stores = [named.store, unnamed.store]
            assert all(isinstance(s, PostgresStore) for s in stores)
            assert [s._keys_home for s in stores] == ["public", "public"]  # one name on both sides
            for store in stores:
                assert await _within(_live(store), 10) is not None
            for revoker, server in ((named, unnamed), (unnamed, named)):
                token, key = await server.keys.create(resources=["casa"])
                assert await server.keys.verify(token) == key
                assert server.store.keys.get(hash_token(token)) == key  # cached
                await revoker.keys.revoke(key_id=key.id)
                took = await _within(_refused(server, token), 1.0)  # far below the 10 s maximum age
                assert took is not None, f"{server.store.url} kept a key revoked by {revoker.store.url}"
        finally:
            await unnamed.close()
            await named.close()


# -- a frozen listener --------------------------------------------------------------------------


async def test_a_frozen_listener_turns_the_cache_off_within_the_heartbeat_bound(short_beats: None) -> None:
    with pg_schema() as url, FreezingProxy(url) as proxy:
        server = await caderno.connect(proxy.url(url), embedder=None)
        elsewhere = await caderno.connect(url, embedder=None)  # another process, not behind the proxy
        try:
            store = server.store
            assert isinstance(store, PostgresStore)
            store.keys.max_age = 3600.0  # only the heartbeat can turn the cache off in time
            token, key = await server.keys.create(resources=["casa"])
            other_token, other = await server.keys.create(resources=["casa"])
            listener = await _listener_link(proxy)
            assert await _within(_live(store), 10) is not None
            assert await server.keys.verify(token) == key
            assert store.keys.get(hash_token(token)) == key  # served from the cache

            proxy.freeze(listener)
            await elsewhere.keys.revoke(key_id=key.id)  # its notice will never arrive
            took = await _within(_refused(server, token), BEAT + BEAT_TIMEOUT + LOADED_SLACK)
            assert took is not None, "a frozen listener kept the revoked key in the cache"
            assert not store._keys_live  # off: every request reads the database

            # A fresh session through the proxy, confirmed by its first heartbeat, brings the cache back.
            assert await _within(_live(store), 10) is not None
            assert (await _listener_link(proxy)) is not listener
            assert await server.keys.verify(other_token) == other
            assert store.keys.get(hash_token(other_token)) == other
            assert await server.keys.verify(token) is None
        finally:
            await elsewhere.close()
            await server.close()


async def test_the_maximum_age_bounds_a_cached_key_when_the_heartbeat_says_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Heartbeats an hour apart: after the first one the listener is trusted for two hours.
    monkeypatch.setattr(PostgresStore, "key_heartbeat_seconds", 3600.0)
    monkeypatch.setattr(PostgresStore, "key_heartbeat_timeout", 3600.0)
    max_age = 0.5
    with pg_schema() as url, FreezingProxy(url) as proxy:
        server = await caderno.connect(proxy.url(url), embedder=None)
        elsewhere = await caderno.connect(url, embedder=None)
        try:
            store = server.store
            assert isinstance(store, PostgresStore)
            store.keys.max_age = max_age
            token, key = await server.keys.create(resources=["casa"])
            listener = await _listener_link(proxy)
            assert await _within(_live(store), 10) is not None  # its first heartbeat is back: trusted for two hours
            proxy.freeze(listener)
            assert await server.keys.verify(token) == key
            await elsewhere.keys.revoke(key_id=key.id)
            took = await _within(_refused(server, token), max_age + SLACK)
            assert took is not None, "a cached key outlived its maximum age"
            assert store._keys_live  # nothing but the age refused it
        finally:
            await elsewhere.close()
            await server.close()


# -- caderno serve behind the proxy ----------------------------------------------------------------


def test_caderno_serve_with_a_frozen_listener_answers_401_within_the_bound() -> None:
    pytest.importorskip("uvicorn")
    import httpx
    from _serving import cli, serving

    bound = KEY_HEARTBEAT_SECONDS + KEY_HEARTBEAT_TIMEOUT  # the defaults: what the README promises
    with pg_schema() as url, FreezingProxy(url) as proxy:
        created = cli(url, "keys", "create", "--resource", "casa", "--json")  # type: ignore[arg-type]
        assert created.returncode == 0, created.stderr
        made = json.loads(created.stdout)
        headers = {"authorization": f"Bearer {made['token']}"}
        with serving(proxy.url(url)) as served:  # type: ignore[arg-type]
            listener = asyncio.run(_listener_link(proxy))
            for _ in range(3):  # the first fills the server's cache, the others are served from it
                assert httpx.get(f"{served.base}/v1/resources", headers=headers).status_code == 200
            proxy.freeze(listener)
            revoked = cli(url, "keys", "revoke", made["key"]["id"])  # type: ignore[arg-type]
            assert revoked.returncode == 0, revoked.stderr
            started = time.monotonic()
            while (status := httpx.get(f"{served.base}/v1/resources", headers=headers).status_code) == 200:
                assert time.monotonic() - started < bound + SLACK, "the revoked key still answers 200"
                time.sleep(0.05)
            assert status == 401
