"""Recall speed: embedding throughput, query latency, and recall at 1k/10k/100k
messages in one resource of a database holding 1M messages.

Measured in one run on this machine:

* embedding throughput of the local model, batch 1 and batch 64, and the
  background worker end to end (append → queue → vectors stored);
* query-embedding latency;
* ``memory.recall`` (all four legs, query embedding included) p50/p99 in a
  resource of 1k, 10k and 100k messages, inside a SQLite database of 1M
  messages over ~900 resources;
* the same vector search with LangGraph's ``InMemoryStore`` (vector index,
  same embedding function, same vectors) and raw numpy brute force over the
  same matrix as the floor.

The 1M stored messages carry synthetic text (words drawn from a Zipf
vocabulary, for a realistic full-text index) and random unit vectors, and
the timed resources the real sparse encoder's terms of that text, for the
rerank to read (a database built before them needs ``--rebuild``):
embedding a million texts with the real model would take ~50 minutes here,
and search time does not depend on the vectors' values. Queries are real
questions embedded by the real model. The database is built once under
bench/results/ and reused (--rebuild to start over).

Then the vector index alone at 100k and 1M vectors in one resource (random
unit vectors fed straight into caderno's cache; a 1M-message resource in
SQLite would add nothing to the search time): caderno's search (int8
pre-scan, candidates rescored from the two int8 levels) against numpy's
exact float32 product (the floor), interleaved query by query in one
process; recall@10 against that exact search on the real question vectors
and on stored vectors plus noise; the cache's bytes per message.

Then the cache's first load: a fresh process per run opens the database,
loads the model, and times its first recall of the 100k resource (the
cache's load), its CPU time (steadier than wall time on a shared host), the
resident memory it adds and its peak (from a baseline taken with the heap
handed back), with this checkout's code (or ``--after``, a src folder), with
``--before`` (a commit, exported with ``git archive``, or a src folder;
default: the last commit with the float32 cache; 'none': no such rows), and
the plain float32 floor (``FLOOR``: the float32 vectors read in the store's
own statements into one matrix, one exact search), in turn ``--load-runs``
times. Code that stores each vector's codes beside it (migration 0019) reads
a copy of the database holding them (made once, ``coded_copy``), as one its
embedding worker filled would be; older code reads the database as built.
``--load-backends sqlite,postgres`` adds the same rows on PostgreSQL
(``--pg``), in a schema filled once from that copy through caderno
(``pg_copy``). ``--load-only`` runs these rows alone.

Run:  .venv/bin/python bench/recall_speed.py [--queries 200] [--quick: index at 100k only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import pct

import caderno
from caderno import Message
from caderno.embeddings import default_embedder, default_sparse_encoder
from caderno.embeddings.splade import MODEL_ID as MODEL_ID_SPARSE
from caderno.stores import ops
from caderno.stores.sqlite import catch_up_fts

HERE = Path(__file__).parent
DB = HERE / "results" / "recall_1m.db"
SIZES = {"r-1k": 1_000, "r-10k": 10_000, "r-100k": 100_000}
TOTAL = 1_000_000
OTHER = 1_000  # messages per background resource
DIM = 384


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(20_000)]


def sparse_terms(texts: list[str]) -> list[bytes]:
    """The real encoder's sparse terms of ``texts`` (the timed resources' own synthetic text): the
    rerank's cost is in how many distinct terms its 100 candidates hold, which random ids would overstate."""
    encoder = default_sparse_encoder()
    return [t for i in range(0, len(texts), 256) for t in encoder.encode(texts[i : i + 256])]


def settle_watermark(path: Path) -> None:
    """The embedding worker's watermark past every message, where a worker that embedded them leaves it.

    ``_fill`` stores the vectors itself, so nothing raised it: every recall's
    count of its resource's pending messages (those marked above the
    watermark) then walked the whole table from seq 0 — ~100 ms a recall at
    1M messages, in every row. Also applied to a database built before this.
    """
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(
            "UPDATE embedding_state SET claimed_upto = (SELECT max(seq) FROM events) "
            "WHERE claimed_upto < (SELECT max(seq) FROM events)"
        )


