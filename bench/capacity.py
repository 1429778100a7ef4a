"""Capacity model: what a turn and a read cost one PostgreSQL core, and what a named target needs.

Measured on the PostgreSQL at --pg (default the test database on
127.0.0.1:5432), in throw-away schemas created and dropped by the run:

  * turns: WRITERS concurrent writers append turns (a user and an assistant
    message, one ``append_messages`` call) to threads of RESOURCES resources,
    for --seconds, after a short warm-up;
  * reads: READERS concurrent readers, for --read-seconds each: a thread's
    last 20 messages (``get_messages``), a turn's snapshot (``turns.load``:
    history, summaries, working memory, facts in one read-only transaction),
    and ``get_context`` (recent and salient parts; no embedder here);
  * server CPU: the CPU time (utime + stime in /proc/<pid>/stat) of the
    PostgreSQL backends serving this run's own connections, found by their
    client ports, before and after each phase. Divided by the operations
    done, it is the cost of one operation on one PostgreSQL core, whatever
    else the machine runs (wall-clock rates on a shared 2-core machine are
    printed too, but the client and the server share those cores). Each
    phase runs in PARTS parts and its figure is their median, the range
    printed beside it: contention still moves CPU time per operation. The
    tables are analyzed after the warm-up, as autovacuum would (see
    ``analyze``: the test server runs without it). The
    server's background processes (WAL writer, checkpointer, autovacuum) are
    shown apart: they serve every database on the server;
  * client CPU: this process's CPU time per operation (caderno's Python side);
  * bytes per message: every table's ``pg_total_relation_size`` (heap,
    TOAST, indexes) after VACUUM, divided by the messages stored; then a
    second schema with EMBED_TURNS turns embedded by the default embedder
    (all-MiniLM-L6-v2, 384 dimensions, stored as bytes: the local server
    has no pgvector), which also gives the database's cost of storing a
    vector and the embedder's messages per CPU-second.

With --full-text-cost, the write phase runs again (half as long) on
three variants of the full-text index (FULL_TEXT_VARIANTS): as shipped, a
message's own words only, and none; each with the bytes ``events`` takes,
a single writer's turns (half as long again) and IMPORT_COPIES imports of
an export of IMPORT_THREADS x IMPORT_TURNS turns. --full-text-only runs
that table alone.

Then the extrapolation to TARGET (printed with its assumptions). Message
text: USER_CHARS and ASSISTANT_CHARS characters of words drawn from the
recall evaluation sets (English and Portuguese). The embedding queue rows
(kept while no embedder runs) are shown but left out of the totals: a
running worker drains them.

Run:  .venv/bin/python bench/capacity.py [--seconds 20 --read-seconds 10 --embed-turns 200 --full-text-cost]
      .venv/bin/python bench/capacity.py --full-text-only [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import drop_schema, pg_schema_url

import caderno
from caderno import Message
from caderno.stores import ops

#: Concurrent writers and readers (asyncio tasks of one process; the pool holds 16 connections).
WRITERS = 8
READERS = 8
#: Resources written to, one thread each: the target's 100 messages per resource is
#: reached by a long run; a short one spreads its turns over these.
RESOURCES = 500
#: Characters of text per message (the target's mean: 500).
USER_CHARS, ASSISTANT_CHARS = 200, 800
#: Turns appended, then embedded, for the bytes of a vector (MiniLM: about 30 messages/s on 2 cores).
EMBED_TURNS = 200
WARMUP_SECONDS = 3.0
#: Each measured phase runs in this many parts; its figure is their median (see ``parts``).
PARTS = 3

#: The named target of the extrapolation.
TARGET = {
    "resources": 10_000_000,
    "messages": 1_000_000_000,
    "turns_per_s": 1_000,  # peak; each turn: one snapshot read, one append of 2 messages, 2 vectors stored
    "reads_per_s": 10_000,  # peak thread reads (get_messages), besides the turns' own snapshots
}
#: Busy share a database core is planned at (headroom for vacuum, checkpoints, bursts, failover).
CORE_UTILISATION = 0.5
#: Disk beyond the tables as written (which already hold the space of dead row versions): WAL, slack.
DISK_HEADROOM = 0.2
#: A Citus worker of the extrapolation: cores and disk.
WORKER_CORES = 16
WORKER_DISK_TB = 4.0

_CLK = os.sysconf("SC_CLK_TCK")
_DATA = Path(__file__).parent / "data"


def vocabulary() -> list[str]:
    """The words of the recall evaluation sets' conversations."""
    words: list[str] = []
    for name in ("recall_eval.json", "recall_eval_pt.json"):
        data = json.loads((_DATA / name).read_text())
        for conv in data["conversations"]:
            for session in conv["sessions"]:
                for m in session["messages"]:
                    words += m["content"].split()
    return words


