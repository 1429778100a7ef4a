"""Recall quality on caderno's two evaluation sets, halved into tuning and held-out.

* ``en`` — bench/data/recall_eval.json: 22 authored multi-session
  conversations (66 threads, 748 messages), 187 questions;
* ``pt`` — bench/data/recall_eval_pt.json: 15 conversations in Portuguese
  (45 threads, 570 messages), 135 questions, each marked words / paraphrase
  / when.

Each set is stored as ONE resource — one household talking to its agent over
months — and every question is asked from its conversation's last session.
A question is recalled@k when one of its answer messages is among the first
k results by fused score; MRR is the mean of 1/rank of the first answer in
the first 10 (0 when absent).

Every question falls in the tuning or the held-out half by a hash of its id
(``split_of``), the same rule for both sets. Weights, k and the fusion method
are chosen on the tuning halves only; the held-out halves are for reporting.

For each set and half: each leg alone (limit 10), then fused with every leg
on (limit 10 each) under each fusion variant (``--fusion``): ``today`` is the
fusion before pools were deepened (RRF k=60, each leg only its limit deep).

``--embedder NAME`` runs the whole evaluation with another embedder of
bench/_embedders.py (default: caderno's own); bench/embedders.py drives it
for every candidate.

``locomo`` — LoCoMo's development half (bench/_locomo.py: the protocol of
  ``../shared/data/locomo/README.md``), read from beside the project when
  that folder is there and skipped with one line when not: turn-level
  evidence recall@10 on the tuning part (conversations 0–2), the check part
  (3–4) and all five, per category, for each leg alone, the query legs
  fused, the default ``recall(query)`` cut to 10, and the baselines BM25
  and dense cosine computed in the bench.

Run:  .venv/bin/python bench/recall_quality.py [--set en|pt|locomo|all] [--split tuning|heldout|both]
          [--fusion today,rrf60,rrf10,rrf5,score,default] [--sweep] [--embedder NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import _embedders
import _locomo

import caderno
import caderno.embeddings
from caderno import Message
from caderno.memory import recall as recall_module
from caderno.memory.recall import DEFAULT_MIN_SIMILARITY

DATA = Path(__file__).parent / "data"
SETS = {"en": DATA / "recall_eval.json", "pt": DATA / "recall_eval_pt.json"}
R = "household"
LEGS = ("recent", "salient", "relevant", "lexical")
#: Leg weights before this comparison.
OLD_WEIGHTS = {"relevant": 1.0, "lexical": 1.0, "recent": 0.5, "salient": 0.5}
#: caderno's constants now.
DEFAULT = {name: getattr(recall_module, name) for name in ("FUSION", "RRF_K", "POOL", "LEG_WEIGHTS", "DISTINCT")}
#: name -> the recall constants it sets (the others keep caderno's values).
#: "today": the fusion before pools were deepened (RRF k=60, each leg only
#: its limit deep, no when leg); "default": caderno's constants.
#: The others are the candidates compared on the tuning halves.
#:
#: Context is no longer a query-time constant (issue 22): the variants that
#: varied ``CONTEXT_WEIGHT`` (a lexical hit lending part of its score to the
#: next message: "no-context", "context0.25", "context1", "c25-pool20") are
#: gone. Each message is now indexed with its neighbours' words and its date
#: in columns of their own (``caderno.core.text.CONTEXT_BEFORE``,
#: ``CONTEXT_AFTER``, ``CONTEXT_COLUMN_WEIGHT``, ``DATE_COLUMN_WEIGHT``),
#: fixed when a message is stored, so every variant here — "today" included —
#: searches that index; bench/recall_proto.py and bench/recall_levers.py
#: measure the index-time choices.
VARIANTS: dict[str, dict[str, Any]] = {
    "today": {"FUSION": "rrf", "RRF_K": 60, "POOL": 0, "LEG_WEIGHTS": OLD_WEIGHTS},
    "rrf60": {"FUSION": "rrf", "RRF_K": 60, "POOL": 30, "LEG_WEIGHTS": OLD_WEIGHTS},
    "rrf10": {"FUSION": "rrf", "RRF_K": 10, "POOL": 30, "LEG_WEIGHTS": OLD_WEIGHTS},
    "rrf5": {"FUSION": "rrf", "RRF_K": 5, "POOL": 30, "LEG_WEIGHTS": OLD_WEIGHTS},
    "score": {"FUSION": "score", "RRF_K": 60, "POOL": 30, "LEG_WEIGHTS": OLD_WEIGHTS},
    "no-when": {"LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "when": 0.0}},
    "when0.5": {"LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "when": 0.5}},
    "when2": {"LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "when": 2.0}},
    "pool20": {"POOL": 20},
    "pool30": {"POOL": 30},
    "k10": {"RRF_K": 10},
    "k60": {"RRF_K": 60},
    "score-fusion": {"FUSION": "score"},
    "pool20-rel1.5": {"POOL": 20, "LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "relevant": 1.5}},
    "pool20-recent0": {"POOL": 20, "LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "recent": 0.0}},
    "pool20-salient0.25": {"POOL": 20, "LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "salient": 0.25}},
    "pool20-k10": {"POOL": 20, "RRF_K": 10},
    "default": {},
    "repeats": {"DISTINCT": False},
    # One leg on its own: the leg as recall runs it (lexical over its
    # index-time context), without the when leg, which is a fusion of the others.
    "leg": {"LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "when": 0.0}},
}
ALL_LEGS = dict.fromkeys(LEGS, 10)
#: thread -> when its questions are asked ("two weeks ago" counts from there).
ASKED_AT: dict[str, datetime] = {}


def split_of(question_id: str) -> str:
    """``"tuning"`` or ``"heldout"``, by the first byte of the id's SHA-256 (even: tuning)."""
    return "tuning" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "heldout"


