"""CadernoStore against LangGraph's own InMemoryStore, and under a real LangGraph graph.

The differential tests apply the same random operations to both stores and
compare every result (values, keys, namespaces, order), ignoring timestamps
and scores. Two documented differences are bridged, not hidden:

* search without a query: CadernoStore returns the most recently updated
  items first (as LangGraph's database stores do); InMemoryStore keeps
  insertion order. The expected page is InMemoryStore's complete result,
  put in recency order, then cut with offset/limit.
* list_namespaces: InMemoryStore also lists namespaces a get or delete
  touched that hold nothing; those are pruned from it before comparing.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import sqlite3
import subprocess
import sys
import uuid
from typing import Any, TypedDict, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import caderno
from caderno.core.clock import utcnow
from caderno.core.errors import MissingExtra, UsageError
from caderno.embeddings import HashingEmbedder
from caderno.memory.adapters.connect import open_store
from caderno.stores import ops
from conftest import python_env

pytest.importorskip("langgraph.store.memory")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402

from caderno.integrations.langgraph import CadernoStore, SyncCallInEventLoop  # noqa: E402

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
EVERYTHING = 10**6

# -- strategies: small alphabets so operations collide ----------------------------------------

labels = st.sampled_from(["a", "b", "c"])
namespaces = st.lists(labels, min_size=1, max_size=2).map(tuple)
prefixes = st.lists(labels, max_size=1).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3"])
values = st.fixed_dictionaries(
    {
        "n": st.integers(0, 3),
        "tag": st.sampled_from(["x", "y"]),
        "meta": st.fixed_dictionaries({"k": st.sampled_from(["a", "b"])}),
        "l": st.lists(st.integers(0, 1), max_size=2),
    }
)
conditions = st.one_of(
    st.tuples(st.just("n"), st.integers(0, 3)),
    st.tuples(
        st.just("n"),
        st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$ne", "$eq"]).flatmap(
            lambda o: st.integers(0, 3).map(lambda i: {o: i})
        ),
    ),
    st.tuples(st.just("n"), st.just({"$gte": 1, "$lt": 3})),
    st.tuples(st.just("tag"), st.sampled_from(["x", "y", {"$eq": "y"}, {"$ne": "x"}])),
    st.tuples(st.just("meta"), st.sampled_from([{"k": "a"}, {"k": "b"}, {"k": {"$ne": "a"}}])),
    st.tuples(st.just("l"), st.sampled_from([[], [0], [0, 1], [1, 1]])),
    st.tuples(st.just("missing"), st.just(1)),
)
filters = st.one_of(st.none(), st.lists(conditions, max_size=2).map(dict))
paths = st.lists(st.sampled_from(["a", "b", "c", "*"]), min_size=1, max_size=2).map(tuple)

put = st.builds(PutOp, namespace=namespaces, key=keys, value=values, index=st.none(), ttl=st.none())
delete = st.builds(PutOp, namespace=namespaces, key=keys, value=st.none(), index=st.none(), ttl=st.none())
get = st.builds(GetOp, namespace=namespaces, key=keys, refresh_ttl=st.just(True))
search = st.builds(
    SearchOp,
    namespace_prefix=prefixes,
    filter=filters,
    limit=st.integers(1, 5),
    offset=st.integers(0, 3),
    query=st.none(),
    refresh_ttl=st.just(True),
)
list_ns = st.builds(
    ListNamespacesOp,
    match_conditions=st.lists(
        st.builds(MatchCondition, match_type=st.sampled_from(["prefix", "suffix"]), path=paths),
        max_size=2,
    ).map(tuple),
    max_depth=st.sampled_from([None, 1, 2]),
    limit=st.integers(1, 6),
    offset=st.integers(0, 2),
)
one_op = st.one_of(put, put, put, put, delete, get, search, search, search, list_ns)
steps = st.lists(
    st.one_of(one_op.map(lambda op: [op]), st.lists(one_op, min_size=2, max_size=4)), min_size=8, max_size=30
)


class Recency:
    """The order of writes: the oracle for "most recently updated first"."""

    def __init__(self) -> None:
        self.seq: dict[tuple[tuple[str, ...], str], int] = {}
        self.clock = 0

    def record(self, batch: list[Any]) -> None:
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in batch:
            if isinstance(op, PutOp):
                last.pop((op.namespace, op.key), None)
                last[(op.namespace, op.key)] = op
        for k in last:
            self.clock += 1
            self.seq[k] = self.clock


def _row(item: Any) -> Any:
    return None if item is None else (item.namespace, item.key, item.value)


def _prune(store: InMemoryStore) -> None:
    for ns in [ns for ns, items in store._data.items() if not items]:
        del store._data[ns]


async def _expected_read(reference: InMemoryStore, recency: Recency, op: Any) -> Any:
    """What CadernoStore must answer to a read, from InMemoryStore's state now."""
    if isinstance(op, SearchOp):
        everything = await reference.asearch(op.namespace_prefix, filter=op.filter, limit=EVERYTHING)
        everything.sort(key=lambda it: -recency.seq[(it.namespace, it.key)])
        return [_row(it) for it in everything[op.offset : op.offset + op.limit]]
    _prune(reference)
    (result,) = await reference.abatch([op])
    return result


