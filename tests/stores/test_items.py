"""The LangGraph store's items in the database: documents kept as written, parsed on PostgreSQL, pages, ranking.

Migration 0022 gives PostgreSQL's items a parsed copy of each document
(``doc``, jsonb) that filters read, and both databases an index that a page
of a search walks newest first; a ranked search reads only its best items.
The differential tests against LangGraph's own store are in
``tests/integrations/test_langgraph.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _migrations import postgres_migrated_up_to, sqlite_migrated_up_to
from _pg import pg_schema

import caderno
from caderno.core.clock import to_iso, utcnow
from caderno.core.errors import UsageError
from caderno.core.records import Item
from caderno.stores import _postgres_plans, ops, postgres, sqlite
from caderno.stores._sql import Plan, Q, to_pyformat
from caderno.stores.capabilities import item_vectors, items

R = "r"
NOW = utcnow()


def _item(namespace: tuple[str, ...], key: str, value: dict[str, Any], seconds: int = 0) -> Item:
    return Item(resource_id=R, namespace=namespace, key=key, value=value, updated_at=NOW + timedelta(seconds=seconds))


async def test_a_document_comes_back_as_written(memory: caderno.Memory) -> None:
    value = {"z": 1, "a": 1e16, "m": {"y": [1, 2.5, None, 1.0], "b": True}, "s": 'é ✓ "q" \\ \n', "u": "\\u0000"}
    await memory.batch([ops.PutItem(item=_item(("docs",), "k", value))])
    (got,) = await memory.batch([ops.GetItem(resource_id=R, namespace=("docs",), key="k")])
    assert got.value == value
    # Exactly: the keys in the order stored (sorted), a float stays a float (jsonb would give 10**16).
    assert json.dumps(got.value) == json.dumps(value, sort_keys=True)
    assert type(got.value["a"]) is float and type(got.value["m"]["y"][3]) is float


@pytest.mark.parametrize(
    "value",
    [{"x": float("nan")}, {"x": [float("-inf")]}, {"x": "a\x00b"}, {"a\x00": 1}, {"x": [{"y": "\x00"}]}],
)
async def test_a_value_json_cannot_hold_is_refused(memory: caderno.Memory, value: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        await memory.batch([ops.PutItem(item=_item(("docs",), "k", value))])
    assert await memory.batch([ops.SearchItems(resource_id=R, prefix=())]) == [[]]


async def test_a_page_is_the_same_found_among_the_newest_items_or_past_them(
    memory: caderno.Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Walks of three items: most pages here are found past them, some among them.
    monkeypatch.setattr(items, "WALK_MIN", 3)
    monkeypatch.setattr(items, "WALK_PER_ROW", 1)
    spaces = [("a",), ("a", "b"), ("ab",), ("c",)]
    await memory.batch(
        [
            ops.PutItem(item=_item(spaces[i % 4], f"k{i}", {"n": i, "tag": "xy"[i % 3 == 0], "o": {"p": i % 2}}, i))
            for i in range(30)
        ]
    )
    wheres: list[tuple[Any, ...]] = [
        (),
        ((("tag",), "$eq", "y"),),
        ((("n",), "$gte", 25),),
        ((("n",), "$lt", 3),),
        ((("o", "p"), "$ne", 1), (("tag",), "$ne", "y")),
        ((("missing",), "$eq", 1),),
    ]
    for prefix in [(), ("a",), ("a", "b"), ("c",), ("zz",)]:
        for where in wheres:
            (whole,) = await memory.batch([ops.SearchItems(resource_id=R, prefix=prefix, where=where)])
            keys = [it.key for it in whole]
            for limit, offset in [(0, 0), (1, 0), (2, 3), (4, 1), (100, 0), (1, 40)]:
                (page,) = await memory.batch(
                    [ops.SearchItems(resource_id=R, prefix=prefix, where=where, limit=limit, offset=offset)]
                )
                assert [it.key for it in page] == keys[offset : offset + limit], (prefix, where, limit, offset)


# -- a ranking and a write between its two reads -----------------------------------------------

ONE, OTHER = b"\x00\x00\x80\x3f\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00\x80\x3f"


async def _ranked_scene(memory: caderno.Memory) -> None:
    """Items old, mid, new (one vector, the same) and far (another), each written a second after the last."""
    keys = [("old", ONE), ("mid", ONE), ("new", ONE), ("far", OTHER)]
    await memory.batch(
        [ops.PutItem(item=_item(("docs",), key, {"t": key}, i), embed=(key,)) for i, (key, _) in enumerate(keys)]
    )
    (jobs,) = await memory.batch([ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow())])
    vectors = dict(keys)
    done = tuple((job, vectors[job.key]) for job in jobs)
    await memory.batch([ops.FinishItemEmbeddings(model="m", dim=2, done=done, failed=(), now=utcnow())])


def _drive(plan: Plan[Any], execute: Callable[[Q], Any], between: Callable[[], None]) -> Any:
    """Run ``plan``, calling ``between`` after its first statement (another writer, meanwhile)."""
    q = next(plan)
    result = execute(q)
    between()
    try:
        while True:
            q = plan.send(result)
            result = execute(q)
    except StopIteration as stop:
        return stop.value


RANK = ops.RankItems(resource_id=R, prefix=("docs",), model="m", query=(1.0, 0.0), k=2)


async def test_rank_items_gives_the_best_first_equal_scores_newest_first(memory: caderno.Memory) -> None:
    await _ranked_scene(memory)
    (ranked,) = await memory.batch([dataclasses.replace(RANK, k=4)])
    assert [(it.key, score) for it, score in ranked] == [("new", 1.0), ("mid", 1.0), ("old", 1.0), ("far", 0.0)]
    filtered, other_dim, none = await memory.batch(
        [
            dataclasses.replace(RANK, where=((("t",), "$ne", "new"),)),
            dataclasses.replace(RANK, query=(1.0, 0.0, 0.0)),
            dataclasses.replace(RANK, k=0),
        ]
    )
    assert [it.key for it, _ in filtered] == ["mid", "old"] and other_dim == [] and none == []


async def test_rank_items_on_sqlite_leaves_out_an_item_written_between_its_two_reads(tmp_path: Path) -> None:
    path = tmp_path / "items.db"
    async with caderno.connect(f"sqlite:///{path}", embedder=None) as memory:
        await _ranked_scene(memory)
    reader, writer = sqlite3.connect(path), sqlite3.connect(path, isolation_level=None)
    try:

        def rewrite() -> None:  # another writer puts "new" again after its vectors were read
            writer.execute("UPDATE items SET updated_at = ? WHERE key = 'new'", (to_iso(utcnow()),))

        ranked = _drive(
            item_vectors.rank_items(sqlite.DIALECT, RANK), lambda q: reader.execute(q.sql, q.params).fetchall(), rewrite
        )
    finally:
        reader.close()
        writer.close()
    assert [it.key for it, _ in ranked] == ["mid"]  # fewer than k: the caller reads the search whole


@pytest.mark.postgres
async def test_rank_items_on_postgres_leaves_out_an_item_written_between_its_two_reads() -> None:
    import psycopg

    with pg_schema() as url:
        async with caderno.connect(url, embedder=None) as memory:
            await _ranked_scene(memory)
        base, schema = url.split("?schema=")
        with psycopg.connect(base, autocommit=True) as reader, psycopg.connect(base, autocommit=True) as writer:
            for conn in (reader, writer):
                conn.execute(f'SET search_path TO "{schema}"')

            def rewrite() -> None:
                writer.execute("DELETE FROM items WHERE key = 'new'")

            def execute(q: Q) -> Any:
                return reader.execute(to_pyformat(q.sql), q.params).fetchall()

            ranked = _drive(_postgres_plans.rank_items(postgres.DIALECT, RANK), execute, rewrite)
    assert [it.key for it, _ in ranked] == ["mid"]


# -- migration 0022 ----------------------------------------------------------------------------

#: Documents as an older caderno stored them (its text, byte for byte): NaN and a \u0000 escape
#: are text jsonb refuses.
OLD_DOCUMENTS = {
    "plain": '{"n":{"b":"x"},"t":"cat"}',
    "float": '{"f":1e+16,"t":"é ✓","z":[1,{"y":null},2.5]}',
    "nan": '{"f":NaN,"t":"cat"}',
    "nul": '{"s":"a\\u0000b","t":"cat"}',
}


@pytest.mark.postgres
async def test_postgres_documents_stored_before_0022_are_parsed_and_kept_as_written() -> None:
    import psycopg

    with pg_schema() as url:
        base, schema = url.split("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            postgres_migrated_up_to(conn, "0021_sparse_terms")
            for i, (key, text) in enumerate(OLD_DOCUMENTS.items()):
                conn.execute(
                    "INSERT INTO items (resource_id, namespace, key, value, created_at, updated_at) "
                    "VALUES (%s, 'docs', %s, %s, %s, %s)",
                    (R, key, text, NOW, NOW + timedelta(seconds=i)),
                )
        async with caderno.connect(url, embedder=None) as memory:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'SET search_path TO "{schema}"')
                rows = conn.execute(
                    "SELECT key, value, doc IS NULL, doc = value::jsonb FROM items WHERE key IN "
                    "('plain', 'float') UNION ALL SELECT key, value, doc IS NULL, NULL FROM items "
                    "WHERE key IN ('nan', 'nul')"
                ).fetchall()
            assert {key: (value, missing, same) for key, value, missing, same in rows} == {
                "plain": (OLD_DOCUMENTS["plain"], False, True),
                "float": (OLD_DOCUMENTS["float"], False, True),
                "nan": (OLD_DOCUMENTS["nan"], True, None),  # kept as written; no filter matches it
                "nul": (OLD_DOCUMENTS["nul"], True, None),
            }
            got = await memory.batch(
                [ops.GetItem(resource_id=R, namespace=("docs",), key=key) for key in ("plain", "float", "nul")]
            )
            for it in got:  # read back as written
                text = json.dumps(it.value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                assert text == OLD_DOCUMENTS[it.key]
            assert type(got[1].value["f"]) is float

            async def keys(*where: Any, limit: int | None = None) -> list[str]:
                (found,) = await memory.batch(
                    [ops.SearchItems(resource_id=R, prefix=("docs",), where=where, limit=limit)]
                )
                return [it.key for it in found]

            assert await keys() == ["nul", "nan", "float", "plain"]
            assert await keys((("n", "b"), "$eq", "x")) == ["plain"]
            assert await keys((("f",), "$gt", 1)) == ["float"]
            assert await keys((("t",), "$eq", "cat"), limit=5) == ["plain"]
            assert await keys((("missing",), "$eq", None)) == ["float", "plain"]
            assert await keys((("t",), "$ne", "dog"), limit=1) == ["float"]
            # Written again, a document is parsed again: its filter finds it.
            await memory.batch([ops.PutItem(item=_item(("docs",), "nan", {"f": 1.5, "t": "cat"}, 9))])
            assert await keys((("t",), "$eq", "cat")) == ["nan", "plain"]


def test_sqlite_0022_gives_a_page_of_items_an_index_to_walk(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite_migrated_up_to(path, "0021_sparse_terms")
    conn.execute(
        "INSERT INTO items VALUES (?, 'docs', 'k', ?, ?, ?)", (R, OLD_DOCUMENTS["plain"], to_iso(NOW), to_iso(NOW))
    )
    conn.close()

    async def open_and_search() -> list[Item]:
        async with caderno.connect(f"sqlite:///{path}", embedder=None) as memory:
            (found,) = await memory.batch(
                [ops.SearchItems(resource_id=R, prefix=(), where=((("n", "b"), "$eq", "x"),), limit=1)]
            )
            return found

    assert [it.key for it in asyncio.run(open_and_search())] == ["k"]
    page = items.page_of(
        sqlite.DIALECT, ops.SearchItems(resource_id=R, prefix=("docs",), limit=1), items.json_condition
    )
    conn = sqlite3.connect(path)
    try:
        walk, every = (
            " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in (page.walk, (f"{page.every[0]} ORDER BY +updated_at DESC", page.every[1]))
        )
    finally:
        conn.close()
    assert "USING INDEX items_recent" in walk
    # The prefix's items: the namespace itself, and the range of those under it.
    assert "PRIMARY KEY (resource_id=? AND namespace>? AND namespace<?)" in every


@pytest.mark.postgres
def test_postgres_reads_the_items_under_a_prefix_off_its_primary_key_whatever_the_collation() -> None:
    import psycopg

    with pg_schema() as url:
        base, schema = url.split("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            postgres_migrated_up_to(conn, "0021_sparse_terms")
            # As on a database whose default collation is a language's (where "a-c" sorts between
            # "a.b" and "a.c", say): 0022 makes namespaces compare byte by byte.
            conn.execute('ALTER TABLE items ALTER COLUMN namespace TYPE text COLLATE "en-US-x-icu"')
            postgres_migrated_up_to(conn, "0022_item_documents")
            conn.execute(
                "INSERT INTO items SELECT %s, 'ns' || (i %% 100), 'k' || i, '{}', now(), now(), '{}' "
                "FROM generate_series(1, 20000) AS i",
                (R,),
            )
            conn.execute("ANALYZE items")
            page = items.page_of(
                postgres.DIALECT, ops.SearchItems(resource_id=R, prefix=("ns7",), limit=1), items.json_condition
            )
            every, params = page.every
            plan = " ".join(row[0] for row in conn.execute(f"EXPLAIN {to_pyformat(every)}", params))
    assert "items_pkey" in plan and "Seq Scan" not in plan


#: Namespaces around "a" in byte order and in a language's: only whole labels are under a prefix.
SPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("a-c",), ("a!",), ("a/x",), ("ab",), ("aé",), ("a", "é"), ("b",)]


async def test_a_prefix_holds_its_whole_labels_only(memory: caderno.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(items, "WALK_MIN", 2)  # pages found by walks, by the prefix's range, and past walks
    monkeypatch.setattr(items, "WALK_PER_ROW", 1)
    await memory.batch([ops.PutItem(item=_item(ns, "k", {"i": i}, i)) for i, ns in enumerate(SPACES)])
    want = {
        (): SPACES,
        ("a",): [("a",), ("a", "b"), ("a", "b", "c"), ("a", "é")],
        ("a", "b"): [("a", "b"), ("a", "b", "c")],
        ("a-c",): [("a-c",)],
        ("a", "z"): [],
    }
    for prefix, spaces in want.items():
        newest_first = sorted(spaces, key=SPACES.index, reverse=True)
        for window in ({}, {"limit": 1}, {"limit": 2, "offset": 1}, {"limit": 10}):
            (found,) = await memory.batch([ops.SearchItems(resource_id=R, prefix=prefix, **window)])
            cut = slice(window.get("offset", 0), window.get("offset", 0) + window.get("limit", 100))
            assert [it.namespace for it in found] == newest_first[cut], (prefix, window)
        ranked = dataclasses.replace(RANK, prefix=prefix, k=len(SPACES))
        assert {it.namespace for it, _ in (await memory.batch([ranked]))[0]} <= set(spaces)
