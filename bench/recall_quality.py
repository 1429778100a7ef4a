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

``longmemeval`` — LongMemEval_S's development part (bench/_longmemeval.py:
  the pooled protocol of ``../shared/data/longmemeval/README.md``, ~16
  questions a resource), read from beside the project when that folder is
  there: the same rows, turn- and session-level evidence recall@10, per
  question type, on its tuning part, its check part and all.

Both public benchmarks run through one harness (``Benchmark``,
``evaluate_benchmark``): the rows of ``BENCH_ROWS``, then the baselines, each
part scored by the benchmark's own ``score``. Embeddings are cached by text
(``_locomo.CachedEmbedder``), so a rerun costs the storing and the recalls.
The stored database itself is not cached: storing LongMemEval's 5,206 turns
takes 7–9 s of an 80–115 s rerun of ``--set all`` (2 shared cores), and a
correct cache would be keyed on every file of caderno that stores or indexes.

Run:  .venv/bin/python bench/recall_quality.py [--set en|pt|locomo|longmemeval|both|all] [--split tuning|heldout|both]
          [--fusion today,rrf60,rrf10,rrf5,score,default] [--sweep] [--embedder NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import _embedders
import _locomo
import _longmemeval

import caderno
import caderno.embeddings
from caderno import Message
from caderno.memory.engines import recall as recall_module
from caderno.memory.engines.recall import DEFAULT_MIN_SIMILARITY

DATA = Path(__file__).parent / "data"
SETS = {"en": DATA / "recall_eval.json", "pt": DATA / "recall_eval_pt.json"}
R = "household"
LEGS = ("recent", "salient", "relevant", "lexical")
#: Leg weights before this comparison.
OLD_WEIGHTS = {"relevant": 1.0, "lexical": 1.0, "recent": 0.5, "salient": 0.5}
#: caderno's constants now.
DEFAULT = {
    name: getattr(recall_module, name)
    for name in ("FUSION", "RRF_K", "POOL", "LEG_WEIGHTS", "DISTINCT", "SPARSE_WEIGHT", "SPARSE_POOL")
}
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
    "today": {"FUSION": "rrf", "RRF_K": 60, "POOL": 0, "LEG_WEIGHTS": OLD_WEIGHTS, "SPARSE_WEIGHT": 0.0},
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
    "leg": {"LEG_WEIGHTS": {**DEFAULT["LEG_WEIGHTS"], "when": 0.0}, "SPARSE_WEIGHT": 0.0},
    # The learned-sparse rerank of the fused pool (SPARSE_WEIGHT): off, alone, and weights around the default.
    "no-sparse": {"SPARSE_WEIGHT": 0.0},
    "sparse-only": {"SPARSE_WEIGHT": 1e6},
    "sparse0.5": {"SPARSE_WEIGHT": 0.5},
    "sparse1": {"SPARSE_WEIGHT": 1.0},
}
ALL_LEGS = dict.fromkeys(LEGS, 10)
#: thread -> when its questions are asked ("two weeks ago" counts from there).
ASKED_AT: dict[str, datetime] = {}


def split_of(question_id: str) -> str:
    """``"tuning"`` or ``"heldout"``, by the first byte of the id's SHA-256 (even: tuning)."""
    return "tuning" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "heldout"


@contextmanager
def variant(name: str) -> Any:
    """Run recall under one variant (module constants of caderno.memory.engines.recall), restored afterwards."""
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


#: The rows of each public benchmark (LoCoMo, LongMemEval): name -> (recall's keyword arguments,
#: the variant of constants it runs under). The baselines BM25 and dense cosine follow them.
BENCH_ROWS: dict[str, tuple[dict[str, Any], str]] = {
    "relevant leg": ({"recent": 0, "salient": 0, "relevant": 10, "lexical": 0, "top": 10}, "leg"),
    "lexical leg": ({"recent": 0, "salient": 0, "relevant": 0, "lexical": 10, "top": 10}, "leg"),
    "fused relevant 5 + lexical 5": ({"recent": 0, "salient": 0, "relevant": 5, "lexical": 5}, "default"),
    "fused, no when leg": ({"recent": 0, "salient": 0, "relevant": 5, "lexical": 5}, "no-when"),
    "default without the sparse rerank": ({"top": 10}, "no-sparse"),
    "sparse rerank of the fused pool alone": ({"top": 10}, "sparse-only"),
    "default recall(query), top 10": ({"top": 10}, "default"),
}
#: The scores of a part: {level ("turn", "session"): {"all", one figure per column, "n"}}.
Scores = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Benchmark:
    """A public benchmark read from beside the project: its haystacks (``_locomo.Haystack``), parts and score."""

    key: str
    """Its name in ``--set`` and in the JSON report."""
    title: str
    path: Path
    load: Callable[[], Sequence[Any]]
    parts: dict[str, Any]
    """Part label -> what ``score`` reads to keep that part's questions."""
    score: Callable[[dict[int, list[list[Any]]], Sequence[Any], Any], Scores]
    """(rankings per haystack and question, the haystacks, a part) -> the part's scores."""
    columns: Callable[[Sequence[Any]], list[str]]
    """The question categories its tables show beside ``all``."""
    tuning: str
    """The part every choice is made on (bench/recall_tune.py)."""
    asking: Callable[[Sequence[Any], Any], Sequence[Any]]
    """(the haystacks, a part) -> the haystacks that part's questions are asked in, asking only those."""


