"""Prototype of recall's next design, in the bench only: measured before caderno changes (issue 22).

Each candidate is rebuilt here from caderno's own parts — SQLite FTS5
through ``sqlite3`` (one table for every conversation, as a store holds every
resource), caderno's stems (``caderno.core.text.stems``) or FTS5's porter,
caderno's default embedder with numpy, caderno's ``when`` windows
(``caderno.memory.engines.when.find_window``), importance (``caderno.memory.engines.importance.score``)
— so that what wins here can be built in the stores as measured:

* **lexical** — each turn in an FTS5 row of three columns: its own text, the
  text of its neighbours in the same thread (``before`` / ``after`` turns:
  index-time context), and its date as words ("8 May 2023 8 de maio de
  2023"); ranked by ``bm25()`` with per-column weights. ``lend`` > 0 instead
  emulates today's query-time context (a hit lends that share of its score
  to the next turn of its thread);
* **dense** — cosine over the turn alone, "Speaker: text", or the previous
  turn + the turn; ``floor`` drops candidates below a similarity
  (caderno's ``min_similarity``);
* **fusion** — weighted reciprocal rank with constant ``k`` over pools of
  ``pool`` per query leg (50 when the question names a time, as caderno's
  ``WHEN_POOL``), the ``when`` leg on top (candidates said in the window the
  question names, by fused rank), recent (0.25) and salient (0.5) legs for
  the default ``recall(query)``, a repeated text counted once, cut to 10.

Corpora: LoCoMo's development half (bench/_locomo.py; tuning = conversations
0–2, check = 3–4) and bench/data's English and Portuguese sets (tuning and
held-out halves by bench/recall_quality.py's ``split_of``). Every choice is
read on the tuning parts; the check and held-out parts are printed beside.

Run:  .venv/bin/python bench/recall_proto.py [--stage lexical,dense,fusion,final]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import _locomo
import numpy as np
import recall_quality as rq

import caderno.embeddings
from caderno import Message
from caderno.core.text import fold, stems, tokenize
from caderno.memory.engines.importance import SALIENT
from caderno.memory.engines.importance import score as importance
from caderno.memory.engines.when import Window, find_window


@dataclass(frozen=True)
class Doc:
    group: str
    """The resource (LoCoMo: a conversation; bench/data: the whole set)."""
    thread: str
    key: str
    """What evidence names (LoCoMo's dia_id, bench/data's message id)."""
    role: str
    content: str
    """As stored: LoCoMo's "Speaker: text", bench/data's message."""
    text: str
    """Without the speaker."""
    created_at: datetime


@dataclass(frozen=True)
class Query:
    group: str
    thread: str
    """Where it is asked from (the recent leg's thread)."""
    text: str
    evidence: frozenset[str]
    kind: str
    part: str
    """tuning / check (LoCoMo) or tuning / heldout (bench/data)."""
    now: datetime


@dataclass(eq=False)  # hashed by identity: the caches below key on it
class Corpus:
    name: str
    docs: list[Doc]
    queries: list[Query]
    share: bool
    """True: score = share of the evidence found (LoCoMo); False: 1 when any answer is found (bench/data)."""
    by_group: dict[str, range] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, d in enumerate(self.docs):
            r = self.by_group.get(d.group)
            self.by_group[d.group] = range(i, i + 1) if r is None else range(r.start, i + 1)


def locomo_corpus() -> Corpus:
    docs, queries = [], []
    for c in _locomo.load():
        part = "tuning" if c.index in _locomo.TUNING else "check"
        for t in c.turns:
            docs.append(Doc(c.resource, c.thread(t.session), t.dia_id, t.role, t.content, t.text, t.created_at))
        for q in c.questions:
            kind = _locomo.CATEGORIES[q.category]
            queries.append(Query(c.resource, c.last_thread, q.text, q.evidence, kind, part, c.now))
    return Corpus("locomo", docs, queries, share=True)


def data_corpus(name: str) -> Corpus:
    data = json.loads(rq.SETS[name].read_text())
    docs, last, asked = [], {}, {}
    for convo in data["conversations"]:
        for s in convo["sessions"]:
            thread = f"{convo['id']}:{s['thread_id']}"  # as bench/recall_quality.py stores it
            base = datetime.fromisoformat(s["date"] + "T20:00:00+00:00")
            for i, m in enumerate(s["messages"]):
                docs.append(
                    Doc(name, thread, m["id"], m["role"], m["content"], m["content"], base + timedelta(minutes=i))
                )
            last[convo["id"]], asked[thread] = thread, base + timedelta(hours=1)
    queries = [
        Query(
            name,
            last[q["conversation"]],
            q["question"],
            frozenset(q["answer_ids"]),
            q.get("kind", "all"),
            rq.split_of(q["id"]),
            asked[last[q["conversation"]]],
        )
        for q in data["questions"]
    ]
    return Corpus(name, docs, queries, share=False)


# --- lexical ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lex:
    stem: str = "caderno"  # "caderno": caderno's stems; "porter": FTS5's porter over folded words
    before: int = 0
    after: int = 0
    date: bool = False
    w_ctx: float = 0.5
    w_date: float = 1.0
    lend: float = 0.0  # query-time context: share of a hit's score lent to the next turn (today: 0.25)
    full_query: bool = False  # True: the time words stay in the query (a date column can match them)


def _terms(stem: str, text: str) -> str:
    return " ".join(stems(text)) if stem == "caderno" else " ".join(tokenize(text))


def neighbours(docs: list[Any], i: int, before: int, after: int) -> list[int]:
    """Indices of the ``before`` docs before ``i`` and the ``after`` after it in its own thread."""
    near = itertools.chain(range(i - before, i), range(i + 1, i + 1 + after))
    return [
        j for j in near if 0 <= j < len(docs) and docs[j].thread == docs[i].thread and docs[j].group == docs[i].group
    ]


@cache
def fts(corpus: Corpus, stem: str, before: int, after: int, date: bool) -> sqlite3.Connection:
    """An in-memory FTS5 table of the corpus: rowid = doc index; columns turn, ctx, date."""
    db = sqlite3.connect(":memory:")
    tok = "unicode61 remove_diacritics 2" if stem == "caderno" else "porter unicode61 remove_diacritics 2"
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(turn, ctx, date, tokenize='{tok}')")
    docs = corpus.docs
    rows = []
    for i, d in enumerate(docs):
        near = [docs[j].content for j in neighbours(docs, i, before, after)]
        day = _locomo.date_words(d.created_at) if date else ""
        rows.append((i, _terms(stem, d.content), _terms(stem, " ".join(near)), _terms(stem, day)))
    db.executemany("INSERT INTO t(rowid, turn, ctx, date) VALUES (?, ?, ?, ?)", rows)
    return db


#: The deepest pool measured: each leg is read this deep once per question and cut per candidate.
DEEPEST = 100


@cache
def lexical(corpus: Corpus, q: Query, text: str, cfg: Lex, limit: int) -> tuple[int, ...]:
    """Doc indices best first, at most ``limit`` (more with ``lend``)."""
    words = stems(text) if cfg.stem == "caderno" else tokenize(text)
    terms = list(dict.fromkeys(words))[: rq.recall_module.MAX_QUERY_TERMS]
    if not terms:
        return []
    db = fts(corpus, cfg.stem, cfg.before, cfg.after, cfg.date)
    span = corpus.by_group[q.group]
    match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
    rows = db.execute(
        "SELECT rowid, -bm25(t, 1.0, ?, ?) FROM t WHERE t MATCH ? AND rowid BETWEEN ? AND ? "
        "ORDER BY bm25(t, 1.0, ?, ?) LIMIT ?",
        (cfg.w_ctx, cfg.w_date, match, span.start, span.stop - 1, cfg.w_ctx, cfg.w_date, limit),
    ).fetchall()
    if not cfg.lend:
        return tuple(i for i, _ in rows)
    score = dict(rows)
    for i, s in rows:
        j = i + 1
        if j < len(corpus.docs) and corpus.docs[j].thread == corpus.docs[i].thread:
            score[j] = score.get(j, 0.0) + cfg.lend * s
    return tuple(i for i, _ in sorted(score.items(), key=lambda kv: (-kv[1], -kv[0])))


# --- dense -----------------------------------------------------------------------------------------

EMBEDDER = _locomo.CachedEmbedder(caderno.embeddings.default_embedder())
DENSE_TEXT = {
    "alone": lambda docs, i: docs[i].text,
    "speaker": lambda docs, i: docs[i].content,
    "prev+turn": lambda docs, i: (
        (docs[i - 1].content + "\n" if i and docs[i - 1].thread == docs[i].thread else "") + docs[i].content
    ),
}


@cache
def doc_vectors(corpus: Corpus, variant: str) -> np.ndarray:
    make = DENSE_TEXT[variant]
    return EMBEDDER.embed([make(corpus.docs, i) for i in range(len(corpus.docs))])


@cache
def query_vector(text: str) -> np.ndarray:
    return EMBEDDER.embed([text])[0]


@cache
def dense(corpus: Corpus, q: Query, text: str, variant: str, floor: float, limit: int) -> tuple[int, ...]:
    """Doc indices by cosine to ``text``, best first, at most ``limit``, none below ``floor``."""
    span = corpus.by_group[q.group]
    sims = doc_vectors(corpus, variant)[span.start : span.stop] @ query_vector(text)
    order = np.argsort(-sims, kind="stable")[:limit]
    return tuple(span.start + int(i) for i in order if sims[i] >= floor)


# --- fusion ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    lex: Lex = Lex()
    dense: str = "speaker"
    floor: float = 0.25
    k: int = 5
    pool: int = 20
    when_pool: int = 50
    w_rel: float = 1.0
    w_lex: float = 0.75
    w_when: float = 1.0  # 0: the when leg off
    w_recent: float = 0.0  # the default recall(query): 0.25
    w_salient: float = 0.0  # the default recall(query): 0.5
    legs: tuple[str, ...] = ("relevant", "lexical")


#: Today's recall as caderno runs it (stems, forward context 0.25 at query time, no date column).
TODAY = Config(lex=Lex(lend=0.25))
DEFAULT_LEGS = {"w_recent": 0.25, "w_salient": 0.5}


@cache
def salient(corpus: Corpus, group: str) -> tuple[int, ...]:
    span = corpus.by_group[group]
    docs = corpus.docs
    hits = [i for i in span if importance(Message(role=docs[i].role, content=docs[i].content)) >= SALIENT]
    return tuple(sorted(hits, reverse=True))


def rrf(legs: dict[str, list[int]], weights: dict[str, float], k: int) -> dict[int, float]:
    fused: dict[int, float] = {}
    for name, hits in legs.items():
        w = weights.get(name, 0.0)
        for rank, i in enumerate(dict.fromkeys(hits), start=1):
            fused[i] = fused.get(i, 0.0) + w / (k + rank)
    return fused


def ranked(corpus: Corpus, q: Query, cfg: Config, top: int = _locomo.K) -> list[str]:
    """The keys of the ``top`` turns ``cfg`` returns for ``q``, best first."""
    window: Window | None = find_window(q.text, q.now) if cfg.w_when else None
    text = window.rest if window is not None and not cfg.lex.full_query else q.text
    pool = cfg.when_pool if window is not None else cfg.pool
    legs: dict[str, list[int]] = {}
    if "lexical" in cfg.legs:
        legs["lexical"] = list(lexical(corpus, q, text, cfg.lex, DEEPEST)[:pool])
    if "relevant" in cfg.legs:
        hits = dense(corpus, q, window.rest if window else q.text, cfg.dense, cfg.floor, DEEPEST)
        legs["relevant"] = list(hits[:pool])
    if cfg.w_recent:
        legs["recent"] = [i for i in reversed(corpus.by_group[q.group]) if corpus.docs[i].thread == q.thread][:10]
    if cfg.w_salient:
        legs["salient"] = list(salient(corpus, q.group)[:5])
    weights = {"relevant": cfg.w_rel, "lexical": cfg.w_lex, "recent": cfg.w_recent, "salient": cfg.w_salient}
    if len(legs) == 1:
        weights = {name: 1.0 for name in legs}
    fused = rrf(legs, weights, cfg.k)
    if window is not None:
        order = sorted(fused, key=lambda i: (-fused[i], -i))
        legs["when"] = [i for i in order if window.holds(corpus.docs[i].created_at)]
        fused = rrf(legs, {**weights, "when": cfg.w_when}, cfg.k)
    out, seen = [], set()
    for i in sorted(fused, key=lambda i: (-fused[i], -i)):
        said = " ".join(fold(corpus.docs[i].content).split())
        if said not in seen:
            seen.add(said)
            out.append(corpus.docs[i].key)
        if len(out) == top:
            break
    return out


def evaluate(corpus: Corpus, cfg: Any, rank: Any = None) -> dict[str, dict[str, float]]:
    """Per part: mean recall@10 overall (``all``) and per kind; ``rank`` (default ``ranked``) orders each question's docs."""
    rank = rank or ranked
    per: dict[str, dict[str, list[float]]] = {}
    for q in corpus.queries:
        got = rank(corpus, q, cfg)
        r = _locomo.turn_recall(got, q.evidence) if corpus.share else float(bool(q.evidence & set(got)))
        part = per.setdefault(q.part, {"all": []})
        part["all"].append(r)
        part.setdefault(q.kind, []).append(r)
    return {p: {k: sum(v) / len(v) for k, v in kinds.items()} for p, kinds in per.items()}


def bm25_baseline(corpus: Corpus) -> dict[str, dict[str, float]]:
    per: dict[str, dict[str, list[float]]] = {}
    for group, span in corpus.by_group.items():
        index = _locomo.BM25([corpus.docs[i].content for i in span])
        for q in (q for q in corpus.queries if q.group == group):
            got = [corpus.docs[span.start + i].key for i in _locomo.top(index.scores(q.text), _locomo.K)]
            r = _locomo.turn_recall(got, q.evidence) if corpus.share else float(bool(q.evidence & set(got)))
            part = per.setdefault(q.part, {"all": []})
            part["all"].append(r)
            part.setdefault(q.kind, []).append(r)
    return {p: {k: sum(v) / len(v) for k, v in kinds.items()} for p, kinds in per.items()}


# --- report ----------------------------------------------------------------------------------------


def table(title: str, corpus: Corpus, rows: Iterable[tuple[str, Config]], kinds: bool = False) -> None:
    parts = sorted({q.part for q in corpus.queries}, key=lambda p: p != "tuning")
    print(f"\n{title} ({corpus.name})\n")
    names = sorted({q.kind for q in corpus.queries}) if kinds else []
    head = (
        [f"{p} all" for p in parts]
        + [f"{p} {n}" for p in parts[:1] for n in names]
        + [f"{parts[1]} {n}" for n in names]
    )
    print("| candidate | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    for label, cfg in rows:
        m = evaluate(corpus, cfg)
        cells = (
            [m[p]["all"] for p in parts]
            + [m[parts[0]].get(n, 0.0) for n in names]
            + [m[parts[1]].get(n, 0.0) for n in names]
        )
        print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |", flush=True)


def leg(cfg: Config, name: str) -> Config:
    """``cfg``'s one leg alone (no when leg)."""
    return replace(cfg, legs=(name,), w_when=0.0)


def stage_today(corpora: list[Corpus]) -> None:
    for corpus in corpora:
        table(
            "Today's recall emulated (compare bench/recall_quality.py)",
            corpus,
            [
                ("lexical leg", leg(TODAY, "lexical")),
                ("relevant leg", leg(TODAY, "relevant")),
                ("fused relevant + lexical", TODAY),
                ("fused, no when leg", replace(TODAY, w_when=0.0)),
                ("default recall(query)", replace(TODAY, **DEFAULT_LEGS)),
            ],
            kinds=True,
        )
        print("BM25 (bench):", {p: round(m["all"], 3) for p, m in bm25_baseline(corpus).items()})


WINDOWS = [(0, 0), (1, 0), (2, 0), (0, 1), (0, 2), (1, 1), (2, 2), (1, 2), (2, 1), (3, 3)]


def stage_lexical(corpus: Corpus) -> None:
    rows = [("today (stems, forward lending 0.25)", leg(TODAY, "lexical"))]
    for stem in ("caderno", "porter"):
        rows.append((f"{stem}, no context", leg(replace(TODAY, lex=Lex(stem=stem)), "lexical")))
    for (b, a), w in itertools.product(WINDOWS[1:], (0.25, 0.5, 1.0)):
        rows.append(
            (
                f"caderno, context -{b}/+{a}, weight {w}",
                leg(replace(TODAY, lex=Lex(before=b, after=a, w_ctx=w)), "lexical"),
            )
        )
    table("Lexical leg alone: stemming and index-time context (window before/after, column weight)", corpus, rows)


def stage_lexical2(corpus: Corpus, base: Lex) -> None:
    rows = [(f"chosen context {base}", leg(replace(TODAY, lex=base), "lexical"))]
    rows.append(
        ("+ porter instead of caderno's stems", leg(replace(TODAY, lex=replace(base, stem="porter")), "lexical"))
    )
    for wd in (0.5, 1.0, 2.0):
        for full in (False, True):
            lex = replace(base, date=True, w_date=wd, full_query=full)
            label = f"+ date column, weight {wd}, " + ("time words kept in query" if full else "time words removed")
            rows.append((label, leg(replace(TODAY, lex=lex), "lexical")))
    table("Lexical leg alone: date column and stemmer on the chosen context", corpus, rows, kinds=True)


def stage_dense(corpus: Corpus) -> None:
    rows = [
        (f"{variant}, floor {floor}", leg(replace(TODAY, dense=variant, floor=floor), "relevant"))
        for variant in DENSE_TEXT
        for floor in (0.25, 0.0)
    ]
    started = time.perf_counter()
    for variant in DENSE_TEXT:
        doc_vectors(corpus, variant)
    EMBEDDER.save()
    print(
        f"\n(vectors of {len(corpus.docs)} turns x {len(DENSE_TEXT)} variants ready in {time.perf_counter() - started:.1f} s)"
    )
    table("Dense leg alone: what is embedded, and the similarity floor", corpus, rows, kinds=True)


#: The design the stages chose (filled in from their tables, tuning part only).
#: lexical: context -2/+2 at 0.5 (0.754 alone, best of 30), date column 1.0 (0.773); dense "Speaker: text"
#: (0.509; prev+turn 0.485, alone 0.249); fusion: the best of 432 (k 5, pool 100, lexical 1.0 : relevant 0.5).
CHOSEN = Config(
    lex=Lex(before=2, after=2, w_ctx=0.5, date=True, w_date=1.0, full_query=True),
    dense="speaker",
    k=5,
    pool=100,
    w_lex=1.0,
    w_rel=0.5,
)
#: The grid and the stages start from the legs chosen before fusion.
BEFORE_FUSION = Config(lex=Lex(before=2, after=2, w_ctx=0.5, date=True, w_date=1.0), dense="speaker")


FUSION_GRID: dict[str, list[Any]] = {
    "k": [5, 10, 60],
    "pool": [20, 50, 100],
    "w_lex": [0.75, 1.0, 1.5],
    "w_rel": [0.5, 1.0],
    "floor": [0.25, 0.0],
    "w_when": [1.0, 0.0],
    "full_query": [False, True],
}


def stage_fusion(corpus: Corpus, top: int = 20) -> None:
    """Every combination of FUSION_GRID over CHOSEN's legs, ranked by the tuning part (check beside)."""
    combos = [dict(zip(FUSION_GRID, v, strict=True)) for v in itertools.product(*FUSION_GRID.values())]
    scored = []
    for combo in combos:
        lex = replace(CHOSEN.lex, full_query=combo["full_query"])
        fusion = {k: v for k, v in combo.items() if k != "full_query"}
        m = evaluate(corpus, replace(BEFORE_FUSION, lex=lex, **fusion))
        scored.append((m["tuning"]["all"], m["check"]["all"], combo))
    scored.sort(key=lambda row: -row[0])
    print(f"\nFusion grid over {CHOSEN}: {len(combos)} combinations, best {top} by the tuning part\n")
    print("| " + " | ".join(FUSION_GRID) + " | tuning | check |")
    print("|" + "---:|" * (len(FUSION_GRID) + 2))
    for tuning, check, combo in scored[:top]:
        print("| " + " | ".join(str(v) for v in combo.values()) + f" | {tuning:.3f} | {check:.3f} |")
    for name, values in FUSION_GRID.items():  # each value's best combination: how much the choice matters
        best = {v: max(t for t, _, c in scored if c[name] == v) for v in values}
        print(f"best tuning by {name}: " + ", ".join(f"{v}: {b:.3f}" for v, b in best.items()))


def stage_final(corpora: list[Corpus]) -> None:
    """The chosen design against today's, its legs, the default recall(query) and BM25 on every corpus."""
    for corpus in corpora:
        table(
            "Chosen design",
            corpus,
            [
                ("today's fused (emulated)", TODAY),
                ("chosen: lexical leg", leg(CHOSEN, "lexical")),
                ("chosen: relevant leg", leg(CHOSEN, "relevant")),
                ("chosen: fused relevant + lexical (+ when)", CHOSEN),
                ("chosen, no when leg", replace(CHOSEN, w_when=0.0)),
                ("chosen, default recall(query) (recent 0.25, salient 0.5)", replace(CHOSEN, **DEFAULT_LEGS)),
                ("chosen, default, salient off", replace(CHOSEN, w_recent=0.25)),
                ("chosen, default, recent off", replace(CHOSEN, w_salient=0.5)),
                ("chosen, default, recent 0.1 salient 0.1", replace(CHOSEN, w_recent=0.1, w_salient=0.1)),
            ],
            kinds=True,
        )
        print("BM25 (bench):", {p: round(m["all"], 3) for p, m in bm25_baseline(corpus).items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", default="today,lexical,dense", help="today, lexical, lexical2, dense, fusion, final")
    args = ap.parse_args()
    if not _locomo.LOCOMO.exists():
        print(f"LoCoMo skipped: {_locomo.LOCOMO} is not there")
        return
    locomo = locomo_corpus()
    stages = args.stage.split(",")
    if "today" in stages:
        stage_today([locomo, data_corpus("en"), data_corpus("pt")])
    if "lexical" in stages:
        stage_lexical(locomo)
    if "lexical2" in stages:
        stage_lexical2(locomo, replace(BEFORE_FUSION.lex, date=False))
    if "dense" in stages:
        stage_dense(locomo)
    if "fusion" in stages:
        stage_fusion(locomo)
    if "final" in stages:
        stage_final([locomo, data_corpus("en"), data_corpus("pt")])
    EMBEDDER.save()


if __name__ == "__main__":
    main()