async def build(path: Path, model: str) -> None:
    """Fill a caderno SQLite database with TOTAL messages straight through sqlite3."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    async with caderno.connect(path, embedder=None):
        pass  # caderno creates its schema; the rows go in below, in bulk
    await asyncio.to_thread(_fill, path, model)
    settle_watermark(path)


def _fill(path: Path, model: str) -> None:
    rng = random.Random(1)
    words = vocabulary(rng)
    cum = list(itertools.accumulate(1 / (i + 1) for i in range(len(words))))
    vec_rng = np.random.default_rng(2)
    resources = dict(SIZES)
    rest = TOTAL - sum(SIZES.values())
    for i in range(rest // OTHER):
        resources[f"bg-{i:04d}"] = OTHER
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA journal_mode = WAL")
    t0 = time.perf_counter()
    done = 0
    for rid, count in resources.items():
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO resources (resource_id, version, created_at, updated_at) VALUES (?, 0, '2026-01-01', '2026-01-01')",
            (rid,),
        )
        threads = max(1, count // 50)
        for t in range(threads):
            conn.execute(
                "INSERT INTO threads (resource_id, thread_id, created_at) VALUES (?, ?, '2026-01-01')", (rid, f"t{t}")
            )
        rows = []
        for n in range(count):
            text = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(6, 18)))
            importance = 0.9 if rng.random() < 0.05 else 0.5
            rows.append((f"{rid}-{n}", rid, f"t{n % threads}", "user" if n % 2 == 0 else "assistant", text, importance))
        conn.executemany(
            "INSERT INTO events (id, resource_id, thread_id, role, content, importance, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, '2026-01-01T00:00:00.000000+00:00')",
            rows,
        )
        conn.execute("DELETE FROM embedding_queue WHERE resource_id = ?", (rid,))
        vecs = vec_rng.standard_normal((count, DIM), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events WHERE resource_id = ? ORDER BY seq", (rid,))]
        conn.executemany(
            "INSERT INTO embeddings (seq, resource_id, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
            [(s, rid, model, DIM, vecs[i].tobytes()) for i, s in enumerate(seqs)],
        )
        if rid in SIZES:  # the resources recall is timed on: sparse terms for the rerank to read
            ids = conn.execute(
                "SELECT m.id, m.seq, e.content FROM embeddings m JOIN events e ON e.seq = m.seq WHERE m.resource_id = ?",
                (rid,),
            ).fetchall()
            terms = sparse_terms([content for _, _, content in ids])
            conn.executemany(
                "INSERT INTO sparse_terms (id, resource_id, model, seq, terms) VALUES (?, ?, ?, ?, ?)",
                [(i, rid, MODEL_ID_SPARSE, s, t) for (i, s, _), t in zip(ids, terms, strict=True)],
            )
        conn.execute("COMMIT")
        done += count
        if done % 100_000 < count:
            print(f"  built {done:,} messages ({time.perf_counter() - t0:.0f} s)", flush=True)
    # Full text as the store leaves it after its batches: everything indexed
    # (stems made by the store's own indexer).
    conn.execute("BEGIN")
    catch_up_fts(conn)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def embedding_throughput(texts: list[str]) -> dict[str, float]:
    emb = default_embedder().load()
    emb.embed(texts[:64])
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        emb.embed(texts[i : i + 64])
    batch64 = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for t in texts[:200]:
        emb.embed([t])
    batch1 = 200 / (time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "w.db") as memory:
            t0 = time.perf_counter()
            for i in range(0, len(texts), 2):
                await memory.append_messages(
                    resource_id="w",
                    thread_id=f"t{i % 20}",
                    messages=[Message.user(texts[i]), Message.assistant(texts[i + 1])],
                )
            await memory.flush()
            background = len(texts) / (time.perf_counter() - t0)
    return {"batch1": batch1, "batch64": batch64, "background": background}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--quick", action="store_true", help="only the vector index, at 100k")
    ap.add_argument(
        "--before",
        default=BEFORE,
        help="the commit (or src folder) the load rows compare with, or 'none' (default: %(default)s)",
    )
    ap.add_argument("--load-runs", type=int, default=3, help="fresh processes per side for the load rows")
    ap.add_argument(
        "--only-100k",
        action="store_true",
        help="recall in one database of the 100k resource alone (bench/results/recall_100k.db; minutes, not the 1M build)",
    )
    ap.add_argument(
        "--load-only",
        action="store_true",
        help="only the first-load rows (before/after), on the database --only-100k (or the default) builds",
    )
    ap.add_argument(
        "--after",
        type=Path,
        default=HERE.parent / "src",
        help="the src folder of the load rows' after (default: this checkout)",
    )
    ap.add_argument(
        "--load-backends",
        default="sqlite",
        help="the load rows' backends, comma-separated: sqlite, postgres (default: %(default)s)",
    )
    ap.add_argument(
        "--pg", default="postgresql://caderno@127.0.0.1:5432/caderno_test", help="PostgreSQL for --load-backends"
    )
    args = ap.parse_args()
    if args.before == "none":
        args.before = None
    global DB, SIZES, TOTAL
    if args.only_100k:
        DB, SIZES, TOTAL = HERE / "results" / "recall_100k.db", {"r-100k": 100_000}, 100_000
    if args.load_only:
        if not DB.exists():
            print(f"building {DB} ({TOTAL:,} messages; once)…", flush=True)
            await build(DB, default_embedder().name)
        else:
            settle_watermark(DB)  # built before ``build`` settled it
        loads: dict[str, dict[str, list[dict[str, float]]]] = {}
        for backend in args.load_backends.split(","):
            db: Path | str = (
                DB if backend == "sqlite" else pg_copy(coded_copy(DB, args.after) or DB, "r-100k", args.pg, args.after)
            )
            loads[backend] = load_rows(db, "r-100k", args.before, args.load_runs, args.after)
            print_load(loads[backend], args.before, args.after, backend)
            print()
        if args.json:
            args.json.write_text(json.dumps({"load": loads}, indent=2))
        return
    data = json.loads((HERE / "data" / "recall_eval.json").read_text())
    texts = [m["content"] for c in data["conversations"] for s in c["sessions"] for m in s["messages"]][:640]
    questions = [q["question"] for q in data["questions"]]
    qvecs = default_embedder().embed([random.Random(4).choice(questions) for _ in range(args.queries)])
    index_rows = [
        index_speed(size, np.asarray(qvecs, dtype=np.float32))
        for size in (100_000, 1_000_000)[: 1 if args.quick or args.only_100k else 2]
    ]
    print_index(index_rows)
    if args.quick:
        return

    thr = await embedding_throughput(texts)
    emb = default_embedder()
    lat = []
    for q in questions[: args.queries]:
        t0 = time.perf_counter()
        emb.embed([q])
        lat.append(time.perf_counter() - t0)

    if args.rebuild or not DB.exists():
        print(f"building {DB} ({TOTAL:,} messages; once)…", flush=True)
        await build(DB, emb.name)
    else:
        settle_watermark(DB)  # built before ``build`` settled it

    rng = random.Random(3)
    queries = [rng.choice(questions) for _ in range(args.queries)]
    rows = []
    async with caderno.connect(DB) as memory:
        memory.embedder.embed(["load the model"])  # "first recall" is the vector cache's load, not the model's
        for rid, size in SIZES.items():
            t0 = time.perf_counter()
            await memory.recall(resource_id=rid, query="warm up", thread_id="t0")
            cold = time.perf_counter() - t0
            # Each query with the sparse rerank (the default) and without it, interleaved.
            times: list[float] = []
            plain: list[float] = []
            sparse = memory.indexer.sparse
            for q in queries:
                for sink, encoder in ((times, sparse), (plain, None)):
                    memory.indexer.sparse = encoder
                    t0 = time.perf_counter()
                    hits = await memory.recall(resource_id=rid, query=q, thread_id="t0")
                    sink.append(time.perf_counter() - t0)
            memory.indexer.sparse = sparse
            assert hits
            stored = await memory.run(ops.ReadVectors(resource_id=rid, model=emb.name, after_id=0))
            matrix = np.frombuffer(b"".join(stored.vectors), dtype=np.float32).reshape(-1, DIM)  # as stored, float32
            # Floor: numpy brute force over the same vectors in float32,
            # column-major (the fastest layout here), query vectors precomputed.
            qvecs = emb.embed(queries)
            columns = np.ascontiguousarray(matrix.T)
            floor = []
            for qv in qvecs:
                t0 = time.perf_counter()
                sims = qv @ columns
                top = np.argpartition(-sims, 5)[:5]
                top[np.argsort(-sims[top])]
                floor.append(time.perf_counter() - t0)
            # The relevant leg alone, query embedding included (what the peer does).
            rel = []
            for q in queries:
                t0 = time.perf_counter()
                await memory.recall(
                    resource_id=rid, query=q, recent=0, salient=0, lexical=0, relevant=5, min_similarity=-1
                )
                rel.append(time.perf_counter() - t0)
            peer = await langgraph_search(matrix, queries, size)
            rows.append(
                {
                    "size": size,
                    "cold_load_ms": cold * 1e3,
                    "recall_p50_ms": pct(times, 0.5) * 1e3,
                    "recall_p99_ms": pct(times, 0.99) * 1e3,
                    "plain_p50_ms": pct(plain, 0.5) * 1e3,
                    "plain_p99_ms": pct(plain, 0.99) * 1e3,
                    "relevant_p50_ms": pct(rel, 0.5) * 1e3,
                    "relevant_p99_ms": pct(rel, 0.99) * 1e3,
                    "langgraph_p50_ms": peer[0] * 1e3 if peer else None,
                    "langgraph_p99_ms": peer[1] * 1e3 if peer else None,
                    "numpy_p50_ms": pct(floor, 0.5) * 1e3,
                    "numpy_p99_ms": pct(floor, 0.99) * 1e3,
                }
            )
            print(f"  measured {size:,} ({rows[-1]['recall_p50_ms']:.1f} ms p50)", flush=True)

    print()
    print(
        f"embedding ({emb.name}, 2 cores): batch 1 {thr['batch1']:.0f} msg/s, batch 64 {thr['batch64']:.0f} msg/s, "
        f"background worker end to end {thr['background']:.0f} msg/s; query embedding "
        f"p50 {pct(lat, 0.5) * 1e3:.1f} ms, p99 {pct(lat, 0.99) * 1e3:.1f} ms"
    )
    print()
    print(f"database: {TOTAL:,} messages over {len(SIZES) + (TOTAL - sum(SIZES.values())) // OTHER} resources (SQLite)")
    print()
    print(
        "| messages in resource | caderno recall, 4 legs p50 / p99 ms | the same without the sparse rerank "
        "| caderno relevant leg p50 / p99 ms "
        "| LangGraph InMemoryStore p50 / p99 ms | numpy brute force p50 / p99 ms | first recall (cache load) ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        lg = (
            f"{r['langgraph_p50_ms']:.1f} / {r['langgraph_p99_ms']:.1f}" if r["langgraph_p50_ms"] is not None else "n/a"
        )
        print(
            f"| {r['size']:,} | {r['recall_p50_ms']:.1f} / {r['recall_p99_ms']:.1f} "
            f"| {r['plain_p50_ms']:.1f} / {r['plain_p99_ms']:.1f} "
            f"| {r['relevant_p50_ms']:.1f} / {r['relevant_p99_ms']:.1f} | {lg} "
            f"| {r['numpy_p50_ms']:.2f} / {r['numpy_p99_ms']:.2f} | {r['cold_load_ms']:.0f} |"
        )
    print()
    print_index(index_rows)
    print()
    loads = load_rows(DB, "r-100k", args.before, args.load_runs)
    print_load(loads, args.before)
    if args.json:
        args.json.write_text(json.dumps({"embedding": thr, "rows": rows, "index": index_rows, "load": loads}, indent=2))


def index_speed(size: int, real: np.ndarray) -> dict[str, float]:
    """caderno's search vs numpy's exact float32 product over ``size`` random unit vectors, top 10, no threshold."""
    from caderno.memory.engines import vector_cache

    rng = np.random.default_rng(size)
    entry = vector_cache._Entry(DIM)
    matrix = np.empty((size, DIM), dtype=np.float32)  # the float32 vectors, for the exact answer
    chunk = 50_000
    load = 0.0
    for lo in range(0, size, chunk):
        vecs = rng.standard_normal((min(chunk, size - lo), DIM), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        matrix[lo : lo + len(vecs)] = vecs
        seqs = list(range(lo + 1, lo + len(vecs) + 1))
        threads = [f"t{s % (size // 50)}" for s in seqs]
        t0 = time.perf_counter()
        entry.add(seqs, threads, vecs.tobytes())
        load += time.perf_counter() - t0
    columns = np.ascontiguousarray(matrix.T)  # the fastest float32 layout for q @ X here
    picks = matrix[rng.integers(0, size, len(real))]
    noise = rng.standard_normal(picks.shape, dtype=np.float32)
    noisy = picks + 0.8 * noise / np.linalg.norm(noise, axis=1, keepdims=True)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)

    def floor(q: np.ndarray) -> list[tuple[int, float]]:
        sims = q @ columns
        top = np.argpartition(-sims, 10)[:10]
        top = top[np.argsort(-sims[top])]
        return [(int(i) + 1, float(sims[i])) for i in top]

    times: dict[str, list[float]] = {"caderno": [], "floor": []}
    found = {"real": 0, "noisy": 0}
    for kind, qs in (("real", real), ("noisy", noisy)):
        for q in qs:
            for name, fn in (("floor", floor), ("caderno", lambda q: entry.search(q, 10, -1.0, None))):
                t0 = time.perf_counter()
                out = fn(q)
                times[name].append(time.perf_counter() - t0)
                if name == "floor":
                    want = {s for s, _ in out}
                else:
                    found[kind] += len(want & {s for s, _ in out})
    row = {"size": size, "bytes_per_message": entry.nbytes / size, "quantize_ms": load * 1e3}
    for name, ts in times.items():
        row[f"{name}_p50_ms"] = pct(ts, 0.5) * 1e3
        row[f"{name}_p99_ms"] = pct(ts, 0.99) * 1e3
    row["recall_real"] = found["real"] / (10 * len(real))
    row["recall_noisy"] = found["noisy"] / (10 * len(noisy))
    print(f"  index {size:,}: {row['caderno_p50_ms']:.1f} ms p50", flush=True)
    return row


def print_index(rows: list[dict[str, float]]) -> None:
    from caderno.memory.engines import vector_cache

    print(
        f"vector index alone, top 10 (two int8 levels per vector; the first scanned, "
        f"max(10 x {vector_cache.OVERSAMPLE}, {vector_cache.MIN_CANDIDATES}) candidates rescored from both; "
        f"int8 kernel: {'simsimd' if vector_cache._int8_kernel() else 'missing, numpy'})"
    )
    print()
    print(
        "| vectors | caderno p50 / p99 ms | numpy exact float32 p50 / p99 ms | caderno / numpy (p50) "
        "| recall@10 vs exact, real queries | recall@10 vs exact, stored + noise | cache bytes/message | load ms, 50k vectors a batch |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['caderno_p50_ms']:.1f} / {r['caderno_p99_ms']:.1f} "
            f"| {r['floor_p50_ms']:.1f} / {r['floor_p99_ms']:.1f} | {r['caderno_p50_ms'] / r['floor_p50_ms']:.2f} "
            f"| {r['recall_real']:.4f} | {r['recall_noisy']:.4f} | {r['bytes_per_message']:.0f} | {r['quantize_ms']:.0f} |"
        )


#: The last commit whose cache held float32 vectors (the "before" of the load rows).
BEFORE = "1c47cbd"
#: The query every first recall (and the floor's search) answers.
QUERY = "what did we say about the garden"
#: What each fresh process of the load rows shares: the memory it holds, in
#: bytes, from /proc/self/status (``VmRSS``; ``VmHWM``, the peak since
#: ``reset_peak``), and a baseline taken with the heap handed back, so memory
#: an earlier step freed but kept is not counted as room the load used.
PROBE_COMMON = """
import asyncio, ctypes, gc, json, sys, time

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

