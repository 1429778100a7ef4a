"""HTTP server load: 64 concurrent clients on loopback vs the same calls in-process.

Workload (one run, same machine; every configuration gets a fresh database):
  * seed, untimed: 64 threads x SEED turns appended, then the embedding queue
    drained, so recall's relevant leg has vectors to search;
  * timed: REQUESTS calls from 64 concurrent clients, each owning one thread,
    drawn at random (seeded) from this mix:
      - 40% append a turn (user + assistant) to the client's thread;
      - 30% read the thread's last 20 messages;
      - 15% recall (query, scope=resource, default legs) — embeds the query
        (one of five questions, so the embedding service's cache of recent
        queries answers all but the first of each; ``--fresh-queries`` adds
        the client and call numbers, so every query is a new one);
      - 15% working-memory merge patch of one key (all clients, one resource).

Configurations (``--only`` picks some):
  * HTTP, 1 worker, background in a child process: ``caderno --db URL serve
    --background process`` as a subprocess (the default MiniLM embedder);
  * HTTP, 1 worker, background in the server's loop: ``serve --background
    inline``, the default (batches embedded by a thread at nice +10);
  * HTTP, 2 workers: ``caderno serve`` has no workers option, so uvicorn
    runs ``make_app`` below (what ``serve`` builds: ``create_app`` with
    ``default_routers()``, background inline in each) with ``--factory --workers 2``;
  * in-process: the same mix through one ``caderno.Memory`` (default embedder)
    from 64 asyncio tasks — the reference the HTTP rows are measured against.

Each on SQLite (a WAL file) and PostgreSQL (--pg URL, a schema created and
dropped by the run; skipped with a line if unreachable). Clients share one
``aiohttp.ClientSession`` (64 keep-alive connections) with a bearer key made
by ``caderno keys create``. The load generator is aiohttp, not httpx: on
cores it shares with the server, httpx spent 2–3 ms of CPU a call and
aiohttp spends 0.3–0.6 (the "client CPU" column). Latency is measured in the
client, per call; "server CPU" is the server process's (and its children's)
user + system time over the timed calls, divided by them.

Closed loop, then open loop: 64 clients that each wait for their answer
always have 64 calls in flight, so their latency is 64 / throughput (Little's
law) however fast a call is; after the closed loop, half as many calls
again arrive at ``--open-share`` (default half) of the closed loop's
requests/s (or at ``--open-rate`` calls/s, the same for every run: two
versions of the code compared at one load, not each at a share of its own
capacity), Poisson, and their latency counts from arrival — what a call
costs under that load.

Not isolated: the clients, the server workers and the embedding worker (fed
by the timed appends, as in production) share the same cores, so requests/s
is a floor for a server with its own machine.

Run:  .venv/bin/python bench/server_load.py [--requests 2560 --seed 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import drop_schema, pct, pg_schema_url

CLIENTS = 64
RESOURCE = "bench"
MIX = (("append", 0.40), ("read", 0.30), ("recall", 0.15), ("patch", 0.15))
ROUTES = [name for name, _ in MIX]
QUERIES = ("onde fica a casa", "reunião de terça", "receita de bolo", "viagem a Lisboa", "preço do aluguel")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
DB_ENV = "CADERNO_BENCH_DB"
#: The configurations (``--only`` names): uvicorn workers and where background work runs.
CONFIGS = {
    "in-process": (0, ""),
    "http": (1, "process"),
    "http-inline": (1, "inline"),
    "http2": (2, "inline"),
    "http-off": (1, "off"),
}
LABELS = {
    "http": "HTTP, 1 worker, background in a child process",
    "http-inline": "HTTP, 1 worker, background in the server's loop",
    "http2": "HTTP, 2 workers, background in each",
    "http-off": "HTTP, 1 worker, no background work (nothing embedded: the floor)",
}


def make_app() -> Any:
    """The app ``caderno serve`` builds, for ``uvicorn --factory --workers N`` (database from $CADERNO_BENCH_DB)."""
    from caderno import Memory
    from caderno.memory.adapters.connect import open_store
    from caderno.server import create_app
    from caderno.server.routes import default_routers

    memory = Memory(open_store(os.environ[DB_ENV]))
    return create_app(memory, routers=default_routers())


def plan(requests: int) -> list[list[str]]:
    """Per client, the routes it calls, in order (same plan for every configuration)."""
    rng = random.Random(7)
    names, weights = zip(*MIX, strict=True)
    per = requests // CLIENTS
    return [rng.choices(names, weights, k=per) for _ in range(CLIENTS)]


FRESH = False  # --fresh-queries


def question(client: int, n: int) -> str:
    """The query of a client's ``n``-th call: one of ``QUERIES``, or with ``--fresh-queries`` one never asked before."""
    query = QUERIES[n % len(QUERIES)]
    return f"{query} {client} {n}" if FRESH else query


