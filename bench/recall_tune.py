"""Choose recall's fusion constants on the tuning parts only, by the WORST of them.

A grid over the constants of caderno.memory.engines.recall that fusion reads at query
time — the relevant leg's weight, the cover rule of the lexical leg
(``COVER_LOW``; ``COVER_HIGH`` is 0.15 above it; ``COVER_FLOOR``), the
recent and salient weights — each combination run with the default
``recall(query)`` on every tuning part:

* ``locomo``: LoCoMo conversations 0-2 (bench/_locomo.py, read from
  ``../shared/data/locomo/``; turn-level evidence recall@10, top 10), when
  there. All five conversations are stored, as bench/recall_quality.py
  stores them: the full-text index's statistics span the database, and with
  0-2 alone the current constants scored 0.789 here against 0.797 there;
* ``longmemeval``: LongMemEval_S dev's tuning part (bench/_longmemeval.py,
  read from ``../shared/data/longmemeval/``; every group stored, its tuning
  questions asked; turn-level evidence recall@10, top 10), when there;
* ``en``, ``pt``: the tuning halves of bench/data's sets
  (bench/recall_quality.py; every leg at limit 10, recall@10 of the first answer).

A combination is ranked by its worst part (then by the mean): a default
must hold on conversations between people, a user with an assistant, and
the project's own households at once, and a mean lets a gain on one hide a
loss on another. The parts measure different things (evidence turns on the
public sets, the first answer on bench/data; Portuguese is the lowest of
every combination), so "worst" is the worst *change* against ``BASELINE``
(the grid's combination with the sparse rerank off): a combination earns
its place only by what it gains where it gains least. (Also measured and left out, on the mean of LoCoMo, en and
pt: handing the weight the lexical leg loses to the relevant leg, 0.800
against 0.809.) The check parts (LoCoMo 3-4, LongMemEval's check part) and
the held-out halves are never read here: bench/recall_quality.py reports
them for the chosen constants.

A parameter is one entry of ``GRID``: its values and how a value sets
recall's constants (``Param``).

What is not in the grid, and why: RRF k (5) and pool depth (100) were
chosen on LoCoMo's tuning part by bench/recall_proto.py (k 5 > 10 > 60;
pools 100 ≥ 50 > 20); context and date columns are part of the full-text
index (``caderno.core.text.CONTEXT_*``, ``DATE_COLUMN_WEIGHT``), chosen by
bench/recall_proto.py and bench/recall_levers.py.

Run:  .venv/bin/python bench/recall_tune.py [--top 15]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _locomo
import recall_quality as rq

import caderno
from caderno.memory.engines import recall as recall_module
from caderno.memory.engines.recall import DEFAULT_MIN_SIMILARITY


@dataclass(frozen=True)
class Param:
    """One axis of the grid."""

    values: list[Any]
    set: Callable[[dict[str, Any], Any], None]
    """Write a value into the recall constants a combination runs under (a dict: name -> value)."""
    get: Callable[[], Any]
    """The value caderno has now (read when called: the grid's "current" row)."""


def leg_weight(values: list[Any], *legs: str) -> Param:
    """An axis over ``LEG_WEIGHTS`` entries: every leg named gets the value."""

    def put(constants: dict[str, Any], value: Any) -> None:
        constants["LEG_WEIGHTS"] = {**constants.get("LEG_WEIGHTS", recall_module.LEG_WEIGHTS)} | dict.fromkeys(
            legs, value
        )

    return Param(values, put, lambda: recall_module.LEG_WEIGHTS[legs[0]])


def constant(name: str, values: list[Any], **also: Callable[[Any], Any]) -> Param:
    """An axis over one module constant of caderno.memory.engines.recall; ``also``: constants derived from its value."""

    def put(constants: dict[str, Any], value: Any) -> None:
        constants[name] = value
        for other, derive in also.items():
            constants[other] = derive(value)

    return Param(values, put, lambda: getattr(recall_module, name))


#: The grid: name -> its values and how each sets recall's constants. Add a parameter with one line.
#: Chosen before and left out of this grid (they held on LongMemEval too, SPARSE_WEIGHT 0.5: a
#: grid of 36 over them ranked the current values first): COVER_LOW 0.45 of [0.4, 0.45, 0.5],
#: COVER_FLOOR 0.5 of [0.25, 0.5], recent/salient 0.0 of [0.0, 0.1].
GRID: dict[str, Param] = {
    "SPARSE_WEIGHT": constant("SPARSE_WEIGHT", [0.0, 0.25, 0.4, 0.5, 0.75]),
    "relevant": leg_weight([0.5, 0.75, 1.0], "relevant"),
    "when": leg_weight([0.5, 1.0], "when"),
}
#: The combination every other is compared with (its change per part): the rerank off.
BASELINE = {"SPARSE_WEIGHT": 0.0, "relevant": 0.5, "when": 1.0}
#: The default recall(query) of bench/data's protocol (every leg, limit 10) and of the public benchmarks' (defaults, top 10).
DATA_LEGS = rq.ALL_LEGS
BENCH_LEGS: dict[str, Any] = {"top": 10}


def settings(combo: dict[str, Any]) -> dict[str, Any]:
    """The recall constants a combination runs under."""
    constants: dict[str, Any] = {}
    for name, value in combo.items():
        GRID[name].set(constants, value)
    return constants


def current() -> dict[str, Any]:
    return {name: param.get() for name, param in GRID.items()}


async def score_sets(combos: list[dict[str, Any]], scores: list[dict[str, float]]) -> None:
    """bench/data's tuning halves: recall@10 of the first answer."""
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


async def score_benchmark(bench: rq.Benchmark, combos: list[dict[str, Any]], scores: list[dict[str, float]]) -> None:
    """A public benchmark's tuning part: turn-level evidence recall@10."""
    if not bench.path.exists():
        print(f"{bench.title} left out: {bench.path} is not there")
        return
    part = bench.parts[bench.tuning]
    asked = bench.asking(bench.load(), part)
    async with rq.ingested(bench, asked) as (memory, key_of, _, took):
        print(f"{bench.title}: ingested in {took:.1f} s")
        for i, combo in enumerate(combos):
            rq.VARIANTS["_tune"] = settings(combo)
            with rq.variant("_tune"):
                got = await _locomo.caderno_rankings(memory, asked, key_of, **BENCH_LEGS)
            scores[i][bench.key] = bench.score(got, asked, part)["turn"]["all"]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*(p.values for p in GRID.values()))]
    for extra in (current(), BASELINE):
        if extra not in combos:
            combos.append(extra)
    scores: list[dict[str, float]] = [{} for _ in combos]
    for bench in rq.BENCHMARKS.values():
        await score_benchmark(bench, combos, scores)
    await score_sets(combos, scores)
    parts = list(scores[0])

    base = scores[combos.index(BASELINE)]

    def worst(i: int) -> float:
        return min(scores[i][p] - base[p] for p in parts)

    def mean(i: int) -> float:
        return sum(scores[i][p] - base[p] for p in parts) / len(parts)

    order = sorted(range(len(combos)), key=lambda i: (worst(i), mean(i)), reverse=True)
    print(
        f"\n{len(combos)} combinations, tuning parts only; recall@10 of {', '.join(parts)}; "
        f"ranked by the worst change against {BASELINE}\n"
    )
    print("| " + " | ".join(GRID) + " | " + " | ".join(parts) + " | worst change | mean change |")
    print("|" + "---:|" * (len(GRID) + len(parts) + 2))
    shown = order[: args.top] + [i for i in order[args.top :] if combos[i] in (current(), BASELINE)]
    for i in shown:
        mark = " (current)" if combos[i] == current() else " (baseline)" if combos[i] == BASELINE else ""
        figures = " | ".join(f"{scores[i][s]:.3f}" for s in parts)
        values = " | ".join(str(v) for v in combos[i].values())
        print(f"| {values} | {figures} | {worst(i):+.3f}{mark} | {mean(i):+.3f} |")


if __name__ == "__main__":
    asyncio.run(main())
