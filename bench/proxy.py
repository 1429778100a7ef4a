"""The memory proxy's cost: a turn through caderno vs the same call straight to the model.

Workload (one process, one event loop, loopback; the scripted chat-completions
upstream of ``tests/_upstream.py`` served by uvicorn, and caderno's app with
the proxy in front of that upstream, served the same way, as the tests do):
every request is one user message answered with a ~400-character text,
sent with the official ``openai`` ``AsyncOpenAI`` client, sequentially,
after WARMUP untimed requests.

  1. Overhead: REQUESTS calls (a) straight to the upstream's
     ``/v1/chat/completions`` and (b) through the proxy with a caderno key
     for one resource and ``X-Caderno-Thread`` naming a new thread per call,
     so every call does the same work: a whole turn (load the thread and
     working memory, recall, build the prompt, call the model, commit the
     turn). On a SQLite file with ``embedder=None`` (recall's lexical legs
     only), then with the default embedder (the query embedded, the turn's
     messages queued for embedding). Background work is awaited between
     calls, outside the timed window: the figures are the request path.
  2. Streaming: the upstream streams slowly (PIECE characters every PAUSE
     seconds, ~1 s for the answer); time to the first content chunk and to
     the end, (a) straight and (b) through the proxy with ``stream=True``.
     The floor printed beside them is the upstream's whole answer: what the
     first chunk waited for when the proxy sent nothing before the turn was
     done.

Client, servers and SQLite share the same cores, so the proxy's added time
includes a second HTTP hop's parsing and serialising on them.

Run:  .venv/bin/python bench/proxy.py [--requests 200 --stream-requests 20] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import pct

import caderno

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _upstream import Upstream, proxy_in_front, serving, text  # noqa: E402

from caderno.server.proxy import THREAD_HEADER  # noqa: E402

#: ~400 characters, the size of a short chat answer.
ANSWER = (
    "Para a viagem a Lisboa em dezembro, guardar R$ 1.000 por mês desde março dá R$ 10.000 até lá. "
    "As passagens costumam custar uns R$ 4.500 para dois, e o hotel perto da Baixa fica em torno de "
    "R$ 450 por noite. Com sete noites, sobram uns R$ 2.350 para comer, passear e os transportes. "
    "Se quiser folga, corte restaurantes para R$ 400 por mês até lá, como você combinou, e mande o bônus."
)
QUESTION = "Quanto preciso guardar para a viagem a Lisboa?"
#: Seconds between the slow upstream's chunks: with PIECE, a ~1 s answer, long enough to tell first chunk from end.
PAUSE = 0.02
#: Characters per chunk of the slow upstream (a few tokens, as real models stream).
PIECE = 8


def client(base_url: str, api_key: str) -> Any:
    import openai

    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0)


async def plain(ai: Any, thread: str | None) -> None:
    headers = {THREAD_HEADER: thread} if thread else None
    answer = await ai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_headers=headers
    )
    assert answer.choices[0].message.content == ANSWER, answer


async def streamed(ai: Any, thread: str | None) -> tuple[float, float]:
    """Seconds to the first content chunk and to the end of the stream."""
    headers = {THREAD_HEADER: thread} if thread else None
    t0 = time.perf_counter()
    stream = await ai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], extra_headers=headers, stream=True
    )
    first = None
    got = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if first is None:
                first = time.perf_counter() - t0
            got.append(chunk.choices[0].delta.content)
    end = time.perf_counter() - t0
    assert "".join(got) == ANSWER and first is not None
    return first, end


async def measure(memory: Any, n: int, warmup: int, stream_n: int) -> dict[str, list[float]]:
    """Both paths, sequential calls: plain latencies and streamed (first chunk, end) times, in seconds."""
    token, _ = await memory.keys.create(resources=["bench"], name="bench")
    upstream = Upstream()
    upstream.script = [text(ANSWER) for _ in range(2 * (warmup + n) + 2 * (1 + stream_n))]
    out: dict[str, list[float]] = {}
    async with serving(upstream.app()) as up, proxy_in_front(memory, upstream) as proxy:
        direct, through = client(up, "upstream-secret"), client(proxy, token)
        for name, ai, thread in (("direct", direct, None), ("proxy", through, "t")):
            for w in range(warmup):
                await plain(ai, thread and f"warm-{w}")
            await memory.flush()
            lat = []
            for i in range(n):
                t0 = time.perf_counter()
                await plain(ai, thread and f"{thread}-{i}")
                lat.append(time.perf_counter() - t0)
                await memory.flush()
            out[name] = lat
        if stream_n:
            upstream.pause, upstream.piece = PAUSE, PIECE
            for name, ai, thread in (("direct", direct, None), ("proxy", through, "s")):
                await streamed(ai, thread and "swarm")  # one untimed, to open the connection
                await memory.flush()
                firsts, ends = [], []
                for i in range(stream_n):
                    first, end = await streamed(ai, thread and f"{thread}-{i}")
                    firsts.append(first)
                    ends.append(end)
                    await memory.flush()
                out[f"{name} first"], out[f"{name} end"] = firsts, ends
        await direct.close()
        await through.close()
    upstream.requests.clear()
    return out


def ms(values: list[float], q: float) -> float:
    return pct(values, q) * 1e3


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200, help="timed plain calls per path and store")
    ap.add_argument("--stream-requests", type=int, default=20, help="timed streamed calls per path (~1 s each)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls per path before timing")
    ap.add_argument("--skip-embedder", action="store_true", help="no default-embedder row")
    ap.add_argument("--quick", action="store_true", help="50 calls, 5 streamed, 5 warm-up (a smoke run)")
    ap.add_argument("--json", type=Path, help="also write the raw times (seconds) as JSON here")
    args = ap.parse_args()
    if args.quick:
        args.requests, args.stream_requests, args.warmup = 50, 5, 5
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"machine: {os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), python {sys.version.split()[0]}; "
        f"workload: {args.requests} sequential calls per path after {args.warmup} warm-up, one user message, "
        f"a {len(ANSWER)}-character answer; streamed: {args.stream_requests} calls, {PIECE} characters "
        f"every {PAUSE * 1e3:.0f} ms"
    )
    print()
    runs: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        memory = await caderno.connect(f"sqlite:///{Path(tmp) / 'off.db'}", embedder=None)
        runs["SQLite, embedder off"] = await measure(memory, args.requests, args.warmup, args.stream_requests)
        await memory.close()
        if not args.skip_embedder:
            memory = await caderno.connect(f"sqlite:///{Path(tmp) / 'on.db'}")
            runs["SQLite, default embedder"] = await measure(memory, args.requests, args.warmup, 0)
            await memory.close()

    print("| store | direct p50 ms | direct p99 ms | proxy p50 ms | proxy p99 ms | added p50 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in runs.items():
        d, p = r["direct"], r["proxy"]
        print(
            f"| {name} | {ms(d, 0.5):.2f} | {ms(d, 0.99):.2f} | {ms(p, 0.5):.2f} | {ms(p, 0.99):.2f} "
            f"| {ms(p, 0.5) - ms(d, 0.5):.2f} |"
        )
    print()
    for name, r in runs.items():
        added = ms(r["proxy"], 0.5) - ms(r["direct"], 0.5)
        print(
            f"{name}: a proxy turn adds {added:.2f} ms at p50 ({ms(r['proxy'], 0.5) / ms(r['direct'], 0.5):.1f}× direct)"
        )
    s = runs["SQLite, embedder off"]
    if args.stream_requests:
        print()
        print("| streamed, SQLite, embedder off | first chunk p50 ms | p99 ms | end p50 ms | p99 ms |")
        print("|---|---:|---:|---:|---:|")
        for side in ("direct", "proxy"):
            f, e = s[f"{side} first"], s[f"{side} end"]
            print(f"| {side} | {ms(f, 0.5):.1f} | {ms(f, 0.99):.1f} | {ms(e, 0.5):.1f} | {ms(e, 0.99):.1f} |")
        floor = ms(s["direct end"], 0.5)
        print(f"| floor: first chunk after the whole answer (direct end) | {floor:.1f} | | | |")
        print()
        added_first = ms(s["proxy first"], 0.5) - ms(s["direct first"], 0.5)
        added_end = ms(s["proxy end"], 0.5) - ms(s["direct end"], 0.5)
        print(
            f"streaming: the proxy adds {added_first:.1f} ms to the first chunk and {added_end:.1f} ms to the end "
            f"at p50; its first chunk comes at {ms(s['proxy first'], 0.5) / floor:.2f}× the whole answer's time "
            f"(<1: streamed before the turn is done)"
        )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
