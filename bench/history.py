"""Conversation-history benchmark: caderno vs a peer vs raw sqlite3.

Workload (one process, one run, same machine, same durability):
  * append: THREADS threads x TURNS turns, one turn (user + assistant) per call;
  * read: READS calls of get_messages(limit=20) on random threads.

Contenders:
  * caderno SQLiteStore (recent-message cache on, and off);
  * the OpenAI Agents SDK ``SQLiteSession`` (package ``openai-agents``);
  * raw sqlite3: plain INSERT/SELECT, synchronous calls on the event loop
    (the floor; it blocks the loop for every fsync, which no async store may);
  * raw sqlite3 on a writer thread: the same statements, each turn handed to
    one thread and awaited (the floor for any store that keeps fsync off the
    event loop, as caderno and the peer both do).

All SQLite files use WAL with synchronous=FULL (every commit fsynced).
caderno runs as deployed — full-text index and embedding queue written in
the append's transaction — but with the background embedding worker off:
it is not on the request path, and it would eat the CPU the contenders
share (its own throughput is measured by bench/recall_speed.py).

A second table runs the same workload with 1, 4 and 16 concurrent writers
(asyncio tasks in one process, each owning a share of the threads), then as
many concurrent readers, on caderno's SQLite and PostgreSQL stores.
PostgreSQL: --pg URL (default the test database on 127.0.0.1:5432), in a
schema created and dropped by the run; skipped with a line if unreachable.

Two more tables put caderno beside the peer at the disk:

* WAL bytes per turn. Each store appends --wal-turns turns on every thread
  of a fresh file (after one warm-up turn each), while another connection
  holds a read transaction opened on an empty WAL (``wal_checkpoint
  (TRUNCATE)`` just before). That reader keeps every checkpoint from copying
  a frame back, so the WAL is never restarted and the growth of the -wal
  file is every frame the turns wrote, caderno's batched full-text indexing
  included; pages = bytes / (page size + the 24-byte frame header). Each
  page a commit changes is one frame, so the pages per turn are the pages a
  turn dirties: its row, each index entry, each counter.
* Append throughput, quiet and with a concurrent disk writer (a second
  process overwriting a 64 MiB file 256 KiB at a time, each write fsynced,
  in the same directory; the file is written out before the first round, so
  no block meets the writer's first allocation of it). caderno, the peer and the raw floor each keep one file open;
  blocks of one turn on every thread alternate between them (the order
  reversed every other round), and rounds alternate quiet and contended, so
  machine noise and the disk's state hit all alike. The figures are the
  median block of each store in each condition.

Run:  .venv/bin/python bench/history.py [--threads 200 --turns 50 --reads 10000]
      .venv/bin/python bench/history.py --disk-only [--wal-turns 5 --rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import queue
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import drop_schema, pct, pg_schema_url

import caderno
from caderno import Message


async def timed_reads(read: Callable[[str], Awaitable[object]], thread_ids: list[str], reads: int) -> list[float]:
    rng = random.Random(7)
    lat = []
    for _ in range(reads):
        tid = rng.choice(thread_ids)
        t0 = time.perf_counter()
        await read(tid)
        lat.append(time.perf_counter() - t0)
    return lat


async def bench_caderno(path: Path, threads: int, turns: int, reads: int, cache: int) -> dict:
    memory = await caderno.connect(path, cache_messages=cache, embedder=None)
    ids = [f"thread-{i}" for i in range(threads)]
    t0 = time.perf_counter()
    for turn in range(turns):
        for tid in ids:
            await memory.append_messages(
                resource_id="bench",
                thread_id=tid,
                messages=[Message.user(f"pergunta {turn} em {tid}"), Message.assistant(f"resposta {turn} em {tid}")],
            )
    append_s = time.perf_counter() - t0

    async def read(tid: str) -> object:
        return await memory.get_messages(resource_id="bench", thread_id=tid, limit=20)

    assert len(await read(ids[0])) == 20
    lat = await timed_reads(read, ids, reads)
    await memory.close()
    return {"turns_per_s": threads * turns / append_s, "lat": lat}


async def bench_agents_sdk(path: Path, threads: int, turns: int, reads: int) -> dict:
    from agents.memory import SQLiteSession

    sessions = {f"thread-{i}": SQLiteSession(f"thread-{i}", path) for i in range(threads)}
    t0 = time.perf_counter()
    for turn in range(turns):
        for tid, session in sessions.items():
            await session.add_items(
                [
                    {"role": "user", "content": f"pergunta {turn} em {tid}"},
                    {"role": "assistant", "content": f"resposta {turn} em {tid}"},
                ]
            )
    append_s = time.perf_counter() - t0

    async def read(tid: str) -> object:
        return await sessions[tid].get_items(limit=20)

    assert len(await read("thread-0")) == 20
    lat = await timed_reads(read, list(sessions), reads)
    for s in sessions.values():
        s.close()
    return {"turns_per_s": threads * turns / append_s, "lat": lat}


def raw_connection(path: Path) -> sqlite3.Connection:
    """The floor's database: one table, one index, WAL, synchronous=FULL."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE m (seq INTEGER PRIMARY KEY, thread TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX m_thread ON m (thread, seq)")
    return conn


