"""Importance: how salient a message is, in [0, 1], scored at append.

A role baseline (user and assistant 0.5, tool 0.3, system 0.1), moved by
what the text says: explicit memory cues ("remember", "importante",
"não esqueça") weigh most, then decisions, corrections and stated
preferences, then concrete numbers, money and dates; very short chit-chat
("ok", "obrigado") goes down. The rules are plain regular expressions in
English and Portuguese, so the score is cheap, deterministic and
explainable. An explicit ``Message.importance`` always wins.

Salient means importance >= ``SALIENT`` (0.8): a user message with a memory
cue, or one that both states a decision or preference and carries numbers.
"""

from __future__ import annotations

import re

from ...core.messages import Message
from ...core.text import fold

__all__ = ["BASELINES", "EMBEDDED_ROLES", "SALIENT", "embeddable", "score"]

#: Salient means importance at or above this. The partial index ``events_salient``
#: of both SQL schemas is built from this value (a test checks they agree).
SALIENT = 0.8
#: Roles whose messages get a vector: what people said and the answers they got.
#: Tool results and system text are noise for "what did we talk about".
EMBEDDED_ROLES = frozenset({"user", "assistant"})


def embeddable(role: str, content: str) -> bool:
    """Whether a message goes to the embedding queue (the one place this is decided)."""
    return role in EMBEDDED_ROLES and content != ""


BASELINES = {"user": 0.5, "assistant": 0.5, "tool": 0.3, "system": 0.1}


def _cues(*phrases: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """Single words go in a set (one lookup per word); phrases are matched on the padded text."""
    folded = [fold(p) for p in phrases]
    return frozenset(p for p in folded if " " not in p), tuple(f" {p} " for p in folded if " " in p)


# Cues are matched on folded text (lowercase, accents stripped, punctuation
# turned into spaces): one pass over the words, no regex backtracking, so
# scoring costs microseconds on the append path.
MEMORY_CUES = _cues(
    "remember",
    "don't forget",
    "dont forget",
    "do not forget",
    "never forget",
    "important",
    "keep in mind",
    "note that",
    "lembra",
    "lembre",
    "lembrar",
    "lembrem",
    "nao esqueca",
    "nao esquecam",
    "importante",
    "anota",
    "anote",
    "anotar",
    "guarde isso",
    "grave isso",
)
DECISIONS = _cues(
    "decided",
    "we decided",
    "let's go with",
    "lets go with",
    "we will",
    "we'll",
    "agreed",
    "the plan is",
    "from now on",
    "decidimos",
    "decidi",
    "decidiu",
    "vamos",
    "combinado",
    "combinada",
    "fechado",
    "fechada",
    "o plano e",
    "a partir de agora",
)
CORRECTIONS = _cues(
    "actually",
    "correction",
    "i meant",
    "not anymore",
    "i prefer",
    "we prefer",
    "i don't like",
    "i do not like",
    "always",
    "never",
    "na verdade",
    "corrigindo",
    "prefiro",
    "preferimos",
    "prefere",
    "nao gosto",
    "nao gostamos",
    "sempre",
    "nunca",
    "errado",
    "errada",
    "mudou",
    "mudamos",
)
CHITCHAT = frozenset(
    fold(w)
    for w in [
        "ok",
        "okay",
        "thanks",
        "thank",
        "you",
        "hi",
        "hello",
        "bye",
        "obrigado",
        "obrigada",
        "valeu",
        "oi",
        "ola",
        "olá",
        "tchau",
        "beleza",
        "legal",
    ]
)
CONCRETE = re.compile(
    r"(R\$|US\$|EUR|USD|€|\$)\s?\d|\d{4}-\d{2}-\d{2}|\b\d{1,3}([.,]\d{3})+\b|\b\d+([.,]\d+)?\s?%", re.I
)
_NON_WORD = re.compile(r"[^\w']+")


def _has(cues: tuple[frozenset[str], tuple[str, ...]], words: set[str], padded: str) -> bool:
    single, phrases = cues
    return not single.isdisjoint(words) or any(map(padded.__contains__, phrases))


def score(message: Message) -> float:
    """The importance of ``message`` (its own, if it carries one)."""
    if message.importance is not None:
        return float(message.importance)
    value = BASELINES[message.role]
    text = message.content or ""
    if message.role in ("user", "assistant") and text:
        weight = 1.0 if message.role == "user" else 0.5  # the user's own words count most
        padded = " " + _NON_WORD.sub(" ", fold(text)).strip() + " "
        words = set(padded.split())
        if _has(MEMORY_CUES, words, padded):
            value += 0.35 * weight
        if _has(DECISIONS, words, padded):
            value += 0.2 * weight
        if _has(CORRECTIONS, words, padded):
            value += 0.2 * weight
        if CONCRETE.search(text):
            value += 0.1 * weight
        stripped = text.strip()
        if len(stripped) < 20 and (padded.strip() in CHITCHAT or len(stripped) < 4):
            value -= 0.25
    return round(min(1.0, max(0.0, value)), 3)
