"""Over HTTP, a recall right after an append finds the message by meaning (a real ``caderno serve`` on loopback).

The count of messages the recall could not search by meaning comes in the
``Caderno-Not-Searchable`` header; the body stays the list of hits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from _serving import make_key, serving  # noqa: E402

from caderno.server.routes import NOT_SEARCHABLE_HEADER  # noqa: E402


def test_an_append_then_a_recall_over_http_finds_it_by_meaning(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    token = make_key(db, "u")
    with serving(db) as served:
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=served.base, headers=headers, timeout=60) as c:
            appended = c.post(
                "/v1/resources/u/threads/t/messages",
                json={"messages": [{"role": "user", "content": "I love hiking in the Alps"}]},
            )
            assert appended.status_code in (200, 201), appended.text
            r = c.post("/v1/resources/u/recall", json={"query": "mountains"})
            assert r.status_code == 200, r.text
            hits = r.json()
            assert isinstance(hits, list)
            assert any(
                h["message"]["content"] == "I love hiking in the Alps" and "relevant" in h["reasons"] for h in hits
            ), hits
            assert r.headers[NOT_SEARCHABLE_HEADER] == "0"
