"""A PostgreSQL connection that dies with a write's commit in flight: the error says the outcome is unknown.

A TCP proxy between the store and the server reads the protocol's messages
and cuts the connection at a chosen one: right after it forwarded the write's
COMMIT and the server answered it (the write IS stored, the client never
hears so), or just before forwarding it (nothing is stored). Only the first
case may be ``OutcomeUnknown``; the second is a plain ``StorageError``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _pg import PG_URL, pg_schema

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.core.errors import OutcomeUnknown, StorageError
from caderno.server.problems import for_error
from caderno.stores import ops

pytestmark = pytest.mark.postgres

#: A frontend message the cut waits for: (type byte, body) -> True.
Trigger = Callable[[bytes, bytes], bool]


class CuttingProxy:
    """Forwards PostgreSQL connections; once armed, cuts the one that sends a matching message.

    ``after=True``: the message goes to the server, and the connection is cut
    (both sides) when the server's answer to it is complete (ReadyForQuery),
    which the client never receives. ``after=False``: the message is never
    forwarded; the connection is cut at once.
    """

    def __init__(self) -> None:
        self.trigger: Trigger | None = None
        self.after = True
        self.cut = asyncio.Event()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    def arm(self, trigger: Trigger, *, after: bool) -> None:
        self.trigger, self.after = trigger, after

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for handler in list(self._handlers):
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        try:
            await self._pump(client_r, client_w)
        except asyncio.CancelledError:
            client_w.transport.abort()  # the test is over

    async def _pump(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        host, port = PG_URL.split("@", 1)[1].split("/", 1)[0].split(":")
        server_r, server_w = await asyncio.open_connection(host, int(port))
        answered = asyncio.Event()  # the server finished answering the triggering message
        state = {"triggered": False}

        async def upstream() -> None:
            (length,) = struct.unpack("!i", await client_r.readexactly(4))  # the startup packet: no type byte
            server_w.write(struct.pack("!i", length) + await client_r.readexactly(length - 4))
            while True:
                kind = await client_r.readexactly(1)
                (length,) = struct.unpack("!i", await client_r.readexactly(4))
                body = await client_r.readexactly(length - 4)
                if not state["triggered"] and self.trigger is not None and self.trigger(kind, body):
                    state["triggered"], self.trigger = True, None
                    if not self.after:
                        return
                server_w.write(kind + struct.pack("!i", length) + body)
                await server_w.drain()

        async def downstream() -> None:
            while True:
                kind = await server_r.readexactly(1)
                (length,) = struct.unpack("!i", await server_r.readexactly(4))
                body = await server_r.readexactly(length - 4)
                if state["triggered"]:
                    if kind == b"Z":  # the server is done with it: stored, and nobody is told
                        answered.set()
                        return
                    continue
                client_w.write(kind + struct.pack("!i", length) + body)
                await client_w.drain()

        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            if state["triggered"] and self.after:
                await asyncio.wait_for(answered.wait(), 10)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, server_w):
                writer.transport.abort()  # a reset, as a crashed server's socket
            if state["triggered"]:
                self.cut.set()


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[CuttingProxy, str, str]]:
    """A proxy, a URL through it (its own schema), and the same schema's direct URL."""
    proxy = CuttingProxy()
    await proxy.start()
    with pg_schema() as direct:
        query = direct.split("?", 1)[1]
        base = PG_URL.split("?", 1)[0]
        rest = base.split("@", 1)
        through = f"{rest[0]}@127.0.0.1:{proxy.port}/{rest[1].split('/', 1)[1]}"
        yield proxy, f"{through}?{query}&sslmode=disable&gssencmode=disable", direct
    await proxy.close()


def _commit(kind: bytes, body: bytes) -> bool:
    return kind == b"Q" and body.rstrip(b"\0").strip().upper() == b"COMMIT"


def _patch(value: str) -> ops.PatchWorkingMemory:
    """A working-memory patch: a transaction of several statements, ended by COMMIT."""
    return ops.PatchWorkingMemory(
        resource_id="r",
        update=lambda current: {**(current or {}), "city": value},
        patch={"city": value},
        expected_version=None,
        source="test",
        now=utcnow(),
    )


async def _stored_city(direct: str) -> Any:
    async with caderno.connect(direct, embedder=None) as memory:
        return (await memory.get_working_memory(resource_id="r")).get("city")


async def test_a_connection_cut_after_the_commit_went_out_is_outcome_unknown(
    proxied: tuple[CuttingProxy, str, str],
) -> None:
    """Before, this was a plain 503 ``storage`` ("nothing stored") for a write that WAS stored."""
    proxy, url, direct = proxied
    async with caderno.connect(url, embedder=None) as memory:
        await memory.update_working_memory(resource_id="r", patch={"city": "Recife"})
        proxy.arm(_commit, after=True)
        with pytest.raises(OutcomeUnknown) as caught:
            await memory.run(_patch("Curitiba"))
        assert proxy.cut.is_set()
        assert "may or may not be stored" in str(caught.value) and "Idempotency-Key" in str(caught.value)
    assert await _stored_city(direct) == "Curitiba"  # it was stored: the error did not lie
    body = for_error(caught.value)
    assert body.status_code == 503 and b"problems/storage-unknown" in bytes(body.body)


async def test_a_connection_cut_before_the_commit_was_sent_is_a_plain_storage_error(
    proxied: tuple[CuttingProxy, str, str],
) -> None:
    """The other side of the line: cut at a statement before COMMIT (the server rolls back), nothing was stored.

    (Cut just before the COMMIT reached the server is ``OutcomeUnknown`` too:
    the client sent it and cannot tell the two apart.)
    """
    proxy, url, direct = proxied
    async with caderno.connect(url, embedder=None) as memory:
        await memory.update_working_memory(resource_id="r", patch={"city": "Recife"})
        proxy.arm(lambda kind, body: b"UPDATE resources SET working_memory" in body, after=False)
        with pytest.raises(StorageError) as caught:
            await memory.run(_patch("Curitiba"))
        assert type(caught.value) is StorageError, repr(caught.value)
    assert await _stored_city(direct) == "Recife"


async def test_a_one_statement_append_cut_after_the_server_ran_it_is_outcome_unknown(
    proxied: tuple[CuttingProxy, str, str],
) -> None:
    """An append alone is one statement that commits by itself: cut once the server answered, it is stored."""
    proxy, url, direct = proxied
    async with caderno.connect(url, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("before")])
        proxy.arm(lambda kind, body: kind == b"B" and b"cut-me" in body, after=True)
        with pytest.raises(OutcomeUnknown):
            await memory.append_messages(resource_id="r", thread_id="t", messages=[Message.user("cut-me")])
    async with caderno.connect(direct, embedder=None) as memory:
        got = await memory.get_messages(resource_id="r", thread_id="t")
    assert [m.content for m in got] == ["before", "cut-me"]