async def _differential(store: CadernoStore, batches: list[list[Any]]) -> None:
    reference = InMemoryStore()
    recency = Recency()
    for batch in batches:
        # Reads see the state from before the batch's writes, in both stores.
        expected_reads = {
            i: await _expected_read(reference, recency, op)
            for i, op in enumerate(batch)
            if isinstance(op, (SearchOp, ListNamespacesOp))
        }
        expected = await reference.abatch(batch)
        recency.record(batch)
        got = await store.abatch(batch)
        for i, op in enumerate(batch):
            if isinstance(op, GetOp):
                assert _row(got[i]) == _row(expected[i]), op
            elif isinstance(op, SearchOp):
                assert [_row(it) for it in got[i]] == expected_reads[i], op
            elif isinstance(op, ListNamespacesOp):
                assert got[i] == expected_reads[i], op
            else:
                assert got[i] is None


@SETTINGS
@given(batches=steps)
def test_random_operations_match_langgraphs_in_memory_store(db_url: str, batches: list[list[Any]]) -> None:
    async def run() -> None:
        async with caderno.connect(db_url, embedder=None) as memory:
            # A fresh resource per example isolates it on a shared database.
            await _differential(CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}"), batches)

    asyncio.run(run())


def _random_batches(rng: random.Random, n: int) -> list[list[Any]]:
    """Long random sequences: hypothesis favours short simple ones, these fill the namespaces."""
    label = lambda: rng.choice("abc")  # noqa: E731
    ns = lambda: tuple(label() for _ in range(rng.randint(1, 2)))  # noqa: E731

    def value() -> dict[str, Any]:
        return {
            "n": rng.randint(0, 3),
            "tag": rng.choice("xy"),
            "meta": {"k": rng.choice("ab")},
            "l": [rng.randint(0, 1) for _ in range(rng.randint(0, 2))],
        }

    def op() -> Any:
        kind = rng.choices(["put", "delete", "get", "search", "list"], weights=[5, 1, 1, 3, 1])[0]
        if kind == "put":
            return PutOp(ns(), rng.choice(["k1", "k2", "k3"]), value())
        if kind == "delete":
            return PutOp(ns(), rng.choice(["k1", "k2", "k3"]), None)
        if kind == "get":
            return GetOp(ns(), rng.choice(["k1", "k2", "k3"]))
        if kind == "search":
            conds = [FILTER_CONDITIONS[rng.randrange(len(FILTER_CONDITIONS))] for _ in range(rng.randint(0, 2))]
            prefix = tuple(label() for _ in range(rng.randint(0, 1)))
            return SearchOp(prefix, dict(conds) or None, limit=rng.randint(1, 6), offset=rng.randint(0, 3))
        paths = [tuple(rng.choice("abc*") for _ in range(rng.randint(1, 2))) for _ in range(rng.randint(0, 2))]
        conditions = tuple(MatchCondition(rng.choice(["prefix", "suffix"]), p) for p in paths)
        return ListNamespacesOp(conditions, rng.choice([None, 1, 2]), limit=rng.randint(1, 6), offset=rng.randint(0, 2))

    return [[op() for _ in range(rng.choice([1, 1, 1, 2, 3]))] for _ in range(n)]