def baseline():
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    open("/proc/self/clear_refs", "w").write("5")  # VmHWM from here
    return status("VmRSS")

def report(t0, c0, before, **extra):
    first, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    print(json.dumps({"first_ms": first * 1e3, "first_cpu_ms": cpu * 1e3, "resident_bytes": status("VmRSS") - before,
                      "peak_bytes": status("VmHWM") - before, **extra}))
"""
#: One fresh process: the model loaded, then the first recall of a resource
#: (the cache's load) timed, and the resident memory it left (and its peak) measured.
PROBE = (
    PROBE_COMMON
    + """
import caderno

async def main(db, rid, query):
    async with caderno.connect(db) as memory:
        memory.embedder.embed(["load the model"])
        await memory.recall(resource_id="no-such-resource", query="warm up", thread_id="t0")
        before = baseline()
        t0, c0 = time.perf_counter(), time.process_time()
        hits = await memory.recall(resource_id=rid, query=query, thread_id="t0")
        entries = list(memory.vectors._entries.values())
        report(t0, c0, before, cache_bytes=sum(e.nbytes for e in entries), vectors=sum(e.n for e in entries),
               hits=len(hits))

asyncio.run(main(*sys.argv[1:]))
"""
)
#: The plain float32 floor, in a fresh process as alike as can be (caderno and
#: the model loaded, the query embedded before the clock starts, as the recall
#: embeds it while it reads): the resource's float32 vectors read in the
#: store's own statements (``VECTOR_READ_CHUNK`` a statement, glued by the
#: database), each block copied into one float32 matrix and dropped, then one
#: exact search; no thread lists, no other leg. What a cache of plain float32
#: vectors could do at best.
FLOOR = (
    PROBE_COMMON
    + """
