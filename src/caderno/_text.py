"""Word tokens for lexical search: lowercase, accents folded, stopwords out, stemmed."""

from __future__ import annotations

import re
import threading
import unicodedata

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
