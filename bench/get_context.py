"""``Memory.get_context`` measured: where salient and relevant look (scope), and the similarity floor.

    .venv/bin/python bench/get_context.py                     # both scopes, the default floor, every set
    .venv/bin/python bench/get_context.py --set locomo --scope thread
    .venv/bin/python bench/get_context.py --floors all        # the floor sweep behind GET_CONTEXT_MIN_SIMILARITY

Every question is asked through ``get_context`` with its default limits
(recent 10, salient 5, relevant 5) under each configuration compared — a
scope (``"resource"``: every thread of the resource; ``"thread"``: the
current one, the reference agent's session) and a floor — and three
figures are kept:

* **relevant@5** — what the relevant part alone finds: the share of a
  question's evidence turns among its (at most 5) messages, averaged
  (turn-level evidence recall: LoCoMo's evidence ``dia_id``s,
  LongMemEval's ``has_answer`` turns); on bench/data the share of questions
  with an answer among them;
* **context** — the same over the whole context (recent + salient +
  relevant, at most 20 messages);
* **messages** — how many messages the context held, on average.

The sets and their protocols:

* LoCoMo dev (bench/_locomo.py): one resource per conversation, one thread
  per session, asked from the last session with ``now`` the day after it;
  tuning part conversations 0–2, check part 3–4;
* LongMemEval_S dev (bench/_longmemeval.py): pooled groups of ~16
  questions, one resource each, one thread per session. Its protocol asks
  with no current thread (the question opens a new conversation), so
  ``get_context`` is called with a thread of its own that holds nothing
  (``NEW_THREAD``): the recent part is empty and the thread scope finds
  nothing by construction — which is what the reference's session scope
  gives a user who asks about an earlier conversation in a new one. So
  each question is asked a second time from the group's newest session
  begun before the question's date (``latest_session``: the user goes on
  with their last conversation), where both parts have something to find;
* bench/data en and pt, stored as bench/recall_quality.py stores them (one
  resource, one thread per session, asked from the conversation's last
  session), halved into tuning and held-out.

LoCoMo and LongMemEval are ingested by bench/recall_quality.py's
``ingested`` (vectors cached by text); each is skipped with one line when
its data is not beside the project.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _embedders
import _locomo
import recall_quality

import caderno
from caderno.memory.engines.get_context import GET_CONTEXT_MIN_SIMILARITY, GET_CONTEXT_SCOPE

#: The floors ``--floors all`` compares: the reference agent's 0.65, recall's 0.25, and around them.
FLOORS = (0.0, 0.15, 0.25, 0.35, 0.45, 0.65)
SCOPES = ("resource", "thread")
#: The thread a LongMemEval question is asked from: a new conversation, holding nothing.
NEW_THREAD = "get-context-new-conversation"
#: The label of LongMemEval's second asking: from the newest session begun before the question (``latest_session``).
LATEST = ", asked from the latest earlier session"

Config = tuple[str, float]
#: One question's figures: per configuration (relevant@5, whole context, messages), and recall(top=5)'s share.
Row = tuple[dict[Config, tuple[float, float, int]], float]


def share(got: Sequence[Any], wanted: set[Any], *, any_of: bool) -> float:
    """Turn recall (share of ``wanted`` in ``got``), or 1/0 for "any of them" (bench/data's answers)."""
    hit = wanted & set(got)
    return float(bool(hit)) if any_of else len(hit) / len(wanted)


async def ask(
    memory: caderno.Memory, configs: Sequence[Config], wanted: set[Any], key: Any, *, any_of: bool, **where: Any
) -> Row:
    """One question under every configuration; ``key`` maps a hit to what ``wanted`` holds."""
    out = {}
    for scope, floor in configs:
        parts = await memory.get_context(scope=scope, min_similarity=floor, **where)
        rel = share([key(h) for h in parts.relevant], wanted, any_of=any_of)
        whole = share([key(h) for h in parts.messages], wanted, any_of=any_of)
        out[(scope, floor)] = (rel, whole, len(parts.messages))
    hits = await memory.recall(top=5, **where)
    return out, share([key(h) for h in hits], wanted, any_of=any_of)


async def public(name: str, configs: Sequence[Config]) -> dict[str, list[Row]] | None:
    """Rows per part of LoCoMo or LongMemEval dev; None (and a line) when its data is not beside the project."""
    bench = recall_quality.BENCHMARKS[name]
    if not bench.path.exists():
        print(f"\n{bench.title} skipped: {bench.path} is not there")
        return None
    haystacks = bench.load()
    rows: dict[str, list[Row]] = {}
    async with recall_quality.ingested(bench, haystacks) as (memory, key_of, _embedder, _took):
        for h in haystacks:
            for q in h.questions:
                if name == "locomo":
                    part, wanted = ("tuning (0-2)" if h.index in _locomo.TUNING else "check (3-4)"), set(q.evidence)
                else:
                    part, wanted = q.part, set(q.evidence_turns)
                if not wanted:  # a LongMemEval question that marks no evidence turn
                    continue
                thread, now = h.asked(q)
                froms = {"": thread} if thread is not None else {"": NEW_THREAD, LATEST: latest_session(h, now)}
                for label, where_from in froms.items():
                    where = {"resource_id": h.resource, "thread_id": where_from, "query": q.text, "now": now}
                    row = await ask(memory, configs, wanted, lambda hit: key_of[hit.message.id], any_of=False, **where)
                    rows.setdefault(part + label, []).append(row)
    return rows


def latest_session(haystack: Any, now: Any) -> str:
    """The thread of the haystack's newest session begun before ``now`` (``NEW_THREAD`` when none is)."""
    begun = [t for t in haystack.turns if t.created_at <= now]
    return haystack.thread(max(begun, key=lambda t: t.created_at).session) if begun else NEW_THREAD


async def project_set(name: str, configs: Sequence[Config]) -> dict[str, list[Row]]:
    """Rows per half of the set (bench/recall_quality.py's split: tuning, heldout)."""
    data = json.loads(recall_quality.SETS[name].read_text())
    rows: dict[str, list[Row]] = {"tuning": [], "heldout": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "eval.db") as memory:
            last = await recall_quality.load(memory, data)
            with _embedders.query_mode(memory.embedder):
                for q in data["questions"]:
                    thread = last[q["conversation"]]
                    where = {"resource_id": recall_quality.R, "thread_id": thread, "query": q["question"]}
                    row = await ask(
                        memory,
                        configs,
                        set(q["answer_ids"]),
                        lambda hit: hit.message.id,
                        any_of=True,
                        now=recall_quality.ASKED_AT[thread],
                        **where,
                    )
                    rows[recall_quality.split_of(q["id"])].append(row)
    return rows


def report(title: str, rows: list[Row], configs: Sequence[Config]) -> None:
    n = len(rows)
    print(f"\n{title}: {n} questions\n")
    print("| scope | min_similarity | relevant@5 | whole context (<= 20) | messages |")
    print("|---|---:|---:|---:|---:|")
    for config in configs:
        rel, whole, size = (sum(r[0][config][i] for r in rows) / n for i in range(3))
        mark = " (default)" if config == (GET_CONTEXT_SCOPE, GET_CONTEXT_MIN_SIMILARITY) else ""
        print(f"| {config[0]}{mark} | {config[1]:.2f} | {rel:.3f} | {whole:.3f} | {size:.1f} |")
    print(f"\nfor comparison, recall(query, top=5) with its default legs: {sum(r[1] for r in rows) / n:.3f}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("locomo", "longmemeval", "en", "pt", "all"), default="all")
    ap.add_argument("--scope", choices=(*SCOPES, "both"), default="both", help="where salient and relevant look")
    ap.add_argument("--floors", choices=("default", "all"), default="default", help="the default floor, or FLOORS")
    args = ap.parse_args()
    scopes = SCOPES if args.scope == "both" else (args.scope,)
    floors = FLOORS if args.floors == "all" else (GET_CONTEXT_MIN_SIMILARITY,)
    configs = [(scope, floor) for scope in scopes for floor in floors]
    titles = {
        "locomo": "LoCoMo dev {part}, turn-level evidence recall",
        "longmemeval": "LongMemEval_S dev {part}, turn-level evidence recall (has_answer turns)",
    }
    for name, title in titles.items():
        if args.set in (name, "all"):
            found = await public(name, configs)
            for part, rows in sorted((found or {}).items(), key=lambda kv: "tuning" not in kv[0]):
                report(title.format(part=part), rows, configs)
    for name in ("en", "pt"):
        if args.set in (name, "all"):
            for half, rows in (await project_set(name, configs)).items():
                report(f"bench/data {name} set, {half} half, share of questions answered", rows, configs)


if __name__ == "__main__":
    asyncio.run(main())
