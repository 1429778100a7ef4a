"""One embedding service per model and process: the texts of concurrent callers run in shared model calls.

A model call has a fixed cost (a tokenizer pass, a graph run, numpy's set-up)
that a batch pays once: MiniLM embeds a chat message in a batch of 64 for
about a third less CPU than alone, the sparse encoder for less than half
(``bench/embedding_speed.py --part batches``). A server's callers come one or
two texts at a time — a recall's query, the few messages a recall embeds
before it searches — so ``Batcher`` gathers what concurrent callers ask of
one model into one call and hands each caller its own results.

* ``batcher(model)`` is the model's one service in this process (its
  ``embed`` — or ``encode``, for the sparse encoder — is what it calls).
* Two lanes, each one thread: **urgent** (someone waits: a query, a recall's
  pending messages), ``URGENT_NICE`` below the process's priority, which
  waits up to ``BATCH_WAIT_SECONDS`` after a first text for others to join;
  and **background** (the embedding worker's batches, nobody waits), at
  ``EMBED_NICE``, with no wait. A call takes at most ``BATCH_TEXTS`` texts:
  up to half from the oldest caller, the rest from those with the fewest
  left first (a query does not wait behind other callers' long lists, and
  a long list is never starved); a caller's longer list runs in several.
* Texts asked by several callers at once (the same query) run once.
* Each text's result is its own: when a call fails, its texts are run one by
  one, so a text the model cannot embed fails alone (``EmbeddingUnavailable``,
  the model missing, fails them all at once: it would fail each again).
* A caller cancelled while it waits leaves the others' call alone; what is
  not yet started of its texts is dropped.
* ``Batcher.hurry`` hands what waits in the background lane to the urgent
  one, for when someone comes to wait for it (a recall waiting for messages
  the worker holds).
* ``Batcher.query`` keeps the last ``QUERY_CACHE_SIZE`` query vectors, by
  model name and text: a question asked again costs no model call.

The event loop never blocks: a caller appends to a lane's queue under a lock
held for microseconds, and results come back through
``loop.call_soon_threadsafe``. A lane's thread starts at its first text and
ends after ``IDLE_SECONDS`` without one; one loop or many, any thread's.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import EmbeddingUnavailable

__all__ = [
    "BATCH_TEXTS",
    "BATCH_WAIT_SECONDS",
    "EMBED_NICE",
    "IDLE_SECONDS",
    "QUERY_CACHE_SIZE",
    "URGENT_NICE",
    "Batcher",
    "batcher",
]

#: Seconds the urgent lane waits, after the first text reaches an idle model,
#: for other callers' texts to join its call. Under load texts gather while
#: the call before runs and nobody waits for this; when the model is idle it
#: is what one text pays so that a burst of callers shares one call.
BATCH_WAIT_SECONDS = 0.002
#: Most texts one model call takes. MiniLM's and the sparse encoder's cost per
#: chat message stops falling past ~32–64 (``bench/embedding_speed.py``), and a
#: query that comes behind a full call waits for it: larger buys nothing.
BATCH_TEXTS = 64
#: Query vectors each model keeps (by model name and text); MiniLM's 1,024 are 1.5 MB.
QUERY_CACHE_SIZE = 1024
#: How much lower than its process the background lane's thread runs (``nice``; Linux): the worker's
#: batches, which nobody waits for, take the CPU requests leave.
EMBED_NICE = 10
#: How much lower than its process the urgent lane's thread runs. The event loop serves every
#: request, those that embed nothing too, and one model call keeps every core busy (its chunks run
#: side by side): a little lower, a recall's embedding takes what the loop leaves without starving
#: it, and still goes before the worker's. ``bench/server_load.py`` (64 clients, SQLite, two
#: interleaved rounds): at 0 rather than 5, appends' p50 was 144 ms rather than 65, reads' 106 rather than 42.
URGENT_NICE = 5
#: Seconds a lane's thread waits for work before it ends (the next text starts another).
IDLE_SECONDS = 10.0
#: Seconds the process, on its way out, waits for a lane's call in flight (a model call cut off by
#: the interpreter's exit can abort the process).
EXIT_WAIT_SECONDS = 30.0


class _Request:
    """One caller's texts, the results so far, and how to hand them back."""

    __slots__ = ("cancelled", "future", "left", "loop", "next", "results", "texts")

    def __init__(self, texts: list[str], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self.texts = texts
        self.results: list[Any] = [None] * len(texts)
        self.next = 0  # the first text not yet taken into a call
        self.left = len(texts)  # texts whose result has not come
        self.loop = loop
        self.future = future
        self.cancelled = False  # set on the caller's loop; read by the lane's thread


class _Lane:
    """One queue of requests and the thread that runs them, ``limit`` texts a call."""

    def __init__(self, run: Callable[[list[str]], Sequence[Any]], *, name: str, wait: float, limit: int, nice: int):
        self.run = run
        self.name = name
        self.wait = wait
        self.limit = limit
        self.nice = nice
        self.calls = 0
        """Model calls made (the tests read it)."""
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[tuple[float, _Request]] = collections.deque()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, request: _Request) -> None:
        """Queue a request (on the caller's loop: holds the lock for an append)."""
        self._forked()
        with self._cond:
            self._append([request])

    def hand_over(self, other: _Lane) -> int:
        """Move the requests waiting here (what is not yet taken of them) to ``other``; how many texts.

        A request whose first texts are in this lane's call now keeps them
        there: the rest is run by ``other``.
        """
        self._forked()
        other._forked()
        with self._cond:
            moved = [r for _, r in self._queue if not r.cancelled]
            self._queue.clear()
        if moved:
            with other._cond:
                other._append(moved)
        return sum(len(r.texts) - r.next for r in moved)

    def _forked(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's thread and lock are not this process's
            self._reset()

    def _append(self, requests: list[_Request]) -> None:
        """Queue ``requests`` and wake (or start) the thread; the caller holds the lock."""
        now = time.monotonic()
        self._queue.extend((now, r) for r in requests)
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"caderno-{self.name}", daemon=True)
            self._thread.start()
            _live.add(self)
        else:
            self._cond.notify()

    def stop(self, timeout: float) -> None:
        """Let the call in flight finish and end the thread (at the interpreter's exit)."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self) -> None:
        if self.nice:
            with contextlib.suppress(AttributeError, OSError):  # per thread on Linux; elsewhere a no-op
                os.setpriority(
                    os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + self.nice
                )
        while True:
            batch = self._take()
            if batch is None:
                return
            self._call(batch)

    def _take(self) -> list[tuple[_Request, int, int]] | None:
        """The next call's texts, as spans of requests; None when the thread should end."""
        with self._cond:
            while True:
                while self._queue and self._queue[0][1].cancelled:
                    self._queue.popleft()
                if self._stopping:
                    self._thread = None
                    return None
                if self._queue:
                    break
                if not self._cond.wait(IDLE_SECONDS) and not self._queue:
                    self._thread = None  # idle: the next submit starts another
                    return None
            # Let others join, up to ``wait`` after the oldest text came (at once when it came long ago).
            deadline = self._queue[0][0] + self.wait
            while (remaining := deadline - time.monotonic()) > 0 and self._waiting() < self.limit:
                self._cond.wait(remaining)
            # The oldest caller takes up to half the call while others wait (none waits for ever), the
            # others the rest, those with the fewest texts left first (a query does not wait behind
            # long lists for more than the call in flight), then the oldest whatever room is left.
            live = [entry for entry in self._queue if not entry[1].cancelled]
            oldest, others = live[0][1], sorted((r for _, r in live[1:]), key=_left)
            picks = [(oldest, self.limit // 2 if others else self.limit), *((r, self.limit) for r in others)]
            spans, room = [], self.limit
            for request, most in [*picks, (oldest, self.limit)]:
                if n := min(_left(request), most, room):
                    spans.append((request, request.next, request.next + n))
                    request.next += n
                    room -= n
            self._queue = collections.deque(entry for entry in live if entry[1].next < len(entry[1].texts))
            return spans

    def waiting(self) -> int:
        """Texts queued and not yet taken into a call (of callers not cancelled)."""
        with self._cond:
            return self._waiting()

    def _waiting(self) -> int:
        return sum(len(r.texts) - r.next for _, r in self._queue if not r.cancelled)

    def _call(self, spans: list[tuple[_Request, int, int]]) -> None:
        texts = [t for request, start, end in spans for t in request.texts[start:end]]
        results = self._results(texts)
        at = 0
        for request, start, end in spans:
            with _handed:  # a request handed over mid-way has spans in two lanes' calls
                request.results[start:end] = results[at : at + end - start]
                request.left -= end - start
                finished = request.left == 0
            at += end - start
            if finished and not request.cancelled:
                with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody to tell
                    request.loop.call_soon_threadsafe(_resolve, request.future, request.results)

    def _results(self, texts: list[str]) -> list[Any]:
        """Each text's result, or the exception embedding it raised; a text asked twice is run once."""
        unique = list(dict.fromkeys(texts))
        if len(unique) < len(texts):
            found = dict(zip(unique, self._results(unique), strict=True))
            return [found[t] for t in texts]
        self.calls += 1
        try:
            return _checked(self.run(texts), len(texts))
        except EmbeddingUnavailable as exc:
            return [exc] * len(texts)  # the model is missing: each text alone would fail the same way
        except Exception as exc:  # noqa: BLE001 - one text may be at fault: each alone, below
            if len(texts) == 1:
                return [exc]
        return [_alone(self.run, t) for t in texts]


def _left(request: _Request) -> int:
    """How many of a request's texts are not yet taken into a call."""
    return len(request.texts) - request.next


def _checked(out: Sequence[Any], n: int) -> list[Any]:
    rows = list(out)
    if len(rows) != n:
        raise ValueError(f"the model gave {len(rows)} results for {n} texts")
    return rows


def _alone(run: Callable[[list[str]], Sequence[Any]], text: str) -> Any:
    """One text's result in a call of its own, or the exception it raised."""
    try:
        (row,) = _checked(run([text]), 1)
        return row
    except Exception as exc:  # noqa: BLE001 - the caller gets it as this text's result
        return exc


def _resolve(future: asyncio.Future[Any], results: list[Any]) -> None:
    if not future.done():
        future.set_result(results)


class Batcher:
    """A model's service in this process: ``each`` and ``all`` for a caller's texts, ``query`` for one.

    ``run`` is the model's batch function (``embed`` or ``encode``): a list of
    texts in, one result per text out, in order. Use ``batcher(model)``
    rather than making one: it is the process's one for that model.
    """

    def __init__(
        self,
        run: Callable[[list[str]], Sequence[Any]],
        *,
        name: str,
        wait: float = BATCH_WAIT_SECONDS,
        limit: int = BATCH_TEXTS,
        cache_size: int = QUERY_CACHE_SIZE,
        nice: int = EMBED_NICE,
        urgent_nice: int = URGENT_NICE,
    ) -> None:
        self.name = name
        self.urgent = _Lane(run, name=f"embed-{name}", wait=wait, limit=limit, nice=urgent_nice)
        """Texts someone waits for, at ``urgent_nice`` below the process's priority."""
        self.background = _Lane(run, name=f"embed-{name}-bg", wait=0.0, limit=limit, nice=nice)
        """The embedding worker's texts, at ``nice`` lower priority."""
        self.cache_size = cache_size
        self._cache: collections.OrderedDict[tuple[str, str], Any] = collections.OrderedDict()
        self._cache_lock = threading.Lock()

    async def each(self, texts: Sequence[str], *, urgent: bool = True) -> list[Any]:
        """Each text's result, or the exception embedding that text raised, in order.

        ``urgent=False`` for work nobody waits for (the background lane).
        """
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        request = _Request(list(texts), loop, future)
        future.add_done_callback(_on_done(request))
        (self.urgent if urgent else self.background).submit(request)
        return await future

    def hurry(self) -> int:
        """Someone now waits for the background lane's queued texts: the urgent lane runs them (how many).

        A recall waiting for messages this process's worker holds calls it,
        so they do not wait at the worker's lower priority.
        """
        return self.background.hand_over(self.urgent)

    async def all(self, texts: Sequence[str], *, urgent: bool = True) -> list[Any]:
        """Each text's result, in order; the first text's failure raised."""
        results = await self.each(texts, urgent=urgent)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    async def query(self, text: str) -> Any:
        """One text's result, from the cache when this model embedded it as a query lately.

        A numpy result is stored read-only and the same object is returned
        on every hit: callers must not change it.
        """
        key = (self.name, text)
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        (result,) = await self.all([text])
        result = _frozen(result)
        if self.cache_size > 0:
            with self._cache_lock:
                self._cache[key] = result
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return result


def _on_done(request: _Request) -> Callable[[asyncio.Future[Any]], None]:
    def done(future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            request.cancelled = True  # the lane drops what it has not started of these texts

    return done


def _frozen(result: Any) -> Any:
    """A numpy row as its own read-only array (not a view holding its whole batch); anything else as is."""
    copy = getattr(result, "copy", None)
    if copy is None or not hasattr(result, "setflags"):
        return result
    own = copy()
    own.setflags(write=False)
    return own


_by_model: weakref.WeakKeyDictionary[Any, Batcher] = weakref.WeakKeyDictionary()
_by_id: dict[int, tuple[Any, Batcher]] = {}  # models that cannot be weakly referenced or hashed: kept
_registry_lock = threading.Lock()
_handed = threading.Lock()  # a request's results and count of texts left, written by the lanes' threads
_live: weakref.WeakSet[_Lane] = weakref.WeakSet()  # lanes whose thread ran: stopped at exit


def batcher(model: Any) -> Batcher:
    """The one ``Batcher`` of ``model`` (an ``Embedder``, or an encoder with ``encode``) in this process."""
    with _registry_lock:
        try:
            found = _by_model.get(model)
        except TypeError:  # unhashable, or no weak references
            held = _by_id.get(id(model))
            found = held[1] if held is not None and held[0] is model else None
        if found is not None:
            return found
        made = Batcher(_caller(model), name=str(getattr(model, "name", type(model).__name__)))
        try:
            _by_model[model] = made
        except TypeError:
            _by_id[id(model)] = (model, made)
        return made


def _caller(model: Any) -> Callable[[list[str]], Sequence[Any]]:
    """``model.embed`` (else ``model.encode``), looked up at each call through a weak reference: the
    service does not keep its model alive (it is the registry's value, the model its key)."""
    method = "embed" if hasattr(model, "embed") else "encode"
    try:
        ref = weakref.ref(model)
    except TypeError:  # no weak references: the registry keeps it anyway (``_by_id``)
        return lambda texts: getattr(model, method)(texts)

    def run(texts: list[str]) -> Sequence[Any]:
        held = ref()
        if held is None:
            raise EmbeddingUnavailable("the model was released while its texts waited")
        return getattr(held, method)(texts)

    return run


@atexit.register
def _stop_lanes() -> None:
    """At the interpreter's exit, let each lane's call in flight finish before its thread is frozen."""
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    for lane in list(_live):
        lane.stop(max(0.0, deadline - time.monotonic()))
