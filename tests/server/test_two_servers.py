"""Two ``caderno serve`` processes on one PostgreSQL schema: one household, one memory.

Real subprocesses on loopback ports, a real PostgreSQL schema, and a
scripted upstream model (``_upstream.Upstream``, served from a thread of
this process) that records every request the servers send it. Both servers
are started at the same moment once for the module; a third one is started
and SIGKILLed mid-turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _pg import pg_schema, require_postgres  # noqa: E402
from _serving import Served, make_key, serving  # noqa: E402
from _upstream import Upstream, call, text  # noqa: E402
from _upstream import serving as serving_upstream  # noqa: E402

from caderno.server.proxy import THREAD_HEADER  # noqa: E402
from conftest import python_env  # noqa: E402

pytestmark = pytest.mark.postgres

RID = "casa"
TASK_PROMPT = "Lembrete: pagar a conta de luz"
TASK_THREAD = "lembretes"
#: [server] for every process: a short lease so a killed server's thread is free quickly,
#: a wait long enough for a turn that holds the thread.
SERVER_TABLE = "[server]\nturn_wait = 10\nturn_lease = 2\n"


@dataclass
class Pair:
    a: Served
    b: Served
    upstream: Upstream
    url: str
    config: Path
    env: dict[str, str]
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    def ask(self, server: Served, thread: str, content: str, timeout: float = 30) -> httpx.Response:
        body = {"model": "m", "messages": [{"role": "user", "content": content}]}
        return httpx.post(
            f"{server.base}/v1/chat/completions",
            json=body,
            headers={**self.headers, THREAD_HEADER: thread},
            timeout=timeout,
        )

    def messages(self, server: Served, thread: str) -> list[dict[str, Any]]:
        got = httpx.get(f"{server.base}/v1/resources/{RID}/threads/{thread}/messages", headers=self.headers)
        assert got.status_code == 200, got.text
        listed: list[dict[str, Any]] = got.json()
        return listed

    def system(self, i: int) -> str:
        """The system messages' text of upstream request ``i``."""
        messages = self.upstream.requests[i]["messages"]
        return "\n".join(str(m["content"]) for m in messages if m["role"] == "system")


@contextlib.contextmanager
def _upstream_thread(upstream: Upstream) -> Iterator[str]:
    """Serve the scripted upstream from its own thread and event loop; yield its ``/v1`` base URL."""
    ready: list[str] = []
    started, stop = threading.Event(), threading.Event()

    async def main() -> None:
        async with serving_upstream(upstream.app()) as base:
            ready.append(base)
            started.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(30), "the scripted upstream did not start"
    try:
        yield f"{ready[0]}/v1"
    finally:
        stop.set()
        thread.join(30)