@contextmanager
def variant(name: str) -> Any:
    """Run recall under one variant (module constants of caderno.memory.recall), restored afterwards."""
    settings = {**DEFAULT, **VARIANTS[name]}
    saved = {key: getattr(recall_module, key) for key in settings}
    for key, value in settings.items():
        setattr(recall_module, key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(recall_module, key, value)


async def load(memory: caderno.Memory, data: dict) -> dict[str, str]:
    """Store every conversation; returns conversation -> its last thread id."""
    last_thread = {}
    for convo in data["conversations"]:
        for session in convo["sessions"]:
            # ':' joins conversation and session: ids are names, never paths ('/' is refused).
            thread = f"{convo['id']}:{session['thread_id']}"
            base = datetime.fromisoformat(session["date"] + "T20:00:00+00:00")
            msgs = [
                Message(role=m["role"], content=m["content"], id=m["id"], created_at=base + timedelta(minutes=i))
                for i, m in enumerate(session["messages"])
            ]
            await memory.append_messages(resource_id=R, thread_id=thread, messages=msgs)
            last_thread[convo["id"]] = thread
            ASKED_AT[thread] = base + timedelta(hours=1)  # questions come at the end of the last session
    await memory.flush()
    return last_thread


async def ranked_ids(memory: caderno.Memory, q: dict, thread: str, legs: dict[str, int], min_sim: float) -> list[str]:
    hits = await memory.recall(
        resource_id=R, query=q["question"], thread_id=thread, min_similarity=min_sim, now=ASKED_AT[thread], **legs
    )
    return [h.message.id for h in sorted(hits, key=lambda h: -h.score)]


def metrics(rankings: list[tuple[list[str], set[str]]]) -> dict[str, float]:
    def first(ids: list[str], answers: set[str]) -> int | None:
        return next((i + 1 for i, m in enumerate(ids[:10]) if m in answers), None)

    n = max(len(rankings), 1)
    ranks = [first(ids, answers) for ids, answers in rankings]
    return {
        "recall@5": sum(1 for r in ranks if r is not None and r <= 5) / n,
        "recall@10": sum(1 for r in ranks if r is not None) / n,
        "MRR": sum(1 / r for r in ranks if r is not None) / n,
    }


async def evaluate(path: Path, fusions: list[str], sweep: bool, embedder: str | None = None) -> dict[str, Any]:
    """Rankings of every question under every configuration, scored per half.

    ``embedder``: a key of ``_embedders.CANDIDATES`` (None: caderno's default).
    """
    data = json.loads(path.read_text())
    questions = data["questions"]
    configs: dict[str, tuple[str, dict[str, int]]] = {
        leg: ("leg", {other: (10 if other == leg else 0) for other in LEGS}) for leg in LEGS
    }
    for name in fusions:
        configs[f"fused {name}"] = (name, ALL_LEGS)
    got: dict[str, list[list[str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen = {} if embedder is None else {"embedder": _embedders.make(embedder)}
        async with caderno.connect(Path(tmp) / "eval.db", **chosen) as memory:
            last = await load(memory, data)
            # Every message is embedded (flush); from here on, embeddings are of questions.
            with _embedders.query_mode(memory.embedder):
                for name, (fusion, legs) in configs.items():
                    with variant(fusion):
                        got[name] = [
                            await ranked_ids(memory, q, last[q["conversation"]], legs, DEFAULT_MIN_SIMILARITY)
                            for q in questions
                        ]
                if sweep:
                    for threshold in (0.15, 0.25, 0.35):
                        got[f"fused, min_similarity {threshold}"] = [
                            await ranked_ids(memory, q, last[q["conversation"]], ALL_LEGS, threshold) for q in questions
                        ]
            model = memory.embedder.name
    out: dict[str, Any] = {"model": model, "questions": len(questions), "halves": {}}
    for half in ("tuning", "heldout"):
        idx = [i for i, q in enumerate(questions) if split_of(q["id"]) == half]
        rows = {name: metrics([(ids[i], set(questions[i]["answer_ids"])) for i in idx]) for name, ids in got.items()}
        kinds = sorted({questions[i].get("kind", "") for i in idx} - {""})
        by_kind = {
            name: {
                kind: metrics(
                    [(ids[i], set(questions[i]["answer_ids"])) for i in idx if questions[i].get("kind") == kind]
                )["recall@10"]
                for kind in kinds
            }
            for name, ids in got.items()
            if name.startswith("fused") or name in ("relevant", "lexical")
        }
        out["halves"][half] = {"n": len(idx), "rows": rows, "by_kind": by_kind if kinds else {}}
    return out


#: LoCoMo rows: name -> (recall's keyword arguments, the variant of constants it runs under).
LOCOMO_ROWS: dict[str, tuple[dict[str, Any], str]] = {
    "relevant leg": ({"recent": 0, "salient": 0, "relevant": 10, "lexical": 0, "top": 10}, "leg"),
    "lexical leg": ({"recent": 0, "salient": 0, "relevant": 0, "lexical": 10, "top": 10}, "leg"),
    "fused relevant 5 + lexical 5": ({"recent": 0, "salient": 0, "relevant": 5, "lexical": 5}, "default"),
    "fused, no when leg": ({"recent": 0, "salient": 0, "relevant": 5, "lexical": 5}, "no-when"),
    "default recall(query), top 10": ({"top": 10}, "default"),
}


async def evaluate_locomo() -> dict[str, dict[str, dict[str, float]]] | None:
    """LoCoMo's rows per part (tuning, check, all); None (and a line) when the data is not beside the project."""
    import time

    if not _locomo.LOCOMO.exists():
        print(f"\nLoCoMo skipped: {_locomo.LOCOMO} is not there")
        return None
    convs = _locomo.load()
    embedder = _locomo.CachedEmbedder(caderno.embeddings.default_embedder())
    results: dict[str, dict[int, list[list[str]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "locomo.db", embedder=embedder) as memory:
            started = time.perf_counter()
            dia_of = await _locomo.ingest(memory, convs)
            took = time.perf_counter() - started
            embedder.save()
            for name, (legs, fusion) in LOCOMO_ROWS.items():
                with variant(fusion):
                    results[name] = await _locomo.caderno_rankings(memory, convs, dia_of, **legs)
    results["BM25 (bench)"] = _locomo.bm25_rankings(convs)
    results["dense cosine (bench)"] = _locomo.dense_rankings(embedder, convs)
    embedder.save()
    turns = sum(len(c.turns) for c in convs)
    print(f"\nLoCoMo: {len(convs)} conversations, {turns} turns, ingested (stored + embedded) in {took:.1f} s")
    parts = {"tuning (0-2)": _locomo.TUNING, "check (3-4)": _locomo.CHECK, "all (0-4)": _locomo.TUNING + _locomo.CHECK}
    return {
        part: {row: _locomo.score(got, convs, which) for row, got in results.items()} for part, which in parts.items()
    }


def print_locomo(report: dict[str, dict[str, dict[str, float]]]) -> None:
    cats = list(_locomo.CATEGORIES.values())
    for part, rows in report.items():
        n = next(iter(rows.values()))["n"]
        print(f"\nLoCoMo {part}: {n:.0f} questions; turn-level evidence recall@10\n")
        print("| retrieval | all | " + " | ".join(cats) + " |")
        print("|---|---:|" + "---:|" * len(cats))
        for row, m in rows.items():
            print(f"| {row} | {m['all']:.3f} | " + " | ".join(f"{m.get(c, 0.0):.3f}" for c in cats) + " |")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("en", "pt", "locomo", "both", "all"), default="all", help="both: en and pt")
    ap.add_argument("--split", choices=("tuning", "heldout", "both"), default="both")
    ap.add_argument(
        "--fusion", default="today,rrf60,rrf10,rrf5,score,default", help="comma-separated: " + ", ".join(VARIANTS)
    )
    ap.add_argument("--sweep", action="store_true", help="also sweep min_similarity (current fusion)")
    ap.add_argument("--embedder", help="a bench/_embedders.py key: " + ", ".join(_embedders.CANDIDATES))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    fusions = [f.strip() for f in args.fusion.split(",") if f.strip()]
    unknown = [f for f in fusions if f not in VARIANTS]
    if unknown:
        ap.error(f"unknown fusion {unknown}; choose from {', '.join(VARIANTS)}")
    halves = ("tuning", "heldout") if args.split == "both" else (args.split,)
    names = ("en", "pt") if args.set in ("both", "all") else (args.set,) if args.set != "locomo" else ()
    report = {}
    print(
        f"default fusion: FUSION={recall_module.FUSION!r}, RRF_K={recall_module.RRF_K}, POOL={recall_module.POOL}, "
        f"LEG_WEIGHTS={recall_module.LEG_WEIGHTS}; min_similarity {DEFAULT_MIN_SIMILARITY}"
    )
    for name in names:
        result = await evaluate(SETS[name], fusions, args.sweep, args.embedder)
        report[name] = result
        for half in halves:
            h = result["halves"][half]
            print(f"\n{name} set, {half} half: {h['n']} of {result['questions']} questions; model {result['model']}\n")
            print("| retrieval | recall@5 | recall@10 | MRR |")
            print("|---|---:|---:|---:|")
            for row, m in h["rows"].items():
                print(f"| {row} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['MRR']:.3f} |")
            if h["by_kind"]:
                kinds = list(next(iter(h["by_kind"].values())))
                print("\n| recall@10 by kind | " + " | ".join(kinds) + " |")
                print("|---|" + "---:|" * len(kinds))
                for row, per in h["by_kind"].items():
                    print(f"| {row} | " + " | ".join(f"{per[k]:.3f}" for k in kinds) + " |")
    if args.set in ("locomo", "all"):
        locomo = await evaluate_locomo()
        if locomo is not None:
            report["locomo"] = locomo
            print_locomo(locomo)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
