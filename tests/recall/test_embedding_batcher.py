"""The embedding service (``caderno.embeddings.batcher``): concurrent callers' texts in shared model calls.

Each caller gets exactly its own vectors (as embedding its texts alone
gives), from many tasks at once; a text the model cannot embed fails alone;
a caller cancelled while it waits, or while its call runs, leaves the others
theirs; a query asked again comes from the cache; the background lane runs
at the lower priority. Models are held at a gate (a ``threading.Event``) to
put callers in the queue before a call takes them: the tests wait for
conditions, never for the clock.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.core.errors import EmbeddingUnavailable
from caderno.embeddings import HashingEmbedder, MiniLMEmbedder
from caderno.embeddings.batcher import BATCH_TEXTS, EMBED_NICE, URGENT_NICE, Batcher, batcher

#: The most seconds a test waits for a condition before it fails (never reached when all is well).
PATIENCE = 60.0


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` to hold, letting the loop and the lanes' threads run."""
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never came"
        await asyncio.sleep(0.001)


class Gated(HashingEmbedder):
    """HashingEmbedder that records its calls; the calls numbered in ``held`` wait for their gate."""

    def __init__(self, held: tuple[int, ...] = ()) -> None:
        super().__init__(32)
        self.calls: list[list[str]] = []
        self.held = set(held)
        self.gates = [threading.Event() for _ in range(16)]
        self.priorities: list[int] = []

    def embed(self, texts: list[str]) -> Any:
        n = len(self.calls)
        self.calls.append(list(texts))
        try:  # a thread's own nice value on Linux
            self.priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        except OSError:
            self.priorities.append(0)
        if n in self.held:
            self.gates[n].wait(PATIENCE)
        return super().embed(texts)


class Flaky(Gated):
    """Fails any call holding a text with BOOM in it."""

    def embed(self, texts: list[str]) -> Any:
        out = super().embed(texts)
        if any("BOOM" in t for t in texts):
            raise RuntimeError("cannot embed BOOM")
        return out


async def held(model: Gated, first_text: str = "hold the model", **options: Any) -> tuple[Batcher, asyncio.Future[Any]]:
    """A service over ``model`` whose first call, ``first_text`` alone, is in the model and held at its gate 0."""
    service = Batcher(model.embed, name=model.name, **options)
    first = asyncio.ensure_future(service.each([first_text]))
    await until(lambda: len(model.calls) == 1)
    return service, first


def alone(model: HashingEmbedder, texts: list[str]) -> list[np.ndarray]:
    return [model.embed([t])[0] for t in texts]


async def test_callers_waiting_together_share_one_call_and_each_gets_its_own_vectors() -> None:
    model = Gated(held=(0,))
    service, first = await held(model, "the first text, alone in its call")
    asks = [[f"caller {i} text {k}" for k in range(1 + i % 3)] for i in range(12)]
    tasks = [asyncio.ensure_future(service.each(texts)) for texts in asks]
    await until(lambda: service.urgent.waiting() == sum(map(len, asks)))
    model.gates[0].set()
    got = await asyncio.gather(*tasks)
    await first
    # One call for the twelve callers: the oldest first, then those with the fewest texts.
    assert model.calls[1:] == [[t for texts in [asks[0], *sorted(asks[1:], key=len)] for t in texts]]
    for texts, vectors in zip(asks, got, strict=True):
        assert len(vectors) == len(texts)
        for v, expected in zip(vectors, alone(HashingEmbedder(32), texts), strict=True):
            assert np.array_equal(v, expected)


