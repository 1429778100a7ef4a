"""Embedders: the port, the local models, the default's choice, a deterministic test embedder, and the sparse encoder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Embedder
from .choice import EMBEDDER_ENV, EMBEDDERS, default_embedder
from .hashing import HashingEmbedder
from .minilm import MODEL_ID, MiniLMEmbedder

if TYPE_CHECKING:
    from .e5 import MultilingualE5Embedder
    from .splade import SpladeEncoder, default_sparse_encoder

__all__ = [
    "EMBEDDERS",
    "EMBEDDER_ENV",
    "MODEL_ID",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "MultilingualE5Embedder",
    "SpladeEncoder",
    "default_embedder",
    "default_sparse_encoder",
]


def __getattr__(name: str) -> Any:
    # The numpy models' modules (and numpy with them) load when they are asked for, not with the package.
    if name == "MultilingualE5Embedder":
        from .e5 import MultilingualE5Embedder

        return MultilingualE5Embedder
    if name in ("SpladeEncoder", "default_sparse_encoder"):
        from . import splade

        return getattr(splade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
