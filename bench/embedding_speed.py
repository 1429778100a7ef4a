"""Embedding speed: the options measured for the local model, and the end-to-end figure.

Every option embeds the same texts in the same process; the options take
turns in each round (interleaved), so load from other work on the machine
falls on all of them alike, and the table gives the median over rounds.

* "chat" texts are the messages of ``bench/data/recall_eval.json`` (1–19
  words, what the README's figure uses); "5–80 words" joins consecutive
  messages into texts of 5 to 80 words.
* the end-to-end rows go through the background worker: ``caderno.connect``
  on a temporary SQLite file, ``append_messages`` in pairs, then
  ``await memory.flush()``; "indexer batch" is ``Indexer.batch_size``.

Run: ``.venv/bin/python bench/embedding_speed.py [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

import caderno
from caderno import Message
from caderno.embeddings import minilm

HERE = Path(__file__).parent


def load_texts() -> tuple[list[str], list[str]]:
    data = json.loads((HERE / "data" / "recall_eval.json").read_text())
    chat = [m["content"] for c in data["conversations"] for s in c["sessions"] for m in s["messages"]]
    rng, mixed, i = random.Random(7), [], 0
    while len(mixed) < 256:
        target, parts = rng.randint(5, 80), []
        while sum(len(p.split()) for p in parts) < target:
            parts.append(chat[i % len(chat)])
            i += 1
        mixed.append(" ".join(" ".join(parts).split()[:80]))
    return chat, mixed


class Variant:
    """The model with one set of options; the embedding loop mirrors ``MiniLMEmbedder.embed``."""

    name, dim = minilm.MODEL_ID, 384

    def __init__(
        self,
        *,
        intra: int = 1,
        parallel: int = 1,
        rows: int | None = None,
        tokens: int | None = None,
        config: dict[str, str] | None = None,
        execution_parallel: bool = False,
        arena: bool = True,
        level: Any = None,
        einsum: bool = True,
        max_tokens: int = minilm.MAX_TOKENS,
    ) -> None:
        o = ort.SessionOptions()
        o.intra_op_num_threads, o.log_severity_level = intra, 3
        for k, v in ({"session.intra_op.allow_spinning": "0"} | (config or {})).items():
            o.add_session_config_entry(k, v)
        if execution_parallel:
            o.execution_mode, o.inter_op_num_threads = ort.ExecutionMode.ORT_PARALLEL, 2
        o.enable_cpu_mem_arena = o.enable_mem_pattern = arena
        if level is not None:
            o.graph_optimization_level = level
        self.session = ort.InferenceSession(minilm._model_file().read_bytes(), o, providers=["CPUExecutionProvider"])
        self.tokenizer = minilm.MiniLMEmbedder().load()._tokenizer.__class__.from_file(str(minilm.TOKENIZER))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.pool = ThreadPoolExecutor(parallel) if parallel > 1 else None
        self.rows, self.tokens, self.einsum = rows, tokens, einsum

    def load(self) -> Variant:
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        enc = self.tokenizer.encode_batch(texts)
        n = [len(e.ids) for e in enc]
        chunks: list[list[int]] = [[]]
        for i in sorted(range(len(texts)), key=n.__getitem__):
            full = len(chunks[-1]) >= self.rows if self.rows else (len(chunks[-1]) + 1) * n[i] > (self.tokens or 0)
            if chunks[-1] and full:
                chunks.append([])
            chunks[-1].append(i)

        def run(rows: list[int]) -> tuple[list[int], np.ndarray]:
            width = max(n[i] for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : n[i]], mask[r, : n[i]] = enc[i].ids, 1
            h = self.session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            w = mask.astype(np.float32)
            if self.einsum:
                pooled = np.einsum("bsd,bs->bd", h, w) / w.sum(axis=1, keepdims=True)
            else:
                pooled = (h * w[:, :, None]).sum(axis=1) / w[:, :, None].sum(axis=1)
            return rows, pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

        for rows, v in self.pool.map(run, chunks) if self.pool and len(chunks) > 1 else map(run, chunks):
            out[rows] = v
        return out


def options() -> dict[str, Callable[[], Any]]:
    par = {"parallel": 2}
    return {
        "SHIPPED: MiniLMEmbedder() (1-thread runs x2 parallel, 256-token chunks)": minilm.MiniLMEmbedder,
        "before: intra_op 2, 16-row chunks, no spinning": lambda: Variant(intra=2, rows=16, einsum=False),
        "intra_op 2, 16 rows, spinning on": lambda: Variant(
            intra=2, rows=16, config={"session.intra_op.allow_spinning": "1"}
        ),
        "intra_op 2, 16 rows, ORT_PARALLEL inter_op 2": lambda: Variant(intra=2, rows=16, execution_parallel=True),
        "intra_op 2, 16 rows, no mem arena/pattern": lambda: Variant(intra=2, rows=16, arena=False),
        "intra_op 2, 16 rows, ORT_ENABLE_BASIC": lambda: Variant(
            intra=2, rows=16, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        ),
        "intra_op 2, 8 rows": lambda: Variant(intra=2, rows=8),
        "intra_op 2, 32 rows": lambda: Variant(intra=2, rows=32),
        "intra_op 2, one chunk (pad to longest)": lambda: Variant(intra=2, rows=10_000),
        "intra_op 2, 512-token chunks": lambda: Variant(intra=2, tokens=512),
        "intra_op 1, sequential, 256-token chunks": lambda: Variant(tokens=256),
        "intra_op 1 x2 parallel, 16 rows": lambda: Variant(rows=16, **par),
        "intra_op 1 x2 parallel, 128-token chunks": lambda: Variant(tokens=128, **par),
        "intra_op 1 x2 parallel, 512-token chunks": lambda: Variant(tokens=512, **par),
        "intra_op 2 x2 parallel (oversubscribed), 256-token chunks": lambda: Variant(intra=2, tokens=256, **par),
    }


def rate(fn: Callable[[list[str]], Any], texts: list[str], batch: int) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        fn(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - t0)


async def end_to_end(embedder: Any, batch: int, texts: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "w.db", embedder=embedder) as memory:
            memory.indexer.batch_size = batch
            t0 = time.perf_counter()
            for i in range(0, len(texts) - 1, 2):
                await memory.append_messages(
                    resource_id="w",
                    thread_id=f"t{i % 20}",
                    messages=[Message.user(texts[i]), Message.assistant(texts[i + 1])],
                )
            await memory.flush()
            return len(texts) / (time.perf_counter() - t0)


def cpu_flags() -> str:
    try:
        flags = set(re.findall(r"\w+", Path("/proc/cpuinfo").read_text()))
    except OSError:
        return "unknown"
    return " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags) or "none"


def table(title: str, results: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    for k, v in results.items():
        print(f"| {k:70s} | {statistics.median(v):6.0f} | {min(v):5.0f}–{max(v):<5.0f} |")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    chat, mixed = load_texts()
    print(f"CPU flags: {cpu_flags()}; usable cores: {minilm._cores()}; onnxruntime {ort.__version__}")
    longest = minilm.MiniLMEmbedder().load()._tokenizer.encode_batch(chat + mixed)
    print(
        f"texts over 128 tokens: {sum(len(e.ids) > 128 for e in longest)} of {len(chat) + len(mixed)} (truncation 128 vs 256 changes nothing here)"
    )

    made = {k: f() for k, f in options().items()}
    results = {f"{k} [{col}]": [] for col in ("chat", "5–80 words") for k in made}
    for e in made.values():
        e.embed(chat[:64])
    for _ in range(args.rounds):
        for k, e in made.items():
            results[f"{k} [chat]"].append(rate(e.embed, chat[:256], 64))
            results[f"{k} [5–80 words]"].append(rate(e.embed, mixed[:64], 64))
    table("embedding only, messages/s, batches of 64 | option | median | range |", results)

    shipped, before = (
        made["SHIPPED: MiniLMEmbedder() (1-thread runs x2 parallel, 256-token chunks)"],
        made["before: intra_op 2, 16-row chunks, no spinning"],
    )
    tok = shipped._tokenizer
    parts: dict[str, list[float]] = {"tokenizer encode_batch": [], "tokenizer encode per text": []}
    for _ in range(args.rounds):
        parts["tokenizer encode_batch"].append(rate(tok.encode_batch, chat[:256], 64))
        parts["tokenizer encode per text"].append(rate(lambda b: [tok.encode(t) for t in b], chat[:256], 64))
    table("tokenizer alone, texts/s | part | median | range |", parts)

    e2e: dict[str, list[float]] = {
        "SHIPPED embedder, indexer batch 64": [],
        "SHIPPED embedder, indexer batch 256": [],
        "before embedder, indexer batch 64": [],
        "before embedder, indexer batch 256": [],
        "no embedder (appends alone)": [],
    }
    runs = {
        "SHIPPED embedder, indexer batch 64": (shipped, 64),
        "SHIPPED embedder, indexer batch 256": (shipped, 256),
        "before embedder, indexer batch 64": (before, 64),
        "before embedder, indexer batch 256": (before, 256),
        "no embedder (appends alone)": (None, 64),
    }
    await end_to_end(shipped, 64, chat[:128])
    for _ in range(args.rounds):
        for k, (emb, batch) in runs.items():
            e2e[k].append(await end_to_end(emb, batch, chat[:640]))
    table("end to end through the background worker, 640 chat messages, messages/s | run | median | range |", e2e)

    lat: dict[str, list[float]] = {"SHIPPED query embedding ms": [], "before query embedding ms": []}
    for q in chat[:200]:
        for k, e in (("SHIPPED query embedding ms", shipped), ("before query embedding ms", before)):
            t0 = time.perf_counter()
            e.embed([q])
            lat[k].append(1000 * (time.perf_counter() - t0))
    print(
        "\nquery embedding (one text), p50 ms: "
        + ", ".join(f"{k.split()[0]} {statistics.median(v):.2f}" for k, v in lat.items())
    )


if __name__ == "__main__":
    asyncio.run(main())
