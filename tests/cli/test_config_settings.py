"""caderno.toml's consolidation and cache settings by the design's names, and ``[model.fast]`` at work.

Parsing is checked on real files; ``caderno worker`` and ``caderno serve``
run as real subprocesses against a scripted chat-completions upstream on a
loopback port (``_upstream``), which records which model each request named.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from _upstream import Upstream, serving  # noqa: E402

import caderno  # noqa: E402
from caderno import Message  # noqa: E402
from caderno.agent.config import load_config  # noqa: E402
from caderno.core.errors import UsageError  # noqa: E402
from caderno.memory.parts.consolidation import FACTS_PROMPT, ConsolidationSettings  # noqa: E402
from conftest import PROCESS_SECONDS, free_port, python_env  # noqa: E402


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "caderno.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_settings_by_their_names(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "consolidation_interval_hours = 0.5\nworking_memory_cap = 12\n\n"
            '[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "chat-1"\napi_key_env = "K"\n\n'
            '[model.fast]\nmodel = "fast-1"\n',
        )
    )
    assert (config.consolidation_interval_hours, config.working_memory_cap) == (0.5, 12)
    options = config.connect_options()
    assert options["cache_messages"] == 12
    assert options["consolidation"].interval_hours == 0.5
    fast, chat = options["consolidation"].fast_model, config.chat_model()
    # [model.fast] names its own model; a key it leaves out is [model]'s.
    assert (fast.model, fast.base_url, chat.model) == ("fast-1", "http://127.0.0.1:9/v1", "chat-1")


async def test_the_cap_reaches_the_sqlite_store(tmp_path: Path) -> None:
    options = load_config(write(tmp_path, "working_memory_cap = 7\n")).connect_options()
    async with caderno.connect(f"sqlite:///{tmp_path / 'c.db'}", embedder=None, **options) as memory:
        assert memory.store.cache.per_thread == 7  # type: ignore[attr-defined]


def test_defaults_are_consolidations_and_the_stores(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[model]\nmodel = "chat-1"\n'))
    assert (config.consolidation_interval_hours, config.working_memory_cap, config.fast_model()) == (None, None, None)
    options = config.connect_options()
    assert "cache_messages" not in options  # the store keeps its own default
    assert options["consolidation"] == ConsolidationSettings()  # 6 hours, no fast model: extractive summaries


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "consolidation_interval_hours = 0\n",
            "consolidation_interval_hours must be a positive number of hours, not 0",
        ),
        ('consolidation_interval_hours = "6h"\n', "consolidation_interval_hours must be a positive number of hours"),
        ("working_memory_cap = -1\n", "working_memory_cap must be a whole number of messages (0 or more), not -1"),
        ("working_memory_cap = 2.5\n", "working_memory_cap must be a whole number of messages"),
        ("working_memory_cap = true\n", "working_memory_cap must be a whole number of messages"),
        ('[model]\nmodel = "m"\nworking_memory_cap = 5\n', "top-level settings go before the first [table]"),
        ('[model]\nmodel = "m"\n[model.fast]\nmodle = "f"\n', "[model.fast] has unknown key(s) modle"),
        ('[model]\nmodel = "m"\nfast = "f"\n', "[model] fast must be a table: [model.fast]"),
        ("[model.fast]\nmodel = 3\n", "[model.fast] model must be a non-empty string, not 3"),
        ("consolidation_hours = 6\n", "unknown section(s) or setting(s) consolidation_hours"),
    ],
)
def test_a_bad_setting_is_a_clear_error(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        load_config(write(tmp_path, text))
    assert said in str(caught.value) and "caderno.toml" in str(caught.value)


def fast_upstream() -> Upstream:
    """Answers a summary request with a marked summary and a facts request with one fact."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][0]["content"] == FACTS_PROMPT:
            fact = [{"category": "travel", "key": "destino", "value": "Amsterdam"}]
            return {"role": "assistant", "content": json.dumps(fact)}
        return {"role": "assistant", "content": "RESUMO DO MODELO RÁPIDO: Amsterdam."}

    return Upstream(script=[reply] * 20)