def text(rng: random.Random, words: list[str], chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:chars]


# -- server CPU, from /proc ----------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK  # utime, stime (fields 14 and 15 of stat)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def _own_ports() -> set[int]:
    """Local TCP ports of this process's sockets."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[9] in inodes:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


class ServerCpu:
    """CPU seconds of the PostgreSQL backends serving this process, and of the server's background processes."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        own = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert own is not None
        self.own = own[0]
        self.local = _cpu_seconds(self.own) is not None  # the server runs on this machine
        version = self.conn.execute("SHOW server_version").fetchone()
        self.version = version[0] if version else "?"

    def backends(self) -> dict[int, float]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s) AND pid <> %s",
            (sorted(_own_ports()), self.own),
        ).fetchall()
        return {pid: cpu for (pid,) in rows if (cpu := _cpu_seconds(pid)) is not None}

    def background(self) -> float:
        """The server's own processes (WAL writer, checkpointer, autovacuum…): not client backends."""
        total = 0.0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("postgres:") and "(" not in cmd and "[local]" not in cmd:
                total += _cpu_seconds(int(pid)) or 0.0
        return total

    def close(self) -> None:
        self.conn.close()


async def timed(server: ServerCpu, run: Callable[[], Awaitable[int]]) -> dict[str, float]:
    """Await ``run`` (it returns how many operations it did): wall time, server and client CPU."""
    before, bg0, c0, t0 = server.backends(), server.background(), time.process_time(), time.perf_counter()
    done = await run()
    wall, client = time.perf_counter() - t0, time.process_time() - c0
    after = server.backends()
    cpu = sum(v - before.get(pid, 0.0) for pid, v in after.items())
    bg = server.background() - bg0
    return {"ops": done, "wall_s": wall, "server_cpu_s": cpu, "background_cpu_s": bg, "client_cpu_s": client}


async def parts(
    server: ServerCpu, concurrency: int, seconds: float, op: Callable[[random.Random], Awaitable[object]]
) -> dict[str, Any]:
    """``phase`` in PARTS equal parts: totals, and each part's server CPU per operation.

    The per-operation figure used is the parts' median: on a machine that
    other work shares, CPU time per operation still moves with contention.
    """
    runs = [await phase(server, concurrency, seconds / PARTS, op) for _ in range(PARTS)]
    out: dict[str, Any] = {k: sum(r[k] for r in runs) for k in runs[0]}
    out["server_ms_per_op"] = [r["server_cpu_s"] / r["ops"] * 1e3 for r in runs]
    return out


async def phase(
    server: ServerCpu, concurrency: int, seconds: float, op: Callable[[random.Random], Awaitable[object]]
) -> dict[str, float]:
    """Run ``op`` in ``concurrency`` loops for ``seconds``."""

    async def run() -> int:
        deadline = time.perf_counter() + seconds
        done = 0

        async def loop(n: int) -> None:
            nonlocal done
            rng = random.Random(n)
            while time.perf_counter() < deadline:
                await op(rng)
                done += 1

        await asyncio.gather(*(loop(n) for n in range(concurrency)))
        return done

    return await timed(server, run)