import numpy as np
import caderno
from caderno.embeddings import default_embedder
from caderno.stores.capabilities.recall import VECTOR_READ_CHUNK

def blocks(db, rid, model):
    if db.startswith("postgres"):
        import psycopg
        base, _, schema = db.partition("?schema=")
        conn = psycopg.connect(base, options=f"-c search_path={schema.split('&')[0]}" if schema else "")
        agg, mark = "string_agg(vector, ''::bytea)", "%s"
    else:
        import sqlite3
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        agg, mark = "CAST(group_concat(vector, '') AS BLOB)", "?"
    n = conn.execute(f"SELECT count(*) FROM embeddings WHERE resource_id = {mark} AND model = {mark}", (rid, model)).fetchone()[0]
    yield n
    start = 0
    while True:
        count, top, values = conn.execute(
            f"SELECT count(*), max(id), {agg} FROM (SELECT id, vector FROM embeddings WHERE resource_id = {mark} "
            f"AND model = {mark} AND id > {mark} ORDER BY id LIMIT {mark}) AS chunk",
            (rid, model, start, VECTOR_READ_CHUNK),
        ).fetchone()
        if not count:
            break
        yield bytes(values)
        start = top
    conn.close()

def main(db, rid, query):
    emb = default_embedder()
    emb.embed(["load the model"])
    q = np.asarray(emb.embed([query])[0], dtype=np.float32)  # before the clock: the recall embeds it meanwhile
    before = baseline()
    t0, c0 = time.perf_counter(), time.process_time()
    read = blocks(db, rid, emb.name)
    matrix = np.empty((next(read), emb.dim), dtype=np.float32)
    done = 0
    for blob in read:
        part = np.frombuffer(blob, dtype=np.float32).reshape(-1, emb.dim)
        matrix[done : done + len(part)] = part
        done += len(part)
        del blob, part
    sims = matrix[:done] @ q
    top = np.argpartition(-sims, 10)[:10]
    top[np.argsort(-sims[top])]
    report(t0, c0, before, cache_bytes=matrix.nbytes, vectors=done, hits=10)

