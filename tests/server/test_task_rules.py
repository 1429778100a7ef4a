"""Tasks over real HTTP: bad schedules are 400s that change nothing, and a resource key keeps the model's limits.

Through ``caderno serve``'s app on a loopback port (uvicorn), on a
SQLite file and a real PostgreSQL schema: schedules that overflowed
(``in 99999999999999999999 minutes``), crons that never fire, a
10,000-character time zone and an import whose task has no ``next_run_at``
were 500s; each is now a 400 ``invalid-request`` with caderno's sentence, and
the resource's export is byte-identical before and after. A resource key
created 40 every-minute tasks; it now keeps the model's minimum interval and
per-resource cap (``state.check_bounded``), and an admin key does not.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

import httpx  # noqa: E402
from _api_helpers import assert_problem, build  # noqa: E402
from _pg import pg_schema, require_postgres  # noqa: E402
from _serving import serving_app  # noqa: E402

from caderno.memory.engines.task_rules import MODEL_MAX_TASKS

RID = "casa"
_HELLO = {"role": "user", "content": "olá"}


@dataclass
class Server:
    base: str
    admin: str
    """An admin key's token."""
    resource: str
    """A key for ``RID`` and ``novo`` only."""

    def client(self, token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, headers={"authorization": f"Bearer {token}"}, timeout=30)

    async def export(self, rid: str = RID) -> bytes:
        async with self.client(self.admin) as http:
            response = await http.get(f"/v1/resources/{rid}/export")
        assert response.status_code == 200, response.text
        return response.content


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        require_postgres()
        with pg_schema() as pg_url:
            yield pg_url


@pytest.fixture
async def server(url: str) -> AsyncIterator[Server]:
    app, memory = build(url)
    async with serving_app(app) as (host, port):  # lifespan on: the app opens and closes the memory
        admin, _ = await memory.keys.create(admin=True, name="operator")
        resource, _ = await memory.keys.create(resources=[RID, "novo"], name="tenant")
        yield Server(base=f"http://{host}:{port}", admin=admin, resource=resource)


def _task(name: str, schedule: str, timezone: str = "UTC") -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "prompt": "veja as contas", "timezone": timezone}


# What an attacker sent, and the words of caderno's sentence that must answer it.
BATTERY = [
    (_task("overflow", "in 99999999999999999999 minutes"), "a one-shot runs within"),
    (_task("estouro", "daqui a 999999999999 dias"), "a one-shot runs within"),
    (_task("digits", "every " + "9" * 5000 + " minutes"), "the limit is 200"),
    (_task("never", "0 0 31 2 *"), "never fires"),
    (_task("nunca", "0 9 30 2 *"), "never fires"),
    (_task("zone", "daily at 9", "A" * 10_000), "an IANA name has at most 64"),
    (_task("path", "daily at 9", "../../../../etc/passwd"), "unknown time zone"),
]


@pytest.mark.parametrize(("body", "words"), BATTERY, ids=[b["name"] for b, _ in BATTERY])
async def test_bad_schedules_are_400s_that_change_nothing(server: Server, body: dict[str, Any], words: str) -> None:
    async with server.client(server.admin) as http:
        made = await http.post(f"/v1/resources/{RID}/tasks", json=_task("existing", "daily at 9"))
        assert made.status_code == 201, made.text
    before = await server.export()
    for token in (server.resource, server.admin):  # the admin key's trust changes no rule of the parser
        async with server.client(token) as http:
            refused = await http.post(f"/v1/resources/{RID}/tasks", json=body)
        problem = assert_problem(refused, 400, "invalid-request")
        assert words in problem["detail"], problem["detail"]
        assert len(problem["detail"]) < 2_000  # a sentence, not the input echoed back
        assert await server.export() == before


async def test_an_import_whose_task_lacks_next_run_at_is_refused_whole(server: Server) -> None:
    async with server.client(server.admin) as http:
        assert (await http.post(f"/v1/resources/{RID}/tasks", json=_task("lembrete", "daily at 9"))).status_code == 201
        said = await http.post(f"/v1/resources/{RID}/threads/t/messages", json={"messages": [_HELLO]})
        assert said.status_code == 201, said.text
    document = json.loads(await server.export())
    document["resource_id"] = "novo"
    empty = await server.export("novo")
    for field, broken in [("next_run_at", "absent"), ("next_run_at", None), ("last_run_at", "absent")]:
        dump = copy.deepcopy(document)
        task = dump["scheduled_tasks"][0]
        if broken == "absent":
            task.pop(field)
        else:
            task[field] = broken
        async with server.client(server.resource) as http:
            response = await http.post("/v1/resources/novo/import", json=dump)
        if field == "last_run_at":  # optional: an absent one is read as never run
            assert response.status_code == 204, response.text
            break
        problem = assert_problem(response, 400, "invalid-request")
        assert "scheduled_tasks[0].next_run_at" in problem["detail"], problem["detail"]
        assert await server.export("novo") == empty  # nothing written: not the messages either


async def test_a_resource_key_keeps_the_models_limits(server: Server) -> None:
    async with server.client(server.resource) as http:
        for schedule in ["every minute", "*/5 * * * *", "0,10 9 * * *", "in 1 minute", "daqui a 10 minutos"]:
            before = await server.export()
            refused = await http.post(f"/v1/resources/{RID}/tasks", json=_task("rapido", schedule))
            problem = assert_problem(refused, 400, "invalid-request")
            assert "15 minutes" in problem["detail"] and "admin key" in problem["detail"], problem["detail"]
            assert await server.export() == before
        for i in range(MODEL_MAX_TASKS):
            made = await http.post(f"/v1/resources/{RID}/tasks", json=_task(f"t{i}", "every 15 minutes"))
            assert made.status_code == 201, made.text
        before = await server.export()
        refused = await http.post(f"/v1/resources/{RID}/tasks", json=_task("demais", "daily at 9"))
        problem = assert_problem(refused, 400, "invalid-request")
        assert f"the most is {MODEL_MAX_TASKS}" in problem["detail"], problem["detail"]
        assert await server.export() == before
        # The cap is per resource: the key's other resource still schedules.
        assert (await http.post("/v1/resources/novo/tasks", json=_task("outra", "hourly"))).status_code == 201
    async with server.client(server.admin) as http:  # an operator is not bound by either limit
        made = await http.post(f"/v1/resources/{RID}/tasks", json=_task("ops", "every minute"))
        assert made.status_code == 201, made.text
        assert made.json()["cron_expr"] == "* * * * *"