def raw_turn(conn: sqlite3.Connection, tid: str, turn: int) -> None:
    conn.execute("BEGIN")
    conn.execute("INSERT INTO m (thread, role, content) VALUES (?, 'user', ?)", (tid, f"pergunta {turn} em {tid}"))
    conn.execute("INSERT INTO m (thread, role, content) VALUES (?, 'assistant', ?)", (tid, f"resposta {turn} em {tid}"))
    conn.execute("COMMIT")


async def bench_raw(path: Path, threads: int, turns: int, reads: int) -> dict:
    conn = raw_connection(path)
    ids = [f"thread-{i}" for i in range(threads)]
    t0 = time.perf_counter()
    for turn in range(turns):
        for tid in ids:
            raw_turn(conn, tid, turn)
    append_s = time.perf_counter() - t0

    async def read(tid: str) -> object:
        rows = conn.execute(
            "SELECT role, content FROM m WHERE thread = ? ORDER BY seq DESC LIMIT 20", (tid,)
        ).fetchall()
        rows.reverse()
        return rows

    lat = await timed_reads(read, ids, reads)
    conn.close()
    return {"turns_per_s": threads * turns / append_s, "lat": lat}


async def bench_raw_thread(path: Path, threads: int, turns: int) -> dict:
    conn = raw_connection(path)
    jobs: queue.SimpleQueue = queue.SimpleQueue()

    def writer() -> None:
        while (job := jobs.get()) is not None:
            future, tid, turn = job
            raw_turn(conn, tid, turn)
            future.set_result(None)

    thread = threading.Thread(target=writer)
    thread.start()
    ids = [f"thread-{i}" for i in range(threads)]
    t0 = time.perf_counter()
    for turn in range(turns):
        for tid in ids:
            future: concurrent.futures.Future = concurrent.futures.Future()
            jobs.put((future, tid, turn))
            await asyncio.wrap_future(future)
    append_s = time.perf_counter() - t0
    jobs.put(None)
    thread.join()
    conn.close()
    return {"turns_per_s": threads * turns / append_s, "lat": [0.0]}


