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
* long messages (``--part long``): paragraphs of 64, 128 and 256 word pieces
  made of the chat messages above, shuffled. "worker" appends them with no
  embedder (the queue fills), then opens the file again with the embedder
  and times ``memory.flush()`` alone, split into the worker's database round
  trips (claim and store) and the rest (embedding); "direct" calls the same
  embedder in batches of 64. Each round runs worker, direct, direct, worker;
  the ratios (worker / direct, in messages/s and in the process's CPU
  seconds) are per round, then the median. On a machine shared with other
  work the CPU ratio is the steadier one. A last table times the tokenizer
  on messages of ~2,000 word pieces, tokenised whole or cut first.
* truncation (``--part truncation``): 40 long assistant replies (300–900
  word pieces), 20 of them holding one fact in their first or their last
  sentence, and a question for each fact; recall@1/@5 of the reply embedded
  whole (the model reads its first 256 word pieces) against the reply split
  at sentence ends into passages of at most 254, 128 or 64 word pieces,
  scored by its best passage.
* sparse (``--part sparse``): ``SpladeEncoder`` (numpy SPLADE-tiny) on the
  chat messages and on 48 LongMemEval assistant turns
  (``../shared/data/longmemeval/``, most of them past 256 word pieces), at
  256 and 512 tokens, with 1 and 2 chunks at once, plus the shipped encoder
  with numpy's BLAS left on its own threads; messages/s (wall) and messages
  per CPU second of the process (steadier on a shared machine), batches of
  64; then the p50 latency of one one-sentence query.
