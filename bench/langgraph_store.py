"""LangGraph store benchmark: caderno's ``CadernoStore`` vs LangGraph's own database stores.

Same data in every store: --items items spread over --namespaces namespaces
``("bench", "u0".."u<N-1>")``, each ``{"text": three words, "n": 0..99,
"tag": a..d, "lang": en/pt}``. Workloads,
timed per call and run in interleaved blocks (caderno, peer, caderno, peer, …,
the first of each pair alternating), median of the blocks' means:

* filter search: ``asearch(("bench",), filter={"tag": …, "n": {"$gte": …}},
  limit=10, offset=0..20)``, the filter and page in the database; and the
  same under one namespace ``("bench", "u<k>")`` in turn;
* semantic search: ``asearch(("bench",), query=…, limit=10)``, and with
  ``filter={"tag": …}`` (a quarter of the items); both stores embed with
  caderno's ``HashingEmbedder`` (the same vectors, no model cost),
  caderno's vectors computed by its background worker before timing, the
  peer's at put time into sqlite-vec;
* gets: ``aget`` of one of the items;
* puts: ``aput`` of a new value to one of the items (no index on either
  store, so no embedding in the timing).

Peers: ``AsyncSqliteStore`` (package ``langgraph-checkpoint-sqlite``; for
the semantic rows with sqlite-vec, on pysqlite3's SQLite where the
interpreter's cannot load extensions) and ``AsyncPostgresStore`` (package
``langgraph-checkpoint-postgres``). PostgreSQL: --pg URL (default the test
database on 127.0.0.1:5432), fresh schemas dropped after the run; its rows
are skipped with a line if unreachable. Semantic search on PostgreSQL is not
measured (the peer needs pgvector on the server).

The table's last column is the peer's time over caderno's: above 1, caderno
is faster.

Run:  .venv/bin/python bench/langgraph_store.py [--items 2000 --namespaces 50 --blocks 12 --calls 40]
      [--only sqlite|postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from _common import drop_schema, pg_schema_url

import caderno
from caderno.embeddings import HashingEmbedder
from caderno.integrations.langgraph import CadernoStore

DIMS = 64
EMBEDDER = HashingEmbedder(DIMS)
WORDS = [
    "cat",
    "dog",
    "tea",
    "rain",
    "blue",
    "sun",
    "moon",
    "river",
    "stone",
    "bread",
    "wine",
    "salt",
    "book",
    "lamp",
    "door",
    "road",
]
TAGS = "abcd"


def items(n: int, namespaces: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    rng = random.Random(7)
    return [
        (
            ("bench", f"u{i % namespaces}"),
            f"k{i}",
            {
                "text": " ".join(rng.choices(WORDS, k=3)),
                "n": rng.randrange(100),
                "tag": rng.choice(TAGS),
                "lang": rng.choice(["en", "pt"]),
            },
        )
        for i in range(n)
    ]


def peer_index() -> dict[str, Any]:
    return {"dims": DIMS, "embed": lambda texts: EMBEDDER.embed(list(texts)).tolist(), "fields": ["text"]}


async def load(store: Any, data: list[tuple[tuple[str, ...], str, dict[str, Any]]]) -> None:
    for at in range(0, len(data), 100):
        await asyncio.gather(*(store.aput(ns, key, value) for ns, key, value in data[at : at + 100]))


Call = Callable[[int], Awaitable[Any]]


def filter_search(store: Any, namespaces: int | None = None) -> Call:
    """Under ``("bench",)`` (every item), or with ``namespaces`` under one of them in turn."""

    def search(i: int) -> Awaitable[Any]:
        prefix = ("bench",) if namespaces is None else ("bench", f"u{(7 * i) % namespaces}")
        return store.asearch(
            prefix, filter={"tag": TAGS[i % 4], "n": {"$gte": 10 * (i % 9)}}, limit=10, offset=10 * (i % 3)
        )

    return search


def semantic_search(store: Any, *, filtered: bool) -> Call:
    return lambda i: store.asearch(
        ("bench",),
        query=f"{WORDS[i % len(WORDS)]} {WORDS[(3 * i) % len(WORDS)]}",
        filter={"tag": TAGS[i % 4]} if filtered else None,
        limit=10,
    )


def gets(store: Any, data: list[tuple[tuple[str, ...], str, dict[str, Any]]]) -> Call:
    def get(i: int) -> Awaitable[Any]:
        ns, key, _ = data[(i * 7919) % len(data)]
        return store.aget(ns, key)

    return get


def puts(store: Any, data: list[tuple[tuple[str, ...], str, dict[str, Any]]]) -> Call:
    def put(i: int) -> Awaitable[Any]:
        ns, key, value = data[(i * 7919) % len(data)]
        return store.aput(ns, key, {**value, "n": i % 100})

    return put


async def interleaved(ours: Call, theirs: Call, blocks: int, calls: int) -> tuple[float, float]:
    """Median over blocks of the mean ms per call: (caderno, peer)."""
    spent: dict[str, list[float]] = {"ours": [], "theirs": []}
    for b in range(blocks):
        order = [("ours", ours), ("theirs", theirs)]
        for name, call in order if b % 2 == 0 else reversed(order):
            t0 = time.perf_counter()
            for i in range(calls):
                await call(b * calls + i)
            spent[name].append((time.perf_counter() - t0) * 1000 / calls)
    return statistics.median(spent["ours"]), statistics.median(spent["theirs"])


def row(rows: list[tuple[str, float, float]], label: str, pair: tuple[float, float]) -> None:
    rows.append((label, *pair))
    print(f"  {label}: caderno {pair[0]:.2f} ms, peer {pair[1]:.2f} ms", flush=True)


async def sqlite_rows(args: argparse.Namespace, tmp: Path, rows: list[tuple[str, float, float]]) -> None:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    data = items(args.items, args.namespaces)
    async with AsyncExitStack() as stack:
        memory = await stack.enter_async_context(caderno.connect(f"sqlite:///{tmp / 'caderno.db'}", embedder=EMBEDDER))
        ours = CadernoStore(memory, resource_id="bench", index={"fields": ["text"]})
        theirs = await stack.enter_async_context(AsyncSqliteStore.from_conn_string(str(tmp / "peer.db")))
        await theirs.setup()
        await load(ours, data)
        await load(theirs, data)
        await ours.flush()
        pair = await interleaved(filter_search(ours), filter_search(theirs), args.blocks, args.calls)
        row(rows, "SQLite filter search", pair)
        one = args.namespaces
        pair = await interleaved(filter_search(ours, one), filter_search(theirs, one), args.blocks, args.calls)
        row(rows, "SQLite filter search, one namespace", pair)
        row(rows, "SQLite get", await interleaved(gets(ours, data), gets(theirs, data), args.blocks, args.calls))
        vec = await vector_peer(stack, tmp / "peer-vec.db")
        if vec is not None:
            await load(vec, data)
            for filtered, label in ((False, "SQLite semantic search"), (True, "SQLite semantic search + filter")):
                pair = await interleaved(
                    semantic_search(ours, filtered=filtered),
                    semantic_search(vec, filtered=filtered),
                    args.blocks,
                    args.calls,
                )
                row(rows, label, pair)
        # Last: a put replaces the item's vectors. Neither store embeds here (no index).
        plain = CadernoStore(memory, resource_id="bench")
        row(rows, "SQLite put", await interleaved(puts(plain, data), puts(theirs, data), args.blocks, args.calls))


async def vector_peer(stack: AsyncExitStack, path: Path) -> Any:
    """``AsyncSqliteStore`` with sqlite-vec, on pysqlite3's SQLite (the interpreter's may not load extensions)."""
    import sqlite3

    import aiosqlite
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        connect: Any = sqlite3.connect
    else:
        try:
            from pysqlite3 import dbapi2  # type: ignore[import-not-found]
        except ImportError:
            print("  no SQLite that loads extensions here (pip install pysqlite3-binary): semantic row skipped")
            return None
        connect = dbapi2.connect
    conn = await stack.enter_async_context(
        aiosqlite.Connection(lambda: connect(str(path), isolation_level=None, check_same_thread=False), 64)
    )
    store = AsyncSqliteStore(conn, index=peer_index())  # type: ignore[arg-type]
    await store.setup()
    return store


async def postgres_rows(args: argparse.Namespace, rows: list[tuple[str, float, float]]) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    ours_schema = pg_schema_url(args.pg)
    peer_schema = pg_schema_url(args.pg)
    if ours_schema is None or peer_schema is None:
        return
    data = items(args.items, args.namespaces)
    try:
        async with AsyncExitStack() as stack:
            memory = await stack.enter_async_context(caderno.connect(ours_schema[0], embedder=None))
            ours = CadernoStore(memory, resource_id="bench")
            peer_url = f"{args.pg}?options=-csearch_path%3D{peer_schema[1]}"
            theirs = await stack.enter_async_context(
                AsyncPostgresStore.from_conn_string(peer_url, pool_config={"min_size": 1, "max_size": 16})
            )
            await theirs.setup()
            await load(ours, data)
            await load(theirs, data)
            pair = await interleaved(filter_search(ours), filter_search(theirs), args.blocks, args.calls)
            row(rows, "PostgreSQL filter search", pair)
            one = args.namespaces
            pair = await interleaved(filter_search(ours, one), filter_search(theirs, one), args.blocks, args.calls)
            row(rows, "PostgreSQL filter search, one namespace", pair)
            row(
                rows, "PostgreSQL get", await interleaved(gets(ours, data), gets(theirs, data), args.blocks, args.calls)
            )
            row(
                rows, "PostgreSQL put", await interleaved(puts(ours, data), puts(theirs, data), args.blocks, args.calls)
            )
    finally:
        drop_schema(args.pg, ours_schema[1])
        drop_schema(args.pg, peer_schema[1])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--namespaces", type=int, default=50, help="namespaces the items are spread over")
    ap.add_argument("--blocks", type=int, default=12, help="interleaved blocks per contender")
    ap.add_argument("--calls", type=int, default=40, help="calls per block")
    ap.add_argument("--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test")
    ap.add_argument("--only", choices=["sqlite", "postgres"], help="one backend's rows")
    args = ap.parse_args()
    rows: list[tuple[str, float, float]] = []
    print(
        f"{args.items} items in {args.namespaces} namespaces, {args.blocks} interleaved blocks of {args.calls} calls each",
        flush=True,
    )
    if args.only != "postgres":
        with tempfile.TemporaryDirectory() as tmp:
            await sqlite_rows(args, Path(tmp), rows)
    if args.only != "sqlite":
        await postgres_rows(args, rows)
    print()
    print("| workload | CadernoStore | LangGraph's store | speed vs peer (peer time / caderno time) |")
    print("|---|---:|---:|---:|")
    for label, ours, theirs in rows:
        print(f"| {label} | {ours:.2f} ms | {theirs:.2f} ms | {theirs / ours:.2f}× |")


if __name__ == "__main__":
    asyncio.run(main())
