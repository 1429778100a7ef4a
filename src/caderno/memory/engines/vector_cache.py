"""The relevant leg's vectors: a per-process cache of each resource's int8 codes, searched by brute force.

Each vector is held as two int8 levels: the first is scanned (with
``simsimd``, a dependency; numpy if it cannot load) and the best candidates
are rescored from both, within ~1e-5 of the float32 cosine (``_Entry``).
A resource's first load fills its rows block by block as the store reads
them (``_FirstLoad``), without the threads unless a search within one needs
them; its entry is then refreshed incrementally from the embeddings change
feed, and the cache is bounded in bytes (least recently used resources are
dropped first), so a search costs one small query plus a matrix-vector
product over that resource alone. Retrieval itself is
``caderno.memory.engines.recall``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ...stores import ops
from ...stores.base import Runner

log = logging.getLogger("caderno.memory.engines.vector_cache")


#: The search scans ``k * OVERSAMPLE`` candidates (at least ``MIN_CANDIDATES``)
#: out of the coarse int8 level and rescores them from both levels (see
#: ``_Entry``). The coarse score is off by ~0.001 at most here, so even 2x
#: finds the exact top 10 on real queries; 8x leaves room for dense
#: neighbourhoods; rescoring 200 rows is a small product. A resource (or
#: thread) with no more vectors than that is rescored whole.
OVERSAMPLE = 8


MIN_CANDIDATES = 200


#: Rows quantized (or scanned without SimSIMD) per step: one float32
#: temporary of 1,024 x 384 x 4 bytes = 1.5 MB stays in cache; 100k vectors
#: quantize in ~70 ms here, against ~380 ms at 8,192 rows a step.
LOAD_CHUNK = 1_024


@functools.cache
def code_dtype(dim: int) -> Any:
    """One vector's codes as stored beside it: both int8 levels, then their two float32 scales (little-endian).

    ``2 * dim + 8`` bytes (776 at 384 dimensions, half of float32's), each
    vector's on its own: no parameter shared between vectors, so a vector's
    codes never change when others are added.
    """
    import numpy as np

    return np.dtype([("hi", "i1", (dim,)), ("lo", "i1", (dim,)), ("hi_scale", "<f4"), ("lo_scale", "<f4")])


def quantize(vectors: Any) -> Any:
    """The codes (``code_dtype``) of float32 ``vectors``, one row each: what ``_Entry`` holds.

    The embedding worker stores them beside each vector, so a cache's first
    load reads half the bytes and skips this; rows stored without them are
    quantized here at load. ``LOAD_CHUNK`` rows at a time through one reused
    temporary: five times faster than whole-array numpy expressions, which
    allocate and walk 150 MB per step at 100k vectors.
    """
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    dim = vectors.shape[1]
    out = np.empty(len(vectors), dtype=code_dtype(dim))
    tmp = np.empty((min(LOAD_CHUNK, len(vectors)), dim), dtype=np.float32)
    for lo in range(0, len(vectors), LOAD_CHUNK):
        part, codes = vectors[lo : lo + LOAD_CHUNK], out[lo : lo + LOAD_CHUNK]
        t = tmp[: len(part)]
        np.abs(part, out=t)
        top = np.maximum(t.max(axis=1), 1e-30) * np.float32(1 / 127)
        np.multiply(part, (1 / top)[:, None], out=t)
        np.rint(t, out=t)
        codes["hi"] = t
        codes["hi_scale"] = top
        np.multiply(t, top[:, None], out=t)
        np.subtract(part, t, out=t)  # what the first level leaves
        low = np.maximum(np.maximum(t.max(axis=1), -t.min(axis=1)), 1e-30) * np.float32(1 / 127)
        np.multiply(t, (1 / low)[:, None], out=t)
        np.rint(t, out=t)
        codes["lo"] = t
        codes["lo_scale"] = low
    return out


@functools.cache
def _int8_kernel() -> Any:
    """SimSIMD's int8 dot product, or None when it cannot load: numpy has no fast int8 product."""
    try:
        import simsimd
    except ImportError:
        return None
    return simsimd


class _Entry:
    """One resource's vectors, two bytes a dimension.

    Each vector ``x`` is held as two int8 levels, row-major: ``hi`` with one
    scale per vector (``x * 127 / max|x|``) and ``lo``, the remainder
    ``x - hi * hi_scale`` quantized the same way. ``hi`` alone is the
    coarse copy the search scans (a quarter of float32's bytes, with
    SimSIMD's int8 product); ``hi * hi_scale + lo * lo_scale`` gives the
    vector back within ``max|x| / 32,258`` per dimension, so the best
    candidates are rescored to within ~1e-5 of the float32 cosine.
    No float32 copy is kept: 800 bytes a 384-dimension vector with its
    seq, thread and lookup, against ~2,000 with float32 and an int8 copy.

    ``order`` lists rows by seq (``sorted_seqs`` the seqs in that order), so
    a vector read again through the change feed's overlap window, or
    re-embedded, replaces its row: no Python object per row.

    ``thread_codes`` holds each row's thread (an index into ``code_of``), or
    -1 while it is not known: the threads are read only once a search
    within a thread needs them (``VectorIndex.feed``), so a resource's first
    load over the whole resource skips the scan of its messages.
    """

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self.n = 0
        self.last_id = 0
        self.hi = np.zeros((0, dim), dtype=np.int8)
        self.lo = np.zeros((0, dim), dtype=np.int8)
        self.hi_scale = np.zeros(0, dtype=np.float32)
        self.lo_scale = np.zeros(0, dtype=np.float32)
        self.seqs = np.zeros(0, dtype=np.int64)
        self.thread_codes = np.zeros(0, dtype=np.int32)
        self.sorted_seqs = np.zeros(0, dtype=np.int64)
        self.order = np.zeros(0, dtype=np.int64)
        self.code_of: dict[str, int] = {}

    _ARRAYS = ("hi", "lo", "hi_scale", "lo_scale", "seqs", "thread_codes")

    @property
    def unthreaded(self) -> bool:
        """Whether some row's thread is not known (a search within a thread would miss it)."""
        return bool((self.thread_codes[: self.n] < 0).any())

    @property
    def nbytes(self) -> int:
        arrays = sum(getattr(self, name).nbytes for name in self._ARRAYS)
        return int(arrays + self.sorted_seqs.nbytes + self.order.nbytes + 64 * len(self.code_of))

    def add(self, seqs: Sequence[int], threads: Sequence[str], blob: bytes) -> None:
        """Take ``len(seqs)`` float32 vectors (row-major ``blob``), ``threads[i]`` the thread of ``seqs[i]``."""
        by_thread: dict[str, list[int]] = {}
        for seq, name in zip(seqs, threads, strict=True):
            by_thread.setdefault(name, []).append(seq)
        self.load(seqs, [blob], by_thread)

    def load(
        self,
        seqs: Sequence[int],
        blocks: list[bytes],
        threads: Mapping[str, Sequence[int]],
        codes: list[bytes] | None = None,
    ) -> None:
        """Take the vectors of ``seqs`` (float32 ``blocks``, then ``codes`` blocks of ``code_dtype``
        as stored beside them, in that order) and each thread's seqs.

        A seq already held is replaced in place; a seq twice in ``seqs``
        keeps its later vector. A seq no thread names keeps the thread it
        had (none, for a new row: not read, or deleted while it was read).
        Works on whole arrays and blocks, never on one Python object per
        vector: this is a resource's first load.

        The blocks are taken: each list is emptied as its blocks are copied,
        and the memory they held is handed back to the system every
        ``TRIM_EVERY`` bytes, so a load holds little more than the rows it
        fills (the store's bytes and the rows together were ~160 MB at 100k).
        """
        self._load_rows(seqs, blocks, codes if codes is not None else [])
        self._set_threads(threads)

    def _load_rows(self, seqs: Sequence[int], floats: list[bytes], codes: list[bytes]) -> None:
        """Rows for ``seqs``, their vectors in ``floats`` (float32, quantized here) then ``codes`` (kept as they are)."""
        import numpy as np

        if not len(seqs):
            floats.clear()
            codes.clear()
            return
        new = np.asarray(seqs, dtype=np.int64)
        rows = np.full(len(new), -1, dtype=np.int64)  # where each vector goes; -1: a later copy wins
        if self.n:
            at = np.minimum(np.searchsorted(self.sorted_seqs, new), self.n - 1)
            held = self.sorted_seqs[at] == new
            rows[held] = self.order[at[held]]
        fresh = np.flatnonzero(rows < 0)
        if len(fresh):
            uniq = new[fresh]
            if not (uniq[1:] > uniq[:-1]).all():  # usually they are: the feed in seq order, none twice
                uniq, last = np.unique(uniq[::-1], return_index=True)
                fresh = np.sort(fresh[::-1][last])
            self._append(new[fresh], uniq)
            rows[fresh] = np.arange(self.n - len(fresh), self.n)
        done = freed = 0
        for source, kind in ((floats, None), (codes, code_dtype(self.dim))):
            source.reverse()  # popped from the end, in order
            while source:
                blob = source.pop()
                if kind is None:
                    block = np.frombuffer(blob, dtype=np.float32).reshape(-1, self.dim)
                else:
                    block = np.frombuffer(blob, dtype=kind)
                at = rows[done : done + len(block)]
                done += len(block)
                keep = at >= 0
                if not keep.all():  # a later copy of some seq wins
                    at, block = at[keep], block[keep]
                self._put(at, block if kind is not None else quantize(block))
                freed += len(blob)
                del blob, block
                if freed >= TRIM_EVERY:
                    _trim_heap()
                    freed = 0

    def extend(self, seqs: Sequence[int], block: bytes, coded: bool) -> None:
        """Append the vectors of ``seqs`` (``block``: float32 rows, or their codes when ``coded``) as
        new rows, as a first load reads them (``_FirstLoad``); ``finish`` then makes them searchable."""
        import numpy as np

        start, need = self.n, self.n + len(seqs)
        self._reserve(need)
        if coded:
            codes = np.frombuffer(block, dtype=code_dtype(self.dim))
        else:
            codes = quantize(np.frombuffer(block, dtype=np.float32).reshape(-1, self.dim))
        self.seqs[start:need] = seqs
        self.thread_codes[start:need] = -1
        self.n = need
        for name in ("hi", "lo", "hi_scale", "lo_scale"):
            getattr(self, name)[start:need] = codes[name]

    def finish(self, threads: Mapping[str, Sequence[int]]) -> None:
        """Make the rows ``extend`` appended searchable by seq (a seq appended twice keeps its later
        row) and give them their threads (``load``'s ``threads``)."""
        import numpy as np

        seqs = self.seqs[: self.n]
        if (seqs[1:] > seqs[:-1]).all():  # the usual first load: the feed in seq order, none twice
            self.order = np.arange(self.n)
        else:
            uniq, last = np.unique(seqs[::-1], return_index=True)
            if len(uniq) < self.n:
                self._keep(np.sort(self.n - 1 - last))
            self.order = np.argsort(self.seqs[: self.n], kind="stable")
        self.sorted_seqs = self.seqs[self.order]
        self._set_threads(threads)

    def _keep(self, rows: Any) -> None:
        """Keep only ``rows`` (increasing), moved down in place a few at a time (no copy of the whole)."""
        for name in self._ARRAYS:
            array = getattr(self, name)
            for lo in range(0, len(rows), LOAD_CHUNK):  # rows[i] >= i: what a step reads is not yet overwritten
                part = rows[lo : lo + LOAD_CHUNK]
                array[lo : lo + len(part)] = array[part]
        self.n = len(rows)

    def _append(self, new: Any, uniq: Any) -> None:
        """Add rows for the seqs ``new`` (distinct, none held; ``uniq`` them sorted), threadless for now."""
        import numpy as np

        start, need = self.n, self.n + len(new)
        self._reserve(need)
        self.seqs[start:need] = new
        self.thread_codes[start:need] = -1
        self.n = need
        if start and uniq[0] > self.sorted_seqs[-1]:  # the usual case: the feed brings newer seqs
            self.sorted_seqs = np.concatenate([self.sorted_seqs, uniq])
            self.order = np.concatenate([self.order, start + np.argsort(new, kind="stable")])
        else:
            self.order = np.argsort(self.seqs[:need], kind="stable")
            self.sorted_seqs = self.seqs[self.order]

    def _set_threads(self, threads: Mapping[str, Sequence[int]]) -> None:
        """Give the held rows among each thread's seqs that thread's code (seqs not held are passed over)."""
        import numpy as np

        if not threads or not self.n:
            return
        codes = self.code_of
        for name in threads:
            codes.setdefault(name, len(codes))
        seqs = np.fromiter(itertools.chain.from_iterable(threads.values()), dtype=np.int64)
        names = np.repeat(
            np.fromiter(map(codes.__getitem__, threads), dtype=np.int32), list(map(len, threads.values()))
        )
        at = np.minimum(np.searchsorted(self.sorted_seqs, seqs), self.n - 1)
        held = self.sorted_seqs[at] == seqs
        self.thread_codes[self.order[at[held]]] = names[held]

    def _reserve(self, need: int) -> None:
        """Grow the arrays to hold ``need`` rows (a quarter spare, not double: the bound is in bytes)."""
        import numpy as np

        cap = len(self.seqs)
        if need <= cap:
            return
        cap = need if self.n == 0 else max(need, cap + cap // 4, 1024)
        for name in self._ARRAYS:
            old = getattr(self, name)
            grown = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            grown[: self.n] = old[: self.n]
            setattr(self, name, grown)

    def _put(self, rows: Any, codes: Any) -> None:
        """Store ``codes`` (``code_dtype``, one a row) at ``rows``: a block of whole rows is a slice copy."""
        if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and (rows[1:] > rows[:-1]).all():
            rows = slice(int(rows[0]), int(rows[-1]) + 1)  # the first load: consecutive rows
        for name in ("hi", "lo", "hi_scale", "lo_scale"):
            getattr(self, name)[rows] = codes[name]

    def vectors(self, rows: Any) -> Any:
        """The float32 vectors of ``rows`` rebuilt from both levels (within ~1e-5 of those stored)."""
        import numpy as np

        out = self.hi[rows].astype(np.float32) * self.hi_scale[rows, None]
        out += self.lo[rows].astype(np.float32) * self.lo_scale[rows, None]
        return out

    def coarse(self, query: Any, rows: Any) -> Any:
        """Scores of ``rows`` (None: every row) from the ``hi`` level alone, for ranking candidates."""
        import numpy as np

        hi = self.hi[: self.n] if rows is None else self.hi[rows]
        scale = self.hi_scale[: self.n] if rows is None else self.hi_scale[rows]
        kernel = _int8_kernel()
        if kernel is not None:
            top = max(float(np.abs(query).max()), 1e-30)
            q8 = np.rint(query * (127.0 / top)).astype(np.int8)
            dots = np.asarray(kernel.cdist(q8[None], hi, metric="dot", out_dtype="float32"))[0]
        else:  # numpy: float32 products a block at a time
            steps = range(0, len(hi), LOAD_CHUNK)
            dots = np.concatenate([hi[lo : lo + LOAD_CHUNK].astype(np.float32) @ query for lo in steps])
        return dots * scale

    def search(self, query: Any, k: int, min_similarity: float, thread_id: str | None) -> list[tuple[int, float]]:
        """``(seq, cosine)`` of the best ``k`` vectors at or above ``min_similarity``."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        rows: Any = None  # None: every row
        if thread_id is not None:
            code = self.code_of.get(thread_id)
            if code is None:
                return []
            rows = np.flatnonzero(self.thread_codes[: self.n] == code)
        count = self.n if rows is None else len(rows)
        m = min(max(k * OVERSAMPLE, MIN_CANDIDATES), count)
        if m == count:  # few enough to rescore them all
            cand = np.arange(count) if rows is None else rows
        else:
            picked = _top(self.coarse(q, rows), m)
            cand = np.sort(picked if rows is None else rows[picked])
        sims = self.vectors(cand) @ q
        keep = np.flatnonzero(sims >= min_similarity)
        if len(keep) > k:
            keep = keep[np.argpartition(-sims[keep], k - 1)[:k]]
        keep = keep[np.argsort(-sims[keep], kind="stable")]
        return [(int(self.seqs[r]), float(sims[i])) for r, i in zip(cand[keep], keep, strict=True)]


def _top(scores: Any, m: int) -> Any:
    """Indices of the ``m`` highest ``scores`` (any order).

    A strided sample gives a threshold that ~4m scores pass; one comparison
    then leaves a small set to partition (argpartition over 1M floats alone
    costs ~9 ms here). Falls back to the full partition if too few pass.
    """
    import numpy as np

    stride = 64
    if len(scores) >= 64 * stride * m // 16:
        sample = scores[::stride]
        r = min(len(sample), 4 * m // stride + 8)
        t = np.partition(sample, len(sample) - r)[len(sample) - r]
        sel = np.flatnonzero(scores >= t)
        if len(sel) >= m:
            return sel[np.argpartition(-scores[sel], m - 1)[:m]]
    return np.argpartition(-scores, m - 1)[:m]


class _FirstLoad:
    """A resource's first load, filled block by block while the store reads it (``ReadVectors.into``).

    Each block is copied into rows made for every vector at once (the store
    counts them first) and dropped, so the store's bytes and the cache's
    rows are never all resident (the blocks of a 100k load are ~80 MB). The
    entry is the load's own until ``VectorIndex.search_rows`` finishes and
    keeps it. The dimension comes from the first block's size.
    """

    def __init__(self) -> None:
        self.entry: _Entry | None = None
        self.expected = 0

    def expect(self, vectors: int) -> None:
        self.expected = vectors

    def take(self, seqs: list[int], block: bytes, coded: bool) -> None:
        if not seqs:
            return
        row = len(block) // len(seqs)
        dim = (row - 8) // 2 if coded else row // 4
        if self.entry is None:
            self.entry = _Entry(dim)
            self.entry._reserve(max(self.expected, len(seqs)))
        elif dim != self.entry.dim:
            raise ValueError(f"a block of {dim}-dimension vectors in a load of {self.entry.dim}")
        self.entry.extend(seqs, block, coded)


class VectorIndex:
    """Per-resource vector cache with an upper bound in bytes (LRU over resources)."""

    def __init__(self, max_bytes: int = 512 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, resource_id: str | None = None) -> None:
        """Drop cached vectors of one resource (or all): after deletes or a reindex."""
        with self._lock:
            for key in [k for k in self._entries if resource_id is None or k[0] == resource_id]:
                del self._entries[key]

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    async def search(
        self,
        run: Runner,
        resource_id: str,
        model: str,
        dim: int,
        query: Any,
        k: int,
        min_similarity: float,
        thread_id: str | None,
    ) -> list[tuple[int, float]]:
        """``(seq, cosine)`` of the best ``k`` vectors at or above ``min_similarity``.

        Reads the change feed past what the cache holds: a resource's first
        load straight into its rows as the store reads it (``_FirstLoad``); a
        large batch is joined and searched off the event loop, and the memory
        the store's rows took is then handed back to the system.
        """
        feed = self.feed(resource_id, model, thread_id)
        return await self.search_rows(feed, dim, await run(feed), query, k, min_similarity, thread_id)

    def feed(self, resource_id: str, model: str, thread_id: str | None = None) -> ops.ReadVectors:
        """The read of the change feed past what the cache holds (for a batch of the caller's), for a
        search within ``thread_id`` (None: the whole resource).

        The threads come only when needed: every message's when a search
        within a thread finds some row's thread unknown, the new vectors'
        when every row's is known, none otherwise (a resource's first load
        for a search over the whole resource then skips the scan of its
        messages: ~15% of that load at 100k).
        """
        with self._lock:
            entry = self._entries.get((resource_id, model))
            unthreaded = entry is None or entry.unthreaded
        if not unthreaded:
            threads: Literal["new", "all", "none"] = "new"
        else:
            threads = "none" if thread_id is None else "all"
        if entry is None:  # the first load: block by block into its rows, as the store reads them
            return ops.ReadVectors(resource_id=resource_id, model=model, after_id=0, threads=threads, into=_FirstLoad())
        return ops.ReadVectors(resource_id=resource_id, model=model, after_id=entry.last_id, threads=threads)

    async def search_rows(
        self,
        feed: ops.ReadVectors,
        dim: int,
        rows: ops.VectorRows,
        query: Any,
        k: int,
        min_similarity: float,
        thread_id: str | None,
    ) -> list[tuple[int, float]]:
        """``search`` once ``feed`` was read: the new rows joined to the cache (a first load's rows
        kept, ``_FirstLoad``), then the search."""
        key = (feed.resource_id, feed.model)
        first = feed.into if isinstance(feed.into, _FirstLoad) else None
        if first is not None:
            entry = first.entry or _Entry(dim)
            if entry.dim != dim:
                raise ValueError(f"{feed.model!r} vectors of {entry.dim} dimensions stored, {dim} searched")
            size = entry.n
        else:
            with self._lock:
                entry = self._entries.get(key) or _Entry(dim)
            size = len(rows.seqs)
        if size < BIG_LOAD:
            return self._refresh(key, entry, rows, first is not None, query, k, min_similarity, thread_id)
        hits = await asyncio.to_thread(
            self._refresh, key, entry, rows, first is not None, query, k, min_similarity, thread_id
        )
        del rows
        _trim_heap()
        return hits

    def _refresh(
        self,
        key: tuple[str, str],
        entry: _Entry,
        rows: ops.VectorRows,
        first: bool,
        query: Any,
        k: int,
        min_similarity: float,
        thread_id: str | None,
    ) -> list[tuple[int, float]]:
        with self._lock:
            if first:
                entry.finish(rows.threads)
            else:
                entry.load(rows.seqs, rows.vectors, rows.threads, rows.codes)
            entry.last_id = max(entry.last_id, rows.last_id)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > 1 and sum(e.nbytes for e in self._entries.values()) > self.max_bytes:
                self._entries.popitem(last=False)
            if entry.n == 0:
                return []
            return entry.search(query, k, min_similarity, thread_id)


#: A change-feed batch of at least this many vectors is quantized in a worker
#: thread, and the heap trimmed after it (``_trim_heap``).
BIG_LOAD = 10_000


#: A load hands the memory of the store's blocks back to the system each time
#: it has copied this many bytes of them (``_Entry.load``), so the rows it
#: fills and the blocks they come from are not all resident at once.
TRIM_EVERY = 16 * 1024 * 1024


def _trim_heap() -> None:
    """Give the memory freed by a large load back to the system (glibc; a no-op elsewhere).

    The store hands a batch over in blocks of a few MB; freed, those can
    stay in glibc's heap (an object per row once kept ~250 MB of a 100k
    load resident, unused; bench/recall_speed.py measures it).
    """
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
