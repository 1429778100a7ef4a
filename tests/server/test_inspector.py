"""The inspector page, clicked through in a real headless Chromium (Playwright).

A real uvicorn serves ``create_app`` on a loopback port over a seeded SQLite
file: two resources, tool calls, a summary, working-memory patches, notebook
entries, facts and a task. The REST API is ``caderno.server.routes`` when it
is importable, else a stand-in router below that implements the same
contract over the same ``Memory`` (so these tests never skip).

Chromium is Debian's (``scripts/ensure-chromium.sh`` installs it; ``make
test`` runs that first). When it is missing these tests fail, never skip.
Screenshots go to each test's tmp dir; ``CADERNO_SCREENSHOT=1`` also writes
the README's ``docs/inspector.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
playwright_sync = pytest.importorskip("playwright.sync_api")

from fastapi import APIRouter, FastAPI, Request, Response  # noqa: E402

import caderno  # noqa: E402
from caderno.core.clock import utcnow  # noqa: E402
from caderno.core.errors import Conflict  # noqa: E402
from caderno.core.messages import Message, ToolCall  # noqa: E402
from caderno.memory.adapters.connect import open_store  # noqa: E402
from caderno.memory.parts.consolidation import summary_message  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.auth import CurrentKey, require  # noqa: E402
from caderno.server.inspector import install_inspector  # noqa: E402
from caderno.server.problems import problem  # noqa: E402
from caderno.stores import ops  # noqa: E402

try:
    from caderno.server.routes import install_routes as real_routes
except ImportError:  # routes.py not written yet: the stand-in below keeps the contract
    real_routes = None

Page = Any  # playwright.sync_api.Page (kept loose: the package is optional)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # required as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium phones home, and a closed network refuses its connections.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = "<img src=x onerror=alert(1)>"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "inspector.png"


# -- the stand-in API (the contract the page is written against) ----------------------------


def stand_in_routes(app: FastAPI) -> None:
    """Exactly the routes the page calls, over ``app.state.memory``."""
    r = APIRouter(prefix="/v1")

    def mem(request: Request) -> caderno.Memory:
        memory: caderno.Memory = request.app.state.memory
        return memory

    def msg(m: Message) -> dict[str, Any]:
        return m.to_dict()  # as the real API: the position in the thread, never the database-wide seq

    @r.get("/resources")
    async def resources(request: Request, key: CurrentKey) -> list[str]:
        return await mem(request).list_resources() if key.admin else list(key.resources)

    @r.get("/resources/{rid}/threads")
    async def threads(request: Request, key: CurrentKey, rid: str) -> list[dict[str, Any]]:
        return [asdict(t) for t in await mem(request).list_threads(resource_id=require(key, rid))]

    @r.get("/resources/{rid}/threads/{tid}/messages")
    async def messages(
        request: Request, key: CurrentKey, rid: str, tid: str, limit: int | None = None, before: int | None = None
    ) -> list[dict[str, Any]]:
        await mem(request).get_thread(resource_id=require(key, rid), thread_id=tid)
        found = await mem(request).get_messages(resource_id=rid, thread_id=tid, limit=limit, before=before)
        return [msg(m) for m in found]

    @r.get("/resources/{rid}/threads/{tid}/summaries")
    async def summaries(request: Request, key: CurrentKey, rid: str, tid: str) -> list[dict[str, Any]]:
        found = await mem(request).summaries(resource_id=require(key, rid), thread_id=tid)
        return [{"message": msg(m), "merged": merged} for m, merged in found]

    @r.patch("/resources/{rid}/messages/{mid}")
    async def edit(request: Request, key: CurrentKey, rid: str, mid: str) -> dict[str, Any]:
        body = await request.json()
        edited = await mem(request).edit_message(
            resource_id=require(key, rid), message_id=mid, content=body["content"], reason=body.get("reason")
        )
        return msg(edited)

    @r.delete("/resources/{rid}/messages/{mid}")
    async def delete_message(request: Request, key: CurrentKey, rid: str, mid: str) -> dict[str, Any]:
        return msg(await mem(request).delete_message(resource_id=require(key, rid), message_id=mid))

    @r.delete("/resources/{rid}/threads/{tid}", status_code=204)
    async def delete_thread(request: Request, key: CurrentKey, rid: str, tid: str) -> Response:
        await mem(request).delete_thread(resource_id=require(key, rid), thread_id=tid)
        return Response(status_code=204)

    def wm_body(state: Any) -> dict[str, Any]:
        if state is None:
            return {"data": None, "version": 0, "updated_at": None}
        return {"data": state.data, "version": state.version, "updated_at": state.updated_at.isoformat()}

    @r.get("/resources/{rid}/working-memory")
    async def get_wm(request: Request, response: Response, key: CurrentKey, rid: str) -> dict[str, Any]:
        body = wm_body(await mem(request).get_working_memory_state(resource_id=require(key, rid)))
        response.headers["ETag"] = f'"{body["version"]}"'
        return body

    @r.patch("/resources/{rid}/working-memory", response_model=None)
    async def patch_wm(request: Request, response: Response, key: CurrentKey, rid: str) -> Any:
        require(key, rid)
        if request.headers.get("content-type", "").split(";")[0] != "application/merge-patch+json":
            return problem(415, "unsupported-media-type", "Unsupported media type", "send merge-patch+json")
        match = request.headers.get("if-match")
        expected = int(match.strip('"')) if match else None
        try:
            state = await mem(request).update_working_memory(
                resource_id=rid, patch=json.loads(await request.body()), expected_version=expected, source="api"
            )
        except Conflict as exc:
            return problem(412, "precondition-failed", "Precondition failed", str(exc))
        response.headers["ETag"] = f'"{state.version}"'
        return wm_body(state)

    @r.get("/resources/{rid}/working-memory/log")
    async def wm_log(request: Request, key: CurrentKey, rid: str) -> list[dict[str, Any]]:
        return await mem(request).working_memory_log(resource_id=require(key, rid))

    @r.get("/resources/{rid}/notebook")
    async def notebook(request: Request, key: CurrentKey, rid: str, thread_id: str | None = None) -> dict[str, Any]:
        book = mem(request).notebook(require(key, rid))
        snapshot = await (book.snapshot_now() if thread_id is None else book.frozen(thread_id))
        return {
            "snapshot": snapshot or {"memory": None, "user": None},
            "entries": {t: await book.entries(t) for t in ("memory", "user")},
        }

    @r.post("/resources/{rid}/recall")
    async def recall(request: Request, key: CurrentKey, rid: str) -> list[dict[str, Any]]:
        query = (await request.json())["query"]
        hits = await mem(request).recall(resource_id=require(key, rid), query=query)
        return [
            {
                "message": msg(h.message),
                "thread_id": h.thread_id,
                "reasons": sorted(h.reasons),
                "score": h.score,
                "scores": h.scores,
            }
            for h in hits
        ]

    @r.get("/resources/{rid}/facts")
    async def facts(request: Request, key: CurrentKey, rid: str) -> list[dict[str, Any]]:
        return [asdict(f) for f in await mem(request).get_facts(resource_id=require(key, rid))]

    @r.get("/resources/{rid}/tasks")
    async def tasks(request: Request, key: CurrentKey, rid: str) -> list[dict[str, Any]]:
        return [asdict(t) for t in await mem(request).tasks.list(resource_id=require(key, rid))]

    app.include_router(r)


# -- a seeded server on a loopback port ---------------------------------------------------------


@dataclass
class Site:
    url: str
    alice: str
    """A key for resource ``alice`` only."""
    ids: dict[str, str]
    db: Path
    home: Path

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {self.alice}"}, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + path, headers={"Authorization": f"Bearer {self.alice}"}, **kw)


async def seed(db: Path, home: Path) -> tuple[str, dict[str, str]]:
    memory = caderno.Memory(open_store(str(db)), embedder=None)
    async with memory:
        ids: dict[str, str] = {}
        # Bob writes first: alice's numbers must be her thread's own, not the database's.
        await memory.append_messages(
            resource_id="bob", thread_id="vault", messages=[Message.user("Bob's vault code is 4321.")]
        )
        trip = await memory.append_messages(
            resource_id="alice",
            thread_id="trip",
            messages=[
                Message.user("Book me a flight to Lisbon on 12 May, please."),
                Message.assistant(
                    "Let me look.",
                    tool_calls=[ToolCall(id="call_1", name="search_flights", arguments={"to": "LIS", "day": "05-12"})],
                ),
                Message.tool("TP1234 leaves at 09:10 and costs 180 EUR.", tool_call_id="call_1", name="search_flights"),
                Message.assistant("I found TP1234 to Lisbon at 09:10 for 180 EUR."),
                Message.user(HOSTILE),
                Message.user("Remember that I prefer a window seat."),
            ],
        )
        await memory.threads.update(resource_id="alice", thread_id="trip", title="Trip to Lisbon")
        ids.update(first=trip[0].id or "", hostile=trip[4].id or "", window=trip[5].id or "")
        span = (trip[0].position or 0, trip[1].position or 0)
        summary = summary_message("Alice wants a flight to Lisbon on 12 May.", span, "extractive", covered=2)
        seqs = (trip[0].seq or 0, trip[1].seq or 0)
        await memory.run(
            ops.WriteSummary(resource_id="alice", thread_id="trip", summary=summary, covered=seqs, now=utcnow())
        )
        await memory.append_messages(
            resource_id="alice", thread_id="scratch", messages=[Message.user("A scratch note to throw away.")]
        )
        for patch, source in [
            ({"name": "Alice", "trip": {"city": "Lisbon"}}, "app"),
            ({"trip": {"day": "05-12"}}, "agent"),
            ({"name": None, "note": HOSTILE}, "api"),
        ]:
            await memory.update_working_memory(resource_id="alice", patch=patch, source=source)
        await memory.facts.remember(resource_id="alice", category="travel", key="seat", value="window", source="user")
        await memory.facts.remember(resource_id="alice", category="travel", key="home_airport", value="OPO")
        await memory.tasks.add(
            resource_id="alice", name="morning-brief", schedule="every day at 9", prompt="Brief me on my trip."
        )
        book = memory.notebook("alice")
        await book.add("memory", "Alice travels light.")
        await book.add("user", "Alice likes window seats.")
        await book.freeze("scratch")  # the latest conversation took its snapshot at its first turn
        token, _ = await memory.keys.create(resources=["alice"], name="inspector test")
        return token, ids


@pytest.fixture
def site(tmp_path: Path, caderno_home: Path) -> Iterator[Site]:
    db = tmp_path / "caderno.db"
    # Playwright's sync API keeps an event loop on this thread: seed on another one.
    seeded: list[tuple[str, dict[str, str]]] = []
    worker = threading.Thread(target=lambda: seeded.append(asyncio.run(seed(db, caderno_home))))
    worker.start()
    worker.join()
    assert seeded, "seeding the database failed (see the thread's traceback above)"
    token, ids = seeded[0]
    with serving(db) as url:
        yield Site(url=url, alice=token, ids=ids, db=db, home=caderno_home)


@contextlib.contextmanager
def serving(db: Path) -> Iterator[str]:
    """A real uvicorn serving ``create_app`` (the API and the inspector) over ``db`` on a loopback port."""
    memory = caderno.Memory(open_store(str(db)), embedder=None)
    routes = real_routes or stand_in_routes
    app = create_app(memory, background=False, routers=[routes, install_inspector])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


# -- the browser ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}; the inspector is tested in a real browser. "
            "Run `bash scripts/ensure-chromium.sh` (as root; `make test` does it) and test again."
        )
    with playwright_sync.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, site: Site, tmp_path: Path) -> Iterator[Page]:
    with opened(browser, tmp_path) as page:
        yield page


@contextlib.contextmanager
def opened(browser: Any, tmp_path: Path) -> Iterator[Page]:
    """A fresh tab that fails the test on a page error, an unexpected console error or any JS dialog."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    problems: list[str] = []
    alerts: list[str] = []  # any alert() is injected script that ran
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    try:
        yield page
    finally:
        shot(page, tmp_path / "last.png")
        context.close()
    # The browser logs every refused request (401, 404, 412) as a console error; those are expected.
    unexpected = [p for p in problems if not any(f"status of {code}" in p for code in (401, 404, 412))]
    assert not unexpected, unexpected
    assert not alerts, f"a JavaScript dialog opened: {alerts}"


