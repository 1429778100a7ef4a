"""The embedders: the real local model, offline; the deterministic test one; failures."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from caderno.core.errors import EmbeddingUnavailable
from caderno.embeddings import HashingEmbedder, MiniLMEmbedder, default_embedder
from conftest import python_env


def test_minilm_quality_and_shape() -> None:
    e = default_embedder()
    v = e.embed(["saving for a trip to Amsterdam", "our Amsterdam travel fund", "the cat sat on the mat"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    close, far1, far2 = float(v[0] @ v[1]), float(v[0] @ v[2]), float(v[1] @ v[2])
    assert close > 0.5 and close - max(far1, far2) > 0.4, (close, far1, far2)


def test_padding_is_dynamic_and_truncation_is_256() -> None:
    e = default_embedder().load()
    assert e._tokenizer.padding is None  # the file's fixed 128-token padding is off
    short = e._tokenizer.encode_batch(["oi", "tudo bem?"])
    assert len(short[0].ids) < len(short[1].ids) < 16  # each text its own length; padding happens per chunk
    long = e._tokenizer.encode_batch(["palavra " * 1000])
    assert len(long[0].ids) == 256
    # Same vector alone or in a batch with a longer text: padding is masked out.
    alone = e.embed(["oi"])[0]
    batched = e.embed(["oi", "uma frase bem mais longa que a primeira, para forçar padding"])[0]
    assert float(alone @ batched) > 0.999


def _reference(texts: list[str]) -> np.ndarray:
    """The embeddings as computed before the speed work: one text at a time, no padding, ORT defaults."""
    import onnxruntime as ort

    from caderno.embeddings.minilm import _model_file

    e = default_embedder().load()
    session = ort.InferenceSession(str(_model_file()), providers=["CPUExecutionProvider"])
    rows = []
    for text in texts:
        ids = np.array([e._tokenizer.encode(text).ids], dtype=np.int64)
        hidden = session.run(
            None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        )[0]
        pooled = hidden[0].mean(axis=0)
        rows.append(pooled / np.linalg.norm(pooled))
    return np.array(rows, dtype=np.float32)


def test_fast_path_matches_the_reference_embeddings() -> None:
    # Lengths from one word to past the 256-token truncation, in an order the
    # embedder must sort, chunk, run in parallel and put back.
    words = [
        "we",
        "moved",
        "the",
        "Lisbon",
        "trip",
        "to",
        "May",
        "because",
        "the",
        "flights",
        "were",
        "cheaper",
        "then",
    ]
    texts = [" ".join(words[: 1 + (i * 7) % len(words)] * (1 + i % 9)) for i in range(70)] + ["palavra " * 400]
    fast = MiniLMEmbedder().embed(texts)
    sequential = MiniLMEmbedder(threads=1).embed(texts)
    ref = _reference(texts)
    assert float(np.min(np.sum(fast * ref, axis=1))) >= 0.999
    assert float(np.min(np.sum(sequential * ref, axis=1))) >= 0.999
    assert np.allclose(fast, sequential, atol=1e-5)


def test_embeds_with_the_network_off() -> None:
    code = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise OSError("network is off in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from caderno.embeddings import MiniLMEmbedder
        print(MiniLMEmbedder().embed(["sem rede"]).shape)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(1, 384)"


def test_missing_and_corrupt_model_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="cannot be read"):
        MiniLMEmbedder(tmp_path / "nope.onnx").load()
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model" * 100)
    with pytest.raises(EmbeddingUnavailable, match="corrupt or not the expected model"):
        MiniLMEmbedder(bad).embed(["x"])


def test_hashing_embedder_is_deterministic() -> None:
    e = HashingEmbedder(64)
    a, b, c = e.embed(["the Lisbon trip", "the Lisbon trip", "a red car"])
    assert np.array_equal(a, b) and float(a @ c) < float(a @ b)
    assert e.name == "hashing-64" and a.shape == (64,)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_parallel_chunks_still_run_after_fork() -> None:
    e = MiniLMEmbedder(threads=2)
    texts = [f"message number {i} " * (1 + i % 20) for i in range(40)]  # several chunks
    parent = e.embed(texts)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda: queue.put(e.embed(texts)))  # fork: the target is not pickled
    child.start()
    try:
        assert np.allclose(parent, queue.get(timeout=60), atol=1e-5)
    finally:
        child.join(10)
