"""A process killed in the middle of a consolidation pass leaves no half summary."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import caderno
from caderno import Message
from caderno.memory.parts.consolidation import ConsolidationSettings
from conftest import python_env

CRASH = textwrap.dedent(
    """
    import asyncio, os, sys, caderno
    from caderno import Message, ScriptedModel
    from caderno.memory.parts.consolidation import ConsolidationSettings

    async def dies(messages, tools):
        os._exit(17)  # the process dies while the summary is being written

    async def main():
        settings = ConsolidationSettings(fast_model=ScriptedModel([dies]), summarize_after_tokens=200,
                                         keep_recent_tokens=60, lease_seconds=1)
        async with caderno.connect(sys.argv[1], embedder=None, consolidation=settings) as m:
            await m.consolidation.run(resource_id="casa")
    asyncio.run(main())
    """
)


def test_crash_mid_pass_leaves_no_half_summary(shared_url: str) -> None:
    url = shared_url

    async def seed() -> list[Message]:
        async with caderno.connect(url, embedder=None) as m:
            return await m.append_messages(
                resource_id="casa",
                thread_id="t",
                messages=[Message.user(f"message {i} about the budget of May, R$ {i}00") for i in range(40)],
            )

    stored = asyncio.run(seed())
    out = subprocess.run(
        [sys.executable, "-c", CRASH, shared_url], env=python_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 17, out.stderr

    async def check() -> None:
        settings = ConsolidationSettings(summarize_after_tokens=200, keep_recent_tokens=60)
        async with caderno.connect(url, embedder=None, consolidation=settings) as m:
            assert await m.consolidation.summaries(resource_id="casa", thread_id="t") == []
            assert await m.get_messages(resource_id="casa", thread_id="t") == stored
            await asyncio.sleep(1.1)  # the dead worker's lease runs out
            report = await m.consolidation.run(resource_id="casa")
            assert report["summaries"] == 1
            (summary, _), *_ = await m.consolidation.summaries(resource_id="casa", thread_id="t")
            assert summary.metadata["span"][0] == stored[0].position == 1

    asyncio.run(check())
