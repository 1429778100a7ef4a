"""Event-loop lag of ``caderno serve``: ``/healthz`` while the largest allowed recall and append run.

A server's requests share one event loop, so a request that computes on it
(parsing a big JSON body, tokenising, stemming or date-parsing a long text)
stalls every other tenant's. This measures it from outside, as a client sees
it: one ``caderno serve`` on a SQLite file (background work off, so no
embedding competes), ``GET /healthz`` called back to back from a separate
client, in two phases of the same run:

  * floor: nothing else running;
  * loaded: ``--rounds`` times, the largest recall a key may send (a query of
    ``MAX_QUERY_CHARS`` characters of prose with dates in it) and the largest
    append (``APPEND_MESSAGES`` messages of ``MAX_MESSAGE_CHARS`` characters,
    just under the 16 MiB body limit) sent at once, ``/healthz`` polled
    meanwhile.

It prints ``/healthz`` p50 / p99 / max of each phase and how long the recall
and append took. Pass ``--query-chars`` above the limit to see what a longer
query would cost (the server refuses it: the run then reports the 400).

Run:  .venv/bin/python bench/loop_lag.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import pct
from server_load import caderno_cli, free_port, start_server, stop_server

from caderno.core.jsonvalue import MAX_MESSAGE_CHARS
from caderno.memory.engines.recall import MAX_QUERY_CHARS

RESOURCE = "lag"
#: Prose with the things recall parses: dates, weekdays, relative times, accents.
SENTENCE = "Na terça, 10 de março de 2024, paguei 120 reais de luz; semana passada a reunião foi ontem às 15h. "
#: Messages of ``MAX_MESSAGE_CHARS`` in the largest append: 15 MB of JSON, under the 16 MiB body limit.
APPEND_MESSAGES = 15
#: How long the floor phase polls /healthz (seconds).
FLOOR_SECONDS = 5.0


async def wait_up(base: str, server: Any) -> None:
    """Until ``/readyz`` answers 200 (60 s at most)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=base, timeout=2) as client:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited: {server.communicate()[0][-2000:]}")
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the server did not come up within 60 s")


def text(chars: int) -> str:
    return (SENTENCE * (chars // len(SENTENCE) + 1))[:chars]


async def poll(client: httpx.AsyncClient, stop: asyncio.Event, into: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        answer = await client.get("/healthz")
        answer.raise_for_status()
        into.append((time.perf_counter() - started) * 1000)


async def timed(client: httpx.AsyncClient, path: str, body: bytes) -> tuple[int, float]:
    started = time.perf_counter()
    answer = await client.post(path, content=body, headers={"content-type": "application/json"})
    return answer.status_code, time.perf_counter() - started


def row(name: str, lags: list[float]) -> str:
    return f"{name:<34} {pct(lags, 0.5):8.1f} {pct(lags, 0.99):8.1f} {max(lags):8.1f} {len(lags):7d}"


async def measure(base: str, token: str, rounds: int, query_chars: int) -> None:
    auth = {"authorization": f"Bearer {token}"}
    recall = json.dumps({"query": text(query_chars)}, ensure_ascii=False).encode()
    append = json.dumps(
        {"messages": [{"role": "user", "content": text(MAX_MESSAGE_CHARS)} for _ in range(APPEND_MESSAGES)]},
        ensure_ascii=False,
    ).encode()
    limits = httpx.Timeout(600.0)
    async with (
        httpx.AsyncClient(base_url=base, timeout=limits) as probe,
        httpx.AsyncClient(base_url=base, timeout=limits, headers=auth) as worker,
    ):
        # Something to find, and the first call's imports out of the way.
        await worker.post(
            f"/v1/resources/{RESOURCE}/threads/t/messages", json={"messages": [{"role": "user", "content": SENTENCE}]}
        )
        await worker.post(f"/v1/resources/{RESOURCE}/recall", json={"query": "luz"})
        floor: list[float] = []
        stop = asyncio.Event()
        poller = asyncio.create_task(poll(probe, stop, floor))
        await asyncio.sleep(FLOOR_SECONDS)
        stop.set()
        await poller
        loaded: list[float] = []
        took: dict[str, list[float]] = {"recall": [], "append": []}
        for i in range(rounds):
            stop = asyncio.Event()
            poller = asyncio.create_task(poll(probe, stop, loaded))
            (rs, rt), (as_, at) = await asyncio.gather(
                timed(worker, f"/v1/resources/{RESOURCE}/recall", recall),
                timed(worker, f"/v1/resources/{RESOURCE}/threads/big-{i}/messages", append),
            )
            stop.set()
            await poller
            if rs != 200 or as_ != 201:
                print(f"round {i}: recall answered {rs}, append {as_}")
            took["recall"].append(rt)
            took["append"].append(at)
    print(
        f"recall query: {query_chars:,} characters ({len(recall) / 1e6:.1f} MB body); append: "
        f"{APPEND_MESSAGES} x {MAX_MESSAGE_CHARS:,} characters ({len(append) / 1e6:.1f} MB body); {rounds} rounds"
    )
    print(f"{'GET /healthz latency (ms)':<34} {'p50':>8} {'p99':>8} {'max':>8} {'calls':>7}")
    print(row("nothing else running (floor)", floor))
    print(row("largest recall + append running", loaded))
    for name, values in took.items():
        print(f"{name} took {pct(values, 0.5):.2f} s (p50 of {len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--query-chars", type=int, default=MAX_QUERY_CHARS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        url = f"sqlite:///{Path(where) / 'lag.db'}"
        token: Any = json.loads(caderno_cli(url, "keys", "create", "--resource", RESOURCE, "--json").stdout)["token"]
        port = free_port()
        server = start_server(url, port, 1, "off")
        try:
            base = f"http://127.0.0.1:{port}"
            asyncio.run(wait_up(base, server))
            asyncio.run(measure(base, token, args.rounds, args.query_chars))
        finally:
            stop_server(server)


if __name__ == "__main__":
    main()
