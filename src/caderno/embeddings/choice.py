"""The embedder caderno uses when none is given: ``$CADERNO_EMBEDDER``.

One switch for every entry point (Python, CLI, server, MCP, worker):
``minilm`` (the default: English, fast) or ``multilingual-e5``
(``caderno.embeddings.e5``; install ``caderno[multilingual]``). After a
change, ``caderno reindex`` re-embeds what is stored: vectors of another
model are never compared.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.errors import UsageError

if TYPE_CHECKING:
    from .e5 import MultilingualE5Embedder
    from .minilm import MiniLMEmbedder

EMBEDDER_ENV = "CADERNO_EMBEDDER"


# Each model's module is imported by its own factory: choosing MiniLM loads
# nothing of e5 (its module imports numpy), and neither loads weights here.
def _minilm() -> MiniLMEmbedder:
    from .minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def _multilingual_e5() -> MultilingualE5Embedder:
    from .e5 import MultilingualE5Embedder

    return MultilingualE5Embedder()


#: Name given in ``$CADERNO_EMBEDDER`` -> the embedder it builds.
EMBEDDERS: dict[str, Callable[[], MiniLMEmbedder | MultilingualE5Embedder]] = {
    "minilm": _minilm,
    "multilingual-e5": _multilingual_e5,
}
_shared: dict[str, MiniLMEmbedder | MultilingualE5Embedder] = {}
_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder | MultilingualE5Embedder:
    """The embedder ``$CADERNO_EMBEDDER`` names (default ``minilm``), one per process (weights load once).

    Raises:
        UsageError: the variable names no embedder caderno knows.
    """
    choice = os.environ.get(EMBEDDER_ENV, "").strip() or "minilm"
    if choice not in EMBEDDERS:
        raise UsageError(
            f"${EMBEDDER_ENV}={choice!r} is not an embedder caderno knows; use one of: {', '.join(EMBEDDERS)}"
        )
    with _lock:
        if choice not in _shared:
            _shared[choice] = EMBEDDERS[choice]()
        return _shared[choice]
