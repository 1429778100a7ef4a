"""Recall quality on caderno's own evaluation set (bench/data/recall_eval.json).

22 authored multi-session conversations (66 threads, 748 messages) are
stored as ONE resource — one household talking to its agent over months —
and 187 questions are asked, each from its conversation's last session.
A question counts as recalled@k when one of its answer messages is among the
first k results. Each leg is measured alone (limit 10), then the fused
result with every leg on.

The relevant leg's threshold is swept too, with the distribution of the
question-to-answer cosine similarities, to choose ``min_similarity``.

Run:  .venv/bin/python bench/recall_quality.py [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

import caderno
from caderno import Message
from caderno.recall import DEFAULT_MIN_SIMILARITY

DATA = Path(__file__).parent / "data" / "recall_eval.json"
R = "household"
LEGS = ("recent", "salient", "relevant", "lexical")


async def load(memory: caderno.Memory, data: dict) -> dict[str, str]:
    """Store every conversation; returns question conversation -> last thread id."""
    last_thread = {}
    for convo in data["conversations"]:
        for session in convo["sessions"]:
            thread = f"{convo['id']}/{session['thread_id']}"
            base = datetime.fromisoformat(session["date"] + "T20:00:00+00:00")
            msgs = [
                Message(role=m["role"], content=m["content"], id=m["id"], created_at=base + timedelta(minutes=i))
                for i, m in enumerate(session["messages"])
            ]
            await memory.append_messages(resource_id=R, thread_id=thread, messages=msgs)
            last_thread[convo["id"]] = thread
    await memory.flush()
    return last_thread


async def ranked_ids(memory: caderno.Memory, q: dict, thread: str, legs: dict[str, int], min_sim: float) -> list[str]:
    hits = await memory.recall(resource_id=R, query=q["question"], thread_id=thread, min_similarity=min_sim, **legs)
    return [h.message.id for h in sorted(hits, key=lambda h: -h.score)]


def recall_at(rankings: list[tuple[list[str], set[str]]], k: int) -> float:
    return sum(1 for ids, answers in rankings if answers & set(ids[:k])) / len(rankings)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    data = json.loads(DATA.read_text())
    questions = data["questions"]
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "eval.db") as memory:
            last = await load(memory, data)

            # Similarity of each question to its answer, and to the best wrong message.
            emb = memory.embedder
            stored = {
                m.id: m.content
                for t in await memory.list_threads(resource_id=R)
                for m in await memory.get_messages(resource_id=R, thread_id=t.id)
            }
            ids = list(stored)
            mat = emb.embed([stored[i] for i in ids])
            qv = emb.embed([q["question"] for q in questions])
            sims = qv @ mat.T
            right = [max(sims[n, ids.index(a)] for a in q["answer_ids"]) for n, q in enumerate(questions)]

            configs: dict[str, dict[str, int]] = {
                leg: {other: (10 if other == leg else 0) for other in LEGS} for leg in LEGS
            }
            configs["fused (all legs)"] = {"recent": 10, "salient": 10, "relevant": 10, "lexical": 10}
            configs["fused (relevant + lexical)"] = {"recent": 0, "salient": 0, "relevant": 10, "lexical": 10}
            results = {}
            for name, legs in configs.items():
                rankings = []
                for q in questions:
                    got = await ranked_ids(memory, q, last[q["conversation"]], legs, DEFAULT_MIN_SIMILARITY)
                    rankings.append((got, set(q["answer_ids"])))
                results[name] = {"recall@5": recall_at(rankings, 5), "recall@10": recall_at(rankings, 10)}

            sweep = {}
            for threshold in (0.15, 0.25, 0.35, 0.45, 0.55, 0.65):
                rankings, fused = [], []
                for q in questions:
                    th = last[q["conversation"]]
                    rel = {"recent": 0, "salient": 0, "relevant": 10, "lexical": 0}
                    rankings.append((await ranked_ids(memory, q, th, rel, threshold), set(q["answer_ids"])))
                    fused.append(
                        (await ranked_ids(memory, q, th, configs["fused (all legs)"], threshold), set(q["answer_ids"]))
                    )
                sweep[threshold] = {
                    "relevant recall@5": recall_at(rankings, 5),
                    "fused recall@5": recall_at(fused, 5),
                    "fused recall@10": recall_at(fused, 10),
                }

    print(
        f"evaluation set: {len(data['conversations'])} conversations, {len(questions)} questions, "
        f"{len(stored)} messages in one resource; model {emb.name}; min_similarity {DEFAULT_MIN_SIMILARITY}"
    )
    print()
    print("| retrieval | recall@5 | recall@10 |")
    print("|---|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['recall@5']:.3f} | {r['recall@10']:.3f} |")
    print()
    print(
        "question → answer cosine similarity: "
        f"median {statistics.median(right):.3f}, p10 {float(np.percentile(right, 10)):.3f}, "
        f"p90 {float(np.percentile(right, 90)):.3f}, min {min(right):.3f}"
    )
    print()
    print("| min_similarity | relevant recall@5 | fused recall@5 | fused recall@10 |")
    print("|---:|---:|---:|---:|")
    for threshold, r in sweep.items():
        print(
            f"| {threshold:.2f} | {r['relevant recall@5']:.3f} | {r['fused recall@5']:.3f} | {r['fused recall@10']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"legs": results, "sweep": sweep}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
