"""Embedders: the port, the local models, the default's choice, and a deterministic test embedder."""

from .base import Embedder
from .choice import EMBEDDER_ENV, EMBEDDERS, default_embedder
from .e5 import MultilingualE5Embedder
from .hashing import HashingEmbedder
from .minilm import MODEL_ID, MiniLMEmbedder

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