main(*sys.argv[1:])
"""
)


#: One process of the "after" code: ``db`` migrated, then every vector's codes
#: stored beside it, as the embedding worker writes them since migration 0019
#: (the database's rows were written straight through sqlite3, without them).
CODE_FILL = """
import asyncio, sqlite3, sys
import numpy as np
import caderno
from caderno.memory.engines.vector_cache import quantize

async def migrate(db):
    async with caderno.connect(db):
        pass

asyncio.run(migrate(sys.argv[1]))
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
last = 0
while True:
    rows = conn.execute("SELECT id, resource_id, model, seq, dim, vector FROM embeddings WHERE id > ? "
                        "ORDER BY id LIMIT 20000", (last,)).fetchall()
    if not rows:
        break
    dim = rows[0][4]
    codes = quantize(np.frombuffer(b"".join(r[5] for r in rows), dtype=np.float32).reshape(-1, dim))
    conn.execute("BEGIN")
    conn.executemany("INSERT OR REPLACE INTO embedding_codes (id, resource_id, model, seq, codes) VALUES (?, ?, ?, ?, ?)",
                     [(*r[:4], c.tobytes()) for r, c in zip(rows, codes)])
    conn.execute("COMMIT")
    last = rows[-1][0]
conn.execute("VACUUM")
"""


def has_codes(src: Path) -> bool:
    """Whether the caderno package under ``src`` stores each vector's codes beside it (migration 0019)."""
    return any("def quantize(" in p.read_text() for p in (src / "caderno" / "memory").rglob("*.py"))


