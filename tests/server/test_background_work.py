"""Background embedding nobody loses: new work, a killed worker's batch, a killed server's batch.

Real ``caderno serve`` and ``caderno worker`` processes on a real SQLite
file and a real PostgreSQL schema, the real embedding model. Every process
that runs background work looks at the queue every ``POLL_SECONDS`` whatever
happened in it, so:

- a standalone worker (the layout ``serve --background off`` + ``caderno
  worker``) embeds what is appended after it started (it used to embed only
  what was queued at its start, then sleep for the consolidation period);
- a worker SIGKILLed mid-batch leaves a lease that runs out
  (``CADERNO_EMBED_LEASE`` makes it short here), and another worker takes the
  batch within ``POLL_SECONDS`` + the lease;
- a server SIGKILLed mid-batch: another server that received no append of
  its own embeds that batch (it used to wait for an append of its own).

Each message ends with exactly one vector. The tests wait for the whole
queue within ``EMBED_WAIT`` (model loads and long texts on a loaded
machine), not for the tighter bound itself: the worker that takes over
embeds the unclaimed jobs first, so its time to the abandoned batch
depends on the machine.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _serving import Served, make_key, serving  # noqa: E402

import caderno  # noqa: E402
from caderno import Message  # noqa: E402
from caderno.core.clock import from_iso  # noqa: E402
from caderno.stores._sqlite_plans import _MARKED  # noqa: E402
from conftest import python_env  # noqa: E402

#: The killed process's lease (seconds): short, so the test waits little for it to run out.
SHORT_LEASE = 3.0
#: How long the whole queue may take to be embedded: model loads and long texts on a loaded machine
#: (a deadline only; 120 s ran out with the suite on 4 workers and the CPU loaded).
EMBED_WAIT = 300.0
#: Long messages appended in eights for a worker to be caught embedding: its first claim (the
#: indexer's ``FIRST_BATCH``, or the eight a notice woke it for) is in flight when the test kills it.
BATCH_MESSAGES = 24
#: The same for server A, beside which server B polls the queue too and may claim part of it
#: with its own (long) lease: 24 were seen all embedded before A's short lease was.
SERVER_MESSAGES = 48
#: Long texts (~450 word pieces each): a batch takes long enough to be caught in flight.
SENTENCES = [
    "The plumber said the kitchen pipes need replacing before winter.",
    "Ana wants the Lisbon trip in the second week of May, with a budget of 3000 euros.",
    "The landlord raises the rent in January by six percent.",
    "Rui's judo classes moved to Mondays and Wednesdays at the club.",
]


def _text(i: int) -> str:
    return f"Note {i}. " + " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(30))


def _sql(url: str, query: str) -> list[tuple[Any, ...]]:
    """Rows of ``query`` on the database at ``url`` (a SQLite path, or PostgreSQL with ``?schema=``)."""
    if not url.startswith("postgresql://"):
        import sqlite3

        with sqlite3.connect(url) as db:
            return db.execute(query).fetchall()
    import psycopg

    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def _leases(url: str) -> list[datetime]:
    """When each claimed, unfinished job's lease runs out (unclaimed: PostgreSQL's '-infinity', SQLite's '' or '0')."""
    if url.startswith("postgresql://"):
        return [v for (v,) in _sql(url, "SELECT not_before FROM embedding_queue WHERE not_before > '-infinity'")]
    return [from_iso(v) for (v,) in _sql(url, "SELECT not_before FROM embedding_queue WHERE not_before > '0'")]


def _short_leases(url: str) -> int:
    """Jobs leased by the process with ``SHORT_LEASE`` (a longer lease runs out later)."""
    now = datetime.now(UTC)
    return sum(now < v <= now + timedelta(seconds=SHORT_LEASE + 1) for v in _leases(url))


def _pending(url: str) -> int:
    """Messages waiting for a vector: the queue's jobs, and on SQLite the messages an append marked
    above the worker's watermark (``_sqlite_plans._MARKED``), which no queue row holds yet."""
    if url.startswith("postgresql://"):
        return int(_sql(url, "SELECT count(*) FROM embedding_queue")[0][0])
    return int(_sql(url, f"SELECT (SELECT count(*) FROM embedding_queue) + (SELECT count(*) {_MARKED})")[0][0])