* batches (``--part batches``): what one chat message costs MiniLM and the
  sparse encoder in batches of 1 to 64 (milliseconds per message, wall and
  the process's CPU), and through the embedding service
  (``caderno.embeddings.batcher``) when 1, 8 or 64 callers at a time each
  ask for one text: the service gathers them into shared calls.

Run: ``.venv/bin/python bench/embedding_speed.py [--rounds 5] [--part all|options|long|truncation|sparse|batches]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
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
from caderno.embeddings import minilm, splade
from caderno.embeddings.batcher import Batcher
from caderno.stores import ops

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


async def end_to_end(embedder: Any, batch: int, texts: list[str], sparse: Any = None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with caderno.connect(Path(tmp) / "w.db", embedder=embedder, sparse=sparse) as memory:
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


def paragraphs(chat: list[str], tokens: int, n: int, tokenizer: Any, seed: int = 11) -> list[str]:
    """``n`` texts of ``tokens`` word pieces (with [CLS] and [SEP]) each, made of shuffled chat messages."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        words: list[str] = []
        while len(tokenizer.encode(" ".join(words), add_special_tokens=True).ids) < tokens:
            words += rng.choice(chat).split()
        while len(tokenizer.encode(" ".join(words)).ids) > tokens:
            words.pop()
        out.append(" ".join(words))
    return out


async def worker_rate(embedder: Any, texts: list[str], sparse: Any = None) -> tuple[float, float, float]:
    """Messages/s of ``memory.flush()`` over a queue of ``texts``, the share of that time in database round
    trips, and the process's CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.db"
        async with caderno.connect(path, embedder=None) as memory:  # the queue fills; nothing embeds
            for i in range(0, len(texts) - 1, 2):
                await memory.append_messages(
                    resource_id="w",
                    thread_id=f"t{i % 20}",
                    messages=[Message.user(texts[i]), Message.assistant(texts[i + 1])],
                )
        async with caderno.connect(path, embedder=embedder, sparse=sparse) as memory:
            run, spent = memory.indexer.run, [0.0]

            async def timed(op: Any) -> Any:
                t = time.perf_counter()
                try:
                    return await run(op)
                finally:
                    spent[0] += time.perf_counter() - t

            memory.indexer.run = timed
            t0, cpu = time.perf_counter(), time.process_time()
            await memory.flush()
            took, cpu = time.perf_counter() - t0, time.process_time() - cpu
            assert await run(ops.CountPendingEmbeddings()) == 0
            return len(texts) / took, spent[0] / took, cpu


async def long_rows(chat: list[str], rounds: int) -> None:
    embedder = minilm.MiniLMEmbedder().load()
    sizes = {64: 128, 128: 96, 256: 64}  # word pieces -> messages per run
    texts = {t: paragraphs(chat, t, n, embedder._tokenizer) for t, n in sizes.items()}
    await worker_rate(embedder, texts[64][:32])
    rows: dict[str, list[float]] = {}
    ratios: dict[int, list[float]] = {t: [] for t in sizes}
    cpu: dict[int, list[float]] = {t: [] for t in sizes}
    trips: dict[int, list[float]] = {t: [] for t in sizes}
    for _ in range(rounds):
        for t, batch in texts.items():
            # worker, direct, direct, worker: a drift in the machine's load falls on both alike
            w1, share, c1 = await worker_rate(embedder, batch)
            c = time.process_time()
            d = [rate(embedder.embed, batch, 64) for _ in range(2)]
            c = time.process_time() - c
            w2, _, c2 = await worker_rate(embedder, batch)
            cpu[t].append((c1 + c2) / c)
            rows.setdefault(f"{t} tokens: worker (flush)", []).extend((w1, w2))
            rows.setdefault(f"{t} tokens: direct, batches of 64", []).extend(d)
            ratios[t].append((w1 + w2) / sum(d))
            trips[t].append(share)
    table("long messages, messages/s | run | median | range |", rows)
    tok, whole = embedder._tokenizer, [" ".join(texts[256][i : i + 8]) for i in range(0, 64, 8)] * 8  # ~2,000 pieces
    cut: dict[str, list[float]] = {"tokenise whole, then truncate": [], "encode_truncated (cut first)": []}
    for _ in range(rounds):
        cut["tokenise whole, then truncate"].append(rate(tok.encode_batch, whole, 64))
        cut["encode_truncated (cut first)"].append(rate(lambda b: minilm.encode_truncated(tok, b, 256), whole, 64))
    table("tokenizer on messages of ~2,000 word pieces, texts/s | way | median | range |", cut)
    for t in sizes:
        print(
            f"{t} tokens: worker/direct {statistics.median(ratios[t]):.2f} (rounds {min(ratios[t]):.2f}–"
            f"{max(ratios[t]):.2f}); CPU seconds worker/direct {statistics.median(cpu[t]):.2f}; "
            f"claim+store round trips {100 * statistics.median(trips[t]):.1f} % of the worker's time"
        )


#: (fact sentence, question): the truncation experiment's needles.
FACTS = [
    ("The locker code at the climbing gym is 4821.", "What is my locker code at the gym?"),
    ("My sister's flight lands at Porto on the 14th at 9:40.", "When does my sister's flight land?"),
    ("The wifi password at the cabin is bluefern77.", "What is the wifi password at the cabin?"),
    ("The plumber, Joaquim, charges 45 euros an hour.", "How much does the plumber charge?"),
    ("Our dog Biscuit is allergic to chicken.", "What is the dog allergic to?"),
    ("The quarterly tax payment is due on July 20.", "When is the quarterly tax payment due?"),
    ("I keep the spare car key in the blue ceramic jar.", "Where is the spare car key?"),
    ("The dentist moved my appointment to Thursday at 3 pm.", "When is my dentist appointment?"),
    ("Mum's birthday dinner is booked at Taberna do Largo.", "Where is mum's birthday dinner booked?"),
    ("The new printer only takes HP 305 cartridges.", "Which cartridges does the printer take?"),
    ("Rui's shoe size is 43.", "What shoe size does Rui wear?"),
    ("The gas meter reading last month was 10482.", "What was the last gas meter reading?"),
    ("The insurance policy number is PT-7731-22.", "What is the insurance policy number?"),
    ("The kids' school closes early every Wednesday at 1 pm.", "When does the school close early?"),
    ("I promised to return Marta's ladder by Sunday.", "When do I have to return Marta's ladder?"),
    ("The bike shop said the new chain costs 32 euros.", "How much is the new bike chain?"),
    ("The recycling is collected on Tuesday nights.", "When is the recycling collected?"),
    ("My library card expires in November.", "When does my library card expire?"),
    ("The landlord's bank account ends in 0093.", "What are the last digits of the landlord's account?"),
    ("The violin lesson was moved to room 12.", "Which room is the violin lesson in?"),
]


def passages(text: str, tokenizer: Any, budget: int) -> list[str]:
    """``text`` cut at sentence ends into passages of at most ``budget`` word pieces (a longer sentence stays whole)."""
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        joined = f"{out[-1]} {sentence}" if out else sentence
        if out and len(tokenizer.encode(joined).ids) <= budget:
            out[-1] = joined
        else:
            out.append(sentence)
    return out


def truncation_recall(chat: list[str]) -> None:
    """Recall@1 and @5 of facts placed at the start or the end of long replies: whole reply vs best passage."""
    embedder = minilm.MiniLMEmbedder().load()
    tok, rng = embedder._tokenizer, random.Random(5)
    fillers = [paragraphs(chat, rng.choice((300, 500, 700, 900)), 1, _untruncated(tok), seed=i)[0] for i in range(40)]
    queries = embedder.embed([q for _, q in FACTS])
    print("\ntruncation vs passages: a fact in a long reply (300–900 word pieces), 40 replies, 20 questions")
    for where in ("start", "end"):
        replies = [
            f"{fact} {fillers[i]}" if where == "start" else f"{fillers[i]} {fact}" for i, (fact, _) in enumerate(FACTS)
        ]
        replies += fillers[len(FACTS) :]  # distractors with no fact
        t0 = time.perf_counter()
        whole = embedder.embed(replies)
        base = time.perf_counter() - t0
        runs = [("whole reply (cut at 256)", queries @ whole.T, base)]
        for budget in (minilm.MAX_TOKENS - 2, 128, 64):
            cut = [passages(r, tok, budget) for r in replies]
            t0 = time.perf_counter()
            flat = embedder.embed([p for ps in cut for p in ps])
            took = time.perf_counter() - t0
            owner = np.repeat(np.arange(len(replies)), [len(ps) for ps in cut])
            name = f"best passage of <={budget} ({len(flat) / len(replies):.1f}/reply)"
            runs.append((name, _best(queries @ flat.T, owner, len(replies)), took))
        for name, scores, took in runs:
            ranks = [int((row > row[i]).sum()) for i, row in enumerate(scores)]
            at1 = sum(r < 1 for r in ranks) / len(ranks)
            at5 = sum(r < 5 for r in ranks) / len(ranks)
            print(
                f"| fact at the {where:5s} | {name:34s} | recall@1 {at1:.2f} | recall@5 {at5:.2f} "
                f"| embedding time ×{took / base:.1f} |"
            )


def _untruncated(tokenizer: Any) -> Any:
    tok = tokenizer.__class__.from_str(tokenizer.to_str())
    tok.no_truncation()
    return tok


def _best(scores: Any, owner: Any, n: int) -> Any:
    best = np.full((scores.shape[0], n), -np.inf, dtype=np.float32)
    for j in range(scores.shape[1]):
        best[:, owner[j]] = np.maximum(best[:, owner[j]], scores[:, j])
    return best


def assistant_turns(n: int, seed: int = 1) -> list[str]:
    """``n`` distinct LongMemEval assistant turns, or none when the shared data set is not beside the project."""
    path = HERE.parent.parent / "shared" / "data" / "longmemeval" / "longmemeval-s-dev.json.gz"
    if not path.exists():
        return []
    turns = {
        t["content"]
        for q in json.loads(gzip.decompress(path.read_bytes()))
        for session in q["haystack_sessions"]
        for t in session
        if t["role"] == "assistant"
    }
    return random.Random(seed).sample(sorted(turns), n)


async def sparse_worker_rows(chat: list[str], rounds: int) -> None:
    """The background worker with and without the sparse terms: what the rerank costs at index time.

    "appended" is the end-to-end rate (append in pairs, then ``flush``) of
    640 chat messages, "queued" the worker's ``flush`` over a queue of
    LongMemEval's long assistant turns; rounds interleaved, medians."""
    dense = minilm.MiniLMEmbedder().load()
    sparse = splade.SpladeEncoder().load()
    turns = assistant_turns(48)
    rows: dict[str, list[float]] = {}
    for _ in range(rounds):
        for label, with_sparse in (("MiniLM alone", None), ("MiniLM + SPLADE-tiny (SHIPPED)", sparse)):
            rows.setdefault(f"{label} [chat, appended]", []).append(
                await end_to_end(dense, 256, chat[:640], sparse=with_sparse)
            )
            if turns:
                rate_, _, _ = await worker_rate(dense, turns, sparse=with_sparse)
                rows.setdefault(f"{label} [LongMemEval assistant turns, queued]", []).append(rate_)
    table("the worker, messages/s | run | median | range |", rows)


def sparse_rows(chat: list[str], rounds: int) -> None:
    """SpladeEncoder's throughput by text kind, token limit and chunks at once; then one query's latency."""
    turns = assistant_turns(48)
    sets = {"chat": chat[:256]} | ({"LongMemEval assistant": turns} if turns else {})
    made: dict[str, tuple[splade.SpladeEncoder, Any]] = {}
    for tokens in (256, 512):
        for threads in (1, 2):
            shipped = " (SHIPPED)" if tokens == splade.MAX_TOKENS and threads == minilm._cores() else ""
            made[f"{tokens} tokens, {threads} chunk(s) at once{shipped}"] = (
                splade.SpladeEncoder(max_tokens=tokens, threads=threads).load(),
                splade._one_blas_thread,
            )
    made[f"{splade.MAX_TOKENS} tokens, {minilm._cores()} at once, numpy's BLAS on its own threads"] = (
        splade.SpladeEncoder().load(),
        contextlib.nullcontext,
    )
    if turns:
        lengths = [len(e.ids) for e in next(iter(made.values()))[0]._tokenizer.encode_batch(turns)]
        print(f"\nLongMemEval assistant turns: {sum(n >= 256 for n in lengths)} of {len(turns)} reach 256 tokens")
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    shipped_blas = splade._one_blas_thread
    try:
        for _ in range(rounds):
            for k, (e, blas) in made.items():
                splade._one_blas_thread = blas
                for kind, texts in sets.items():
                    t0, c0 = time.perf_counter(), time.process_time()
                    for i in range(0, len(texts), 64):
                        e.encode(texts[i : i + 64])
                    wall.setdefault(f"{k} [{kind}]", []).append(len(texts) / (time.perf_counter() - t0))
                    cpu.setdefault(f"{k} [{kind}]", []).append(len(texts) / (time.process_time() - c0))
    finally:
        splade._one_blas_thread = shipped_blas
    table("sparse encoder, messages/s (wall), batches of 64 | run | median | range |", wall)
    table("sparse encoder, messages per CPU second | run | median | range |", cpu)
    shipped = splade.SpladeEncoder().load()
    lat = []
    for _ in range(10):
        for _, q in FACTS:
            t0 = time.perf_counter()
            shipped.encode([q])
            lat.append(1000 * (time.perf_counter() - t0))
    print(
        f"\nsparse query encoding (one sentence), p50 ms: {statistics.median(lat):.2f} (p90 {np.percentile(lat, 90):.2f})"
    )


#: Batch sizes of the ``batches`` part.
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
#: Callers at once of the service rows: each asks for one text, then the next.
SERVICE_CALLERS = (1, 8, 64)


async def batch_rows(chat: list[str], rounds: int) -> None:
    """Milliseconds per chat message by batch size (MiniLM, the sparse encoder), and through the service."""
    texts = chat[:256]
    models: dict[str, Callable[[list[str]], Any]] = {
        "MiniLM": minilm.MiniLMEmbedder().load().embed,
        "SPLADE-tiny": splade.SpladeEncoder().load().encode,
    }
    for run in models.values():
        run(texts[:64])
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def record(key: str, took: float, spent: float) -> None:
        wall.setdefault(key, []).append(1e3 * took / len(texts))
        cpu.setdefault(key, []).append(1e3 * spent / len(texts))

    for _ in range(rounds):
        for name, run in models.items():
            for size in BATCH_SIZES:
                t0, c0 = time.perf_counter(), time.process_time()
                for i in range(0, len(texts), size):
                    run(texts[i : i + size])
                record(f"{name}, batches of {size}", time.perf_counter() - t0, time.process_time() - c0)
            for callers in SERVICE_CALLERS:
                service = Batcher(run, name=name, cache_size=0)
                queue = iter(texts)

                async def caller(service: Batcher = service, queue: Any = queue) -> None:
                    for text in queue:
                        await service.all([text])

                t0, c0 = time.perf_counter(), time.process_time()
                await asyncio.gather(*(caller() for _ in range(callers)))
                took, spent = time.perf_counter() - t0, time.process_time() - c0
                record(f"{name}, service, {callers} caller(s) of one text at a time", took, spent)
    print("\nms per chat message (256 messages, 1–19 words), median of rounds | run | wall | CPU |")
    for key in wall:
        print(f"| {key:62s} | {statistics.median(wall[key]):6.2f} | {statistics.median(cpu[key]):6.2f} |")


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
    ap.add_argument("--part", choices=("all", "options", "long", "truncation", "sparse", "batches"), default="all")
    args = ap.parse_args()
    chat, mixed = load_texts()
    print(f"CPU flags: {cpu_flags()}; usable cores: {minilm._cores()}; onnxruntime {ort.__version__}")
    if args.part in ("all", "long"):
        await long_rows(chat, args.rounds)
    if args.part in ("all", "truncation"):
        truncation_recall(chat)
    if args.part in ("all", "options"):
        await options_rows(chat, mixed, args.rounds)
    if args.part in ("all", "sparse"):
        sparse_rows(chat, args.rounds)
        await sparse_worker_rows(chat, args.rounds)
    if args.part in ("all", "batches"):
        await batch_rows(chat, args.rounds)


async def options_rows(chat: list[str], mixed: list[str], rounds: int) -> None:
    longest = minilm.MiniLMEmbedder().load()._tokenizer.encode_batch(chat + mixed)
    print(
        f"texts over 128 tokens: {sum(len(e.ids) > 128 for e in longest)} of {len(chat) + len(mixed)} (truncation 128 vs 256 changes nothing here)"
    )

    made = {k: f() for k, f in options().items()}
    results = {f"{k} [{col}]": [] for col in ("chat", "5–80 words") for k in made}
    for e in made.values():
        e.embed(chat[:64])
    for _ in range(rounds):
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
    for _ in range(rounds):
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
    for _ in range(rounds):
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
