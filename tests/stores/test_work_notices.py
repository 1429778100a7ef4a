"""PostgreSQL: an append in one process wakes the embedding worker of every other at once.

``PostgresStore`` sends a notice on ``caderno_work`` after each committed
batch that queued embedding work; every store of the same schema hears it
on its key listener's session and calls what ``watch_embedding_queue`` set
(``Memory.run_background`` sets its indexer's wake-up). Which operations
queue work is their ``queues_work`` attribute, set by hand beside each one;
the first test checks it against the statements the plans really send.
"""

from __future__ import annotations

import asyncio
import re
import time

import _op_cases
import pytest
from _op_cases import Scene, cases, runnable, sent
from _pg import pg_schema

import caderno
from caderno import Message
from caderno.stores import postgres

pytestmark = pytest.mark.postgres

#: The fixture, under its name here (pytest finds fixtures by module attribute).
scene = _op_cases.scene

#: How long a notice may take to reach another store (it takes milliseconds; a loaded machine more).
NOTICE_WAIT = 5.0

_QUEUES = re.compile(r"\bINSERT INTO (embedding_queue|item_embeddings)\b")


async def test_the_operations_announced_are_exactly_those_that_queue_work(scene: Scene) -> None:
    queueing: set[str] = set()
    for op in cases(scene):
        if type(op) in runnable(scene) and any(_QUEUES.search(q.sql) and q.params for q in await sent(scene.store, op)):
            queueing.add(type(op).__name__)
    assert queueing == {kind.__name__ for kind in runnable(scene) if kind.queues_work}


async def _heard(wake: asyncio.Event, what: str) -> None:
    try:
        await asyncio.wait_for(wake.wait(), NOTICE_WAIT)
    except TimeoutError:
        pytest.fail(f"no notice within {NOTICE_WAIT} s of {what}")


async def test_an_append_through_one_store_wakes_the_other() -> None:
    with pg_schema() as url:
        writer = await caderno.connect(url, embedder=None)
        listener = await caderno.connect(url, embedder=None)
        try:
            await writer.open()
            await listener.open()
            store = listener.store
            assert isinstance(store, postgres.PostgresStore)
            wake = asyncio.Event()
            store.watch_embedding_queue(wake.set)
            deadline = time.monotonic() + NOTICE_WAIT  # the listener's session is up once a heartbeat came back
            while not store._keys_live and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            wake.clear()  # (the session's start wakes it once, for work queued while nobody listened)
            await writer.append_messages(resource_id="casa", thread_id="t", messages=[Message.user("a viagem")])
            await _heard(wake, "an append in another store")
        finally:
            await writer.close()
            await listener.close()
