"""LongMemEval_S's development part for the recall benchmarks: loading, the pooled protocol, the score.

LongMemEval (Wu et al., ICLR 2025; xiaowu0162/LongMemEval, MIT) is read from
``../shared/data/longmemeval/longmemeval-s-dev.json.gz`` beside the project
when that folder is there, never copied into it. It is the other shape of
conversation caderno must hold: a user talking to an assistant whose answers
are long, about many topics, over months, then asking about their own life.
LoCoMo (bench/_locomo.py) is two people chatting; a default must hold on both.

The protocol of the data's README, pooled so that questions compete:

* the questions, sorted by ``question_date`` (then id), are cut into
  ``round(n / GROUP_SIZE)`` consecutive groups of about ``GROUP_SIZE``;
* each group is ONE resource holding, for each of its questions, its
  evidence sessions (``answer_session_ids``) plus ONE of its distractor
  sessions: the one whose SHA-256 of ``"<question_id>:<session_id>"`` is
  smallest (``distractor``; deterministic, independent of the file's
  order). A session held by two questions of a group is stored once, dated
  by the first question (in the group's order) that holds it as evidence,
  else by the first that holds it at all (23 shared sessions carry
  different dates in different haystacks);
* one thread per session; each message dated by its session's
  ``haystack_dates`` entry, a second apart; sessions appended in date order
  (then session id);
* every question asked through ``recall`` with no current thread (it comes
  in a new conversation) and ``now`` = its ``question_date``, at most 10
  messages back;
* turn-level evidence recall@10: the share of the question's ``has_answer``
  turns among the 10; session-level: the share of its ``answer_session_ids``
  with at least one message among the 10; averaged over questions, overall
  and per ``question_type``.

The groups are built from all questions; the split only decides where a
question is scored. ``PARTS``: within each ``question_type``, questions
ordered by the SHA-256 of their id alternate tuning, check, tuning, …
(``split_of``), so both parts hold every type in about equal numbers. Every
choice is made on the tuning part; the check part is reported, never used
to choose.

Message ids are ``lme<group>-<session id>-<turn index>`` and map back to
``(session id, turn index)``, the turn's ``key``: what ``has_answer`` marks.
The shared ingest and the rankings (caderno's, BM25's, dense cosine's) are
bench/_locomo.py's, which read only its ``Haystack`` shape.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

#: Where LongMemEval_S's development part lives: beside the project, never in it.
LONGMEMEVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval" / "longmemeval-s-dev.json.gz"
#: Questions per pooled resource, the data README's "about 16": with ~2.8 sessions a
#: question, a question searches ~45 sessions / ~500 turns, the others' evidence among them.
GROUP_SIZE = 16
#: The parts a question can be scored in (``split_of``), and the union of both.
PARTS = ("tuning", "check", "all")
K = 10
#: Where and how the dataset writes a date: "2023/05/20 (Sat) 02:21".
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"


def parse_date(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` -> an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=UTC)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class Turn:
    """One turn of a stored session."""

    group: int
    session: str
    """LongMemEval's session id (one thread each)."""
    index: int
    """Its position in the session: with the session, what ``has_answer`` is scored by."""
    role: str
    """The dataset's role, ``user`` or ``assistant``."""
    content: str
    created_at: datetime
    """The session's date plus a second per turn before it in the session."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.session, self.index)

    @property
    def name(self) -> None:
        """No author name: the role says who spoke."""
        return None


@dataclass(frozen=True)
class Question:
    question_id: str
    question_type: str
    text: str
    now: datetime
    """Its ``question_date``: when it is asked."""
    part: str
    """``tuning`` or ``check`` (``split_of``)."""
    evidence_turns: frozenset[tuple[str, int]]
    """(session id, turn index) of its ``has_answer`` turns."""
    evidence_sessions: frozenset[str]
    """Its ``answer_session_ids``."""
    distractor: str
    """The one distractor session of its haystack the group holds for it."""


@dataclass(frozen=True)
class Group:
    """One pooled resource: the sessions of about ``GROUP_SIZE`` questions asked close in time."""

    index: int
    turns: list[Turn]
    questions: list[Question]

    @property
    def resource(self) -> str:
        return f"longmemeval-{self.index}"

    def thread(self, session: str) -> str:
        return f"session-{session}"

    def message_id(self, turn: Turn) -> str:
        return f"lme{self.index}-{turn.session}-{turn.index}"

    def asked(self, question: Question) -> tuple[str | None, datetime]:
        """No current thread (the question opens a new conversation); ``now`` is its date."""
        return None, question.now

    @property
    def sessions(self) -> int:
        return len({t.session for t in self.turns})


def split_of(records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """question_id -> ``tuning`` or ``check``: per question_type, by SHA-256 of the id, alternating."""
    out = {}
    types = sorted({r["question_type"] for r in records})
    for kind in types:
        ids = sorted((r["question_id"] for r in records if r["question_type"] == kind), key=_digest)
        for i, qid in enumerate(ids):
            out[qid] = "tuning" if i % 2 == 0 else "check"
    return out


def distractor(record: dict[str, Any]) -> str:
    """The question's distractor session kept in its group: smallest SHA-256 of "<question_id>:<session_id>"."""
    evidence = set(record["answer_session_ids"])
    others = {s for s in record["haystack_session_ids"] if s not in evidence}
    return min(others, key=lambda s: _digest(f"{record['question_id']}:{s}"))