# -- sizes -------------------------------------------------------------------------------------------


_SIZES = (
    "SELECT c.relname, pg_table_size(c.oid) FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
    "AND c.relkind = 'r' UNION ALL "
    "SELECT t.relname || ' index ' || i.relname, pg_relation_size(i.oid) FROM pg_index x "
    "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
    "WHERE t.relnamespace = %s::regnamespace"
)


def analyze(dsn: str, schema: str) -> None:
    """ANALYZE every table of ``schema``, as autovacuum would (the test server runs with it off).

    Without statistics, the plans a connection caches while the tables are
    nearly empty (foreign-key checks by sequential scan) stay: a turn's
    server CPU then grows with the table (measured: 3 ms to 9 ms within
    19,000 messages). ANALYZE also makes the sessions plan again.
    """
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall():
            conn.execute(f'ANALYZE "{schema}"."{t}"')


def sizes(dsn: str, schema: str) -> dict[str, Any]:
    """Bytes of each table (heap and TOAST) and each index: as written (after VACUUM, which keeps the
    space of dead row versions for reuse) and compact (after VACUUM FULL); and the messages stored."""
    import psycopg

    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
        for kind, command in (("written", "VACUUM ANALYZE"), ("compact", "VACUUM FULL")):
            for t in tables:
                conn.execute(f'{command} "{schema}"."{t}"')
            out[kind] = dict(conn.execute(_SIZES, (schema, schema)).fetchall())
        row = conn.execute(f"SELECT count(*) FROM \"{schema}\".events WHERE kind = 'message'").fetchone()
    out["messages"] = row[0] if row else 0
    return out


async def empty_sizes(base: str) -> dict[str, int]:
    """What an empty, migrated schema takes, measured in a schema of its own (VACUUM there would
    record the measured schemas' tables as empty: see ``analyze``)."""
    made = pg_schema_url(base)
    assert made is not None
    url, schema = made
    try:
        await (await caderno.connect(url, embedder=None)).close()
        return dict(sizes(base, schema)["compact"])
    finally:
        drop_schema(base, schema)


_QUEUE = "embedding_queue"
_VECTORS = "embeddings"


def growth(table_sizes: dict[str, int], baseline: dict[str, int], messages: int) -> dict[str, float]:
    """Bytes per message of each table and index, beyond the empty schema's."""
    return {name: (size - baseline.get(name, 0)) / messages for name, size in table_sizes.items()}


def _table(name: str) -> str:
    return name.split(" index ", 1)[0]


# -- the run -----------------------------------------------------------------------------------------