def _sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` in the schema of a ``pg_schema`` URL."""
    import psycopg

    base, _, schema = url.rpartition("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        cursor = conn.execute(query, args)
        return list(cursor.fetchall()) if cursor.description else []


async def _add_due_task(url: str) -> None:
    """A one-shot task, then made due already, so both servers find it due as they start."""
    import caderno

    memory = await caderno.connect(url, embedder=None)
    try:
        await memory.tasks.add(
            resource_id=RID, name="luz", schedule="in 2 hours", prompt=TASK_PROMPT, thread_id=TASK_THREAD
        )
    finally:
        await memory.close()


def _wait_for(check: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {seconds:g} s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_postgres()
    home = tmp_path_factory.mktemp("two-servers")
    upstream = Upstream(script=[text("Lembrete anotado.")])  # the due task's turn
    with pg_schema() as url, _upstream_thread(upstream) as up:
        config = home / "caderno.toml"
        config.write_text(f'[model]\nbase_url = "{up}"\nmodel = "scripted-1"\n\n{SERVER_TABLE}')
        env = {**python_env(), "CADERNO_HOME": str(home / "home")}
        token = make_key(url, RID)
        asyncio.run(_add_due_task(url))
        _sql(url, "UPDATE scheduled_tasks SET next_run_at = now() - interval '1 minute'")
        with contextlib.ExitStack() as stack:
            # Started together: each looks for due tasks as it starts, so both race for the task.
            starting = [serving(url, config, env=env) for _ in range(2)]
            with ThreadPoolExecutor(2) as pool:
                a, b = pool.map(lambda cm: cm.__enter__(), starting)
            for cm in starting:
                stack.push(cm.__exit__)
            pair = Pair(a=a, b=b, upstream=upstream, url=url, config=config, env=env, token=token)
            _wait_for(lambda: len(pair.messages(a, TASK_THREAD)) >= 2, 30, "the due task's turn")
            yield pair


def test_working_memory_from_monday_on_a_reaches_wednesday_on_b(pair: Pair) -> None:
    goal = {"destino": "Amsterdam", "valor": "EUR 6.000", "prazo": "2026-09-01"}
    pair.upstream.script += [
        call("update_working_memory", {"patch": {"meta": goal, "renda_mensal": "R$ 14.000"}}),
        text("Anotado: Amsterdam, EUR 6.000 até 2026-09-01."),
        text("Lembro sim: EUR 6.000 para Amsterdam até 2026-09-01."),
    ]
    monday = pair.ask(pair.a, "segunda", "Queremos ir a Amsterdam; a renda da casa é R$ 14.000 por mês.")
    assert monday.status_code == 200, monday.text
    sent = len(pair.upstream.requests)
    wednesday = pair.ask(pair.b, "quarta", "e a meta de Amsterdam, lembra?")
    assert wednesday.status_code == 200, wednesday.text
    assert wednesday.json()["choices"][0]["message"]["content"].startswith("Lembro sim")
    assert len(pair.upstream.requests) == sent + 1
    # B's request carries the working memory A's turn wrote, as its own block of the prompt.
    (block,) = [m["content"] for m in pair.upstream.requests[sent]["messages"] if "WORKING MEMORY" in m["content"]]
    for said in (
        '"destino": "Amsterdam"',
        '"valor": "EUR 6.000"',
        '"prazo": "2026-09-01"',
        '"renda_mensal": "R$ 14.000"',
    ):
        assert said in block, block


def test_a_note_written_on_a_is_in_the_next_conversation_on_b_and_old_ones_keep_their_snapshot(pair: Pair) -> None:
    note = "Preferimos voos noturnos."
    pair.upstream.script += [text("Olá!"), text("Continuando."), text("Voos noturnos, certo.")]
    first = pair.ask(pair.a, "antiga", "Oi, vamos planejar a viagem.")
    assert first.status_code == 200, first.text
    written = httpx.post(
        f"{pair.a.base}/v1/resources/{RID}/notebook/user",
        json={"action": "add", "content": note},
        headers=pair.headers,
    )
    assert written.status_code == 200, written.text

    sent = len(pair.upstream.requests)
    again = pair.ask(pair.b, "antiga", "E os voos?")
    assert again.status_code == 200, again.text
    assert note not in pair.system(sent)  # the conversation's snapshot froze at its first turn, on A
    frozen = httpx.get(
        f"{pair.b.base}/v1/resources/{RID}/notebook", params={"thread_id": "antiga"}, headers=pair.headers
    )
    assert frozen.status_code == 200, frozen.text
    assert note not in str(frozen.json()["snapshot"]) and note in frozen.json()["entries"]["user"]

    fresh = pair.ask(pair.b, "nova", "Que voos preferimos?")
    assert fresh.status_code == 200, fresh.text
    assert note in pair.system(sent + 1)
    now = httpx.get(f"{pair.b.base}/v1/resources/{RID}/notebook", params={"thread_id": "nova"}, headers=pair.headers)
    assert note in str(now.json()["snapshot"])


def test_concurrent_turns_on_one_thread_through_a_and_b_are_not_interleaved(pair: Pair) -> None:
    pair.upstream.script += [text("primeira resposta"), text("segunda resposta")]
    pair.upstream.delays += [1.5]  # A's turn holds the thread while its model call is slow
    sent = len(pair.upstream.requests)
    finished: dict[str, float] = {}

    def turn(server: Served, content: str) -> httpx.Response:
        answer = pair.ask(server, "corrida", content)
        finished[content] = time.monotonic()
        return answer

    with ThreadPoolExecutor(2) as pool:
        on_a = pool.submit(turn, pair.a, "primeira pergunta")
        _wait_for(lambda: len(pair.upstream.requests) > sent, 10, "A's model call")
        b_started = time.monotonic()
        on_b = pool.submit(turn, pair.b, "segunda pergunta")
        first, second = on_a.result(), on_b.result()
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text  # it waited (turn_wait 10 s) rather than being refused
    assert finished["segunda pergunta"] > finished["primeira pergunta"] > b_started
    # B's turn read the thread after A's turn was stored: A's answer is in B's prompt.
    assert len(pair.upstream.requests) == sent + 2
    assert "primeira resposta" in pair.upstream.prompt(sent + 1)
    stored = [(m["role"], m["content"]) for m in pair.messages(pair.a, "corrida")]
    assert stored == [
        ("user", "primeira pergunta"),
        ("assistant", "primeira resposta"),
        ("user", "segunda pergunta"),
        ("assistant", "segunda resposta"),
    ]


def test_a_server_killed_mid_turn_stores_nothing_and_frees_the_thread_for_b(pair: Pair) -> None:
    pair.upstream.script += [text("nunca entregue"), text("B respondeu")]
    pair.upstream.delays += [5.0]  # the killed server's model call
    sent = len(pair.upstream.requests)
    with serving(pair.url, pair.config, env=pair.env) as doomed:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(pair.ask, doomed, "queda", "mensagem do servidor morto")
            _wait_for(lambda: len(pair.upstream.requests) > sent, 10, "the doomed server's model call")
            doomed.process.send_signal(signal.SIGKILL)
            doomed.process.wait(10)
            with pytest.raises(httpx.TransportError):
                pending.result()
    # Its lease is still in the table: B waits for it to lapse (turn_lease 2 s, within turn_wait 10 s).
    answer = pair.ask(pair.b, "queda", "mensagem pelo B")
    assert answer.status_code == 200, answer.text
    stored = [(m["role"], m["content"]) for m in pair.messages(pair.b, "queda")]
    assert stored == [("user", "mensagem pelo B"), ("assistant", "B respondeu")]


def test_the_sdks_retry_through_another_server_while_the_first_is_stopped_stores_the_turn_once(pair: Pair) -> None:
    """The OpenAI SDK times out on a stalled server and retries on another, with no key: one turn stored.

    The first server is SIGSTOPped while its model call runs (a long GC
    pause, a VM migration), past its turn lease; the client's retry
    (``x-stainless-retry-count``) reaches B, which takes the thread, finds
    nothing stored and answers. When the first server is continued its model
    call ends and its commit finds its lease's token gone: it stores nothing.
    Before the lease was a fence, its commit re-created the lease B had given
    back and the same turn was stored twice (10 of 10 threads).
    """
    pair.upstream.script += [text("resposta do servidor parado"), text("resposta pelo B")]
    pair.upstream.delays += [4.0]  # the stalled server's model call, answered while it is stopped
    sent = len(pair.upstream.requests)
    body = {"model": "m", "messages": [{"role": "user", "content": "quanto gastamos em junho?"}]}
    headers = {**pair.headers, THREAD_HEADER: "sdk-retry"}
    with serving(pair.url, pair.config, env=pair.env) as stalled:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(
                httpx.post, f"{stalled.base}/v1/chat/completions", json=body, headers=headers, timeout=60
            )
            _wait_for(lambda: len(pair.upstream.requests) > sent, 10, "the first server's model call")
            stalled.process.send_signal(signal.SIGSTOP)
            try:
                # The client gave up on the first server and retries on B (turn_wait 10 s > turn_lease 2 s).
                retry = httpx.post(
                    f"{pair.b.base}/v1/chat/completions",
                    json=body,
                    headers={**headers, "x-stainless-retry-count": "1"},
                    timeout=60,
                )
            finally:
                stalled.process.send_signal(signal.SIGCONT)
            assert retry.status_code == 200, retry.text
            late = first.result()  # the first server's turn, continued: refused, nothing stored
    assert late.status_code == 409 and late.json()["type"].endswith("/thread-busy"), late.text
    stored = [(m["role"], m["content"]) for m in pair.messages(pair.b, "sdk-retry")]
    assert stored == [("user", "quanto gastamos em junho?"), ("assistant", "resposta pelo B")]


def test_each_message_is_embedded_once_and_the_due_task_ran_once(pair: Pair) -> None:
    from caderno.memory.engines.importance import embeddable

    # Both servers run the embedding worker: wait until the queue is drained.
    _wait_for(lambda: _sql(pair.url, "SELECT count(*) FROM embedding_queue") == [(0,)], 60, "the embedding queue")
    events = _sql(pair.url, "SELECT seq, role, content FROM events WHERE resource_id = %s AND kind = 'message'", RID)
    counted = dict(_sql(pair.url, "SELECT seq, count(*) FROM embeddings WHERE resource_id = %s GROUP BY seq", RID))
    wanted = {seq for seq, role, content in events if embeddable(role, content)}
    assert wanted, events
    assert set(counted) == wanted
    assert set(counted.values()) == {1}

    # The due one-shot task: one turn, on one server, though both found it due as they started.
    task_calls = [r for r in pair.upstream.requests if r["messages"][-1]["content"] == TASK_PROMPT]
    assert len(task_calls) == 1, task_calls
    stored = [m["role"] for m in pair.messages(pair.b, TASK_THREAD)]
    assert stored == ["user", "assistant"]
    assert _sql(pair.url, "SELECT count(*) FROM scheduled_tasks WHERE name = 'luz'") == [(0,)]