FILTER_CONDITIONS: list[tuple[str, Any]] = [
    ("n", 1),
    ("n", {"$gt": 1}),
    ("n", {"$gte": 2}),
    ("n", {"$lt": 2}),
    ("n", {"$lte": 1}),
    ("n", {"$ne": 0}),
    ("n", {"$eq": 3}),
    ("n", {"$gte": 1, "$lt": 3}),
    ("tag", "x"),
    ("tag", {"$ne": "x"}),
    ("meta", {"k": "a"}),
    ("meta", {"k": {"$eq": "b"}}),
    ("l", [0]),
    ("l", []),
    ("missing", 1),
]


@pytest.mark.parametrize("seed", range(3))
async def test_long_random_sequences_match_langgraphs_in_memory_store(db_url: str, seed: int) -> None:
    async with caderno.connect(db_url, embedder=None) as memory:
        await _differential(CadernoStore(memory), _random_batches(random.Random(seed), 400))


# -- filters in SQL ---------------------------------------------------------------------------

#: Keys that are not plain names: each is a field name like any other, never SQL or a JSON path.
HOSTILE_KEYS = ["a') OR 1=1 --", 'say "hi"', "a.b", "$.n", "a[0]", "*", "k\\x", "'", "%s ?"]
ODD_VALUES: list[dict[str, Any]] = [
    {"n": 1, "f": 1.5, "b": True, "s": "1", "z": None, "o": {"p": 2, "q": None}},
    {"n": 2.0, "f": -0.5, "b": False, "s": "x", "o": {"p": "2"}},
    {"n": True, "f": 3, "s": 1, "z": 0, "o": [1]},
    {"n": "2", "b": 1, "s": "", "z": "null", "o": None},
    {"n": -7, "f": 1e300, "s": "é ✓", "o": {"p": 2.0, "q": 0}},
    {"n": 9223372036854775807, "b": 0.0},
    {"n": 3, "o": {"p": {"r": 1, "s": [1]}, "0": 1}, "l": [{"p": 2}, 1]},
    *({key: "v", "n": i} for i, key in enumerate(HOSTILE_KEYS)),
]
ODD_FILTERS: list[dict[str, Any]] = [
    {"n": 1},
    {"n": 2},
    {"n": True},
    {"n": 1.0},
    {"n": "2"},
    {"n": {"$ne": 2}},
    {"n": {"$eq": 9223372036854775807}},
    {"b": False},
    {"b": {"$ne": True}},
    {"s": "1"},
    {"s": 1},
    {"s": ""},
    {"s": {"$ne": "x"}},
    {"s": "é ✓"},
    {"z": None},
    {"z": {"$ne": None}},
    {"z": {"$eq": None}},
    {"missing": None},
    {"missing": {"$ne": 1}},
    {"o": {"p": 2}},
    {"o": {"p": {"$ne": 2}}},
    {"o": {"q": None}},
    {"o": {"q": {"$ne": None}}},
    {"o": {}},
    {"o": [1]},
    {"o": None},
    # a key that reads like an array index is a key: never the element of a list
    {"o": {"0": 1}},
    {"o": {"0": {"$ne": 1}}},
    {"l": {"0": {"p": 2}}},
    {"l": {"1": 1}},
    # deeper paths, under an object, a list, a number
    {"o": {"p": {"r": 1}}},
    {"o": {"p": {"r": {"$ne": 1}}}},
    {"o": {"p": {"r": None}}},
    {"o": {"p": {"s": {"$ne": None}}}},
    {"o": {"p": {"r": {"$gte": 1}}}, "n": {"$gt": 2}},
    *({key: "v"} for key in HOSTILE_KEYS),
    *({key: {"$ne": "v"}} for key in HOSTILE_KEYS),
    {"a') OR 1=1 --": 1},
    {"n') OR ('1'='1": 1},
]
#: Comparisons: InMemoryStore raises on a field that is not a number, so these data have none.
NUMBER_VALUES: list[dict[str, Any]] = [
    {"n": 1, "f": 1.5, "s": "a"},
    {"n": 2.0, "f": -0.5, "s": "b"},
    {"n": True, "f": 3, "s": "a"},
    {"n": -7, "f": 1e300, "s": "c"},
    {"n": 9223372036854775807, "f": 0, "s": "b"},
    {"n": 0, "f": 2, "s": "a"},
]
NUMBER_FILTERS: list[dict[str, Any]] = [
    {"n": {"$gt": 1}},
    {"n": {"$lte": 1.5}},
    {"n": {"$gte": True}},
    {"n": {"$lt": -7}},
    {"n": {"$gt": 2**70}},  # beyond 64 bits: left to Python
    {"f": {"$gte": 1, "$lt": 1e301}},
    {"n": {"$gt": 0}, "s": {"$ne": "a"}},
    {"n": {"$gte": 0}, "f": {"$lte": 2}, "s": "a"},
]