def coded_copy(db: Path, after: Path) -> Path | None:
    """A copy of ``db`` with every vector's codes, made once by the ``after`` code (None: it has no codes)."""
    import os
    import shutil
    import subprocess
    import sys

    if not has_codes(after):
        return None
    copy = db.with_name(db.stem + "_coded.db")
    if copy.exists() and copy.stat().st_mtime >= db.stat().st_mtime:
        return copy
    print(f"storing every vector's codes in a copy, {copy} (once)…", flush=True)
    shutil.copyfile(db, copy)
    env = {**os.environ, "PYTHONPATH": str(after)}
    subprocess.run([sys.executable, "-c", CODE_FILL, str(copy)], env=env, check=True)
    return copy


#: The schema of the PostgreSQL load rows (kept between runs: filled once).
PG_SCHEMA = "bench_recall_100k"


#: One process of the "after" code (the oldest the load rows run, so every side opens what it
#: migrates): schema ``PG_SCHEMA`` made to hold resource ``rid`` of the SQLite database ``coded``
#: (its messages, in their threads, and each one's vector, codes and sparse terms, stored through
#: caderno as its worker stores them), once; made again when newer code migrated it past this one.
PG_FILL = """
import asyncio, itertools, sqlite3, sys
import psycopg
import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.core.errors import SchemaTooNew
from caderno.embeddings.splade import MODEL_ID as SPARSE
from caderno.stores import ops

async def fill(coded, rid, base, schema):
    url = f"{base}?schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    src = sqlite3.connect(f"file:{coded}?mode=ro", uri=True)
    want = src.execute("SELECT count(*) FROM embedding_codes WHERE resource_id = ?", (rid,)).fetchone()[0]
    model, dim = src.execute("SELECT model, dim FROM embeddings WHERE resource_id = ? LIMIT 1", (rid,)).fetchone()
    try:
        async with caderno.connect(url, embedder=None) as memory:
            have = await memory.run(ops.ReadVectors(resource_id=rid, model=model, after_id=0, threads="none"))
            if len(have.seqs) == want:
                return
    except SchemaTooNew:
        pass
    print(f"copying {rid} into PostgreSQL schema {schema} (once)…", flush=True)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    rows = src.execute(
        "SELECT e.thread_id, e.role, e.content, e.importance, m.vector, c.codes, s.terms FROM events e "
        "JOIN embeddings m ON m.resource_id = e.resource_id AND m.seq = e.seq "
        "JOIN embedding_codes c ON c.id = m.id LEFT JOIN sparse_terms s ON s.id = m.id "
        "WHERE e.resource_id = ? ORDER BY e.thread_id, e.seq", (rid,)).fetchall()
    done, codes, terms = [], [], []
    async with caderno.connect(url, embedder=None) as memory:
        for thread_id, group in itertools.groupby(rows, key=lambda r: r[0]):
            group = list(group)
            stored = await memory.append_messages(resource_id=rid, thread_id=thread_id, messages=[
                Message(role=role, content=content, importance=importance) for _, role, content, importance, *_ in group])
            for m, r in zip(stored, group, strict=True):
                done.append((rid, m.seq, r[4])); codes.append(r[5]); terms.append(r[6] or b"")
        for lo in range(0, len(done), 2_000):
            await memory.run(ops.FinishEmbeddings(
                model=model, dim=dim, done=tuple(done[lo : lo + 2_000]), failed=(), now=utcnow(),
                codes=tuple(codes[lo : lo + 2_000]), sparse=tuple(terms[lo : lo + 2_000]), sparse_model=SPARSE))
    with psycopg.connect(base, autocommit=True) as conn:  # as autovacuum leaves tables some time after writes
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("VACUUM ANALYZE")

asyncio.run(fill(*sys.argv[1:]))
"""