def load(path: Path = LONGMEMEVAL, group_size: int = GROUP_SIZE) -> list[Group]:
    """The pooled groups of the protocol (see the module's docstring), every question in one."""
    with gzip.open(path, "rt") as f:
        records: list[dict[str, Any]] = json.load(f)
    records.sort(key=lambda r: (parse_date(r["question_date"]), r["question_id"]))
    part = split_of(records)
    n_groups = max(1, round(len(records) / group_size))
    size, extra = divmod(len(records), n_groups)
    groups, start = [], 0
    for g in range(n_groups):
        chunk = records[start : start + size + (g < extra)]
        start += size + (g < extra)
        groups.append(_group(g, chunk, part))
    return groups


def _group(index: int, records: list[dict[str, Any]], part: dict[str, str]) -> Group:
    # session id -> (its date, its turns); the first claim as evidence wins, then the first claim at all.
    sessions: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for evidence_first in (True, False):
        for r in records:
            wanted = set(r["answer_session_ids"]) if evidence_first else {distractor(r)}
            for sid, date, turns in zip(
                r["haystack_session_ids"], r["haystack_dates"], r["haystack_sessions"], strict=True
            ):
                if sid in wanted and sid not in sessions:
                    sessions[sid] = (date, turns)
    turns = []
    for sid, (date, session) in sorted(sessions.items(), key=lambda kv: (parse_date(kv[1][0]), kv[0])):
        base = parse_date(date)
        for i, t in enumerate(session):
            turns.append(Turn(index, sid, i, t["role"], t["content"], base + timedelta(seconds=i)))
    questions = []
    for r in records:
        evidence = set(r["answer_session_ids"])
        marked = {
            (sid, i)
            for sid, session in zip(r["haystack_session_ids"], r["haystack_sessions"], strict=True)
            if sid in evidence
            for i, t in enumerate(session)
            if t.get("has_answer")
        }
        questions.append(
            Question(
                r["question_id"],
                r["question_type"],
                r["question"],
                parse_date(r["question_date"]),
                part[r["question_id"]],
                frozenset(marked),
                frozenset(evidence),
                distractor(r),
            )
        )
    return Group(index, turns, questions)


def question_types(groups: Iterable[Group]) -> list[str]:
    return sorted({q.question_type for g in groups for q in g.questions})


def turn_recall(returned: Sequence[tuple[str, int]], q: Question, k: int = K) -> float | None:
    """Share of the question's ``has_answer`` turns among the first ``k``; None when it marks none."""
    if not q.evidence_turns:
        return None
    return len(q.evidence_turns & set(returned[:k])) / len(q.evidence_turns)


def session_recall(returned: Sequence[tuple[str, int]], q: Question, k: int = K) -> float:
    """Share of the question's evidence sessions with at least one message among the first ``k``."""
    return len(q.evidence_sessions & {session for session, _ in returned[:k]}) / len(q.evidence_sessions)


def score(results: dict[int, list[list[Any]]], groups: Sequence[Group], part: str) -> dict[str, dict[str, float]]:
    """Mean turn- and session-level recall@10 of the questions of ``part`` (``tuning``, ``check``, ``all``).

    ``results[group][i]``: the turn keys returned for question ``i`` of that
    group, best first. Returns ``{"turn": {...}, "session": {...}}``, each with
    ``all``, one figure per question type, and ``n`` (questions scored).
    """
    per: dict[str, dict[str, list[float]]] = {"turn": {"all": []}, "session": {"all": []}}
    for g in groups:
        for q, got in zip(g.questions, results[g.index], strict=True):
            if part != "all" and q.part != part:
                continue
            figures = {"turn": turn_recall(got, q), "session": session_recall(got, q)}
            for level, r in figures.items():
                if r is not None:
                    per[level]["all"].append(r)
                    per[level].setdefault(q.question_type, []).append(r)
    return {
        level: {name: sum(v) / len(v) for name, v in buckets.items() if v} | {"n": len(buckets["all"])}
        for level, buckets in per.items()
    }


def only(groups: Sequence[Group], part: str) -> list[Group]:
    """The same groups (every session stored) asking only the questions of ``part``."""
    return [Group(g.index, g.turns, [q for q in g.questions if part in ("all", q.part)]) for g in groups]