BENCHMARKS = {
    "locomo": Benchmark(
        "locomo",
        "LoCoMo",
        _locomo.LOCOMO,
        _locomo.load,
        {"tuning (0-2)": _locomo.TUNING, "check (3-4)": _locomo.CHECK, "all (0-4)": _locomo.TUNING + _locomo.CHECK},
        lambda got, convs, which: {"turn": _locomo.score(got, {c.index: c for c in convs}, which)},
        lambda convs: list(_locomo.CATEGORIES.values()),
        "tuning (0-2)",
        # Every conversation stored (full-text statistics span the database, so the figures match
        # this report's), only the part's conversations asked.
        lambda convs, which: [c if c.index in which else dataclasses.replace(c, questions=[]) for c in convs],
    ),
    "longmemeval": Benchmark(
        "longmemeval",
        "LongMemEval_S dev",
        _longmemeval.LONGMEMEVAL,
        _longmemeval.load,
        {part: part for part in _longmemeval.PARTS},
        _longmemeval.score,
        _longmemeval.question_types,
        "tuning",
        _longmemeval.only,
    ),
}


@asynccontextmanager
async def ingested(
    bench: Benchmark, haystacks: Sequence[Any]
) -> AsyncIterator[tuple[caderno.Memory, dict[str, Any], _locomo.CachedEmbedder, float]]:
    """A SQLite file holding ``haystacks`` by the benchmark's protocol, every message embedded.

    Yields the memory, message id -> turn key, the embedder (vectors cached
    by text) and the seconds storing and embedding took.
    """
    embedder = _locomo.CachedEmbedder(caderno.embeddings.default_embedder())
    sparse = _locomo.CachedSparse(caderno.embeddings.default_sparse_encoder())
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / f"{bench.key}.db", embedder=embedder, sparse=sparse) as memory:
            started = time.perf_counter()
            key_of = await _locomo.ingest(memory, haystacks)
            took = time.perf_counter() - started
            embedder.save()
            sparse.save()
            yield memory, key_of, embedder, took


async def evaluate_benchmark(bench: Benchmark) -> dict[str, Any] | None:
    """Every row and both baselines, scored per part; None (and a line) when the data is not beside the project."""
    if not bench.path.exists():
        print(f"\n{bench.title} skipped: {bench.path} is not there")
        return None
    started = time.perf_counter()
    haystacks = bench.load()
    results: dict[str, dict[int, list[list[Any]]]] = {}
    async with ingested(bench, haystacks) as (memory, key_of, embedder, took):
        for name, (legs, fusion) in BENCH_ROWS.items():
            with variant(fusion):
                results[name] = await _locomo.caderno_rankings(memory, haystacks, key_of, **legs)
        sparse = memory.indexer.sparse
        results["SPLADE-tiny over every turn (bench)"] = _locomo.sparse_rankings(sparse, haystacks)
        sparse.save()
    results["BM25 (bench)"] = _locomo.bm25_rankings(haystacks)
    results["dense cosine (bench)"] = _locomo.dense_rankings(embedder, haystacks)
    embedder.save()
    size = {
        "resources": len(haystacks),
        "turns": sum(len(h.turns) for h in haystacks),
        "questions": sum(len(h.questions) for h in haystacks),
    }
    total = time.perf_counter() - started
    print(
        f"\n{bench.title}: {size['resources']} resources, {size['turns']} turns, {size['questions']} questions; "
        f"ingested (stored + embedded) in {took:.1f} s, {total:.1f} s in all"
    )
    parts = {
        part: {row: bench.score(got, haystacks, which) for row, got in results.items()}
        for part, which in bench.parts.items()
    }
    return size | {
        "ingest_s": round(took, 1),
        "total_s": round(total, 1),
        "columns": bench.columns(haystacks),
        "parts": parts,
    }


def print_benchmark(bench: Benchmark, report: dict[str, Any]) -> None:
    columns = report["columns"]
    for part, rows in report["parts"].items():
        first = next(iter(rows.values()))
        for level, figures in first.items():
            print(f"\n{bench.title} {part}: {figures['n']:.0f} questions; {level}-level evidence recall@10\n")
            print("| retrieval | all | " + " | ".join(columns) + " |")
            print("|---|---:|" + "---:|" * len(columns))
            for row, scores in rows.items():
                m = scores[level]
                cells = (f"{m[c]:.3f}" if c in m else "–" for c in columns)  # – : no question of that kind here
                print(f"| {row} | {m['all']:.3f} | " + " | ".join(cells) + " |")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=(*SETS, *BENCHMARKS, "both", "all"), default="all", help="both: en and pt")
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
    names = tuple(SETS) if args.set in ("both", "all") else (args.set,) if args.set in SETS else ()
    started = time.perf_counter()
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
    for key, bench in BENCHMARKS.items():
        if args.set in (key, "all"):
            result = await evaluate_benchmark(bench)
            if result is not None:
                report[key] = result
                print_benchmark(bench, result)
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