def turn(rng: random.Random, words: list[str]) -> list[Message]:
    return [Message.user(text(rng, words, USER_CHARS)), Message.assistant(text(rng, words, ASSISTANT_CHARS))]


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    words = vocabulary()
    made = pg_schema_url(args.pg)
    if made is None:
        sys.exit(1)
    url, schema = made
    server = ServerCpu(args.pg)
    if not server.local:
        print("the server is not on this machine: its CPU cannot be read from /proc")
        sys.exit(1)
    results: dict[str, Any] = {"server": f"PostgreSQL {server.version}", "cpu": _cpu_model()}
    results["baseline"] = await empty_sizes(args.pg)
    try:
        memory = await caderno.connect(url, embedder=None)
        resources = [f"user-{i}" for i in range(RESOURCES)]

        write = writer(memory, words)

        async def read_thread(rng: random.Random) -> None:
            await memory.get_messages(resource_id=rng.choice(resources), thread_id="main", limit=20)

        async def load(rng: random.Random) -> None:
            rid = rng.choice(resources)
            reads = [  # what a turn's context providers read by default: history, summaries, working memory, facts
                ops.ReadThread(resource_id=rid, thread_id="main", limit=20),
                ops.ReadWorkingMemory(resource_id=rid),
                ops.ReadSummaries(resource_id=rid, thread_id="main"),
                ops.ReadFacts(resource_id=rid),
            ]
            await memory.turns.load(resource_id=rid, thread_id="main", reads=reads)

        async def context(rng: random.Random) -> None:
            await memory.get_context(resource_id=rng.choice(resources), thread_id="main", query=rng.choice(words))

        await phase(server, WRITERS, WARMUP_SECONDS, write)
        analyze(args.pg, schema)
        results["turn (append 2 messages)"] = await parts(server, WRITERS, args.seconds, write)
        results["read thread (last 20)"] = await parts(server, READERS, args.read_seconds, read_thread)
        results["turn snapshot (turns.load)"] = await parts(server, READERS, args.read_seconds, load)
        results["get_context (no embedder)"] = await parts(server, READERS, args.read_seconds, context)
        await memory.close()
        results["sizes"] = sizes(args.pg, schema)
    finally:
        drop_schema(args.pg, schema)

    made = pg_schema_url(args.pg)
    assert made is not None
    url, schema = made
    try:
        plain = await caderno.connect(url, embedder=None)
        rng = random.Random(99)
        for i in range(args.embed_turns):
            await plain.append_messages(
                resource_id=f"user-{i % RESOURCES}", thread_id="main", messages=turn(rng, words)
            )
        await plain.close()
        analyze(args.pg, schema)
        memory = await caderno.connect(url)  # the default embedder
        await asyncio.to_thread(memory.embedder.load)
        stored = 2 * args.embed_turns

        async def flush() -> int:
            await memory.flush()  # returns when the queue is empty
            assert await memory.run(ops.CountPendingEmbeddings()) == 0, "messages left unembedded"
            return stored

        results["store a vector"] = await timed(server, flush)
        results["embedder"] = memory.embedder.name
        await memory.close()
        results["vector_sizes"] = sizes(args.pg, schema)
    finally:
        drop_schema(args.pg, schema)
    try:
        if args.full_text_cost:
            results["full_text"] = await full_text_cost(args, server, words, results["baseline"])
    finally:
        server.close()
    return results


# -- what the full-text index costs ------------------------------------------------------------

#: Variants of the full-text index, set up in a throw-away schema after migration: as shipped
#: (a message's own words, its 4 neighbours' and its date, computed by the statement that writes
#: it, which also sets the 2 messages before it again: migration 0027); its own words only (the
#: context left out: the thread's tail reads as empty, so no message is set again, and a new one
#: keeps its own words alone: about what a message cost before migration 0013 gave it a context);
#: none (no text made at all).
_OWN_WORDS_ONLY = [
    "CREATE OR REPLACE FUNCTION {s}.caderno_thread_tail(rid text, tid text, upto bigint) "
    "RETURNS TABLE (n integer, seq bigint, own tsvector) LANGUAGE sql VOLATILE AS "
    "$$ SELECT NULL::integer, NULL::bigint, NULL::tsvector WHERE false $$",
    "CREATE OR REPLACE FUNCTION {s}.caderno_context_tsv(own tsvector, b1 tsvector, b2 tsvector, a1 tsvector, "
    "a2 tsvector, at timestamptz) RETURNS tsvector LANGUAGE sql STABLE AS $$ SELECT setweight(own, 'A') $$",
]
FULL_TEXT_VARIANTS: dict[str, list[str]] = {
    "as shipped": [],
    "own words only": _OWN_WORDS_ONLY,
    "none": [
        *_OWN_WORDS_ONLY,
        "CREATE OR REPLACE FUNCTION {s}.caderno_terms(body text) RETURNS tsvector LANGUAGE sql IMMUTABLE AS "
        "$$ SELECT ''::tsvector $$",
    ],
}
#: The export each variant imports (``import_phase``): threads of one resource, turns each.
IMPORT_THREADS, IMPORT_TURNS = 10, 50
#: How many times each variant imports it (into resources of their own).
IMPORT_COPIES = 4