def turn(client: int, n: int) -> tuple[str, str]:
    topic = QUERIES[(client + n) % len(QUERIES)]
    return f"pergunta {n} do cliente {client} sobre {topic}", f"resposta {n}: anotado, {topic}"


Call = Callable[[str, int, int], Awaitable[None]]


async def drive(call: Call, routes: list[list[str]]) -> dict[str, Any]:
    """64 tasks, each running its share of the plan; latency per route, wall time."""
    lat: dict[str, list[float]] = defaultdict(list)

    async def client(i: int, mine: list[str]) -> None:
        for n, route in enumerate(mine):
            t0 = time.perf_counter()
            await call(route, i, n)
            lat[route].append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i, mine) for i, mine in enumerate(routes)))
    return {"wall": time.perf_counter() - t0, "lat": dict(lat)}


async def drive_open(call: Call, routes: list[list[str]], rate: float) -> dict[str, Any]:
    """Open loop: calls arrive at ``rate`` a second (Poisson), whatever the server's pace.

    Closed-loop clients (``drive``) wait for each answer before the next
    call, so 64 of them always have 64 calls in flight and their latency is
    64 / throughput (Little's law) however fast each call is served; arrivals
    at a set rate below capacity show the latency a call itself takes under
    that load. Each call's latency is counted from its arrival, so time it
    spent queued behind others counts. Calls take the plan's routes in turn,
    client by client.
    """
    rng = random.Random(11)
    lat: dict[str, list[float]] = defaultdict(list)
    order = [(i, n, route) for n in range(len(routes[0])) for i, mine in enumerate(routes) for route in [mine[n]]]

    async def one(at: float, i: int, n: int, route: str) -> None:
        await asyncio.sleep(max(0.0, at - time.perf_counter()))
        await call(route, i, n)
        lat[route].append(time.perf_counter() - at)

    t0 = time.perf_counter()
    at, pending = t0, []
    for i, n, route in order:
        at += rng.expovariate(rate)
        pending.append(one(at, i, n + 10_000, route))
    await asyncio.gather(*pending)
    return {"wall": time.perf_counter() - t0, "lat": dict(lat)}


# -- in-process -------------------------------------------------------------------------------


async def run_inprocess(url: str, routes: list[list[str]], seed: int) -> dict[str, Any]:
    import caderno
    from caderno import Message
    from caderno.stores import ops

    memory = await caderno.connect(url)

    async def call(route: str, i: int, n: int) -> None:
        tid = f"t{i}"
        if route == "append":
            user, assistant = turn(i, 1000 + n)
            await memory.append_messages(
                resource_id=RESOURCE, thread_id=tid, messages=[Message.user(user), Message.assistant(assistant)]
            )
        elif route == "read":
            await memory.get_messages(resource_id=RESOURCE, thread_id=tid, limit=20)
        elif route == "recall":
            await memory.recall(resource_id=RESOURCE, query=question(i, n), thread_id=tid)
        else:
            await memory.update_working_memory(resource_id=RESOURCE, patch={f"c{i}": n}, source="bench")

    try:
        await asyncio.gather(*(seed_client(call, i, seed) for i in range(CLIENTS)))
        await memory.flush()
        r = await drive(call, routes)
        r["pending"] = await memory.run(ops.CountPendingEmbeddings())
        return r
    finally:
        await memory.close()


