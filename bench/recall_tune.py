"""Choose recall's fusion constants on the tuning parts only: LoCoMo 0-2 and both project sets' tuning halves.

A grid over the constants of caderno.memory.recall that fusion reads at query
time — the relevant leg's weight, the cover rule of the lexical leg
(``COVER_LOW``; ``COVER_HIGH`` is 0.15 above it; ``COVER_FLOOR``), the
recent and salient weights — each combination run with the default
``recall(query)`` (every leg at its default limit, top 10) on:

* LoCoMo conversations 0-2 (``bench/_locomo.py``, read from
  ``../shared/data/locomo/``; turn-level evidence recall@10), when there;
* the tuning halves of bench/data's English and Portuguese sets
  (bench/recall_quality.py; recall@10 of the first answer).

Ranked by the mean of the three recall@10 figures. (Also measured and
left out: handing the weight the lexical leg loses to the relevant leg,
mean 0.800 against 0.809.) The check part
(LoCoMo 3-4) and the held-out halves are never read here:
bench/recall_quality.py reports them for the chosen constants.

What is not in the grid, and why: RRF k (5) and pool depth (100) were
chosen on LoCoMo's tuning part by bench/recall_proto.py (k 5 > 10 > 60;
pools 100 ≥ 50 > 20); context and date columns are part of the full-text
index (``caderno.core.text.CONTEXT_*``, ``DATE_COLUMN_WEIGHT``), chosen by
bench/recall_proto.py and bench/recall_levers.py.

Run:  .venv/bin/python bench/recall_tune.py [--top 15]   (about 5 minutes with the embedding cache)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import _locomo
import recall_quality as rq

import caderno
from caderno.memory import recall as recall_module
from caderno.memory.recall import DEFAULT_MIN_SIMILARITY

GRID: dict[str, list[Any]] = {
    "relevant": [0.5, 0.75, 1.0],
    "COVER_LOW": [0.4, 0.45, 0.5],
    "COVER_FLOOR": [0.25, 0.5],
    "recent/salient": [0.0, 0.1],
}
#: The default recall(query) of bench/data's protocol (every leg, limit 10) and LoCoMo's (defaults, top 10).
DATA_LEGS = rq.ALL_LEGS
LOCOMO_LEGS: dict[str, Any] = {"top": 10}


def settings(combo: dict[str, Any]) -> dict[str, Any]:
    side = combo["recent/salient"]
    return {
        "LEG_WEIGHTS": {**recall_module.LEG_WEIGHTS, "relevant": combo["relevant"], "recent": side, "salient": side},
        "COVER_LOW": combo["COVER_LOW"],
        "COVER_HIGH": combo["COVER_LOW"] + 0.15,
        "COVER_FLOOR": combo["COVER_FLOOR"],
    }


def current() -> dict[str, Any]:
    return {
        "relevant": recall_module.LEG_WEIGHTS["relevant"],
        "COVER_LOW": recall_module.COVER_LOW,
        "COVER_FLOOR": recall_module.COVER_FLOOR,
        "recent/salient": recall_module.LEG_WEIGHTS["recent"],
    }


async def score_sets(combos: list[dict[str, Any]], scores: list[dict[str, float]]) -> None:
    for name, path in rq.SETS.items():
        data = json.loads(path.read_text())
        tuning = [q for q in data["questions"] if rq.split_of(q["id"]) == "tuning"]
        with tempfile.TemporaryDirectory() as tmp:
            async with caderno.connect(Path(tmp) / "tune.db") as memory:
                last = await rq.load(memory, data)
                for i, combo in enumerate(combos):
                    rq.VARIANTS["_tune"] = settings(combo)
                    with rq.variant("_tune"):
                        ranked = [
                            await rq.ranked_ids(memory, q, last[q["conversation"]], DATA_LEGS, DEFAULT_MIN_SIMILARITY)
                            for q in tuning
                        ]
                    pairs = [(ids, set(q["answer_ids"])) for ids, q in zip(ranked, tuning, strict=True)]
                    scores[i][name] = rq.metrics(pairs)["recall@10"]


async def score_locomo(combos: list[dict[str, Any]], scores: list[dict[str, float]]) -> None:
    if not _locomo.LOCOMO.exists():
        print(f"LoCoMo left out: {_locomo.LOCOMO} is not there")
        return
    convs = _locomo.load()
    tuning = [convs[i] for i in _locomo.TUNING]
    embedder = _locomo.CachedEmbedder(caderno.embeddings.default_embedder())
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "locomo.db", embedder=embedder) as memory:
            dia_of = await _locomo.ingest(memory, tuning)
            embedder.save()
            for i, combo in enumerate(combos):
                rq.VARIANTS["_tune"] = settings(combo)
                with rq.variant("_tune"):
                    got = await _locomo.caderno_rankings(memory, tuning, dia_of, **LOCOMO_LEGS)
                scores[i]["locomo"] = _locomo.score(got, convs, _locomo.TUNING)["all"]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    if current() not in combos:
        combos.append(current())
    scores: list[dict[str, float]] = [{} for _ in combos]
    await score_locomo(combos, scores)
    await score_sets(combos, scores)
    sets = list(scores[0])

    def mean(i: int) -> float:
        return sum(scores[i].values()) / len(scores[i])

    order = sorted(range(len(combos)), key=mean, reverse=True)
    print(f"{len(combos)} combinations, tuning parts only; recall@10, ranked by the mean of {', '.join(sets)}\n")
    print("| " + " | ".join(GRID) + " | " + " | ".join(sets) + " | mean |")
    print("|" + "---:|" * (len(GRID) + len(sets) + 1))
    shown = order[: args.top] + [i for i in order[args.top :] if combos[i] == current()]
    for i in shown:
        mark = " (current)" if combos[i] == current() else ""
        figures = " | ".join(f"{scores[i][s]:.3f}" for s in sets)
        print("| " + " | ".join(str(v) for v in combos[i].values()) + f" | {figures} | {mean(i):.3f}{mark} |")


if __name__ == "__main__":
    asyncio.run(main())
