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

from .messages import Message

__all__ = ["BASELINES", "SALIENT", "score"]

SALIENT = 0.8
BASELINES = {"user": 0.5, "assistant": 0.5, "tool": 0.3, "system": 0.1}


def _rx(*words: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)(" + "|".join(words) + r")(?!\w)", re.IGNORECASE)


MEMORY_CUES = _rx(
    r"remember",
    r"don'?t forget",
    r"do not forget",
    r"never forget",
    r"important",
    r"keep in mind",
    r"note that",
    r"lembr[ae]\w*",
    r"n[ãa]o esque[çc]a\w*",
    r"importante",
    r"anot[ae]\w*",
    r"guarde isso",
    r"grave isso",
)
DECISIONS = _rx(
    r"decided",
    r"we decided",
    r"let'?s go with",
    r"we will",
    r"we'll",
    r"agreed",
    r"the plan is",
    r"from now on",
    r"decidi\w*",
    r"vamos",
    r"combinad[oa]",
    r"fechad[oa]",
    r"o plano [ée]",
    r"a partir de agora",
)
CORRECTIONS = _rx(
    r"actually",
    r"correction",
    r"i meant",
    r"not anymore",
    r"i prefer",
    r"we prefer",
    r"i (don'?t|do not) like",
    r"always",
    r"never",
    r"na verdade",
    r"corrigindo",
    r"prefer[eio]\w*",
    r"n[ãa]o gost\w+",
    r"sempre",
    r"nunca",
    r"errad[oa]",
    r"mudou",
    r"mudamos",
)
CONCRETE = re.compile(
    r"(R\$|US\$|EUR|USD|€|\$)\s?\d|\d{4}-\d{2}-\d{2}|\b\d{1,3}([.,]\d{3})+\b|\b\d+([.,]\d+)?\s?%", re.I
)
CHITCHAT = _rx(
    r"ok(ay)?",
    r"thanks?",
    r"thank you",
    r"hi",
    r"hello",
    r"bye",
    r"obrigad[oa]",
    r"valeu",
    r"oi",
    r"ol[áa]",
    r"tchau",
    r"beleza",
    r"legal",
)


def score(message: Message) -> float:
    """The importance of ``message`` (its own, if it carries one)."""
    if message.importance is not None:
        return float(message.importance)
    value = BASELINES[message.role]
    text = message.content or ""
    if message.role in ("user", "assistant") and text:
        weight = 1.0 if message.role == "user" else 0.5  # the user's own words count most
        if MEMORY_CUES.search(text):
            value += 0.35 * weight
        if DECISIONS.search(text):
            value += 0.2 * weight
        if CORRECTIONS.search(text):
            value += 0.2 * weight
        if CONCRETE.search(text):
            value += 0.1 * weight
        stripped = text.strip()
        if len(stripped) < 20 and (CHITCHAT.fullmatch(stripped.rstrip("!.?, ")) or len(stripped) < 4):
            value -= 0.25
    return round(min(1.0, max(0.0, value)), 3)