async def test_filters_of_every_kind_match_langgraphs_in_memory_store(db_url: str) -> None:
    puts = [[PutOp(("odd",), f"k{i}", value)] for i, value in enumerate(ODD_VALUES)]
    puts += [[PutOp(("num",), f"k{i}", value)] for i, value in enumerate(NUMBER_VALUES)]
    searches = [
        [SearchOp((space,), f, limit=limit, offset=offset) for f in filters]
        for space, filters in (("odd", ODD_FILTERS), ("num", NUMBER_FILTERS))
        for limit, offset in ((EVERYTHING, 0), (2, 1))
    ]
    async with caderno.connect(db_url, embedder=None) as memory:
        await _differential(CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}"), puts + searches)


async def test_search_items_filters_and_pages_in_the_database(memory: caderno.Memory) -> None:
    store = CadernoStore(memory, resource_id="u1")
    for i in range(10):
        await store.aput(("docs",), f"k{i}", {"n": i, "even": i % 2 == 0})
    where = ((("n",), "$gte", 2), (("even",), "$eq", True))
    page, everything = await memory.batch(
        [
            ops.SearchItems(resource_id="u1", prefix=("docs",), where=where, limit=2, offset=1),
            ops.SearchItems(resource_id="u1", prefix=("docs",), where=where, offset=1),
        ]
    )
    assert [it.key for it in page] == ["k6", "k4"]  # newest first: k8 skipped, two taken
    assert [it.key for it in everything] == ["k6", "k4", "k2"]


@pytest.mark.parametrize(
    "condition",
    [
        (('say "hi"',), "$eq", "v"),  # JSON escapes these: a JSON path on SQLite would not find them
        (("k\\x",), "$eq", "v"),
        (("a\nb",), "$eq", "v"),
        (("n",), "$in", 1),  # not an operator
        (("n",), "$gt", "1"),  # comparisons take numbers
        (("n",), "$eq", [1]),
        (("n",), "$eq", float("nan")),
        (("n",), "$eq", 2**64),
        ((), "$eq", 1),
    ],
)
async def test_search_items_refuses_conditions_it_cannot_take(memory: caderno.Memory, condition: Any) -> None:
    with pytest.raises(UsageError):
        await memory.batch([ops.SearchItems(resource_id="u1", prefix=(), where=(condition,))])