async def seed_client(call: Call, i: int, seed: int) -> None:
    for n in range(seed):
        await call("append", i, n - 1000)  # turn numbers below the timed ones


# -- HTTP -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def caderno_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "caderno"), "--db", url, *args], capture_output=True, text=True, timeout=120, check=True
    )


def start_server(url: str, port: int, workers: int, background: str) -> subprocess.Popen[str]:
    if workers == 1:
        command = [str(BIN / "caderno"), "--db", url, "serve", "--port", str(port), "--log-level", "warning"]
        command += ["--background", background]
    else:
        command = [
            *(str(sys.executable), "-m", "uvicorn", "--factory", "server_load:make_app", "--app-dir", str(HERE)),
            *("--workers", str(workers), "--port", str(port), "--log-level", "warning"),
        ]
    env = {**os.environ, DB_ENV: url}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_server(server: subprocess.Popen[str]) -> str:
    """SIGTERM (then SIGKILL after 30 s); the server's output."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            return server.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            server.kill()
    return server.communicate(timeout=10)[0]


async def wait_up(base: str, server: subprocess.Popen[str]) -> None:
    import aiohttp

    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession(base, timeout=aiohttp.ClientTimeout(total=2)) as client:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited: {server.communicate()[0][-2000:]}")
            try:
                async with client.get("/readyz") as r:
                    if r.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the server did not come up within 60 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children alive now (Linux ``/proc``)."""
    total = 0.0
    for p in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


async def pending_embeddings(url: str, wait: float = 0) -> int:
    """Messages still waiting for a vector; with ``wait``, first wait (bounded) for the server to embed them."""
    import caderno
    from caderno.stores import ops

    memory = await caderno.connect(url, embedder=None)
    try:
        deadline = time.monotonic() + wait
        while (left := await memory.run(ops.CountPendingEmbeddings())) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        return left
    finally:
        await memory.close()


