"""Blocking use of caderno: ``connect_sync(url)`` and ``SyncMemory``, for scripts and threaded code.

``Memory`` is async because the agent loop and the server are; a script, a
notebook cell or a thread-pool web app wants plain calls. ``SyncMemory`` keeps
one event loop in a daemon thread of its own and runs every call there
(``asyncio.run_coroutine_threadsafe``), so:

- the ``Memory`` and its store (a SQLite file's connections, a PostgreSQL
  pool bound to one loop) only ever live on that one loop, whichever thread
  calls; several threads may call at once and their calls interleave as
  concurrent tasks would on an async ``Memory``;
- nothing is written twice: the blocking methods are generated from the
  async ones (``_blocking``), with their names, signatures and docstrings, so
  the two APIs cannot drift apart (``tests/test_sync_api.py`` checks that
  every public coroutine method of ``Memory`` has its blocking twin).

Called from a thread that runs an event loop, every entry point refuses
(``UsageError``) instead of blocking that loop: async code uses
``caderno.connect``. LangGraph refuses its sync calls inside a loop the same
way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from ...core.errors import UsageError
from ..engines.notebook_rules import MEMORY_CHAR_LIMIT, USER_CHAR_LIMIT
from ..facade import Memory
from .connect import connect

__all__ = ["CLOSE_GRACE_SECONDS", "SyncMemory", "connect_sync"]

P = ParamSpec("P")
R = TypeVar("R")

#: How long ``close()`` lets calls other threads have in flight finish before cancelling them.
#: An append or a read takes milliseconds and a first recall that loads the embedding model a
#: few seconds; only ``run_background`` (which never returns) is expected to be cancelled.
CLOSE_GRACE_SECONDS = 10.0


def _refuse_inside_loop(what: str) -> None:
    """Raise when the calling thread runs an event loop: blocking it would stall (or deadlock) that loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(
        f"{what} blocks, and this thread is running an event loop; in async code use "
        "`memory = await caderno.connect(url)` or `async with caderno.connect(url) as memory` instead"
    )