async def test_semantic_search_ranks_only_the_filtered_items(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
        store = CadernoStore(memory, resource_id="u1", index={"fields": ["text"]})
        await store.aput(("docs",), "cat", {"text": "cat", "lang": "en"})
        await store.aput(("docs",), "gato", {"text": "cat dog", "lang": "pt"})
        await store.aput(("docs",), "chuva", {"text": "rain", "lang": "pt"})
        await store.flush()
        hits = await store.asearch(("docs",), query="cat", filter={"lang": "pt"})
        second = await store.asearch(("docs",), query="cat", filter={"lang": {"$ne": "en"}}, limit=1, offset=1)
        where = ((("lang",), "$eq", "pt"),)
        (kept,) = await memory.batch(
            [ops.ReadItemVectors(resource_id="u1", prefix=("docs",), model=EMBEDDER.name, where=where)]
        )
    assert [v.key for v in kept] == ["chuva", "gato"]  # only the filtered items' vectors are read
    # The best match ("cat") is filtered out before ranking; the rest are ranked and scored.
    assert sorted(it.key for it in hits) == ["chuva", "gato"] and all(it.score is not None for it in hits)
    assert [it.score for it in hits] == sorted((it.score for it in hits), reverse=True)
    assert [it.key for it in second] == [hits[1].key]


# -- semantic search --------------------------------------------------------------------------

EMBEDDER = HashingEmbedder(32)
words = st.lists(st.sampled_from(["cat", "dog", "tea", "rain", "blue"]), min_size=1, max_size=3).map(" ".join)
indexed_put = st.builds(
    PutOp,
    namespace=namespaces,
    key=keys,
    value=st.builds(lambda t, o: {"text": t, "other": o}, words, words),
    index=st.none(),
    ttl=st.none(),
)
unindexed_put = st.builds(
    PutOp,
    namespace=namespaces,
    key=st.just("raw"),
    value=st.builds(lambda t: {"text": t}, words),
    index=st.just(False),
    ttl=st.none(),
)
semantic_steps = st.lists(st.one_of(indexed_put, indexed_put, unindexed_put, delete), min_size=1, max_size=15)


@SETTINGS
@given(writes=semantic_steps, query=words, prefix=prefixes)
def test_semantic_search_ranks_as_langgraphs_in_memory_store(
    db_url: str, writes: list[Any], query: str, prefix: Any
) -> None:
    async def run() -> None:
        reference = InMemoryStore(
            index={"dims": 32, "embed": lambda texts: EMBEDDER.embed(texts).tolist(), "fields": ["text"]}
        )
        async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
            store = CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}", index={"fields": ["text"]})
            for op in writes:
                await reference.abatch([op])
                await store.abatch([op])
            await store.flush()  # the background worker has embedded every queued item
            want = await reference.asearch(prefix, query=query, limit=EVERYTHING)
            got = await store.asearch(prefix, query=query, limit=EVERYTHING)
        assert {(it.namespace, it.key): it.value for it in got} == {(it.namespace, it.key): it.value for it in want}
        scores = {(it.namespace, it.key): it.score for it in want}
        for it in got:
            want_score = scores[(it.namespace, it.key)]
            assert (it.score is None) == (want_score is None)
            if it.score is not None:
                assert it.score == pytest.approx(want_score, abs=1e-5)
        ranked = [it.score for it in got if it.score is not None]
        assert ranked == sorted(ranked, reverse=True)
        assert all(it.score is None for it in got[len(ranked) :])  # unscored items come last

    asyncio.run(run())


@SETTINGS
@given(
    writes=semantic_steps,
    later=st.lists(st.one_of(indexed_put, delete), max_size=4),
    query=words,
    prefix=prefixes,
    limit=st.integers(1, 4),
    offset=st.integers(0, 3),
)
def test_a_ranked_page_is_the_same_slice_of_the_whole_ranking(
    db_url: str, writes: list[Any], later: list[Any], query: str, prefix: Any, limit: int, offset: int
) -> None:
    """A page of a ranked search is read from the vectors first, then only its items (``_rank_first``);
    it must be the page the whole read gives (a batch with a write reads whole: one snapshot for
    reads and writes), also when items changed after their vectors were made (``later``: stale
    vectors, new values, deletions) or too few are scored."""

    async def run() -> None:
        async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
            store = CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}", index={"fields": ["text"]})
            for op in writes:
                await store.abatch([op])
            await store.flush()
            await memory.indexer.close()  # the later writes keep their old vectors, or none
            for op in later:
                await store.abatch([op])
            search = SearchOp(namespace_prefix=prefix, query=query, limit=limit, offset=offset)
            nothing = PutOp(namespace=("none",), key="none", value=None)  # deletes nothing; the batch writes
            whole = cast(list[SearchItem], (await store.abatch([search, nothing]))[0])
            page = await store.asearch(prefix, query=query, limit=limit, offset=offset)
        assert [(it.namespace, it.key, it.value, it.score) for it in page] == [
            (it.namespace, it.key, it.value, it.score) for it in whole
        ]

    asyncio.run(run())