def writer(memory: caderno.Memory, words: list[str]) -> Callable[[random.Random], Awaitable[None]]:
    """A turn of a random resource's thread: the write phases' operation."""

    async def write(rng: random.Random) -> None:
        rid = f"user-{rng.randrange(RESOURCES)}"
        await memory.append_messages(resource_id=rid, thread_id="main", messages=turn(rng, words))

    return write


async def export_to_import(args: argparse.Namespace, words: list[str]) -> dict[str, Any]:
    """What each variant imports: a resource of IMPORT_THREADS threads of IMPORT_TURNS turns, exported."""
    made = pg_schema_url(args.pg)
    assert made is not None
    url, schema = made
    try:
        async with caderno.connect(url, embedder=None) as memory:
            rng = random.Random(5)
            for t in range(IMPORT_THREADS):
                batch = [m for _ in range(IMPORT_TURNS) for m in turn(rng, words)]
                await memory.append_messages(resource_id="source", thread_id=f"t{t}", messages=batch)
            return await memory.export_resource(resource_id="source")
    finally:
        drop_schema(args.pg, schema)


async def import_phase(server: ServerCpu, memory: caderno.Memory, dump: dict[str, Any]) -> dict[str, float]:
    """IMPORT_COPIES imports of ``dump`` into resources of their own: the operations are the messages."""
    messages = sum(len(t["messages"]) for t in dump["threads"])

    async def run() -> int:
        for k in range(IMPORT_COPIES):
            await memory.import_resource({**dump, "resource_id": f"imported-{k}"})
        return IMPORT_COPIES * messages

    return await timed(server, run)


async def full_text_cost(
    args: argparse.Namespace, server: ServerCpu, words: list[str], empty: dict[str, int]
) -> dict[str, Any]:
    """Server CPU per turn and bytes per message of ``events`` with each variant of the full-text index,
    with WRITERS concurrent writers and with one (wall-clock turns/s), and imports (messages/s)."""
    import psycopg

    dump = await export_to_import(args, words)
    out: dict[str, Any] = {}
    for name, setup in FULL_TEXT_VARIANTS.items():
        made = pg_schema_url(args.pg)
        assert made is not None
        url, schema = made
        try:
            memory = await caderno.connect(url, embedder=None)
            with psycopg.connect(args.pg, autocommit=True) as conn:
                for sql in setup:
                    conn.execute(sql.format(s=f'"{schema}"'))
            await phase(server, WRITERS, WARMUP_SECONDS, writer(memory, words))
            analyze(args.pg, schema)
            out[name] = await parts(server, WRITERS, args.seconds / 2, writer(memory, words))
            out[name]["one writer"] = await parts(server, 1, args.seconds / 2, writer(memory, words))
            out[name]["import"] = await import_phase(server, memory, dump)
            await memory.close()
            measured = sizes(args.pg, schema)
            each = growth(measured["written"], empty, measured["messages"])
            out[name]["events_bytes_per_message"] = sum(v for rel, v in each.items() if _table(rel) == "events")
        finally:
            drop_schema(args.pg, schema)
    return out


# -- printing -----------------------------------------------------------------------------------------


def _per_op(p: dict[str, Any]) -> float:
    """Server CPU seconds per operation: the parts' median where the phase ran in parts."""
    if "server_ms_per_op" in p:
        return statistics.median(p["server_ms_per_op"]) / 1e3
    return float(p["server_cpu_s"] / p["ops"])


def _spread(p: dict[str, Any]) -> str:
    runs = p.get("server_ms_per_op")
    return f" ({min(runs):.3f}–{max(runs):.3f})" if runs else ""


