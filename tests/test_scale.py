"""Scale proof: many OS processes writing one database at once.

4 processes x 25 threads x 20 turns of appends, while 2 more processes patch
the working memory of shared resources. Nothing may be lost, duplicated or
reordered, and every patch must land (no lost update).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import caderno
from conftest import python_env

WRITERS, THREADS, TURNS = 4, 25, 20
PATCHERS, PATCHES, RESOURCES = 2, 40, 5

WRITER = textwrap.dedent(
    """
    import asyncio, sys, caderno
    from caderno import Message
    url, p, threads, turns, resources = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    async def main():
        async with caderno.connect(url) as m:
            for turn in range(turns):
                for t in range(threads):
                    await m.append_messages(resource_id=f"res{t % resources}", thread_id=f"p{p}-t{t}", messages=[
                        Message.user(f"{p}/{t}/{turn}/q"), Message.assistant(f"{p}/{t}/{turn}/a")])
    asyncio.run(main())
    """
)

PATCHER = textwrap.dedent(
    """
    import asyncio, sys, caderno
    url, p, patches, resources = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    async def main():
        async with caderno.connect(url) as m:
            for i in range(patches):
                await m.update_working_memory(resource_id=f"res{i % resources}", patch={f"k{p}-{i}": i},
                                              source=f"patcher{p}")
    asyncio.run(main())
    """
)


def test_many_processes_lose_nothing(shared_url: str) -> None:
    asyncio.run(_create(shared_url))  # create the schema once, like a deployed app
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, shared_url, str(p), str(THREADS), str(TURNS), str(RESOURCES)],
            env=python_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(WRITERS)
    ] + [
        subprocess.Popen(
            [sys.executable, "-c", PATCHER, shared_url, str(p), str(PATCHES), str(RESOURCES)],
            env=python_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PATCHERS)
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    asyncio.run(_verify(shared_url))


async def _create(url: str) -> None:
    async with caderno.connect(url):
        pass


async def _verify(url: str) -> None:
    async with caderno.connect(url) as memory:
        total = 0
        for p in range(WRITERS):
            for t in range(THREADS):
                msgs = await memory.get_messages(resource_id=f"res{t % RESOURCES}", thread_id=f"p{p}-t{t}")
                expected = [f"{p}/{t}/{turn}/{qa}" for turn in range(TURNS) for qa in "qa"]
                assert [m.content for m in msgs] == expected
                assert len({m.id for m in msgs}) == len(msgs)
                total += len(msgs)
        assert total == WRITERS * THREADS * TURNS * 2
        log_total = 0
        for r in range(RESOURCES):
            state = await memory.working_memory.state(resource_id=f"res{r}")
            keys = {f"k{p}-{i}" for p in range(PATCHERS) for i in range(r, PATCHES, RESOURCES)}
            assert state is not None and set(state.data) == keys
            assert state.version == len(keys)
            dump = await memory.export_resource(resource_id=f"res{r}")
            assert [e["version"] for e in dump["working_memory_log"]] == list(range(1, len(keys) + 1))
            log_total += len(dump["working_memory_log"])
        assert log_total == PATCHERS * PATCHES
