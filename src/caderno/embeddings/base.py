"""The embedding port."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``name`` is stored next to every vector: vectors of different names are
    never compared.
    """

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """A float32 array of shape ``(len(texts), dim)``, each row of norm 1."""
        ...