async def seed(db: Path) -> None:
    """A thread long enough to summarise, with salient user messages to read facts from."""
    async with caderno.connect(f"sqlite:///{db}", embedder=None) as memory:
        filler = " ".join(["A viagem para Amsterdam precisa de EUR 6.000 até setembro."] * 8)
        messages = [
            Message.user(f"{i}: {filler}", importance=0.9) if i % 2 == 0 else Message.assistant(f"{i}: {filler}")
            for i in range(30)
        ]
        await memory.append_messages(resource_id="casa", thread_id="t", messages=messages)


async def consolidated_by_the_fast_model(db: Path, command: list[str], upstream: Upstream, up: str) -> None:
    """Run ``caderno … command`` until its first consolidation pass wrote a model summary and a fact; stop it."""
    toml = db.parent / "caderno.toml"
    toml.write_text(
        f'[model]\nbase_url = "{up}/v1"\nmodel = "chat-1"\n\n[model.fast]\nmodel = "fast-1"\n', encoding="utf-8"
    )
    log = (db.parent / "out.log").open("w")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caderno.cli", "--db", str(db), "--config", str(toml), *command,
        env=python_env(), stdout=log, stderr=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PROCESS_SECONDS
        while time.monotonic() < deadline:
            async with caderno.connect(f"sqlite:///{db}", embedder=None) as memory:
                facts = await memory.facts.list(resource_id="casa")
                summaries = await memory.consolidation.summaries(resource_id="casa", thread_id="t")
            if facts and summaries:
                break
            assert process.returncode is None, (db.parent / "out.log").read_text()
            await asyncio.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), PROCESS_SECONDS)
        log.close()
    assert summaries and facts, (db.parent / "out.log").read_text()
    assert "RESUMO DO MODELO RÁPIDO" in summaries[0][0].content
    assert [(f.key, f.value) for f in facts] == [("destino", "Amsterdam")]
    assert {r["model"] for r in upstream.requests} == {"fast-1"}  # never the chat model


async def test_worker_consolidates_with_the_fast_model(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    await seed(db)
    upstream = fast_upstream()
    async with serving(upstream.app()) as up:
        await consolidated_by_the_fast_model(db, ["worker"], upstream, up)


async def test_serve_consolidates_with_the_fast_model(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    await seed(db)
    upstream = fast_upstream()
    async with serving(upstream.app()) as up:
        await consolidated_by_the_fast_model(db, ["serve", "--port", str(free_port())], upstream, up)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"]], ids=["serve", "worker"])
async def test_a_host_consolidates_every_configured_interval(tmp_path: Path, command: list[str]) -> None:
    """A second pass comes after ``consolidation_interval_hours`` (here 1.08 s), not after the default 6 hours."""
    db = tmp_path / "i.db"
    await seed(db)
    toml = write(tmp_path, "consolidation_interval_hours = 0.0003\n")
    log = (tmp_path / "out.log").open("w")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caderno.cli", "--db", str(db), "--config", str(toml),
        *[str(free_port()) if part == "0" else part for part in command],
        env=python_env(), stdout=log, stderr=log,
    )  # fmt: skip
    try:
        later: list[Any] = []
        deadline = time.monotonic() + PROCESS_SECONDS
        while time.monotonic() < deadline:
            async with caderno.connect(f"sqlite:///{db}", embedder=None) as memory:
                if not later and await memory.consolidation.summaries(resource_id="casa", thread_id="t"):
                    # The first pass (at start) is done: a thread written now waits for the next one.
                    filler = " ".join(["Outra conversa sobre o orçamento de março, EUR 1.200."] * 8)
                    await memory.append_messages(
                        resource_id="casa", thread_id="t2", messages=[Message.user(f"{i}: {filler}") for i in range(30)]
                    )
                    later.append(True)
                elif later and await memory.consolidation.summaries(resource_id="casa", thread_id="t2"):
                    break
            assert process.returncode is None, (tmp_path / "out.log").read_text()
            await asyncio.sleep(0.1)
        else:
            pytest.fail("no second pass: " + (tmp_path / "out.log").read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), PROCESS_SECONDS)
        log.close()
