"""Numbers and validators at the HTTP edge: every out-of-range number is a 4xx problem, never a 500.

Issue 21, finding 4: ``?before=9223372036854775808``, a huge ``limit`` or
recall ``message_range`` reached SQLite as an ``OverflowError`` (a plain-text
500 and a dropped connection); ``If-Match: "²"`` passed ``str.isdigit`` and
broke ``int``. Each case here goes through the real app and checks that the
stored data did not change.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from _api_helpers import Api, api_fixture, assert_problem  # noqa: E402, F401

import caderno  # noqa: E402
from caderno.core.errors import UsageError  # noqa: E402
from caderno.memory.engines.recall import MAX_MESSAGE_RANGE, MAX_QUERY_CHARS  # noqa: E402

R = "/v1/resources/casa"
MERGE = {"content-type": "application/merge-patch+json"}


def _client(api: Api) -> httpx.AsyncClient:
    """A client that gets the app's answer even when the app raises (what a socket client sees as a 500)."""
    transport = httpx.ASGITransport(app=api.app, raise_app_exceptions=False)
    return httpx.AsyncClient(
        transport=transport, base_url="http://caderno.test", headers={"authorization": f"Bearer {api.admin}"}
    )


async def _seed(c: httpx.AsyncClient) -> None:
    r = await c.post(R + "/threads/t/messages", json={"messages": [{"role": "user", "content": "oi"}]})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "query",
    [
        "before=9223372036854775808",
        "before=-9223372036854775809",
        "before=1e23",
        "before=99999999999999999999999",
        "limit=9223372036854775808",
        "limit=99999999999999999999999",
        "limit=-1",
    ],
)
async def test_out_of_range_page_numbers_are_422(api: Api, query: str) -> None:
    async with _client(api) as c:
        await _seed(c)
        r = await c.get(R + f"/threads/t/messages?{query}")
        body = assert_problem(r, 422, "invalid-request")
        assert query.split("=")[0] in body["detail"]


async def test_the_largest_seq_still_pages(api: Api) -> None:
    async with _client(api) as c:
        await _seed(c)
        r = await c.get(R + "/threads/t/messages?before=9223372036854775807&limit=9223372036854775807")
        assert r.status_code == 200, r.text
        assert [m["content"] for m in r.json()] == ["oi"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("message_range", 10**23),
        ("message_range", [0, 10**23]),
        ("message_range", MAX_MESSAGE_RANGE + 1),
        ("recent", 10**23),
        ("lexical", 10**23),
        ("top", 10**23),
    ],
)
async def test_recall_numbers_out_of_range_are_422(api: Api, field: str, value: Any) -> None:
    async with _client(api) as c:
        await _seed(c)
        r = await c.post(R + "/recall", json={"query": "oi", field: value})
        assert_problem(r, 422, "invalid-request")


async def test_recall_at_the_bound_answers(api: Api) -> None:
    async with _client(api) as c:
        await _seed(c)
        r = await c.post(R + "/recall", json={"query": "oi", "message_range": MAX_MESSAGE_RANGE})
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("message_range", [10**23, (0, 10**23), MAX_MESSAGE_RANGE + 1])
async def test_recall_message_range_bound_in_the_python_api(tmp_path: Any, message_range: Any) -> None:
    async with caderno.connect(f"sqlite:///{tmp_path / 'r.db'}") as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[caderno.Message.user("oi")])
        with pytest.raises(UsageError, match="message_range"):
            await memory.recall(resource_id="r", query="oi", message_range=message_range)
        hits = await memory.recall(resource_id="r", query="oi", message_range=MAX_MESSAGE_RANGE)
        assert [h.message.content for h in hits] == ["oi"]


async def _wm(c: httpx.AsyncClient) -> Any:
    r = await c.get(R + "/working-memory")
    return r.json(), r.headers["etag"]


@pytest.mark.parametrize("header", ['"²"', '"¹"', '"1 "', '"+1"', '"-1"', "1", '""', 'w/"1"', '"1", "2"'])
async def test_if_match_takes_ascii_digits_only(api: Api, header: str) -> None:
    async with _client(api) as c:
        await c.patch(R + "/working-memory", content=b'{"a": 1}', headers=MERGE)
        before = await _wm(c)
        r = await c.patch(
            R + "/working-memory", content=b'{"a": 2}', headers={**MERGE, "if-match": header.encode("latin-1")}
        )
        assert_problem(r, 400, "invalid-request")
        assert await _wm(c) == before


@pytest.mark.parametrize(
    "header", ['W/"1"', 'W/"0"', '"99999999999999999999999"', '"9223372036854775808"', '"01"', '"001"']
)
async def test_if_match_weak_or_impossible_tags_never_match(api: Api, header: str) -> None:
    """RFC 9110 13.1.1: If-Match uses strong comparison, so a weak tag matches nothing: 412."""
    async with _client(api) as c:
        await c.patch(R + "/working-memory", content=b'{"a": 1}', headers=MERGE)
        before = await _wm(c)
        assert before[1] == '"1"'
        r = await c.patch(R + "/working-memory", content=b'{"a": 2}', headers={**MERGE, "if-match": header})
        assert_problem(r, 412, "precondition-failed")
        assert await _wm(c) == before


async def test_if_match_strong_tag_still_applies(api: Api) -> None:
    async with _client(api) as c:
        await c.patch(R + "/working-memory", content=b'{"a": 1}', headers=MERGE)
        r = await c.patch(R + "/working-memory", content=b'{"a": 2}', headers={**MERGE, "if-match": '"1"'})
        assert r.status_code == 200, r.text
        assert r.headers["etag"] == '"2"'


# -- a recall query has a length limit ---------------------------------


async def test_a_recall_query_past_the_limit_is_a_400_with_the_limit(api: Api) -> None:
    """A 4 MB query took 13.9 s of the event loop; past ``MAX_QUERY_CHARS`` it is refused before any work."""
    async with _client(api) as c:
        await _seed(c)
        r = await c.post(R + "/recall", json={"query": "oi " * (MAX_QUERY_CHARS // 3 + 1)})
        body = assert_problem(r, 400, "invalid-request")
        assert f"the limit is {MAX_QUERY_CHARS:,}" in body["detail"], body
        r = await c.post(R + "/recall", json={"query": ("oi " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]})
        assert r.status_code == 200, r.text
        assert [h["message"]["content"] for h in r.json()] == ["oi"]


async def test_a_recall_query_past_the_limit_is_refused_by_the_python_api(db_url: str) -> None:
    """Every interface (HTTP, MCP, the CLI, the model's tool) reaches this check through ``Memory.recall``."""
    async with caderno.connect(db_url, embedder=None) as memory:
        await memory.append_messages(resource_id="r", thread_id="t", messages=[caderno.Message.user("oi")])
        with pytest.raises(UsageError, match=f"the limit is {MAX_QUERY_CHARS:,}"):
            await memory.recall(resource_id="r", query="x" * (MAX_QUERY_CHARS + 1))
        assert [m.content for m in await memory.get_messages(resource_id="r", thread_id="t")] == ["oi"]
        hits = await memory.recall(resource_id="r", query="oi " + "x" * (MAX_QUERY_CHARS - 3))
        assert [h.message.content for h in hits] == ["oi"]