async def test_a_ranked_page_keeps_recency_among_equal_scores_and_never_scores_a_changed_item(
    db_url: str,
) -> None:
    async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
        store = CadernoStore(memory, resource_id="u1", index={"fields": ["text"]})
        for key in ("old", "mid", "new"):  # the same text: the same score; recency breaks the tie
            await store.aput(("docs",), key, {"text": "cat"})
        await store.aput(("docs",), "far", {"text": "rain"})
        await store.flush()
        assert [it.key for it in await store.asearch(("docs",), query="cat", limit=2)] == ["new", "mid"]
        assert [it.key for it in await store.asearch(("docs",), query="cat", limit=1, offset=2)] == ["old"]

        # Another writer changes the best item just before the search ranks: its new value has no
        # vector yet, so it is not scored by the old value's. (An item changed between the store's
        # read of the vectors and its read of the page's items: tests/stores/test_items.py.)
        await memory.indexer.close()  # the changed value stays unembedded
        batch = memory.batch
        other = CadernoStore(memory, resource_id="u1", index={"fields": ["text"]})

        async def meanwhile(ops_: Any) -> Any:
            if any(isinstance(op, ops.RankItems) for op in ops_):
                await other.aput(("docs",), "new", {"text": "cat, changed"})
            return await batch(ops_)

        memory.batch = meanwhile  # type: ignore[method-assign, assignment]
        try:
            page = await store.asearch(("docs",), query="cat", limit=2)
            whole = await store.asearch(("docs",), query="cat", limit=4)
        finally:
            memory.batch = batch  # type: ignore[method-assign]
    assert [(it.key, it.score is None) for it in page] == [("mid", False), ("old", False)]
    # Too few scored for the page: read whole, the unscored item after the scored ones.
    assert [(it.key, it.score is None) for it in whole] == [
        ("mid", False),
        ("old", False),
        ("far", False),
        ("new", True),
    ]