async def run_http(
    url: str,
    routes: list[list[str]],
    seed: int,
    workers: int,
    background: str,
    open_share: float,
    open_rate: float = 0.0,
) -> dict[str, Any]:
    import aiohttp

    token = json.loads(caderno_cli(url, "keys", "create", "--resource", RESOURCE, "--json").stdout)["token"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(url, port, workers, background)
    try:
        await wait_up(base, server)
        headers = {"authorization": f"Bearer {token}"}
        prefix = f"/v1/resources/{RESOURCE}"
        patch_headers = {"content-type": "application/merge-patch+json"}

        retried = [0]

        def caller(client: aiohttp.ClientSession) -> Call:
            async def call(route: str, i: int, n: int) -> None:
                for attempt in range(3):
                    try:
                        return await once(client, route, i, n)
                    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                        # A keep-alive connection the server closed as it was reused.
                        if attempt == 2:
                            raise
                        retried[0] += 1

            return call

        async def once(client: aiohttp.ClientSession, route: str, i: int, n: int) -> None:
            tid = f"t{i}"
            if route == "append":
                user, assistant = turn(i, 1000 + n)
                body = {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]}
                request = client.post(f"{prefix}/threads/{tid}/messages", json=body)
            elif route == "read":
                request = client.get(f"{prefix}/threads/{tid}/messages", params={"limit": 20})
            elif route == "recall":
                request = client.post(f"{prefix}/recall", json={"query": question(i, n), "thread_id": tid})
            else:
                request = client.patch(f"{prefix}/working-memory", data=json.dumps({f"c{i}": n}), headers=patch_headers)
            async with request as r:
                text = await r.read()
                if r.status >= 300:
                    raise RuntimeError(f"{route}: {r.status} {text[:300]!r}")

        def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=CLIENTS)
            return aiohttp.ClientSession(base, headers=headers, connector=connector, timeout=aiohttp.ClientTimeout(120))

        # One client per phase: uvicorn closes connections idle for 5 s (its
        # keep-alive timeout), and the wait for the embeddings is longer.
        async with session() as client:
            await asyncio.gather(*(seed_client(caller(client), i, seed) for i in range(CLIENTS)))
        if background != "off":  # with background work off nothing embeds them: no use waiting
            await pending_embeddings(url, wait=180)
        async with session() as client:
            cpu0, own0 = cpu_seconds(server.pid), time.process_time()
            r = await drive(caller(client), routes)
            r["cpu"], r["client_cpu"] = cpu_seconds(server.pid) - cpu0, time.process_time() - own0
        if open_share or open_rate:
            rate = open_rate or open_share * sum(len(v) for v in r["lat"].values()) / r["wall"]
            async with session() as client:
                r["open"] = {"rate": rate, **await drive_open(caller(client), [m[: len(m) // 2] for m in routes], rate)}
        r["pending"] = await pending_embeddings(url)
        r["retried"] = retried[0]
        return r
    except BaseException:
        print(f"server output:\n{stop_server(server)[-3000:]}", file=sys.stderr)
        raise
    finally:
        stop_server(server)


# -- databases --------------------------------------------------------------------------------


async def measure(backend: str, how: str, fresh: Callable[[], tuple[str, Callable[[], None]]], **kw: Any) -> dict:
    url, cleanup = fresh()
    try:
        if how == "in-process":
            r = await run_inprocess(url, kw["routes"], kw["seed"])
        else:
            r = await run_http(
                url, kw["routes"], kw["seed"], kw["workers"], kw["background"], kw["open_share"], kw["open_rate"]
            )
    finally:
        cleanup()
    total = sum(len(v) for v in r["lat"].values())
    retried = f", {r['retried']} retried after a closed connection" if r.get("retried") else ""
    print(f"  {backend}, {how}: {total} calls in {r['wall']:.1f} s{retried}", file=sys.stderr)
    cpu = {"cpu_ms": 1e3 * r["cpu"] / total, "client_ms": 1e3 * r["client_cpu"] / total} if "cpu" in r else {}
    row = {"backend": backend, "how": how, "rps": total / r["wall"], "lat": r["lat"], "pending": r["pending"], **cpu}
    return row | ({"open": r["open"]} if "open" in r else {})


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2_560, help="timed calls per configuration")
    ap.add_argument("--seed", type=int, default=10, help="turns per thread appended before timing")
    ap.add_argument("--quick", action="store_true", help="1,280 calls, 3 seed turns (a smoke run)")
    ap.add_argument("--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument(
        "--open-share",
        type=float,
        default=0.5,
        help="after the closed loop, half the calls again arriving at this share of its requests/s (0: skip)",
    )
    ap.add_argument("--only", default="", help=f"comma-separated: sqlite, postgres, {', '.join(CONFIGS)}")
    ap.add_argument(
        "--open-rate",
        type=float,
        default=0.0,
        help="the open loop's calls/s, the same for every run (instead of a share)",
    )
    ap.add_argument(
        "--fresh-queries", action="store_true", help="every recall asks a question not asked before (no cache hits)"
    )
    args = ap.parse_args()
    global FRESH
    FRESH = args.fresh_queries
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    if args.quick:
        args.requests, args.seed = 1_280, 3
    if shutil.which("caderno", path=str(BIN)) is None:
        sys.exit(f"no caderno script next to {sys.executable}: run `make install`")
    routes = plan(args.requests)
    print(
        f"workload: {CLIENTS} clients, {CLIENTS * len(routes[0])} timed calls per configuration "
        f"({', '.join(f'{int(w * 100)}% {n}' for n, w in MIX)}) after {args.seed} seed turns per thread; "
        f"{os.cpu_count()} cores shared by clients and server; python {sys.version.split()[0]}"
        f"{'; every query a new one' if FRESH else ''}; load average {os.getloadavg()[0]:.1f}"
    )
    print()
    tmp = Path(tempfile.mkdtemp(prefix="caderno-load-"))
    counter = iter(range(1_000))

    def sqlite() -> tuple[str, Callable[[], None]]:
        return str(tmp / f"load{next(counter)}.db"), lambda: None

    def postgres() -> tuple[str, Callable[[], None]]:
        made = pg_schema_url(args.pg)
        assert made is not None
        url, name = made
        return url, lambda: drop_schema(args.pg, name)

    backends: list[tuple[str, Callable[[], tuple[str, Callable[[], None]]]]] = [("SQLite", sqlite)]
    probe = pg_schema_url(args.pg)
    if probe is not None:
        drop_schema(args.pg, probe[1])
        backends.append(("PostgreSQL", postgres))
    names = {"SQLite": "sqlite", "PostgreSQL": "postgres"}  # the --only names
    backends = [b for b in backends if not only & {"sqlite", "postgres"} or names[b[0]] in only]
    hows = [h for h in CONFIGS if not only - {"sqlite", "postgres"} or h in only]
    rows = []
    try:
        for backend, fresh in backends:
            w = {"routes": routes, "seed": args.seed, "open_share": args.open_share, "open_rate": args.open_rate}
            for how in hows:
                if how == "in-process":
                    rows.append(await measure(backend, how, fresh, **w))
                else:
                    workers, background = CONFIGS[how]
                    rows.append(await measure(backend, LABELS[how], fresh, **w, workers=workers, background=background))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    head = " | ".join(f"{r} p50 ms | {r} p99 ms" for r in ROUTES)
    print(f"| store | how | requests/s | {head} | server CPU ms/call | client CPU ms/call | unembedded at end |")
    print("|---|---|---:|" + "---:|" * (2 * len(ROUTES) + 3))
    for r in rows:
        cells = " | ".join(f"{pct(r['lat'][x], 0.5) * 1e3:.1f} | {pct(r['lat'][x], 0.99) * 1e3:.1f}" for x in ROUTES)
        cpu = f"{r['cpu_ms']:.2f} | {r['client_ms']:.2f}" if "cpu_ms" in r else "– | –"
        print(f"| {r['backend']} | {r['how']} | {r['rps']:,.0f} | {cells} | {cpu} | {r['pending']:,} |")
    print()
    print("unembedded at end: messages the embedding worker had not reached when the last call returned.")
    if any("open" in r for r in rows):
        print()
        print(
            (
                f"Open loop: calls arriving at {args.open_rate:.0f}/s"
                if args.open_rate
                else f"Open loop: calls arriving at {args.open_share:.0%} of each row's requests/s"
            )
            + " (Poisson), latency from arrival:"
        )
        print()
        head = " | ".join(f"{x} p50 ms | {x} p99 ms" for x in ROUTES)
        print(f"| store | how | offered calls/s | {head} |")
        print("|---|---|---:|" + "---:|" * (2 * len(ROUTES)))
        for r in rows:
            if "open" in r:
                o = r["open"]
                cells = " | ".join(
                    f"{pct(o['lat'][x], 0.5) * 1e3:.1f} | {pct(o['lat'][x], 0.99) * 1e3:.1f}" for x in ROUTES
                )
                print(f"| {r['backend']} | {r['how']} | {o['rate']:,.0f} | {cells} |")
    print()
    print("Overhead of HTTP over the same calls in-process (ratio of p50s; requests/s as in-process / HTTP):")
    print()
    print(f"| store | how | requests/s | {' | '.join(f'{r} p50' for r in ROUTES)} |")
    print("|---|---|---:|" + "---:|" * len(ROUTES))
    ref = None
    for r in rows:
        if r["how"] == "in-process":
            ref = r
            continue
        if ref is None or ref["backend"] != r["backend"]:
            continue
        cells = " | ".join(f"{pct(r['lat'][x], 0.5) / pct(ref['lat'][x], 0.5):.2f}×" for x in ROUTES)
        print(f"| {r['backend']} | {r['how']} | {ref['rps'] / r['rps']:.2f}× | {cells} |")
    print()
    print("Ratios: >1 means HTTP is slower than in-process (64 tasks on one Memory, same mix, same seed).")
    if args.json:
        summary = [
            {
                "backend": r["backend"],
                "how": r["how"],
                "rps": r["rps"],
                **{f"{x}_p50_ms": pct(r["lat"][x], 0.5) * 1e3 for x in ROUTES},
                **{f"{x}_p99_ms": pct(r["lat"][x], 0.99) * 1e3 for x in ROUTES},
                "unembedded": r["pending"],
            }
            for r in rows
        ]
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
