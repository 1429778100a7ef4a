"""The embedders: the real local model, offline; the deterministic test one; failures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from caderno.embeddings import HashingEmbedder, MiniLMEmbedder, default_embedder
from caderno.errors import EmbeddingUnavailable
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
    assert len(short[0].ids) < len(short[1].ids) < 16  # each text its own length; padding happens per sub-batch
    long = e._tokenizer.encode_batch(["palavra " * 1000])
    assert len(long[0].ids) == 256
    # Same vector alone or in a batch with a longer text: padding is masked out.
    alone = e.embed(["oi"])[0]
    batched = e.embed(["oi", "uma frase bem mais longa que a primeira, para forçar padding"])[0]
    assert float(alone @ batched) > 0.999


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
