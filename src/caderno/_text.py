"""Word tokens for lexical search: lowercase, accents folded, stopwords out."""

from __future__ import annotations

import re
import unicodedata

# Function words of English and Portuguese that carry no topic.
_STOPWORDS = (
    """a an and are as at be but by did do does for from had has have he her his how i if in into is it its me my
    no not of on or our she so than that the their them then there these they this to up us was we were what when
    where which who why will with would you your yours about all any can just also
    o os as um uma uns umas e ou de do da dos das em no na nos nas ao aos à às por para pra com sem que se eu tu
    ele ela eles elas nós vós voce você vocês meu minha meus minhas seu sua seus suas nosso nossa nossos nossas
    é foi ser era são está estão estava isso isto esse essa este esta aquele aquela lá aqui mas mais muito
    como quando onde qual quais quem porque já ainda também só me te lhe nos""".split()
)


def fold(text: str) -> str:
    """Lowercase and strip accents ("São" -> "sao")."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


STOPWORDS = frozenset(fold(w) for w in _STOPWORDS)


def tokenize(text: str) -> list[str]:
    """Content words of ``text``: folded, at least two characters, no stopwords."""
    return [t for t in re.findall(r"\w+", fold(text)) if len(t) > 1 and t not in STOPWORDS]
