"""A deterministic, dependency-light embedder for tests where meaning is beside the point.

Hashes lowercase word unigrams and bigrams into ``dim`` buckets (signed),
then L2-normalises: texts sharing words get similar vectors. It is not a
language model — the recall tests use the real one.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any


class HashingEmbedder:
    """Feature hashing over words; the same text always gives the same vector."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
                h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