def pg_copy(coded: Path, rid: str, base: str, after: Path) -> str:
    """The caderno URL of ``base``'s schema ``PG_SCHEMA`` holding resource ``rid`` of ``coded`` (``PG_FILL``)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(after)}
    subprocess.run([sys.executable, "-c", PG_FILL, str(coded), rid, base, PG_SCHEMA], env=env, check=True)
    return f"{base}?schema={PG_SCHEMA}"


def load_rows(
    db: Path | str, rid: str, before: str | None, runs: int, after: Path = HERE.parent / "src"
) -> dict[str, list[dict[str, float]]]:
    """First recall, its CPU time and the memory it leaves (and its peak): the plain float32 floor, ``after``
    (this checkout) and ``before``, in turn, a fresh process each.

    ``before`` is a commit (its ``src`` exported with ``git archive``) or a
    folder holding a ``caderno`` package tree (``src``), for a comparison
    with a working tree whose schema no commit has yet; None: no before rows.
    Code that stores each vector's codes reads a copy of a SQLite ``db``
    holding them (``coded_copy``), as a database its embedding worker filled
    would; older code reads ``db`` (a newer schema would stop an older
    caderno). A PostgreSQL ``db`` (a URL) is read as it is by all.
    """
    import os
    import subprocess
    import sys

    out: dict[str, list[dict[str, float]]] = {"floor": [], "after": []}
    paths = {"floor": str(after), "after": str(after)}
    with tempfile.TemporaryDirectory() as tmp:
        if before is not None:
            out["before"] = []
            paths["before"] = before
            if not Path(before).is_dir():
                archive = subprocess.run(
                    ["git", "archive", "--format=tar", before, "src"], cwd=HERE.parent, capture_output=True, check=False
                )
                if archive.returncode:
                    print(f"  no 'before' rows: git archive {before} failed ({archive.stderr.decode().strip()[:200]})")
                    out.pop("before")
                else:
                    subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
                paths["before"] = str(Path(tmp) / "src")
        dbs = {
            name: str(db if isinstance(db, str) else coded_copy(db, Path(path)) or db) for name, path in paths.items()
        }
        for _ in range(runs):
            for name in list(out):
                env = {**os.environ, "PYTHONPATH": paths[name]}
                done = subprocess.run(
                    [sys.executable, "-c", FLOOR if name == "floor" else PROBE, dbs[name], rid, QUERY],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=name != "before",
                )
                if done.returncode:  # older code refuses a database a newer migration has touched
                    last = (done.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"  no 'before' rows: {before} cannot open this database ({last[:200]})")
                    out.pop(name)
                    continue
                out[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def print_load(
    rows: dict[str, list[dict[str, float]]], before: str | None, after: Path | str = "this checkout", backend: str = ""
) -> None:
    print(
        f"first recall of the 100k resource (the cache's load){' on ' + backend if backend else ''}, "
        "a fresh process per run, in turn with the plain float32 floor"
    )
    print()
    print(
        "| code | runs | first recall, median ms | its CPU time, median ms "
        "| resident MB per 100k vectors, median | peak MB per 100k, median | cache MB per 100k vectors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    medians: dict[str, tuple[float, float, float]] = {}
    labels = (("floor", "plain float32 floor"), ("before", f"before ({before})"), ("after", f"after ({after})"))
    for name, label in labels:
        if name in rows and rows[name]:
            rs = rows[name]
            first = pct([r["first_ms"] for r in rs], 0.5)
            cpu = pct([r.get("first_cpu_ms", float("nan")) for r in rs], 0.5)
            mb = pct([r["resident_bytes"] / r["vectors"] * 100_000 / 1e6 for r in rs], 0.5)
            peak = pct([r.get("peak_bytes", float("nan")) / r["vectors"] * 100_000 / 1e6 for r in rs], 0.5)
            cache = pct([r.get("cache_bytes", float("nan")) / r["vectors"] * 100_000 / 1e6 for r in rs], 0.5)
            medians[name] = (first, cpu, mb)
            print(f"| {label} | {len(rs)} | {first:.0f} | {cpu:.0f} | {mb:.0f} | {peak:.0f} | {cache:.0f} |")
    print()
    for name in ("before", "floor"):
        if name in medians and "after" in medians:
            (wall_a, cpu_a, mb_a), (wall_b, cpu_b, mb_b) = medians["after"], medians[name]
            print(
                f"after / {name}: first recall {wall_a / wall_b:.2f}, its CPU time {cpu_a / cpu_b:.2f}, "
                f"resident memory {mb_a / mb_b:.2f}"
            )


async def langgraph_search(matrix: np.ndarray, queries: list[str], size: int) -> tuple[float, float] | None:
    """LangGraph InMemoryStore with a vector index over the same vectors, same embedder."""
    try:
        from langgraph.store.base import PutOp
        from langgraph.store.memory import InMemoryStore
    except ImportError:
        print("langgraph is not installed (pip install 'caderno[bench]'); its column is skipped")
        return None
    emb = default_embedder()
    known = {f"doc {i}": matrix[i] for i in range(len(matrix))}

    def embed(texts: list[str]) -> list[list[float]]:
        # Stored texts map to the vectors caderno holds; anything else (the
        # queries) goes through the same model caderno uses.
        out = [known.get(t) for t in texts]
        fresh = [t for t, v in zip(texts, out, strict=True) if v is None]
        vecs = iter(emb.embed(fresh)) if fresh else iter(())
        return [(v if v is not None else next(vecs)).tolist() for v in out]

    store = InMemoryStore(index={"dims": DIM, "embed": embed, "fields": ["text"]})
    ops = [PutOp(("household",), f"k{i}", {"text": f"doc {i}"}) for i in range(size)]
    for i in range(0, size, 5_000):
        store.batch(ops[i : i + 5_000])
    times = []
    for q in queries[: min(len(queries), 20 if size >= 100_000 else len(queries))]:
        t0 = time.perf_counter()
        await store.asearch(("household",), query=q, limit=5)
        times.append(time.perf_counter() - t0)
    return pct(times, 0.5), pct(times, 0.99)


if __name__ == "__main__":
    asyncio.run(main())