async def test_many_tasks_at_once_get_exactly_the_real_models_vectors() -> None:
    """MiniLM in batches gives each text the vector it gets alone (padding to a longer text changes nothing)."""
    model = MiniLMEmbedder()
    service = Batcher(model.embed, name=model.name)
    rng = random.Random(3)
    words = [
        "trip",
        "Lisbon",
        "May",
        "budget",
        "plumber",
        "pipes",
        "winter",
        "rent",
        "judo",
        "Monday",
        "insurance",
        "March",
        "euros",
    ]
    asks = [[" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 4))] for _ in range(60)]
    got = await asyncio.gather(*(service.all(texts) for texts in asks))
    assert service.urgent.calls < len(asks)  # shared calls
    for texts, vectors in zip(asks, got, strict=True):
        for v, expected in zip(vectors, model.embed(texts), strict=True):
            np.testing.assert_allclose(v, expected, atol=1e-5)


async def test_a_query_goes_before_long_lists_that_came_first() -> None:
    model = Gated(held=(0,))
    service, first = await held(model, limit=8)
    pending = [f"pending message {i}" for i in range(12)]
    messages = asyncio.ensure_future(service.all(pending))
    await until(lambda: service.urgent.waiting() == 12)
    query = asyncio.ensure_future(service.query("the question"))
    await until(lambda: service.urgent.waiting() == 13)
    model.gates[0].set()
    await asyncio.gather(first, messages, query)
    # Half the call for the oldest caller's list, the question, the rest of the room for the list again.
    assert model.calls[1:] == [[*pending[:4], "the question", *pending[4:7]], pending[7:]]


async def test_a_long_list_is_not_starved_by_a_stream_of_queries() -> None:
    model = Gated(held=(0,))
    service, first = await held(model, limit=8)
    pending = [f"pending message {i}" for i in range(8)]
    messages = asyncio.ensure_future(service.all(pending))
    queries = [asyncio.ensure_future(service.all([f"question {i}"])) for i in range(20)]
    await until(lambda: service.urgent.waiting() == 28)
    model.gates[0].set()
    await asyncio.gather(first, messages, *queries)
    assert model.calls[1][:4] == pending[:4] and model.calls[2][:4] == pending[4:]  # half of each call


async def test_a_caller_longer_than_a_call_is_split_and_keeps_its_order() -> None:
    model = Gated()
    service = Batcher(model.embed, name=model.name)
    texts = [f"text number {i}" for i in range(2 * BATCH_TEXTS + 5)]
    vectors = await service.all(texts)
    assert [len(c) for c in model.calls] == [BATCH_TEXTS, BATCH_TEXTS, 5]
    assert all(np.array_equal(v, e) for v, e in zip(vectors, alone(HashingEmbedder(32), texts), strict=True))


async def test_a_failing_text_fails_alone() -> None:
    model = Flaky(held=(0,))
    service, first = await held(model)
    mixed = asyncio.ensure_future(service.each(["fine one", "BOOM here", "fine two"]))
    other = asyncio.ensure_future(service.all(["another caller's text"]))
    await until(lambda: service.urgent.waiting() == 4)
    model.gates[0].set()
    one, bad, two = await mixed
    (theirs,) = await other
    await first
    expected = HashingEmbedder(32)
    assert isinstance(bad, RuntimeError) and "BOOM" in str(bad)
    assert np.array_equal(one, expected.embed(["fine one"])[0])
    assert np.array_equal(two, expected.embed(["fine two"])[0])
    assert np.array_equal(theirs, expected.embed(["another caller's text"])[0])
    # The shared call failed, then each of its texts ran alone.
    assert model.calls[1] == ["fine one", "BOOM here", "fine two", "another caller's text"]
    assert sorted(map(tuple, model.calls[2:])) == sorted((t,) for t in model.calls[1])
    with pytest.raises(RuntimeError, match="BOOM"):
        await service.all(["BOOM again"])


async def test_a_missing_model_fails_every_text_in_one_call() -> None:
    calls: list[list[str]] = []

    def missing(texts: list[str]) -> Any:
        calls.append(texts)
        raise EmbeddingUnavailable("no model file here")

    service = Batcher(missing, name="missing")
    results = await service.each(["a", "b", "c"])
    assert all(isinstance(r, EmbeddingUnavailable) for r in results)
    assert calls == [["a", "b", "c"]]  # not tried again text by text: each would fail the same way


async def test_a_caller_cancelled_in_the_queue_is_dropped_and_the_others_are_served() -> None:
    model = Gated(held=(0,))
    service, first = await held(model)
    a = asyncio.ensure_future(service.all(["a one", "a two"]))
    b = asyncio.ensure_future(service.all(["b, who leaves"]))
    c = asyncio.ensure_future(service.all(["c one"]))
    await until(lambda: service.urgent.waiting() == 4)
    b.cancel()
    await until(lambda: service.urgent.waiting() == 3)
    model.gates[0].set()
    got_a, got_c = await a, await c
    with pytest.raises(asyncio.CancelledError):
        await b
    await first
    assert model.calls[1] == ["a one", "a two", "c one"]  # b's text never reached the model
    assert np.array_equal(np.stack(got_a), HashingEmbedder(32).embed(["a one", "a two"]))
    assert np.array_equal(got_c[0], HashingEmbedder(32).embed(["c one"])[0])


async def test_a_caller_cancelled_while_its_call_runs_leaves_the_call_to_the_others() -> None:
    model = Gated(held=(0, 1))
    service, first = await held(model)
    a = asyncio.ensure_future(service.all(["a text"]))
    b = asyncio.ensure_future(service.all(["b text"]))
    await until(lambda: service.urgent.waiting() == 2)
    model.gates[0].set()
    await until(lambda: len(model.calls) == 2)  # a's and b's texts are in the model now
    b.cancel()
    with pytest.raises(asyncio.CancelledError):
        await b
    model.gates[1].set()
    assert np.array_equal((await a)[0], HashingEmbedder(32).embed(["a text"])[0])
    await first
    assert np.array_equal((await service.all(["after"]))[0], HashingEmbedder(32).embed(["after"])[0])


async def test_a_query_asked_again_comes_from_the_cache() -> None:
    model = Gated()
    service = Batcher(model.embed, name=model.name, cache_size=2)
    v1 = await service.query("where is the cabin")
    v2 = await service.query("where is the cabin")
    assert v2 is v1 and model.calls == [["where is the cabin"]]
    assert np.array_equal(v1, HashingEmbedder(32).embed(["where is the cabin"])[0])
    assert not v1.flags.writeable  # shared by every caller: nobody may change it
    await service.query("second")
    await service.query("third")  # the cache holds two: the first question is out
    await service.query("where is the cabin")
    assert model.calls.count(["where is the cabin"]) == 2


async def test_a_failed_query_is_not_cached() -> None:
    model = Flaky()
    service = Batcher(model.embed, name=model.name)
    with pytest.raises(RuntimeError):
        await service.query("BOOM")
    with pytest.raises(RuntimeError):
        await service.query("BOOM")
    assert model.calls == [["BOOM"], ["BOOM"]]


async def test_one_service_per_model() -> None:
    model, other = HashingEmbedder(16), HashingEmbedder(16)
    assert batcher(model) is batcher(model)
    assert batcher(other) is not batcher(model)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="thread priorities are per thread on Linux")
async def test_the_background_lane_runs_at_lower_priority() -> None:
    model = Gated()
    service = Batcher(model.embed, name=model.name)
    await service.all(["a query"])
    await service.all(["the worker's message"], urgent=False)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert model.priorities == [min(19, base + URGENT_NICE), min(19, base + EMBED_NICE)]


async def test_callers_on_two_event_loops_share_the_service() -> None:
    model = Gated()
    service = Batcher(model.embed, name=model.name)
    got: dict[str, Any] = {}

    def other_loop() -> None:
        got["other"] = asyncio.run(service.all(["from the other loop"]))

    thread = threading.Thread(target=other_loop)
    thread.start()
    mine = await service.all(["from this loop"])
    await until(lambda: not thread.is_alive())
    assert np.array_equal(mine[0], HashingEmbedder(32).embed(["from this loop"])[0])
    assert np.array_equal(got["other"][0], HashingEmbedder(32).embed(["from the other loop"])[0])


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts += texts
        return super().embed(texts)


async def test_recall_and_the_worker_go_through_the_service(tmp_path: Path) -> None:
    """A recall's query is embedded once however often it is asked; the messages once each."""
    model = Counting()
    async with caderno.connect(tmp_path / "m.db", embedder=model) as memory:
        await memory.append_messages(
            resource_id="r",
            thread_id="t",
            messages=[Message.user("The Lisbon trip is in May"), Message.user("The plumber comes on Monday")],
        )
        first = await memory.recall(resource_id="r", query="when is the trip", recent=0, salient=0, lexical=0)
        again = await memory.recall(resource_id="r", query="when is the trip", recent=0, salient=0, lexical=0)
        await memory.flush()
    assert [h.message.content for h in first] == [h.message.content for h in again]
    assert first[0].message.content == "The Lisbon trip is in May"
    assert model.texts.count("when is the trip") == 1
    assert model.texts.count("The Lisbon trip is in May") == 1
    assert model.texts.count("The plumber comes on Monday") == 1


async def test_a_text_several_callers_ask_at_once_is_run_once() -> None:
    model = Gated(held=(0,))
    service, first = await held(model)
    tasks = [asyncio.ensure_future(service.all(["the same question", f"own text {i}"])) for i in range(3)]
    await until(lambda: service.urgent.waiting() == 6)
    model.gates[0].set()
    got = await asyncio.gather(*tasks)
    await first
    assert model.calls[1] == ["the same question", "own text 0", "own text 1", "own text 2"]
    expected = HashingEmbedder(32).embed(["the same question"])[0]
    assert all(np.array_equal(vectors[0], expected) for vectors in got)


async def test_hurry_hands_the_background_lanes_waiting_texts_to_the_urgent_lane() -> None:
    """A recall waiting for the worker's messages: what the worker's call has not started runs urgently."""
    model = Gated(held=(0,))
    service = Batcher(model.embed, name=model.name, limit=4)
    texts = [f"worker message {i}" for i in range(10)]
    worker = asyncio.ensure_future(service.each(texts, urgent=False))
    await until(lambda: len(model.calls) == 1)  # its first four, held in the background lane's call
    assert service.hurry() == 6
    await until(lambda: len(model.calls) == 3)  # the other six, in the urgent lane, while the first call waits
    assert model.calls[1:] == [texts[4:8], texts[8:]]
    assert not worker.done()
    model.gates[0].set()
    vectors = await worker
    assert all(np.array_equal(v, e) for v, e in zip(vectors, alone(HashingEmbedder(32), texts), strict=True))
    if Path("/proc/self/task").exists():
        base = os.getpriority(os.PRIO_PROCESS, 0)
        urgent = min(19, base + URGENT_NICE)
        assert model.priorities == [min(19, base + EMBED_NICE), urgent, urgent]
    assert service.hurry() == 0


async def test_the_service_does_not_keep_its_model_alive() -> None:
    model = HashingEmbedder(8)
    service = weakref.ref(batcher(model))
    assert np.array_equal((await batcher(model).all(["kept?"]))[0], HashingEmbedder(8).embed(["kept?"])[0])
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None and service() is None
