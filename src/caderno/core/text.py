"""Word tokens for lexical search: lowercase, accents folded, stopwords out, stemmed."""

from __future__ import annotations

import re
import threading
import unicodedata
from datetime import UTC, datetime

import Stemmer

# Function words of English and Portuguese that carry no topic.
_STOPWORDS = [
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "but",
    "by",
    "did",
    "do",
    "does",
    "for",
    "from",
    "had",
    "has",
    "have",
    "he",
    "her",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "me",
    "my",
    "no",
    "not",
    "of",
    "on",
    "or",
    "our",
    "she",
    "so",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "to",
    "up",
    "us",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "about",
    "all",
    "any",
    "can",
    "just",
    "also",
    "o",
    "os",
    "as",
    "um",
    "uma",
    "uns",
    "umas",
    "e",
    "ou",
    "de",
    "do",
    "da",
    "dos",
    "das",
    "em",
    "no",
    "na",
    "nos",
    "nas",
    "ao",
    "aos",
    "à",
    "às",
    "por",
    "para",
    "pra",
    "com",
    "sem",
    "que",
    "se",
    "eu",
    "tu",
    "ele",
    "ela",
    "eles",
    "elas",
    "nós",
    "vós",
    "voce",
    "você",
    "vocês",
    "meu",
    "minha",
    "meus",
    "minhas",
    "seu",
    "sua",
    "seus",
    "suas",
    "nosso",
    "nossa",
    "nossos",
    "nossas",
    "é",
    "foi",
    "ser",
    "era",
    "são",
    "está",
    "estão",
    "estava",
    "isso",
    "isto",
    "esse",
    "essa",
    "este",
    "esta",
    "aquele",
    "aquela",
    "lá",
    "aqui",
    "mas",
    "mais",
    "muito",
    "como",
    "quando",
    "onde",
    "qual",
    "quais",
    "quem",
    "porque",
    "já",
    "ainda",
    "também",
    "só",
    "me",
    "te",
    "lhe",
    "nos",
]


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# Latin letters with accents map straight to their base letter (one
# str.translate, no per-character Python loop); anything rarer goes through
# full Unicode decomposition.
_LATIN = {cp: _strip_accents(chr(cp)) for cp in range(0xC0, 0x250) if _strip_accents(chr(cp)) != chr(cp)}


def fold(text: str) -> str:
    """Lowercase and strip accents ("São" -> "sao")."""
    folded = text.lower().translate(_LATIN)
    return folded if folded.isascii() else _strip_accents(folded)


STOPWORDS = frozenset(fold(w) for w in _STOPWORDS)


def tokenize(text: str) -> list[str]:
    """Content words of ``text``: folded, at least two characters, no stopwords."""
    return [t for t in re.findall(r"\w+", fold(text)) if len(t) > 1 and t not in STOPWORDS]


#: The languages lexical search stems every message and query in (Snowball
#: stemmers, through PyStemmer). Every word is indexed under its stem in each
#: of them rather than under one detected language: a household mixes
#: languages inside one message ("a meta de Amsterdam", "budget do mês"), and
#: the short messages memory is made of ("R$ 300 no seguro") are too short to
#: detect. PostgreSQL applies the same rule with its own ``english`` and
#: ``portuguese`` configurations (the same Snowball algorithms).
STEM_LANGUAGES = ("english", "portuguese")

_local = threading.local()  # a Stemmer object is not safe to share between threads


def _stemmers() -> list[Stemmer.Stemmer]:
    stemmers: list[Stemmer.Stemmer] | None = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = [Stemmer.Stemmer(lang) for lang in STEM_LANGUAGES]
    return stemmers


def stems(text: str) -> list[str]:
    """The search terms of ``text``: each content word's stem in every ``STEM_LANGUAGES``.

    A word whose stems agree gives one term; one whose stems differ gives
    each ("viagens" -> "viagen", "viag"), so a term count stays close to the
    word count. Used for indexing and for queries alike.
    """
    words = tokenize(text)
    if not words:
        return []
    per_language = [s.stemWords(words) for s in _stemmers()]
    terms = []
    for i in range(len(words)):
        first = per_language[0][i]
        terms.append(first)
        terms.extend({w[i] for w in per_language[1:]} - {first})
    return terms


