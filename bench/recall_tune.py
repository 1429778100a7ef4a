"""Choose recall's fusion constants on the tuning halves only.

A grid over the constants of caderno.recall (relevant, lexical, recent and
salient weights, RRF k, pool depth), each combination run on the
tuning half of both evaluation sets (bench/recall_quality.py); ranked by the
mean of the two sets' recall@10, then by mean MRR. The held-out halves are
never read here: bench/recall_quality.py reports them for the chosen
constants.

Run:  .venv/bin/python bench/recall_tune.py [--top 15]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import recall_quality as rq

import caderno
from caderno import recall as recall_module
from caderno.recall import DEFAULT_MIN_SIMILARITY

#: Context is not in the grid: it is no longer a query-time constant
#: (``CONTEXT_WEIGHT`` is gone, issue 22) but part of the full-text index,
#: each message stored with its neighbours' words and its date in columns of
#: their own (``caderno._text.CONTEXT_BEFORE``, ``CONTEXT_AFTER``,
#: ``CONTEXT_COLUMN_WEIGHT``), chosen on LoCoMo by bench/recall_proto.py and
#: bench/recall_levers.py; every combination here searches that index.
GRID: dict[str, list[Any]] = {
    "relevant": [1.0, 1.5],
    "lexical": [0.75, 1.0],
    "recent": [0.0, 0.25],
    "salient": [0.25, 0.5],
    "RRF_K": [5, 10],
    "POOL": [10, 20, 30],
}


def settings(combo: dict[str, Any]) -> dict[str, Any]:
    weights = {
        **recall_module.LEG_WEIGHTS,
        "relevant": combo["relevant"],
        "lexical": combo["lexical"],
        "recent": combo["recent"],
        "salient": combo["salient"],
    }
    return {
        "LEG_WEIGHTS": weights,
        "RRF_K": combo["RRF_K"],
        "POOL": combo["POOL"],
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    scores: dict[int, dict[str, dict[str, float]]] = {i: {} for i in range(len(combos))}
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
                            await rq.ranked_ids(memory, q, last[q["conversation"]], rq.ALL_LEGS, DEFAULT_MIN_SIMILARITY)
                            for q in tuning
                        ]
                    scores[i][name] = rq.metrics(
                        [(ids, set(q["answer_ids"])) for ids, q in zip(ranked, tuning, strict=True)]
                    )

    def key(i: int) -> tuple[float, float]:
        per = scores[i].values()
        return (sum(m["recall@10"] for m in per) / 2, sum(m["MRR"] for m in per) / 2)

    order = sorted(scores, key=key, reverse=True)
    print(f"{len(combos)} combinations, tuning halves only; ranked by mean recall@10, then mean MRR\n")
    print("| " + " | ".join(GRID) + " | en r@10 | pt r@10 | mean r@10 | mean MRR |")
    print("|" + "---:|" * (len(GRID) + 4))
    current = {
        "relevant": recall_module.LEG_WEIGHTS["relevant"],
        "lexical": recall_module.LEG_WEIGHTS["lexical"],
        "recent": recall_module.LEG_WEIGHTS["recent"],
        "salient": recall_module.LEG_WEIGHTS["salient"],
        "RRF_K": recall_module.RRF_K,
        "POOL": recall_module.POOL,
    }
    shown = order[: args.top] + [i for i in order if combos[i] == current and i not in order[: args.top]]
    for i in shown:
        mean_r, mean_mrr = key(i)
        mark = " (current)" if combos[i] == current else ""
        print(
            "| " + " | ".join(str(v) for v in combos[i].values()) + f" | {scores[i]['en']['recall@10']:.3f} "
            f"| {scores[i]['pt']['recall@10']:.3f} | {mean_r:.3f} | {mean_mrr:.3f}{mark} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