def _item_rows(path: Any) -> list[tuple[Any, ...]]:
    """The item embedding table of a SQLite file, read directly: (key, texts, has vectors)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT key, texts, vectors IS NOT NULL FROM item_embeddings ORDER BY namespace, key"
        ).fetchall()
    finally:
        conn.close()


async def test_item_vectors_are_queued_in_the_database_and_survive_a_restart(tmp_path: Any) -> None:
    path = tmp_path / "items.db"
    url = f"sqlite:///{path}"
    async with caderno.connect(url, embedder=EMBEDDER) as memory:
        await memory.indexer.close()  # this process stops before its worker ever runs
        store = CadernoStore(memory, index={"fields": ["text"]})
        await store.aput(("docs",), "1", {"text": "cat on the mat"})
        await store.aput(("docs",), "2", {"text": "rain in spain"})
        await store.aput(("docs",), "3", {"text": "cat on the mat"}, index=False)
        unscored = await store.asearch(("docs",), query="cat on the mat")
        assert {it.key for it in unscored} == {"1", "2", "3"} and all(it.score is None for it in unscored)
    # The jobs were written with the puts, in the database: the closed process left them there.
    assert _item_rows(path) == [("1", '["cat on the mat"]', 0), ("2", '["rain in spain"]', 0)]
    async with caderno.connect(url, embedder=EMBEDDER) as memory:
        store = CadernoStore(memory, index={"fields": ["text"]})
        await store.flush()  # a new process's worker embeds what the old one left
        first = await store.asearch(("docs",), query="cat on the mat")
    assert _item_rows(path) == [("1", '["cat on the mat"]', 1), ("2", '["rain in spain"]', 1)]
    assert [it.key for it in first] == ["1", "2", "3"] and first[0].score == pytest.approx(1.0, abs=1e-5)
    assert first[1].score is not None and first[2].score is None  # not indexed: after the scored ones

    class NoMoreEmbedding(HashingEmbedder):
        """Embeds queries only: a vector found now can only come from the database."""

        def embed(self, texts: list[str]) -> Any:
            assert texts == ["cat on the mat"], texts
            return super().embed(texts)

    async with caderno.connect(url, embedder=NoMoreEmbedding(32)) as memory:
        again = await CadernoStore(memory, index={"fields": ["text"]}).asearch(("docs",), query="cat on the mat")
    assert [(it.key, it.score) for it in again] == [(it.key, it.score) for it in first]


async def test_a_put_while_the_worker_embeds_never_leaves_the_old_vector(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
        await memory.indexer.close()  # the test plays the worker, step by step
        store = CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}", index={"fields": ["text"]})
        await store.aput(("docs",), "k", {"text": "cat on the mat"})
        jobs = await memory.run(ops.ClaimItemEmbeddings(limit=100, lease_seconds=60, now=utcnow()))
        (old,) = [j for j in jobs if j.resource_id == store.resource_id]
        await store.aput(("docs",), "k", {"text": "rain in spain"})  # written again while the worker embeds
        await memory.run(
            ops.FinishItemEmbeddings(
                model=EMBEDDER.name,
                dim=EMBEDDER.dim,
                done=((old, EMBEDDER.embed(["cat on the mat"]).tobytes()),),
                failed=(),
                now=utcnow(),
            )
        )
        read = ops.ReadItemVectors(resource_id=store.resource_id, prefix=(), model=EMBEDDER.name)
        assert await memory.run(read) == []  # the stale result was dropped
        (hit,) = await store.asearch(("docs",), query="cat on the mat")
        assert hit.value == {"text": "rain in spain"} and hit.score is None
        await store.flush()
        (stored,) = await memory.run(read)
        assert stored.vectors == EMBEDDER.embed(["rain in spain"]).tobytes()
        (hit,) = await store.asearch(("docs",), query="rain in spain")
        assert hit.score == pytest.approx(1.0, abs=1e-5)


async def test_deleting_an_item_or_erasing_the_resource_drops_its_vectors(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=EMBEDDER) as memory:
        await memory.indexer.close()  # vectors are computed when the test says (flush), not in between
        rid = f"r-{uuid.uuid4().hex}"
        store = CadernoStore(memory, resource_id=rid, index={"fields": ["text"]})
        await store.abatch(
            [
                PutOp(("docs",), "a", {"text": "cat"}),
                PutOp(("docs",), "b", {"text": "dog"}),
                PutOp(("x",), "c", {"text": "tea"}),
            ]
        )
        await store.flush()
        read = ops.ReadItemVectors(resource_id=rid, prefix=(), model=EMBEDDER.name)
        assert [v.key for v in await memory.run(read)] == ["a", "b", "c"]
        await store.adelete(("docs",), "a")
        assert [v.key for v in await memory.run(read)] == ["b", "c"]
        await store.aput(("docs",), "a", {"text": "cat"})  # the same key again: a new job, no old vector
        assert [v.key for v in await memory.run(read)] == ["b", "c"]
        await memory.erase_resource(resource_id=rid)
        assert await memory.run(read) == []
        assert await memory.run(ops.ClaimItemEmbeddings(limit=100, lease_seconds=60, now=utcnow())) == []
        assert await store.asearch(("docs",), query="cat") == []


async def test_a_store_without_an_index_queues_nothing(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=None) as memory:
        store = CadernoStore(memory, resource_id=f"r-{uuid.uuid4().hex}")
        await store.aput(("docs",), "k", {"text": "cat"})
        (hit,) = await store.asearch(("docs",), query="cat")  # no index: no scores, no embedder needed
        assert hit.key == "k" and hit.score is None
        assert await memory.run(ops.ClaimItemEmbeddings(limit=100, lease_seconds=60, now=utcnow())) == []


async def test_items_keep_created_at_and_advance_updated_at(memory: caderno.Memory) -> None:
    store = CadernoStore(memory, resource_id="u1")
    await store.aput(("prefs",), "theme", {"v": "dark"})
    first = await store.aget(("prefs",), "theme")
    await store.aput(("prefs",), "theme", {"v": "light"})
    second = await store.aget(("prefs",), "theme")
    assert first and second and second.value == {"v": "light"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    # The namespace is a path inside the resource: another resource does not see it.
    assert await CadernoStore(memory, resource_id="u2").aget(("prefs",), "theme") is None


async def test_semantic_search_needs_an_embedder(memory: caderno.Memory) -> None:
    memory.embedder = None
    with pytest.raises(UsageError):
        CadernoStore(memory, index={"fields": ["text"]})


# -- sync calls -------------------------------------------------------------------------------


async def test_sync_calls_work_from_threads_and_refuse_on_the_loop(tmp_path: Any) -> None:
    async with caderno.connect(f"sqlite:///{tmp_path / 's.db'}", embedder=None) as memory:
        store = CadernoStore(memory)
        await asyncio.to_thread(store.put, ("ns",), "k", {"v": 1})
        assert (await asyncio.to_thread(store.get, ("ns",), "k")).value == {"v": 1}  # type: ignore[union-attr]
        with pytest.raises(SyncCallInEventLoop, match="async methods"):
            store.get(("ns",), "k")
        with pytest.raises(asyncio.InvalidStateError):
            store.put(("ns",), "k", {"v": 2})


def test_sync_calls_without_a_loop_say_what_to_do(tmp_path: Any) -> None:
    memory = caderno.Memory(open_store(f"sqlite:///{tmp_path / 'n.db'}"), embedder=None)
    with pytest.raises(UsageError, match="event loop"):
        CadernoStore(memory).get(("ns",), "k")


# -- a real graph ------------------------------------------------------------------------------


class State(TypedDict):
    user: str
    said: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    """A sync node: LangGraph runs it on a worker thread, so it uses the store's sync API."""
    ns = ("memories", state["user"])
    recalled = [it.value["text"] for it in store.search(ns)]
    store.put(ns, f"m{len(recalled)}", {"text": state["said"]})
    return {"recalled": recalled}


