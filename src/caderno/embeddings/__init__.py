"""Embedders: the port, the default local model, and a deterministic test embedder."""

from .base import Embedder
from .hashing import HashingEmbedder
from .minilm import MODEL_ID, MiniLMEmbedder, default_embedder

__all__ = ["MODEL_ID", "Embedder", "HashingEmbedder", "MiniLMEmbedder", "default_embedder"]
