"""Vector search inside the database (``VECTOR_SEARCH``): optional, and not part of ``ALL``.

Only PostgreSQL with pgvector handles it (its plan is in
``_postgres_plans``); without it the memory layer searches its own vector
cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._op import Op, operations_in

__all__ = ["SearchVectors"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchVectors(Op[list[tuple[int, float]]]):
    """``(seq, similarity)`` of the best ``k`` vectors of ``model`` at or above
    ``min_similarity``, best first: the dot product, as the in-process search
    computes it (embedders give unit vectors, so it is the cosine).

    Optional (``VECTOR_SEARCH``): only a backend that searches in the database
    handles it; the memory layer otherwise searches its own vector cache.
    """

    one_statement: ClassVar[bool] = True
    resource_id: str
    model: str
    query: tuple[float, ...]
    k: int
    min_similarity: float
    thread_id: str | None = None


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