async def summarise(state: State, *, store: BaseStore) -> dict[str, Any]:
    """An async node on the same store."""
    await store.aput(("seen",), state["user"], {"count": len(state["recalled"]) + 1})
    return {}


def build() -> Any:
    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("summarise", summarise)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "summarise")
    graph.add_edge("summarise", END)
    return graph


async def test_a_langgraph_graph_remembers_across_runs(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    async with caderno.connect(url, embedder=None) as memory:
        app = build().compile(store=CadernoStore(memory, resource_id="agent"))
        out = await app.ainvoke({"user": "ana", "said": "I like tea", "recalled": []})
        assert out["recalled"] == []
    # A second run in a new connection (a new process, as far as the database knows).
    async with caderno.connect(url, embedder=None) as memory:
        store = CadernoStore(memory, resource_id="agent")
        app = build().compile(store=store)
        out = await app.ainvoke({"user": "ana", "said": "and rain", "recalled": []})
        assert out["recalled"] == ["I like tea"]
        assert (await store.aget(("seen",), "ana")).value == {"count": 2}  # type: ignore[union-attr]
        assert await store.alist_namespaces() == [("memories", "ana"), ("seen",)]
        assert [it.value["text"] for it in await store.asearch(("memories", "ana"))] == ["and rain", "I like tea"]


# -- packaging --------------------------------------------------------------------------------


def test_importing_caderno_does_not_import_langgraph() -> None:
    code = "import sys, caderno; assert not [m for m in sys.modules if m.startswith('langgraph')], 'langgraph imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=python_env())


def test_missing_langgraph_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("langgraph", "langgraph.store", "langgraph.store.base"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "caderno.integrations.langgraph")
    with pytest.raises(MissingExtra, match=r"pip install .*\[langgraph\]'"):
        importlib.import_module("caderno.integrations.langgraph")
    monkeypatch.undo()
    importlib.import_module("caderno.integrations.langgraph")