# --- index-time context ------------------------------------------------------------------------
#
# Each message is indexed for full text in three parts: its own words, the
# words of its neighbours in the same thread (``CONTEXT_BEFORE`` messages
# before it and ``CONTEXT_AFTER`` after it), and the day it was said as words
# (``date_words``). A question is often phrased with the words of the turn
# around its answer ("how much is the car insurance?" / "R$ 310 a month"),
# and dates with the words of a calendar ("in May 2023"). Every backend
# applies these numbers (SQLite's catch-up, which memory:// shares, and
# PostgreSQL's trigger functions); PostgreSQL's are written into migration
# 0013_index_time_context, so changing one here means a new migration there.
# Measured on LoCoMo's tuning part (bench/recall_proto.py, the lexical leg
# alone, turn recall@10): no context 0.609, today's query-time lending 0.632,
# -2/+2 at 0.5 0.754 (-2 only 0.746, -1/+1 0.722, +2 only 0.649).

#: Messages before a message, in its thread, whose words are its context.
CONTEXT_BEFORE = 2
#: Messages after a message, in its thread, whose words are its context.
CONTEXT_AFTER = 2
#: Weight of the context column against the message's own words (1.0):
#: 0.5 beat 0.25 (0.739) and 1.0 (0.716) on LoCoMo's tuning part.
CONTEXT_COLUMN_WEIGHT = 0.5
#: Weight of the date column: 1.0 took the lexical leg from 0.754 to 0.773
#: on LoCoMo's tuning part (0.5: 0.765, 2.0: 0.771); temporal questions of
#: the check part 0.701 -> 0.759.
DATE_COLUMN_WEIGHT = 1.0

MONTHS_EN = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
MONTHS_PT = (
    "janeiro", "fevereiro", "março", "abril", "maio", "junho",
    "julho", "agosto", "setembro", "outubro", "novembro", "dezembro",
)  # fmt: skip


def date_words(when: datetime) -> str:
    """The UTC day of ``when`` as words, in English and Portuguese: "8 May 2023 8 de maio de 2023".

    What the date column of the full-text index holds, so "May 2023",
    "maio" or "8 de maio" find what was said that day.
    """
    day = when.astimezone(UTC) if when.tzinfo is not None else when
    month = day.month - 1
    return f"{day.day} {MONTHS_EN[month]} {day.year} {day.day} de {MONTHS_PT[month]} de {day.year}"


#: Characters that render as nothing (or reorder what is shown) but that the
#: model still reads: a note could hide an instruction from the user who
#: reviews MEMORY.md. Every format character (category ``Cf``: soft hyphen,
#: LRM/RLM/ALM, bidi embeddings and isolates, zero-width space/joiners, word
#: joiner, invisible operators, BOM, Unicode tag characters, …) is refused,
#: plus these invisible characters of other categories.
_INVISIBLE_EXTRA = frozenset(
    "\u034f"  # COMBINING GRAPHEME JOINER (Mn)
    "\u115f\u1160\u3164\uffa0"  # Hangul fillers (Lo): blank letters
    "\u17b4\u17b5"  # Khmer inherent vowels (Mn): render as nothing
    "\u180e"  # MONGOLIAN VOWEL SEPARATOR (Cf since Unicode 6.3, Zs before)
    "\u2028\u2029"  # line / paragraph separators: invisible line breaks
    # BRAILLE PATTERN BLANK (So) looks like a space but is not whitespace,
    # so it slips past trimming and fakes empty notes. Only the blank cell
    # is refused; real braille text keeps its other patterns.
    "\u2800"
)
#: Variation selectors (Mn) carry hidden bytes ("emoji smuggling"): one per
#: byte after an innocent character. VS-15/VS-16 (U+FE0E/U+FE0F) alone after
#: a character are ordinary text/emoji presentation ("☕️") and stay allowed;
#: any other selector, or two in a row, is refused.
_PRESENTATION_SELECTORS = frozenset("\ufe0e\ufe0f")
#: Control characters a note may hold: tab and line breaks. Others (ESC
#: above all) can rewrite a terminal that shows the file.
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def _is_variation_selector(ch: str) -> bool:
    return "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef"


def first_invisible(content: str) -> tuple[int, str] | None:
    """``(index, kind)`` of the first hidden character of ``content``, or ``None``.

    The notebook refuses notes that hold one; ``caderno.core.validate.check_name``
    refuses ids that do (a bidi override or a zero-width space makes the id a
    person confirms look like another).
    """
    previous = ""
    for index, ch in enumerate(content):
        category = unicodedata.category(ch)
        if category == "Cf" or ch in _INVISIBLE_EXTRA:
            return index, "invisible or bidirectional control character"
        if category == "Cc" and ch not in _ALLOWED_CONTROLS:
            return index, "control character"
        if category == "Cs":
            return index, "lone surrogate"
        if _is_variation_selector(ch) and (
            ch not in _PRESENTATION_SELECTORS or not previous or _is_variation_selector(previous)
        ):
            return index, "variation selector (can smuggle hidden data)"
        previous = ch
    return None
