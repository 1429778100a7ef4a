"""``Memory.get_context``'s similarity floor, measured: the reference's 0.65 against lower ones.

    .venv/bin/python bench/get_context.py            # LoCoMo (when beside the project) and bench/data en, pt
    .venv/bin/python bench/get_context.py --set en

For each floor, every question is asked through ``get_context`` with its
default limits (recent 10, salient 5, relevant 5), and two figures are kept:

* **relevant@5** — what the relevant part alone finds: on LoCoMo the share
  of a question's evidence turns among its (at most 5) messages, averaged
  (turn-level evidence recall, ``bench/_locomo.py``); on bench/data the share
  of questions with an answer among them;
* **context** — the same over the whole context (recent + salient +
  relevant, at most 20 messages).

LoCoMo follows bench/_locomo.py's protocol (one resource per conversation,
one thread per session, asked from the last session with ``now`` the day
after it); bench/data is stored as bench/recall_quality.py stores it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import _embedders
import _locomo
import recall_quality

import caderno
import caderno.embeddings

#: The floors compared: the reference agent's 0.65, recall's 0.25, and around them.
FLOORS = (0.0, 0.15, 0.25, 0.35, 0.45, 0.65)


def share(got: list[str], wanted: set[str], *, any_of: bool) -> float:
    """Turn recall (share of ``wanted`` in ``got``), or 1/0 for "any of them" (bench/data's answers)."""
    hit = wanted & set(got)
    return float(bool(hit)) if any_of else len(hit) / len(wanted)


async def ask(memory: caderno.Memory, **where: Any) -> list[list[str]]:
    """Per floor the relevant part's ids and the whole context's ids, then ``recall(query, top=5)``'s ids."""
    out = []
    for floor in FLOORS:
        parts = await memory.get_context(min_similarity=floor, **where)
        out += [[h.message.id or "" for h in parts.relevant], [h.message.id or "" for h in parts.messages]]
    hits = await memory.recall(top=5, **where)
    return [*out, [h.message.id or "" for h in hits]]


async def locomo() -> list[list[float]] | None:
    if not _locomo.LOCOMO.exists():
        print(f"LoCoMo skipped: {_locomo.LOCOMO} is not there")
        return None
    convs = _locomo.load()
    embedder = _locomo.CachedEmbedder(caderno.embeddings.default_embedder())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "locomo.db", embedder=embedder) as memory:
            dia_of = await _locomo.ingest(memory, convs)
            for c in convs:
                for q in c.questions:
                    got = await ask(memory, resource_id=c.resource, thread_id=c.last_thread, query=q.text, now=c.now)
                    rows.append([share([dia_of[i] for i in ids], set(q.evidence), any_of=False) for ids in got])
    embedder.save()
    return rows


async def project_set(name: str) -> dict[str, list[list[float]]]:
    """Rows per half of the set (bench/recall_quality.py's split: tuning, heldout)."""
    data = json.loads(recall_quality.SETS[name].read_text())
    rows: dict[str, list[list[float]]] = {"tuning": [], "heldout": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "eval.db") as memory:
            last = await recall_quality.load(memory, data)
            with _embedders.query_mode(memory.embedder):
                for q in data["questions"]:
                    thread = last[q["conversation"]]
                    where = {"resource_id": recall_quality.R, "thread_id": thread, "query": q["question"]}
                    got = await ask(memory, now=recall_quality.ASKED_AT[thread], **where)
                    answers = set(q["answer_ids"])
                    half = recall_quality.split_of(q["id"])
                    rows[half].append([share(ids, answers, any_of=True) for ids in got])
    return rows


def report(title: str, rows: list[list[float]]) -> None:
    n = len(rows)
    print(f"\n{title}: {n} questions\n")
    print("| min_similarity | relevant@5 | whole context (<= 20) |")
    print("|---:|---:|---:|")
    for i, floor in enumerate(FLOORS):
        rel = sum(r[2 * i] for r in rows) / n
        whole = sum(r[2 * i + 1] for r in rows) / n
        print(f"| {floor:.2f} | {rel:.3f} | {whole:.3f} |")
    print(f"\nfor comparison, recall(query, top=5) with its default legs: {sum(r[-1] for r in rows) / n:.3f}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("locomo", "en", "pt", "all"), default="all")
    args = ap.parse_args()
    if args.set in ("locomo", "all"):
        found = await locomo()
        if found is not None:
            report("LoCoMo conversations 0-4, turn-level evidence recall", found)
    for name in ("en", "pt"):
        if args.set in (name, "all"):
            for half, rows in (await project_set(name)).items():
                report(f"bench/data {name} set, {half} half, share of questions answered", rows)


if __name__ == "__main__":
    asyncio.run(main())