class _Portal:
    """One event loop in a daemon thread, and the one way into it from other threads."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closed = False
        self._calls: set[asyncio.Task[Any]] = set()  # touched on the loop's thread only
        self._thread = threading.Thread(target=self._loop.run_forever, name="caderno-sync", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def call(self, what: str, fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` on the loop and wait for its result (or its exception).

        Raises:
            UsageError: the calling thread runs an event loop, or this portal
                is closed (or was closed while the call waited).
        """
        _refuse_inside_loop(what)
        with self._lock:  # no call slips in after close() has begun
            if self._closed:
                raise UsageError(f"{what}: this SyncMemory is closed; open another with caderno.connect_sync(url)")
            future = asyncio.run_coroutine_threadsafe(self._track(fn, *args, **kwargs), self._loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise UsageError(f"{what}: this SyncMemory was closed while the call was running") from None
        except BaseException:
            future.cancel()  # a KeyboardInterrupt in the waiting thread stops the call too (no-op when done)
            raise

    async def _track(self, fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            return await fn(*args, **kwargs)
        finally:
            self._calls.discard(task)

    def close(self, finish: Callable[[], Awaitable[None]] | None) -> None:
        """Refuse new calls, let those in flight end (``CLOSE_GRACE_SECONDS``), run ``finish``, stop the loop.

        Idempotent, and callable from any thread but the loop's own.
        """
        _refuse_inside_loop("SyncMemory.close")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(finish), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    async def _shutdown(self, finish: Callable[[], Awaitable[None]] | None) -> None:
        if self._calls:
            _, late = await asyncio.wait(set(self._calls), timeout=CLOSE_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        try:
            if finish is not None:
                await finish()
        finally:
            rest = asyncio.all_tasks() - {asyncio.current_task()}
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await self._loop.shutdown_asyncgens()
            await self._loop.shutdown_default_executor()  # the threads SQLite work ran on


class _Blocking:
    """Base of the blocking wrappers: an async object (``_target``) and the portal its calls go through."""

    _target: Any
    _portal: _Portal


def _blocking(fn: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> Callable[Concatenate[_Blocking, P], R]:
    """The blocking twin of the coroutine method ``fn``: same name, signature and docstring."""
    what = fn.__qualname__

    @functools.wraps(fn)
    def method(self: _Blocking, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._portal.call(what, fn, self._target, *args, **kwargs)

    method.__qualname__ = f"Sync{fn.__qualname__}"
    return method


class BlockingPart(_Blocking):
    """A part of a ``Memory`` (``memory.facts``, ``memory.threads``…) whose coroutine methods block.

    The class of each part is made from the async one (``blocking_class``):
    ``help(memory.facts)`` lists its methods with their signatures. Other
    public attributes (``memory.consolidation.settings``) are the async
    part's own.
    """

    def __init__(self, target: Any, portal: _Portal) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._target, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(self._target) if not n.startswith("_")})

    def __repr__(self) -> str:
        return f"<blocking {self._target!r}>"


_classes: dict[type, type[BlockingPart]] = {}


def blocking_class(cls: type) -> type[BlockingPart]:
    """A ``BlockingPart`` subclass with a blocking twin of every public coroutine method of ``cls`` (made once)."""
    if cls in _classes:
        return _classes[cls]
    methods = {
        name: _blocking(fn)
        for name, fn in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }
    doc = f"``{cls.__name__}`` with blocking methods (``caderno.memory.adapters.sync``).\n\n{inspect.getdoc(cls) or ''}"
    made = type(f"Sync{cls.__name__}", (BlockingPart,), {"__doc__": doc, "__module__": __name__, **methods})
    return _classes.setdefault(cls, made)  # two threads racing here keep one class


def _part(target: Any, portal: _Portal) -> Any:
    return blocking_class(type(target))(target, portal)


class SyncMemory(_Blocking):
    """``Memory`` with blocking methods: for scripts and threaded code (``caderno.connect_sync``).

    The same flat methods and parts as ``Memory``, each call blocking until
    it is done; safe to share between threads. Use it as a context manager
    (``with caderno.connect_sync("app.db") as memory:``) or call ``close()``.
    Inside async code (a thread running an event loop) every call refuses:
    use ``caderno.connect`` there.

    Args:
        memory: a ``Memory`` that is not open yet; it is opened, used and
            closed on this object's own event loop, in a thread of its own.
    """

    def __init__(self, memory: Memory) -> None:
        self._start(memory.open)

    @classmethod
    def _opening(cls, opener: Callable[[], Awaitable[Memory]]) -> SyncMemory:
        self = cls.__new__(cls)
        self._start(opener)
        return self

    def _start(self, opener: Callable[[], Awaitable[Memory]]) -> None:
        _refuse_inside_loop("caderno.connect_sync")
        self._portal = _Portal()
        try:
            memory = self._portal.call("caderno.connect_sync", opener)
        except BaseException:
            self._portal.close(None)
            raise
        self._target = memory
        self.threads = _part(memory.threads, self._portal)
        """Thread records, blocking (``Memory.threads``)."""
        self.messages = _part(memory.messages, self._portal)
        """Stored messages changed and audited, blocking (``Memory.messages``)."""
        self.working_memory = _part(memory.working_memory, self._portal)
        """Versioned state and patch log, blocking (``Memory.working_memory``)."""
        self.facts = _part(memory.facts, self._portal)
        """Facts and their history, blocking (``Memory.facts``)."""
        self.consolidation = _part(memory.consolidation, self._portal)
        """Summaries and fact extraction, blocking (``Memory.consolidation``)."""
        self.tasks = _part(memory.tasks, self._portal)
        """Scheduled tasks, blocking (``Memory.tasks``)."""
        self.macros = _part(memory.macros, self._portal)
        """Learned tool macros, blocking (``Memory.macros``)."""
        self.prefixes = _part(memory.prefixes, self._portal)
        """Approved command prefixes, blocking (``Memory.prefixes``)."""
        self.keys = _part(memory.keys, self._portal)
        """HTTP API keys, blocking (``Memory.keys``)."""

    def notebook(
        self, resource_id: str, *, memory_char_limit: int = MEMORY_CHAR_LIMIT, user_char_limit: int = USER_CHAR_LIMIT
    ) -> Any:
        """The resource's notebook in this database, blocking (``Memory.notebook``)."""
        book = self._target.notebook(resource_id, memory_char_limit=memory_char_limit, user_char_limit=user_char_limit)
        return _part(book, self._portal)

    def supports(self, *kinds: type[Any]) -> bool:
        """Whether the store handles every one of these operation types (``Memory.supports``)."""
        return bool(self._target.supports(*kinds))

    @property
    def closed(self) -> bool:
        """True once ``close()`` has begun: every call then raises ``UsageError``."""
        return self._portal.closed

    def close(self) -> None:
        """Let calls in flight finish (``CLOSE_GRACE_SECONDS``), close the ``Memory``, stop the loop's thread.

        Safe from any thread, and more than once. Messages still waiting for
        vectors stay queued in the database for the next process.
        """
        self._portal.close(self._target.close)

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<SyncMemory {state} over {type(self._target.store).__name__}>"

    # The flat methods of ``Memory``, blocking (``_blocking`` keeps each one's signature and docstring).
    append_messages = _blocking(Memory.append_messages)
    get_messages = _blocking(Memory.get_messages)
    get_working_memory = _blocking(Memory.get_working_memory)
    update_working_memory = _blocking(Memory.update_working_memory)
    list_threads = _blocking(Memory.list_threads)
    delete_thread = _blocking(Memory.delete_thread)
    list_resources = _blocking(Memory.list_resources)
    erase_resource = _blocking(Memory.erase_resource)
    export_resource = _blocking(Memory.export_resource)
    import_resource = _blocking(Memory.import_resource)
    recall = _blocking(Memory.recall)
    get_context = _blocking(Memory.get_context)
    reindex = _blocking(Memory.reindex)
    flush = _blocking(Memory.flush)
    batch = _blocking(Memory.batch)
    run = _blocking(Memory.run)
    run_background = _blocking(Memory.run_background)


def connect_sync(url: str | Any = "sqlite:///caderno.db", **options: Any) -> SyncMemory:
    """Open a blocking ``SyncMemory`` on the database a URL names: ``caderno.connect`` for plain code.

    Takes the same URL and options as ``caderno.connect``. Use it as
    ``with caderno.connect_sync("app.db") as memory:``, or call
    ``memory.close()`` when done.

    Raises:
        UsageError: called from a thread that runs an event loop (use
            ``caderno.connect`` there), or a bad URL or option.
    """
    _refuse_inside_loop("caderno.connect_sync")
    return SyncMemory._opening(lambda: connect(url, **options))