def shot(page: Page, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def sign_in(page: Page, site: Site, token: str | None = None) -> None:
    page.goto(site.url + "/")
    page.get_by_label("API key").fill(token or site.alice)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Resources").get_by_role("link", name="alice").wait_for()


def open_trip(page: Page) -> Any:
    page.get_by_role("navigation", name="Resources").get_by_role("link", name="alice").click()
    page.get_by_role("link", name="Trip to Lisbon").click()
    messages = page.get_by_role("list", name="Messages")
    messages.wait_for()
    return messages


def thread_ids(site: Site) -> list[str]:
    return [t["id"] for t in site.get("/v1/resources/alice/threads").json()]


def tab(page: Page, name: str) -> None:
    page.get_by_role("navigation", name="Sections").get_by_role("link", name=name).click()


# -- the flows ---------------------------------------------------------------------------------------


def test_page_is_served_with_a_strict_policy(site: Site) -> None:
    index = httpx.get(site.url + "/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in index.headers["content-security-policy"]
    for asset in ("/inspector/app.js", "/inspector/style.css"):
        assert httpx.get(site.url + asset).status_code == 200
    assert "http" not in index.text.replace("http-equiv", ""), "the page must load nothing from outside"


def test_sign_in_thread_with_folded_tool_calls_summary_and_hostile_text(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    assert page.evaluate("Object.keys(sessionStorage)") == ["caderno.inspector.key"]
    assert page.evaluate("localStorage.length") == 0
    messages = open_trip(page)
    assert page.get_by_role("heading", name="thread Trip to Lisbon (trip)").is_visible()
    cards = messages.get_by_role("listitem")
    # The summary sits in place, before the messages it covers; the tool result is folded.
    assert cards.first.get_attribute("aria-label") == "Summary"
    assert "Alice wants a flight to Lisbon on 12 May." in cards.first.inner_text()
    assert "summary of messages #1–#2 (2 messages)" in " ".join(cards.first.inner_text().split())
    labels = [c.get_attribute("aria-label") for c in cards.all()]
    assert not any(label.startswith("tool") for label in labels), labels
    assistant = messages.get_by_role("listitem", name="assistant message #2")
    folded = assistant.locator("details.tools")
    assert folded.locator("summary").inner_text() == "1 tool call: search_flights"
    assert not folded.get_by_text("TP1234 leaves at 09:10").is_visible()
    folded.locator("summary").click()
    assert folded.get_by_text("TP1234 leaves at 09:10 and costs 180 EUR.").is_visible()
    assert '"to": "LIS"' in folded.locator("pre.args").inner_text()
    # Stored markup is shown as text and never becomes an element.
    hostile = messages.get_by_role("listitem", name="user message #5")
    assert hostile.locator(".text").inner_text() == HOSTILE
    assert messages.locator("img").count() == 0
    shot(page, tmp_path / "thread.png")
    if os.environ.get("CADERNO_SCREENSHOT") == "1":
        shot(page, DOCS_SHOT)


def test_load_earlier_pages_back_by_position(page: Page, site: Site) -> None:
    # More than one page (PAGE = 200 in app.js), written after others wrote, so seq and position differ.
    total = 205
    for start in range(0, total, 50):
        turn = [{"role": "user", "content": f"long {i}"} for i in range(start, min(start + 50, total))]
        got = httpx.post(
            site.url + "/v1/resources/alice/threads/long/messages",
            headers={"Authorization": f"Bearer {site.alice}"},
            json={"messages": turn},
        )
        assert got.status_code in (200, 201), got.text
    sign_in(page, site)
    page.goto(site.url + "/#/r/alice/threads/long")
    messages = page.get_by_role("list", name="Messages")
    messages.get_by_role("listitem", name=f"user message #{total}").wait_for()
    assert messages.get_by_role("listitem").count() == 200
    page.get_by_role("button", name="Load earlier messages").click()
    messages.get_by_role("listitem", name="user message #1", exact=True).wait_for()
    labels = [c.get_attribute("aria-label") for c in messages.get_by_role("listitem").all()]
    assert labels == [f"user message #{p}" for p in range(1, total + 1)]
    assert messages.get_by_role("listitem", name="user message #1", exact=True).locator(".text").inner_text() == "long 0"
    assert page.get_by_role("button", name="Load earlier messages").is_hidden()


def test_working_memory_json_log_and_patch(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    page.goto(site.url + "/#/r/alice/working-memory")
    shown = json.loads(page.get_by_label("Working memory JSON").inner_text())
    assert shown == {"trip": {"city": "Lisbon", "day": "05-12"}, "note": HOSTILE}
    assert page.get_by_role("heading", name="Working memory · version 3").is_visible()
    log = page.get_by_role("table", name="Working memory log")
    assert [r.inner_text().split("\t")[:2] for r in log.locator("tbody tr").all()] == [
        ["v3", "api"],
        ["v2", "agent"],
        ["v1", "app"],
    ]
    v3 = page.get_by_label("Change in version 3").inner_text()
    assert '- name: "Alice"' in v3 and f"+ note: {json.dumps(HOSTILE)}" in v3
    assert '+ trip.day: "05-12"' in page.get_by_label("Change in version 2").inner_text()
    assert page.locator("main img").count() == 0

    page.get_by_label("Merge patch (JSON; null deletes a key)").fill('{"mood": "excited", "note": null}')
    page.get_by_role("button", name="Apply patch").click()
    page.get_by_role("heading", name="Working memory · version 4").wait_for()
    assert json.loads(page.get_by_label("Working memory JSON").inner_text())["mood"] == "excited"
    assert '+ mood: "excited"' in page.get_by_label("Change in version 4").inner_text()
    shot(page, tmp_path / "working-memory.png")

    # Someone else writes version 5; the page still holds version 4: 412, said plainly.
    other = httpx.patch(
        site.url + "/v1/resources/alice/working-memory",
        headers={"Authorization": f"Bearer {site.alice}", "Content-Type": "application/merge-patch+json"},
        content=b'{"by": "someone else"}',
    )
    assert other.status_code == 200
    page.get_by_label("Merge patch (JSON; null deletes a key)").fill('{"mood": "calm"}')
    page.get_by_role("button", name="Apply patch").click()
    page.get_by_role("alert").get_by_text("changed since you loaded version 4").wait_for()
    assert site.get("/v1/resources/alice/working-memory").json()["data"]["mood"] == "excited"


def test_edit_and_delete_a_message(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    messages = open_trip(page)
    window = messages.get_by_role("listitem", name="user message #6")
    window.get_by_role("button", name="Edit message #6").click()
    window.get_by_label("New content").fill("I prefer an aisle seat.")
    window.get_by_label("Reason (optional)").fill("user corrected it")
    window.get_by_role("button", name="Save").click()
    page.get_by_role("status").get_by_text("Saved message #6.").wait_for()
    assert messages.get_by_role("listitem", name="user message #6").locator(".text").inner_text() == (
        "I prefer an aisle seat."
    )

    hostile = messages.get_by_role("listitem", name="user message #5")
    hostile.get_by_role("button", name="Delete message #5").click()
    dialog = page.get_by_role("dialog")
    assert f"message #5 (id “{site.ids['hostile']}”) of resource “alice” will be deleted" in dialog.inner_text()
    dialog.get_by_role("button", name="Delete message").click()
    page.get_by_role("status").get_by_text("Deleted message #5.").wait_for()
    assert messages.get_by_role("listitem", name="user message #5").count() == 0
    stored = site.get("/v1/resources/alice/threads/trip/messages").json()
    assert [m["content"] for m in stored if m["position"] >= 5] == ["I prefer an aisle seat."]
    shot(page, tmp_path / "edited.png")


def test_delete_a_thread_after_confirming(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    page.get_by_role("navigation", name="Resources").get_by_role("link", name="alice").click()
    page.get_by_role("link", name="scratch").click()
    page.get_by_role("button", name="Delete thread").click()
    dialog = page.get_by_role("dialog")
    assert "Thread “scratch” of resource “alice” and all its messages will be deleted" in dialog.inner_text()
    shot(page, tmp_path / "confirm.png")
    dialog.get_by_role("button", name="Cancel").click()
    assert "scratch" in thread_ids(site)

    page.get_by_role("button", name="Delete thread").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete thread").click()
    page.get_by_role("status").get_by_text("Deleted thread scratch.").wait_for()
    page.get_by_role("table", name="Threads").wait_for()
    assert page.get_by_role("link", name="scratch").count() == 0
    assert page.get_by_role("link", name="Trip to Lisbon").is_visible()
    assert thread_ids(site) == ["trip"]


def test_recall_shows_legs_and_scores(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    page.goto(site.url + "/#/r/alice/recall")
    page.get_by_label("Search memory").fill("Lisbon flight")
    page.get_by_role("button", name="Search").click()
    hits = page.get_by_role("list", name="Recall results").get_by_role("listitem")
    hits.first.wait_for()
    found = hits.filter(has_text="Book me a flight to Lisbon")
    assert found.count() == 1
    assert "lexical" in found.get_by_label("found by").inner_text()
    assert found.locator(".score").inner_text().startswith("score 0.")
    assert "lexical " in found.inner_text()  # the leg's own score
    assert found.get_by_role("link", name="thread trip").is_visible()
    shot(page, tmp_path / "recall.png")


def test_notebook_snapshot_beside_live_entries_facts_and_tasks(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    page.goto(site.url + "/#/r/alice/notebook")
    memory_box = page.get_by_role("region", name="Notebook Memory (MEMORY.md)")
    assert "Alice travels light." in memory_box.locator("pre.snapshot").inner_text()
    assert "conversation scratch" in memory_box.inner_text()
    # Written after the snapshot froze: live, flagged, and absent from the snapshot.
    added = httpx.post(
        site.url + "/v1/resources/alice/notebook/memory",
        json={"action": "add", "content": "Alice's passport expires in 2031."},
        headers={"Authorization": f"Bearer {site.alice}"},
    )
    assert added.status_code == 200, added.text
    page.reload()
    memory_box = page.get_by_role("region", name="Notebook Memory (MEMORY.md)")
    memory_box.locator("ol.entries").wait_for()
    assert "passport" not in memory_box.locator("pre.snapshot").inner_text()
    fresh = memory_box.locator("ol.entries li").filter(has_text="passport")
    assert "new since snapshot" in fresh.inner_text()
    user_box = page.get_by_role("region", name="Notebook User (USER.md)")
    assert "Alice likes window seats." in user_box.inner_text()
    shot(page, tmp_path / "notebook.png")

    tab(page, "Facts")
    facts = page.get_by_role("table", name="Facts")
    facts.locator("tbody tr").first.wait_for()
    rows = [r.inner_text().split("\t")[:4] for r in facts.locator("tbody tr").all()]
    assert ["travel", "seat", "window", "user"] in rows and ["travel", "home_airport", "OPO", "agent"] in rows

    tab(page, "Tasks")
    tasks = page.get_by_role("table", name="Scheduled tasks")
    row = tasks.locator("tbody tr").first.inner_text()
    assert "morning-brief" in row and "every day at 9" in row and "Brief me on my trip." in row and "active" in row
    shot(page, tmp_path / "tasks.png")


def test_a_key_for_alice_never_sees_bob(page: Page, site: Site, tmp_path: Path) -> None:
    sign_in(page, site)
    resources = page.get_by_role("navigation", name="Resources").get_by_role("link")
    assert resources.all_inner_texts() == ["alice"]
    for path in ("threads", "threads/vault", "working-memory", "notebook", "facts", "tasks"):
        page.goto(f"{site.url}/#/r/bob/{path}")
        page.get_by_role("heading", name="Not found").wait_for()
        assert "resource 'bob' not found" in page.get_by_role("alert").inner_text()
        assert "4321" not in page.content()
    shot(page, tmp_path / "not-found.png")
    assert site.get("/v1/resources/bob/threads").status_code == 404


def test_a_bad_key_is_refused_and_sign_out_forgets_the_key(page: Page, site: Site) -> None:
    page.goto(site.url + "/")
    page.get_by_label("API key").fill("cad_not-a-real-key")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").get_by_text("That key was not accepted").wait_for()
    assert page.get_by_label("API key").is_visible()
    assert page.evaluate("sessionStorage.length") == 0

    sign_in(page, site)
    page.reload()  # the key survives a reload of this tab
    page.get_by_role("navigation", name="Resources").get_by_role("link", name="alice").wait_for()
    page.get_by_role("button", name="Sign out").click()
    assert page.get_by_label("API key").is_visible()
    assert page.evaluate("sessionStorage.length") == 0


def signed_in_parts(page: Page) -> dict[str, Any]:
    """Every part of the page that only a signed-in user may see, by name."""
    return {
        "sign-out button": page.get_by_role("button", name="Sign out"),
        "key hint": page.locator("#key-hint"),
        "resource list": page.get_by_role("navigation", name="Resources"),
        "Resources heading": page.get_by_role("heading", name="Resources"),
        "tabs": page.get_by_role("navigation", name="Sections"),
        "thread view": page.get_by_role("list", name="Messages"),
        "edit buttons": page.get_by_role("button", name="Edit message #"),
        "delete buttons": page.get_by_role("button", name="Delete message #"),
    }


def shown(parts: dict[str, Any]) -> list[str]:
    return [name for name, where in parts.items() if any(el.is_visible() for el in where.all())]


def test_signed_out_shows_only_the_sign_in_form(page: Page, site: Site, tmp_path: Path) -> None:
    """Signed out, nothing of the signed-in page shows: a ``display`` rule must not beat ``hidden``."""
    page.goto(site.url + "/")
    page.get_by_label("API key").wait_for()
    shot(page, tmp_path / "signed-out-first.png")
    assert shown(signed_in_parts(page)) == []
    assert page.get_by_role("heading", name="Sign in").is_visible()
    assert page.get_by_role("heading", name="caderno inspector").is_visible()

    sign_in(page, site)
    open_trip(page)
    page.get_by_role("button", name="Edit message #").first.wait_for()
    shot(page, tmp_path / "signed-in.png")
    assert shown(signed_in_parts(page)) == list(signed_in_parts(page))  # the check above sees these parts
    assert not page.get_by_label("API key").is_visible()

    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API key").wait_for()
    shot(page, tmp_path / "signed-out.png")
    assert shown(signed_in_parts(page)) == []
    assert page.get_by_role("heading", name="Sign in").is_visible()
    page.reload()  # and the page as a new visit finds it
    page.get_by_label("API key").wait_for()
    assert shown(signed_in_parts(page)) == []


def rank_key(hit: dict[str, Any], index: int) -> tuple[float, int, int]:
    """Recall's own ranking (``top``): fused score, then newest first (to the page's millisecond), then API index."""
    created = hit["message"]["created_at"]
    ms = (datetime.fromisoformat(created) - EPOCH) // timedelta(milliseconds=1) if created else 0
    return (-hit["score"], -ms, -index)


def score_text(value: float) -> str:
    """The page's score format (``formatScore``): 0, three significant digits, or x.xxe±n when tiny or huge."""
    if value == 0:
        return "0"
    if 0.001 <= abs(value) < 1000:
        return repr(float(f"{value:.3g}")).removesuffix(".0")
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{'+' if int(exponent) >= 0 else '-'}{abs(int(exponent))}"


def test_recall_lists_hits_best_first_with_score_and_legs(page: Page, site: Site, tmp_path: Path) -> None:
    """The Recall tab ranks the API's hits by fused score, not in the conversation order the API answers in."""
    said = [
        "The ferry to Tavira leaves from the old harbour.",
        "Tavira has a ferry and a bridge; the ferry to Tavira island runs hourly, Tavira ferry tickets cost 2 EUR.",
        "I had soup for lunch.",
        "Pack sunscreen for Tavira.",
    ]
    appended = site.post(
        "/v1/resources/alice/threads/algarve/messages",
        json={"messages": [{"role": "user", "content": t} for t in said]},
    )
    assert appended.status_code == 201, appended.text
    api = site.post("/v1/resources/alice/recall", json={"query": "Tavira ferry"})
    assert api.status_code == 200, api.text
    hits = api.json()
    expected = [h for _, h in sorted(enumerate(hits), key=lambda ih: rank_key(ih[1], ih[0]))]
    conversation_order = [h["message"]["id"] for h in hits]
    assert [h["message"]["id"] for h in expected] != conversation_order, "pick data the ranking reorders"

    sign_in(page, site)
    page.goto(site.url + "/#/r/alice/recall")
    page.get_by_label("Search memory").fill("Tavira ferry")
    page.get_by_role("button", name="Search").click()
    rows = page.get_by_role("list", name="Recall results").get_by_role("listitem")
    rows.first.wait_for()
    assert rows.count() == len(expected)
    for row, hit in zip(rows.all(), expected, strict=True):
        text = row.inner_text()
        assert hit["message"]["content"] in text
        assert row.locator(".score").inner_text() == f"score {score_text(hit['score'])}"
        assert row.get_by_label("found by").inner_text().split() == sorted(hit["reasons"])
        for leg, value in hit["scores"].items():
            assert f"{leg} {score_text(value)}" in text
    scores = [h["score"] for h in expected]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert "0.000" not in page.get_by_role("list", name="Recall results").inner_text()
    shot(page, tmp_path / "recall-ranked.png")


# -- stored ids that are paths (a database written before "ids are names") -------------------------


@dataclass
class Hostile:
    url: str
    admin: str
    threads: list[str]
    """Carol's thread ids that a browser would resolve as a path."""
    messages: dict[int, str]
    """Seq → hostile id of the messages in carol's thread ``plain``."""


def hostile_ids(key_id: str) -> list[str]:
    return ["../../bob", "..", ".", "../../bob/threads/t1", f"../../../keys/{key_id}"]


async def seed_hostile(db: Path) -> tuple[str, list[str], dict[int, str]]:
    from _legacy import legacy_append

    async with caderno.Memory(open_store(str(db)), embedder=None) as memory:
        await memory.append_messages(resource_id="bob", thread_id="t1", messages=[Message.user("Bob's vault: 4321.")])
        _, bob_key = await memory.keys.create(resources=["bob"], name="bob's key")
        admin, _ = await memory.keys.create(admin=True, name="admin")
        ids = hostile_ids(bob_key.id)
        for tid in ids:  # written below the validation layer, as an older caderno let them in
            await legacy_append(memory, resource_id="carol", thread_id=tid, messages=[(None, f"in thread {tid}")])
        stored = await legacy_append(
            memory, resource_id="carol", thread_id="plain", messages=[(mid, f"message {mid}") for mid in ids]
        )
        return admin, ids, {m.position or 0: m.id or "" for m in stored}


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Hostile]:
    db = tmp_path / "hostile.db"
    seeded: list[Any] = []
    worker = threading.Thread(target=lambda: seeded.append(asyncio.run(seed_hostile(db))))
    worker.start()
    worker.join()
    assert seeded, "seeding the database failed (see the thread's traceback above)"
    admin, threads, messages = seeded[0]
    with serving(db) as url:
        yield Hostile(url=url, admin=admin, threads=threads, messages=messages)


def untouched(site: Hostile) -> tuple[bytes, bytes, bytes]:
    """Bob's export, carol's export and the keys list, byte for byte."""
    auth = {"Authorization": f"Bearer {site.admin}"}
    paths = ("/v1/resources/bob/export", "/v1/resources/carol/export", "/v1/keys")
    return tuple(httpx.get(site.url + path, headers=auth).content for path in paths)  # type: ignore[return-value]


def report_of(page: Page) -> dict[str, Any]:
    """What the page said after an action: wait until it shows an error, a status or a confirmation."""
    page.wait_for_function(
        "() => !document.getElementById('error').hidden || document.getElementById('status').textContent"
        " || document.getElementById('confirm').open"
    )
    got: dict[str, Any] = page.evaluate(
        "() => ({error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,"
        " dialog: document.getElementById('confirm').open ? document.getElementById('confirm-text').textContent : null})"
    )
    return got


def clear_report(page: Page) -> None:
    page.evaluate(
        "() => { const e = document.getElementById('error'); e.hidden = true; e.textContent = '';"
        " document.getElementById('status').textContent = ''; }"
    )


def click_and_confirm(page: Page, button: Any, acted_on: str, before: Any, site: Hostile) -> None:
    """Click an action, accept its confirmation if one opens; nothing stored may change, the page says why."""
    clear_report(page)
    button.click()
    said = report_of(page)
    if said["dialog"] is not None:
        page.get_by_role("dialog").locator("#confirm-ok").click()
        settled = report_of(page)
        assert untouched(site) == before, f"{acted_on}: stored data changed after the confirmation"
        assert acted_on in said["dialog"], f"the confirmation must show the exact id: {said['dialog']!r}"
        said = settled
    assert untouched(site) == before, f"{acted_on}: stored data changed"
    assert "will not act on" in said["error"], said


def test_ids_that_are_paths_are_refused_never_fetched(browser: Any, hostile: Hostile, tmp_path: Path) -> None:
    before = untouched(hostile)
    sent: list[str] = []
    with opened(browser, tmp_path) as page:
        page.on("request", lambda r: sent.append(f"{r.method} {r.url}"))
        page.goto(hostile.url + "/")
        page.get_by_label("API key").fill(hostile.admin)
        page.get_by_role("button", name="Sign in").click()
        page.goto(hostile.url + "/#/r/carol/threads")
        page.get_by_role("table", name="Threads").wait_for()
        # Every action on each hostile message of a plain thread: Edit (then Save), Delete.
        page.get_by_role("link", name="plain", exact=True).click()
        messages = page.get_by_role("list", name="Messages")
        messages.wait_for()
        for seq, mid in hostile.messages.items():
            card = messages.get_by_role("listitem", name=f"user message #{seq}")
            click_and_confirm(page, card.get_by_role("button", name=f"Delete message #{seq}"), mid, before, hostile)
            card = page.get_by_role("list", name="Messages").get_by_role("listitem", name=f"user message #{seq}")
            clear_report(page)
            card.get_by_role("button", name=f"Edit message #{seq}").click()
            if card.get_by_label("New content").count():  # the form opened: save through it
                card.get_by_label("New content").fill("edited")
                click_and_confirm(page, card.get_by_role("button", name="Save"), mid, before, hostile)
            else:
                assert "will not act on" in report_of(page)["error"]
        # Each hostile thread: open it, and delete it if the page offers to.
        for tid in hostile.threads:
            page.goto(hostile.url + "/#/r/carol/threads")
            page.get_by_role("table", name="Threads").get_by_role("link", name=tid, exact=True).click()
            page.get_by_text("will not act on").or_(page.get_by_role("button", name="Delete thread")).first.wait_for()
            delete = page.get_by_role("button", name="Delete thread")
            if delete.count():
                click_and_confirm(page, delete, tid, before, hostile)
            else:
                assert f"thread id {json.dumps(tid)}" in page.get_by_role("alert").inner_text()
            assert untouched(hostile) == before, tid
        shot(page, tmp_path / "hostile-ids.png")
    assert untouched(hostile) == before
    fetched = [line for line in sent if "/v1/" in line]
    assert all(
        line.split(" ", 1)[1].split("?")[0].startswith(f"{hostile.url}/v1/resources/carol/")
        or line.endswith("/v1/resources")
        for line in fetched
    ), fetched
    assert not [line for line in fetched if not line.startswith("GET ")], fetched
