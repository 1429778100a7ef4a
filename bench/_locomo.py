"""LoCoMo for the recall benchmarks: loading, the protocol, the baselines, the score.

LoCoMo (Maharana et al., ACL 2024; snap-research/LoCoMo, CC BY-NC 4.0) is
read from ``../shared/data/locomo/locomo-dev.json`` beside the project when
that folder is there, never copied into it. Its README states the protocol
this module implements:

* one resource per conversation, one thread per session, each message dated
  by its session's date (``created_at``; a minute apart within a session),
  the speaker's name in the text ("Caroline: …") and in the message's
  ``name`` (its author: what an author prior reads; the nine speakers of the
  development half pass caderno's check of ``name`` — non-empty, at most 256
  characters, no NUL);
* questions of categories 1–4 (multi-hop, temporal, open-domain,
  single-hop) whose evidence names turns of the conversation, asked with
  ``now`` = the day after the last session;
* turn-level evidence recall@10: the share of a question's evidence turns
  among the first 10 returned, averaged over questions.

Conversations 0–2 are the tuning part (every choice is made there), 3–4
the check part (reported, never used to choose).

Baselines computed here, independently of caderno: Okapi BM25 over the turns
(k1 1.2, b 0.75, lowercase words, English stop words) and dense cosine with
caderno's default embedder. ``CachedEmbedder`` keeps the vectors of texts
already embedded in a file outside the project (``CACHE``), so a second run
costs only what changed.

``ingest``, ``caderno_rankings``, ``bm25_rankings`` and ``dense_rankings``
read only what ``Haystack`` names, so bench/_longmemeval.py's pooled groups
go through the same code: a haystack is one resource whose turns say their
thread, author and date, and whose questions say from where and when they
are asked.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: Where the development half of LoCoMo lives: beside the project, never in it (CC BY-NC).
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
#: Vectors of texts already embedded, per model (outside the project: they are derived from LoCoMo).
CACHE = Path.home() / ".cache" / "caderno-bench"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
#: Conversations (by position in the file) on which every choice is made; the rest are the check part.
TUNING = (0, 1, 2)
CHECK = (3, 4)
K = 10
MONTHS_EN = "January February March April May June July August September October November December".split()  # noqa: SIM905
MONTHS_PT = "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split()  # noqa: SIM905

# NLTK's English stop words: the BM25 baseline's list, independent of caderno's.
ENGLISH_STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him
    his himself she she's her hers herself it it's its itself they them their theirs themselves what which who
    whom this that that'll these those am is are was were be been being have has had having do does did doing a
    an the and but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here there when
    where why how all any both each few more most other some such no nor not only own same so than too very s t
    can will just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't
    doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't
    shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation."""

    conv: int
    """The conversation's position in the file."""
    session: int
    """Its session number (one thread each)."""
    dia_id: str
    """LoCoMo's id of the turn (``D3:7``): what evidence names."""
    speaker: str
    role: str
    """``user`` for the conversation's first speaker, ``assistant`` for the second."""
    text: str
    """What was said, without the speaker."""
    created_at: datetime
    """The session's date, plus a minute per turn before it in the session."""

    @property
    def content(self) -> str:
        """The message as stored: the speaker's name, then the text."""
        return f"{self.speaker}: {self.text}"

    @property
    def key(self) -> str:
        """What the score compares: the dia_id."""
        return self.dia_id

    @property
    def name(self) -> str:
        """The message's author (``Message.name``)."""
        return self.speaker


@dataclass(frozen=True)
class Question:
    conv: int
    text: str
    category: int
    evidence: frozenset[str]
    """dia_ids of the evidence turns that exist in the conversation."""


@dataclass(frozen=True)
class Conversation:
    index: int
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    now: datetime
    """The day after the last session: when every question is asked."""

    @property
    def resource(self) -> str:
        return f"locomo-{self.sample_id}"

    def thread(self, session: int) -> str:
        return f"session-{session}"

    @property
    def last_thread(self) -> str:
        return self.thread(self.turns[-1].session)

    def message_id(self, turn: Turn) -> str:
        return f"{self.sample_id}-{turn.dia_id.replace(':', '-')}"

    def asked(self, question: Question) -> tuple[str | None, datetime]:
        """Where and when a question is asked: from the last session, the day after it."""
        return self.last_thread, self.now


class HaystackTurn(Protocol):
    """What the shared ingest and rankings read of a turn.

    Declared as attributes for brevity; frozen dataclass fields and
    properties provide them (read-only: this is a reading shape, bench/ is
    not type-checked as a whole).
    """

    session: Any
    """What ``Haystack.thread`` makes its thread from."""
    role: str
    content: str
    name: str | None
    """Its author (``Message.name``), or None."""
    created_at: datetime
    key: Hashable
    """What the score compares (LoCoMo's dia_id; LongMemEval's (session, turn index))."""