def report(r: dict[str, Any]) -> None:
    print(
        f"{time.strftime('%Y-%m-%d')}: {r['server']} on this machine, {os.cpu_count()} cores ({r['cpu']}), "
        f"python {sys.version.split()[0]}; server CPU of this run's backends, from /proc\n"
    )
    print(
        "| operation | ops | wall ops/s | server CPU ms/op (parts) | ops/s per PostgreSQL core "
        "| client CPU ms/op | background CPU s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    cost: dict[str, float] = {}
    client: dict[str, float] = {}
    for name in (
        "turn (append 2 messages)",
        "read thread (last 20)",
        "turn snapshot (turns.load)",
        "get_context (no embedder)",
        "store a vector",
    ):
        p = r[name]
        cost[name] = _per_op(p)
        client[name] = p["client_cpu_s"] / p["ops"]
        print(
            f"| {name} | {p['ops']:,} | {p['ops'] / p['wall_s']:,.0f} | {cost[name] * 1e3:.3f}{_spread(p)} "
            f"| {1 / cost[name]:,.0f} | {client[name] * 1e3:.3f} | {p['background_cpu_s']:.1f} |"
        )
    embed_rate = r["store a vector"]["ops"] / r["store a vector"]["client_cpu_s"]
    print(f"\nembedder {r['embedder']}: {embed_rate:,.0f} messages per CPU-second (client, both cores)")

    n, nv = r["sizes"]["messages"], r["vector_sizes"]["messages"]
    written = growth(r["sizes"]["written"], r["baseline"], n)
    compact = growth(r["sizes"]["compact"], r["baseline"], n)
    vec_written = growth(r["vector_sizes"]["written"], r["baseline"], nv)
    vec_compact = growth(r["vector_sizes"]["compact"], r["baseline"], nv)

    def total(each: dict[str, float], tables: set[str] | None = None) -> float:
        if tables is None:
            return sum(v for name, v in each.items() if _table(name) not in (_QUEUE, _VECTORS))
        return sum(v for name, v in each.items() if _table(name) in tables)

    plain, plain_compact = total(written), total(compact)
    vector_bytes, vector_compact = total(vec_written, {_VECTORS}), total(vec_compact, {_VECTORS})
    with_vectors = plain + vector_bytes
    print(
        f"\nbytes per message: {n:,} messages of {(USER_CHARS + ASSISTANT_CHARS) // 2} characters on average "
        f"over {RESOURCES} resources; beyond the empty schema; 'table' is heap and TOAST; as written "
        "(after VACUUM: dead row versions' space kept for reuse) and compact (after VACUUM FULL)"
    )
    print("| relation | as written | compact |")
    print("|---|---:|---:|")

    def line(name: str, a: float, b: float, note: str = "") -> None:
        label = name if " index " in name else f"{name} table"
        print(f"| {label}{note} | {a:,.0f} | {b:,.0f} |")

    for name, v in sorted(written.items(), key=lambda kv: -kv[1]):
        if v >= 1 and _table(name) != _VECTORS:
            line(
                name,
                v,
                compact[name],
                " (queue: drained by a running worker, not counted)" if _table(name) == _QUEUE else "",
            )
    print(f"| **without vectors** | **{plain:,.0f}** | **{plain_compact:,.0f}** |")
    for name, v in sorted(vec_written.items(), key=lambda kv: -kv[1]):
        if _table(name) == _VECTORS:
            line(name, v, vec_compact[name], f" ({nv:,} messages embedded)")
    print(
        f"| **with vectors (384 dimensions, as bytes)** | **{with_vectors:,.0f}** | **{plain_compact + vector_compact:,.0f}** |"
    )

    t = TARGET
    turn_cpu = cost["turn (append 2 messages)"] + cost["turn snapshot (turns.load)"] + 2 * cost["store a vector"]
    db_busy = t["turns_per_s"] * turn_cpu + t["reads_per_s"] * cost["read thread (last 20)"]
    db_cores = db_busy / CORE_UTILISATION
    ctx_cores = (t["turns_per_s"] * turn_cpu + t["reads_per_s"] * cost["get_context (no embedder)"]) / CORE_UTILISATION
    table_tb = t["messages"] * with_vectors / 1e12
    disk_tb = table_tb * (1 + DISK_HEADROOM)
    app_busy = (
        t["turns_per_s"] * (client["turn (append 2 messages)"] + client["turn snapshot (turns.load)"])
        + t["reads_per_s"] * client["read thread (last 20)"]
    )
    embed_cores = 2 * t["turns_per_s"] / embed_rate
    workers = max(math.ceil(db_cores / WORKER_CORES), math.ceil(disk_tb / WORKER_DISK_TB))
    print(
        f"\ntarget: {t['resources']:,} resources, {t['messages']:,} messages; peak {t['turns_per_s']:,} turns/s "
        f"(each: a snapshot, an append of 2 messages, 2 vectors stored) and {t['reads_per_s']:,} thread reads/s; "
        f"database cores planned at {CORE_UTILISATION:.0%} busy; disk +{DISK_HEADROOM:.0%} for WAL and bloat"
    )
    print("| quantity | value |")
    print("|---|---:|")
    print(f"| messages per resource | {t['messages'] / t['resources']:,.0f} |")
    print(f"| tables, with vectors | {table_tb:,.2f} TB |")
    print(f"| tables, without vectors | {t['messages'] * plain / 1e12:,.2f} TB |")
    print(f"| disk per copy (primary; as much again per standby) | {disk_tb:,.2f} TB |")
    print(f"| database CPU at peak (busy cores) | {db_busy:,.1f} |")
    print(f"| database cores (at {CORE_UTILISATION:.0%}) | {db_cores:,.0f} |")
    print(f"| database cores if every read is a get_context | {ctx_cores:,.0f} |")
    print(f"| Citus workers of {WORKER_CORES} cores and {WORKER_DISK_TB:g} TB (plus a coordinator) | {workers} |")
    print(f"| caderno processes' CPU at peak (busy cores, embedding apart) | {app_busy:,.1f} |")
    print(f"| embedding cores for {2 * t['turns_per_s']:,} messages/s | {embed_cores:,.0f} |")
    if "full_text" in r:
        full_text_report(r["full_text"])


def full_text_report(variants: dict[str, Any]) -> None:
    print("\nthe full-text index's share (FULL_TEXT_VARIANTS; events table and indexes as written):")
    print(
        f"| full-text index | server CPU ms/turn, {WRITERS} writers (parts) | turns/s per PostgreSQL core "
        "| one writer: turns/s (wall), server CPU ms/turn | import: messages/s (wall), server CPU µs/message "
        "| events bytes per message |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, p in variants.items():
        per, one, imp = _per_op(p), p["one writer"], p["import"]
        one_rate = one["ops"] / one["wall_s"]
        print(
            f"| {name} | {per * 1e3:.3f}{_spread(p)} | {1 / per:,.0f} | {one_rate:,.0f}, {_per_op(one) * 1e3:.3f} "
            f"| {imp['ops'] / imp['wall_s']:,.0f}, {imp['server_cpu_s'] / imp['ops'] * 1e6:.0f} "
            f"| {p['events_bytes_per_message']:,.0f} |"
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test")
    ap.add_argument("--seconds", type=float, default=20.0, help="the write phase")
    ap.add_argument("--read-seconds", type=float, default=10.0, help="each read phase")
    ap.add_argument("--embed-turns", type=int, default=EMBED_TURNS)
    ap.add_argument(
        "--full-text-cost",
        action="store_true",
        help="also measure turns and bytes with the full-text index's variants (FULL_TEXT_VARIANTS; about 40 s more)",
    )
    ap.add_argument(
        "--full-text-only",
        action="store_true",
        help="only the full-text variants' table (writes, one writer, imports), none of the rest",
    )
    ap.add_argument("--json", type=Path, help="also write the measurements as JSON here")
    args = ap.parse_args()
    started = time.perf_counter()
    if args.full_text_only:
        server = ServerCpu(args.pg)
        try:
            results = {"full_text": await full_text_cost(args, server, vocabulary(), await empty_sizes(args.pg))}
        finally:
            server.close()
        full_text_report(results["full_text"])
    else:
        results = await measure(args)
        report(results)
    print(f"\n(run took {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
