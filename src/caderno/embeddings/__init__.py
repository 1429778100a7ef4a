"""Embedders: the port, the local models, the default's choice, and a deterministic test embedder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Embedder
from .choice import EMBEDDER_ENV, EMBEDDERS, default_embedder
from .hashing import HashingEmbedder
from .minilm import MODEL_ID, MiniLMEmbedder

if TYPE_CHECKING:
    from .e5 import MultilingualE5Embedder

__all__ = [
    "EMBEDDERS",
    "EMBEDDER_ENV",
    "MODEL_ID",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "MultilingualE5Embedder",
    "default_embedder",
]


def __getattr__(name: str) -> Any:
    # The opt-in model's module (and numpy with it) loads when it is asked for, not with the package.
    if name == "MultilingualE5Embedder":
        from .e5 import MultilingualE5Embedder

        return MultilingualE5Embedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