class Haystack(Protocol):
    """One resource of a benchmark: its turns (in the order stored) and its questions (``.text`` each)."""

    index: int
    """Its key in every ranking's result."""
    resource: str
    turns: Sequence[HaystackTurn]
    questions: Sequence[Any]

    def thread(self, session: Any) -> str: ...
    def message_id(self, turn: Any) -> str: ...
    def asked(self, question: Any) -> tuple[str | None, datetime]:
        """(the current thread or None, ``now``) of a question."""
        ...


def session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def date_words(day: datetime) -> str:
    """A date as words a question can use, in English and Portuguese: "8 May 2023 8 de maio de 2023"."""
    return f"{day.day} {MONTHS_EN[day.month - 1]} {day.year} {day.day} de {MONTHS_PT[day.month - 1]} de {day.year}"


def load(path: Path = LOCOMO) -> list[Conversation]:
    """Every conversation of the file with its turns and its questions of categories 1–4 with evidence."""
    out = []
    for index, sample in enumerate(json.loads(path.read_text())):
        c = sample["conversation"]
        roles = {c["speaker_a"]: "user", c["speaker_b"]: "assistant"}
        sessions = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k) and c[k])
        turns = []
        for s in sessions:
            base = session_date(c[f"session_{s}_date_time"])
            for i, t in enumerate(c[f"session_{s}"]):
                turns.append(
                    Turn(
                        index,
                        s,
                        t["dia_id"],
                        t["speaker"],
                        roles.get(t["speaker"], "user"),
                        t["text"],
                        base + timedelta(minutes=i),
                    )
                )
        ids = {t.dia_id for t in turns}
        questions = []
        for q in sample["qa"]:
            if q.get("category") not in CATEGORIES:
                continue
            # Evidence ids as written; the few malformed ones ("D8:6; D9:17", "D") name no turn (759 questions remain).
            evidence = frozenset(e for e in q.get("evidence", []) if e in ids)
            if evidence:
                questions.append(Question(index, q["question"], q["category"], evidence))
        last = max(t.created_at for t in turns)
        now = datetime(last.year, last.month, last.day, 12, tzinfo=UTC) + timedelta(days=1)
        out.append(Conversation(index, sample["sample_id"], turns, questions, now))
    return out


def turn_recall(returned: Sequence[str], evidence: Iterable[str], k: int = K) -> float:
    """Share of the evidence turns among the first ``k`` returned."""
    evidence = set(evidence)
    return len(evidence & set(returned[:k])) / len(evidence)


def score(
    results: dict[int, list[list[str]]],
    convs: Sequence[Conversation] | Mapping[int, Conversation],
    which: Iterable[int],
) -> dict[str, float]:
    """Mean turn recall@10 over the questions of conversations ``which``: overall (``all``) and per category.

    ``convs[c]``: conversation ``c`` (a list of them all, or a mapping by index).

    ``results[conv][i]``: the dia_ids returned for question ``i`` of that conversation, best first.
    """
    per: dict[str, list[float]] = {"all": []}
    for c in which:
        for q, got in zip(convs[c].questions, results[c], strict=True):
            r = turn_recall(got, q.evidence)
            per["all"].append(r)
            per.setdefault(CATEGORIES[q.category], []).append(r)
    return {name: sum(v) / len(v) for name, v in per.items()} | {"n": len(per["all"])}


# --- baselines -------------------------------------------------------------------------------------