def _wait(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.05)


def _one_vector_each(url: str, n: int) -> None:
    rows = _sql(url, "SELECT seq, count(*) FROM embeddings GROUP BY seq")
    assert len(rows) == n and {count for _, count in rows} == {1}, rows


def _queue(url: str, n: int, *, first: int = 0) -> None:
    """``n`` messages appended by this process (which embeds nothing)."""

    async def append() -> None:
        async with caderno.connect(url, embedder=None) as memory:
            for i in range(first, first + n, 8):
                texts = [_text(k) for k in range(i, min(first + n, i + 8))]
                await memory.append_messages(
                    resource_id="casa", thread_id="t", messages=[Message.user(t) for t in texts]
                )

    asyncio.run(append())


@contextmanager
def _worker(url: str, *, lease: float | None = None) -> Iterator[subprocess.Popen[str]]:
    env = {**python_env(), "CADERNO_DB": url}
    if lease is not None:
        env["CADERNO_EMBED_LEASE"] = str(lease)
    process = subprocess.Popen(
        [sys.executable, "-m", "caderno.cli", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        assert "caderno worker on" in process.stderr.readline()  # started (the line before its loops)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def _append(served: Served, token: str, texts: list[str]) -> None:
    body = {"messages": [{"role": "user", "content": t} for t in texts]}
    r = httpx.post(
        f"{served.base}/v1/resources/casa/threads/t/messages",
        json=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 201, r.text


def test_a_standalone_worker_embeds_what_is_appended_after_it_started(shared_url: str) -> None:
    token = make_key(shared_url, "casa")
    with serving(shared_url, None, "--background", "off") as served, _worker(shared_url):
        _append(served, token, ["o primeiro, antes de tudo"])
        _wait(lambda: _pending(shared_url) == 0, EMBED_WAIT, "the first message embedded")  # the worker is running
        for n in range(5):  # well after its start
            _append(served, token, [f"mensagem {n}.{k} sobre a viagem" for k in range(4)])
        _wait(lambda: _pending(shared_url) == 0, EMBED_WAIT, "20 messages appended after the worker started")
    _one_vector_each(shared_url, 21)


def test_a_killed_workers_batch_is_taken_up_by_another_worker(shared_url: str) -> None:
    make_key(shared_url, "casa")  # the schema, before two processes race to make it
    with _worker(shared_url, lease=SHORT_LEASE) as doomed:
        _queue(shared_url, BATCH_MESSAGES)
        _wait(lambda: _short_leases(shared_url) > 0, EMBED_WAIT, "the worker claimed a batch")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    abandoned = _leases(shared_url)
    assert abandoned, "the worker finished its batch before it was killed: nothing to take over"
    with _worker(shared_url):
        _wait(lambda: _pending(shared_url) == 0, EMBED_WAIT, "the killed worker's batch embedded by another")
    _one_vector_each(shared_url, BATCH_MESSAGES)


def test_a_server_with_no_appends_embeds_a_killed_servers_batch(shared_url: str) -> None:
    token = make_key(shared_url, "casa")
    short = {**python_env(), "CADERNO_EMBED_LEASE": str(SHORT_LEASE)}
    with serving(shared_url) as b:
        with serving(shared_url, env=short) as a:
            for i in range(0, SERVER_MESSAGES, 8):
                _append(a, token, [_text(k) for k in range(i, i + 8)])
            _wait(lambda: _short_leases(shared_url) > 0, EMBED_WAIT, "server A claimed a batch")
            a.process.send_signal(signal.SIGKILL)
        _wait(lambda: _pending(shared_url) == 0, EMBED_WAIT, "server A's queue embedded by server B")
        assert b.process.poll() is None
    _one_vector_each(shared_url, SERVER_MESSAGES)
    assert "Traceback" not in b.log, b.log
