"""Approval bypass is an admin's decision: trusted tasks and approved prefixes need an admin key.

Issue 21, finding 6: a key for one resource created tasks with
``"trusted": true`` and imported ``allowed_prefixes`` (``rm``, ``curl``,
``bash``), so any worker that runs gated tools would run them unasked. Each
refusal here is a 403 problem and leaves the resource byte-identical.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("fastapi")

from _api_helpers import Api, api_fixture, assert_problem  # noqa: E402, F401

R = "/v1/resources/casa"


def _dump(**sections: Any) -> dict[str, Any]:
    from caderno.stores.export import new_dump

    return {**new_dump("casa"), **sections}


def _task(trusted: bool) -> dict[str, Any]:
    return {
        "id": "0190f1f2-0000-7000-8000-000000000001",
        "name": "limpar",
        "cron_expr": "0 9 * * *",
        "original_schedule": "daily at 9",
        "prompt": "rode rm -rf /tmp/x",
        "source": "tool",
        "is_oneshot": False,
        "is_paused": False,
        "is_trusted": trusted,
        "timezone": "UTC",
        "thread_id": "task:limpar",
        "next_run_at": "2026-01-02T09:00:00+00:00",  # every export has one (an import without one is refused)
        "last_run_at": None,
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
    }


async def _export(api: Api) -> str:
    return json.dumps(await api.memory.export_resource(resource_id="casa"), sort_keys=True)


async def test_a_resource_key_cannot_create_a_trusted_task(api: Api) -> None:
    token = await api.key("casa")
    before = await _export(api)
    async with api.client(token) as c:
        r = await c.post(R + "/tasks", json={"name": "x", "schedule": "daily at 9", "prompt": "p", "trusted": True})
        body = assert_problem(r, 403, "forbidden")
        assert "admin" in body["detail"]
        assert await _export(api) == before
        ok = await c.post(R + "/tasks", json={"name": "x", "schedule": "daily at 9", "prompt": "p"})
        assert ok.status_code == 201 and ok.json()["is_trusted"] is False


async def test_an_admin_key_may_create_a_trusted_task(api: Api) -> None:
    async with api.client(api.admin) as c:
        r = await c.post(R + "/tasks", json={"name": "x", "schedule": "daily at 9", "prompt": "p", "trusted": True})
        assert r.status_code == 201 and r.json()["is_trusted"] is True


@pytest.mark.parametrize(
    "sections",
    [
        {"allowed_prefixes": ["rm", "curl", "bash"]},
        {"scheduled_tasks": [_task(trusted=True)]},
    ],
    ids=["prefixes", "trusted-task"],
)
async def test_a_resource_key_cannot_import_approval_bypass(api: Api, sections: dict[str, Any]) -> None:
    token = await api.key("casa")
    before = await _export(api)
    async with api.client(token) as c:
        r = await c.post(R + "/import", json=_dump(**sections))
        assert_problem(r, 403, "forbidden")
    assert await _export(api) == before
    assert await api.memory.prefixes.list(resource_id="casa") == []
    async with api.client(api.admin) as c:  # the same document is an admin's to restore
        r = await c.post(R + "/import", json=_dump(**sections))
        assert r.status_code == 204, r.text
    assert await _export(api) != before


async def test_a_resource_key_still_imports_plain_documents(api: Api) -> None:
    token = await api.key("casa")
    async with api.client(token) as c:
        r = await c.post(R + "/import", json=_dump(scheduled_tasks=[_task(trusted=False)]))
        assert r.status_code == 204, r.text
    assert [t.name for t in await api.memory.tasks.list(resource_id="casa")] == ["limpar"]