def bm25_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in ENGLISH_STOP_WORDS]


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over a list of texts."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(bm25_words(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for w in set(bm25_words(query)):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, d in enumerate(self.docs):
                tf = d.get(w)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                    out[i] += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def top(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` best scores, best first (ties: earlier first); zero scores left out."""
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(i) for i in order if scores[i] > 0]


def through_cache(
    cache: dict[str, Any], texts: list[str], compute: Callable[[list[str]], Any], keep: Callable[[Any], Any] = bytes
) -> tuple[list[Any], bool]:
    """Each text's value from ``cache`` (keyed by the text's sha1), the missing ones computed in one call
    and stored as ``keep(value)``; and whether any was."""
    keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
    missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in cache))
    for t, value in zip(missing, compute(missing) if missing else [], strict=True):
        cache[hashlib.sha1(t.encode()).hexdigest()] = keep(value)
    return [cache[k] for k in keys], bool(missing)


class CachedEmbedder:
    """An embedder whose vectors are kept on disk by text (sha1), so reruns skip texts embedded before.

    It keeps the wrapped model's ``name`` and ``dim``: caderno stores the
    same vectors it would have computed.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.path = CACHE / (re.sub(r"[^\w.-]", "_", inner.name) + ".npz")
        self.cache: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as z:
                self.cache = dict(zip(z["keys"].tolist(), z["vectors"], strict=True))
        self.dirty = False

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors, added = through_cache(self.cache, texts, self.inner.embed, lambda v: np.asarray(v, dtype=np.float32))
        self.dirty |= added
        return np.stack(vectors).astype(np.float32)

    def save(self) -> None:
        if self.dirty:
            CACHE.mkdir(parents=True, exist_ok=True)
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vectors=np.stack([self.cache[k] for k in keys]))
            self.dirty = False


class CachedSparse:
    """A sparse encoder whose packed term weights are kept on disk by text (sha1), as ``CachedEmbedder``'s vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = CACHE / (re.sub(r"[^\w.-]", "_", inner.name) + ".pickle")
        self.cache: dict[str, bytes] = {}
        if self.path.exists():
            self.cache = pickle.loads(self.path.read_bytes())
        self.dirty = False

    def load(self) -> None:
        self.inner.load()

    def encode(self, texts: list[str]) -> list[bytes]:
        blobs, added = through_cache(self.cache, texts, self.inner.encode)
        self.dirty |= added
        return blobs

    def save(self) -> None:
        if self.dirty:
            CACHE.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(pickle.dumps(self.cache))
            self.dirty = False


def sparse_rankings(sparse: Any, convs: Sequence[Haystack]) -> dict[int, list[list[Any]]]:
    """Per conversation, per question: turn keys by the sparse dot product over every turn (a first-stage leg)."""
    from caderno.embeddings.splade import dot

    out = {}
    for c in convs:
        docs = sparse.encode([t.content for t in c.turns])
        out[c.index] = [
            [c.turns[i].key for i in top(dot(query, docs), K)] for query in sparse.encode([q.text for q in c.questions])
        ]
    return out


def dense_rankings(embedder: Any, convs: Sequence[Haystack], doc_text: Any = None) -> dict[int, list[list[Any]]]:
    """Per conversation, per question: turn keys by cosine of question and ``doc_text(turn)`` (default: content)."""
    doc_text = doc_text or (lambda t: t.content)
    out = {}
    for c in convs:
        docs = embedder.embed([doc_text(t) for t in c.turns])
        qs = embedder.embed([q.text for q in c.questions])
        sims = qs @ docs.T
        out[c.index] = [[c.turns[i].key for i in np.argsort(-row, kind="stable")[:K]] for row in sims]
    return out


def bm25_rankings(convs: Sequence[Haystack]) -> dict[int, list[list[Any]]]:
    out = {}
    for c in convs:
        index = BM25([t.content for t in c.turns])
        out[c.index] = [[c.turns[i].key for i in top(index.scores(q.text), K)] for q in c.questions]
    return out


# --- caderno ---------------------------------------------------------------------------------------


async def ingest(memory: Any, convs: Sequence[Haystack]) -> dict[str, Any]:
    """Store every conversation by the protocol; returns message id -> turn key (dia_id). Waits for the embeddings.

    Each LoCoMo turn is stored as "Speaker: text" with ``name=<speaker>``:
    the content is what every leg has always searched (so no figure moves),
    the name is where caderno reads a message's author. Sessions are
    appended in the order of their first turn.
    """
    from caderno import Message

    dia_of = {}
    for c in convs:
        by_session: dict[Any, list[HaystackTurn]] = {}
        for t in c.turns:
            by_session.setdefault(t.session, []).append(t)
        for session, turns in by_session.items():
            msgs = []
            for t in turns:
                mid = c.message_id(t)
                dia_of[mid] = t.key
                msgs.append(Message(role=t.role, content=t.content, name=t.name, id=mid, created_at=t.created_at))
            await memory.append_messages(resource_id=c.resource, thread_id=c.thread(session), messages=msgs)
    await memory.flush()
    return dia_of


async def caderno_rankings(
    memory: Any, convs: Sequence[Haystack], dia_of: dict[str, Any], **legs: Any
) -> dict[int, list[list[Any]]]:
    """Per conversation, per question: the turn keys ``memory.recall`` returns (best fused score first).

    ``legs``: recall's keyword arguments (recent, salient, relevant, lexical, top, min_similarity).
    """
    out = {}
    for c in convs:
        got = []
        for q in c.questions:
            thread, now = c.asked(q)
            hits = await memory.recall(resource_id=c.resource, query=q.text, thread_id=thread, now=now, **legs)
            got.append([dia_of[h.message.id] for h in sorted(hits, key=lambda h: -h.score)])
        out[c.index] = got
    return out