async def bench_concurrent(url: str, threads: int, turns: int, reads: int, writers: int) -> dict:
    memory = await caderno.connect(url, embedder=None)
    ids = [f"thread-{i}" for i in range(threads)]
    shares = [ids[w::writers] for w in range(writers)]

    async def writer(mine: list[str]) -> None:
        for turn in range(turns):
            for tid in mine:
                await memory.append_messages(
                    resource_id="bench",
                    thread_id=tid,
                    messages=[Message.user(f"pergunta {turn} em {tid}"), Message.assistant(f"resposta {turn}")],
                )

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(mine) for mine in shares))
    append_s = time.perf_counter() - t0

    async def read(tid: str) -> object:
        return await memory.get_messages(resource_id="bench", thread_id=tid, limit=20)

    parts = await asyncio.gather(*(timed_reads(read, ids, reads // writers) for _ in range(writers)))
    await memory.close()
    return {"turns_per_s": threads * turns / append_s, "lat": [x for p in parts for x in p]}


#: Bytes the disk writer writes before each fsync, in the contended condition.
DISK_WRITE = 256 * 1024
#: The disk writer's file is rewritten from its start past this size.
DISK_FILE = 64 * 1024 * 1024
#: The concurrent disk writer: writes DISK_WRITE bytes and fsyncs, until killed.
_DISK_WRITER = f"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
chunk, offset = os.urandom({DISK_WRITE}), 0
while True:
    os.pwrite(fd, chunk, offset)
    os.fsync(fd)
    offset = (offset + len(chunk)) % {DISK_FILE}
"""


def turn_messages(turn: int, tid: str) -> list[Message]:
    return [Message.user(f"pergunta {turn} em {tid}"), Message.assistant(f"resposta {turn} em {tid}")]


def turn_items(turn: int, tid: str) -> list[Any]:
    return [
        {"role": "user", "content": f"pergunta {turn} em {tid}"},
        {"role": "assistant", "content": f"resposta {turn} em {tid}"},
    ]


class Appender:
    """One store with a file open, appending one turn to each of its threads per block."""

    def __init__(self, name: str, path: Path, threads: int) -> None:
        self.name, self.path = name, path
        self.ids = [f"thread-{i}" for i in range(threads)]
        self.turn = 0

    async def open(self) -> None:
        raise NotImplementedError

    async def append(self, tid: str, turn: int) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def block(self) -> float:
        """Append one turn on every thread; the turns per second."""
        t0 = time.perf_counter()
        for tid in self.ids:
            await self.append(tid, self.turn)
        self.turn += 1
        return len(self.ids) / (time.perf_counter() - t0)


class CadernoAppender(Appender):
    async def open(self) -> None:
        self.memory = await caderno.connect(str(self.path), embedder=None)

    async def append(self, tid: str, turn: int) -> None:
        await self.memory.append_messages(resource_id="bench", thread_id=tid, messages=turn_messages(turn, tid))

    async def close(self) -> None:
        await self.memory.close()


class PeerAppender(Appender):
    async def open(self) -> None:
        from agents.memory import SQLiteSession

        self.sessions = {tid: SQLiteSession(tid, self.path) for tid in self.ids}

    async def append(self, tid: str, turn: int) -> None:
        await self.sessions[tid].add_items(turn_items(turn, tid))

    async def close(self) -> None:
        for s in self.sessions.values():
            s.close()


class RawAppender(Appender):
    async def open(self) -> None:
        self.conn = raw_connection(self.path)

    async def append(self, tid: str, turn: int) -> None:
        raw_turn(self.conn, tid, turn)

    async def close(self) -> None:
        self.conn.close()


#: A WAL file's header, and each frame's header before its page (sqlite.org/fileformat2.html#walformat).
_WAL_HEADER, _FRAME_HEADER = 32, 24


def wal_frames(wal: Path, start: int, page: int) -> list[int]:
    """The page number of each frame of ``wal`` from byte ``start`` (a frame boundary) on."""
    data = wal.read_bytes()[max(start, _WAL_HEADER) :]
    step = _FRAME_HEADER + page
    return [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data) - step + 1, step)]


def btree_of_pages(path: Path) -> dict[int, str]:
    """Each page's b-tree (a table or an index; FTS5's shadow tables by name), from the dbstat table."""
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
    finally:
        conn.close()


async def wal_per_turn(store: Appender, turns: int) -> dict:
    """The WAL bytes and pages one turn writes (the method is in the module docstring), and the
    frames per turn of each b-tree the turns dirtied (``trees``: a page's frame counts once per commit)."""
    await store.open()
    await store.block()  # threads exist, tables and caches warm
    wal = Path(f"{store.path}-wal")
    pin = sqlite3.connect(store.path, isolation_level=None)
    pin.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = pin.execute("PRAGMA page_size").fetchone()[0]
    pin.execute("BEGIN")
    pin.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
    before = wal.stat().st_size
    for _ in range(turns):
        await store.block()
    grown = wal.stat().st_size - before
    frames = wal_frames(wal, before, page)
    pin.execute("COMMIT")
    pin.close()
    await store.close()
    n = turns * len(store.ids)
    owner = btree_of_pages(store.path)
    trees: dict[str, float] = {}
    for pageno in frames:
        name = owner.get(pageno, "(free or new)")
        trees[name] = trees.get(name, 0.0) + 1 / n
    trees = dict(sorted(trees.items(), key=lambda kv: -kv[1]))
    return {"name": store.name, "bytes": grown / n, "pages": grown / (page + 24) / n, "trees": trees}


async def contended_throughput(d: Path, threads: int, rounds: int) -> dict[tuple[str, str], list[float]]:
    """Blocks of turns/s by (store, condition), interleaved as the module docstring says."""
    stores: list[Appender] = [
        CadernoAppender("caderno", d / "tc.db", threads),
        PeerAppender("peer", d / "ta.db", threads),
        RawAppender("floor", d / "tr.db", threads),
    ]
    for s in stores:
        await s.open()
        await s.block()  # warm-up, not counted
    disk_file = d / "disk-writer.bin"
    with disk_file.open("wb") as f:  # written once: each contended block then overwrites, never allocates
        for _ in range(DISK_FILE // DISK_WRITE):
            f.write(os.urandom(DISK_WRITE))
        os.fsync(f.fileno())
    out: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for condition in ("quiet", "contended") if r % 2 == 0 else ("contended", "quiet"):
            writer = None
            if condition == "contended":
                writer = subprocess.Popen([sys.executable, "-c", _DISK_WRITER, str(disk_file)])
                await asyncio.sleep(0.2)  # its first fsyncs are under way
            try:
                for s in stores if r % 2 == 0 else stores[::-1]:
                    out.setdefault((s.name, condition), []).append(await s.block())
            finally:
                if writer is not None:
                    writer.kill()
                    writer.wait()
    for s in stores:
        await s.close()
    return out


async def disk_tables(threads: int, wal_turns: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        wal = [
            await wal_per_turn(CadernoAppender("caderno SQLite", d / "wc.db", threads), wal_turns),
            await wal_per_turn(PeerAppender("openai-agents SQLiteSession", d / "wa.db", threads), wal_turns),
            await wal_per_turn(RawAppender("raw sqlite3 (floor)", d / "wr.db", threads), wal_turns),
        ]
        blocks = await contended_throughput(d, threads, rounds) if rounds else {}
    peer = wal[1]
    print(f"WAL written per turn ({threads} threads x {wal_turns} turns, after one warm-up turn each):")
    print()
    print("| store | WAL bytes/turn | WAL pages/turn | bytes vs peer |")
    print("|---|---:|---:|---:|")
    for w in wal:
        print(f"| {w['name']} | {w['bytes']:,.0f} | {w['pages']:.2f} | {w['bytes'] / peer['bytes']:.2f}× |")
    print()
    print("WAL frames per turn by b-tree (a table or index; each page a commit changes is one frame):")
    print()
    for w in wal:
        shown = ", ".join(f"{name} {count:.2f}" for name, count in w["trees"].items() if count >= 0.005)
        print(f"* {w['name']}: {shown}")
    print()
    if not blocks:
        return {"wal": wal}
    med = {k: statistics.median(v) for k, v in blocks.items()}
    print(
        f"Append throughput, quiet and with a concurrent disk writer ({DISK_WRITE // 1024} KiB + fsync in a loop): "
        f"median of {rounds} interleaved blocks of {threads} turns; caderno / peer is the median of each round's "
        "pair of blocks (its range in brackets):"
    )
    print()
    print("| condition | caderno turns/s | peer turns/s | raw floor turns/s | caderno / peer | caderno / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for condition in ("quiet", "contended"):
        c, p, f = (med[(name, condition)] for name in ("caderno", "peer", "floor"))
        pairs = [a / b for a, b in zip(blocks[("caderno", condition)], blocks[("peer", condition)], strict=True)]
        spread = f"[{min(pairs):.2f}–{max(pairs):.2f}]"
        print(
            f"| {condition} | {c:,.0f} | {p:,.0f} | {f:,.0f} | {statistics.median(pairs):.2f}× {spread} | {c / f:.2f}× |"
        )
    print()
    kept = {name: med[(name, "contended")] / med[(name, "quiet")] for name in ("caderno", "peer", "floor")}
    print("contended / quiet: " + ", ".join(f"{name} {ratio:.2f}×" for name, ratio in kept.items()))
    print()
    return {"wal": wal, "throughput": {f"{k[0]} {k[1]}": v for k, v in blocks.items()}}


def row(name: str, r: dict) -> dict:
    lat = r["lat"]
    return {
        "name": name,
        "turns_per_s": r["turns_per_s"],
        "p50_us": pct(lat, 0.50) * 1e6,
        "p99_us": pct(lat, 0.99) * 1e6,
        "mean_us": statistics.fmean(lat) * 1e6,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--reads", type=int, default=10_000)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test")
    ap.add_argument("--skip-peer", action="store_true", help="only the concurrency table (no peer, no disk tables)")
    ap.add_argument("--wal-turns", type=int, default=5, help="turns per thread measured for WAL bytes")
    ap.add_argument(
        "--rounds", type=int, default=6, help="rounds of the quiet/contended throughput table (0: the WAL table alone)"
    )
    ap.add_argument("--disk-only", action="store_true", help="only the WAL and the disk-writer tables")
    args = ap.parse_args()
    reads = (
        ""
        if args.disk_only
        else f"{args.turns} turns appended one turn per call; {args.reads} get_messages(limit=20); "
    )
    print(f"workload: {args.threads} threads; {reads}WAL, synchronous=FULL; python {sys.version.split()[0]}")
    print()
    disk = {} if args.skip_peer else await disk_tables(args.threads, args.wal_turns, args.rounds)
    if args.disk_only:
        if args.json:
            args.json.write_text(json.dumps({"disk": disk}, indent=2))
        return
    rows = []
    if not args.skip_peer:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            w = (args.threads, args.turns, args.reads)
            rows.append(row("caderno SQLite", await bench_caderno(d / "c.db", *w, 50)))
            rows.append(row("caderno SQLite, cache off", await bench_caderno(d / "c0.db", *w, 0)))
            rows.append(row("openai-agents SQLiteSession", await bench_agents_sdk(d / "a.db", *w)))
            rows.append(row("raw sqlite3 (floor)", await bench_raw(d / "r.db", *w)))
            thread_floor = await bench_raw_thread(d / "rt.db", args.threads, args.turns)
        peer, raw = rows[2], rows[3]
        print(
            "| store | append turns/s | read p50 µs | read p99 µs "
            "| append vs peer | read p50 vs peer | append vs raw | read p50 vs raw |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['name']} | {r['turns_per_s']:,.0f} | {r['p50_us']:,.0f} | {r['p99_us']:,.0f} "
                f"| {r['turns_per_s'] / peer['turns_per_s']:.2f}× | {peer['p50_us'] / r['p50_us']:.2f}× "
                f"| {r['turns_per_s'] / raw['turns_per_s']:.2f}× | {raw['p50_us'] / r['p50_us']:.2f}× |"
            )
        print()
        print("Ratios: >1 means faster than the reference (throughput for appends, inverse latency for reads).")
        t = thread_floor["turns_per_s"]
        print(
            f"raw sqlite3 on a writer thread (the floor off the event loop): {t:,.0f} turns/s = "
            f"{t / peer['turns_per_s']:.2f}× the peer; caderno reaches {rows[0]['turns_per_s'] / t:.2f}× of it"
        )
        print()

    conc = []
    pg = pg_schema_url(args.pg)
    with tempfile.TemporaryDirectory() as tmp:
        for writers in (1, 4, 16):
            w = (args.threads, args.turns, args.reads, writers)
            r = await bench_concurrent(str(Path(tmp) / f"w{writers}.db"), *w)
            conc.append(row(f"SQLite | {writers}", r))
            if pg:
                pg_url, name = pg
                r = await bench_concurrent(pg_url, *w)
                conc.append(row(f"PostgreSQL | {writers}", r))
                drop_schema(args.pg, name)
                pg = pg_schema_url(args.pg)
    if pg:
        drop_schema(args.pg, pg[1])
    print("| caderno store | concurrent writers | append turns/s | vs 1 writer | read p50 µs | read p99 µs |")
    print("|---|---:|---:|---:|---:|---:|")
    single = {r["name"].split(" |")[0]: r["turns_per_s"] for r in conc if r["name"].endswith("| 1")}
    for r in conc:
        ratio = r["turns_per_s"] / single[r["name"].split(" |")[0]]
        print(f"| {r['name']} | {r['turns_per_s']:,.0f} | {ratio:.2f}× | {r['p50_us']:,.0f} | {r['p99_us']:,.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"peer": rows, "concurrency": conc, "disk": disk}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
