"""``Memory`` is flat where the contract names it and reaches everything else through a part.

The rule is in ``caderno/memory/facade.py``'s docstring; CHANGELOG.md's
"The parts of Memory" lists where each old flat name moved. These tests hold the rule
and that table to the code, so neither can drift.
"""

from __future__ import annotations

import re
from pathlib import Path

import caderno
from caderno import Message, ScriptedModel
from caderno.memory.parts.consolidation import ConsolidationSettings

#: The contract (DESIGN.md §4, the seed port) and the port: what stays flat on ``Memory``.
FLAT = {
    "append_messages", "get_messages", "get_working_memory", "update_working_memory",
    "list_threads", "delete_thread",
    "list_resources", "erase_resource", "export_resource", "import_resource",
    "recall", "get_context", "reindex",
    "open", "close", "flush", "supports", "batch", "run", "run_background",
}  # fmt: skip
PARTS = {
    "threads", "messages", "working_memory", "facts", "consolidation", "turns",
    "tasks", "macros", "prefixes", "keys", "notebook",
}  # fmt: skip
#: What a part is built on, kept as attributes for the integrations that need the machinery.
MACHINERY = {"store", "embedder", "indexer", "vectors", "retriever"}

#: CHANGELOG.md's rows "| `memory.old_name(...)` | `memory.part.method(...)` |".
MOVED_ROW = re.compile(r"^\| `memory\.(\w+)(?:\(\.\.\.\))?` \| `memory\.(\w+)\.(\w+)(?:\(\.\.\.\))?` \|", re.M)
CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def test_every_public_name_is_flat_or_a_part() -> None:
    memory = caderno.Memory(caderno.InMemoryStore(), embedder=None)
    public = {name for name in dir(memory) if not name.startswith("_")}
    assert public == FLAT | PARTS | MACHINERY


def test_the_changelog_says_where_each_old_name_went_and_the_part_has_it() -> None:
    moved = MOVED_ROW.findall(CHANGELOG.read_text())
    assert len(moved) >= 20, "the changelog's table of moved names"
    memory = caderno.Memory(caderno.InMemoryStore(), embedder=None)
    for old, part, method in moved:
        assert not hasattr(memory, old), f"{old} is still flat"
        assert part in PARTS and hasattr(getattr(memory, part), method), f"memory.{part}.{method}"


async def test_consolidation_settings_live_in_the_part() -> None:
    settings = ConsolidationSettings(summarize_after_tokens=40, keep_recent_tokens=10)
    async with caderno.connect("memory://", embedder=None, consolidation=settings) as memory:
        assert memory.consolidation.settings is settings
        texts = [f"message {i}: the budget for March is {1000 + i} reais, decided by Ana." for i in range(12)]
        await memory.append_messages(resource_id="casa", thread_id="t", messages=[Message.user(t) for t in texts])
        memory.consolidation.schedule(resource_id="casa", thread_id="t")
        await memory.flush()  # waits for the scheduled run: it joined the memory's background tasks
        assert len(await memory.consolidation.summaries(resource_id="casa", thread_id="t")) == 1
        assert await memory.consolidation.run(resource_id="casa") == {
            "summaries": 0,
            "merges": 0,
            "facts": 0,
            "failures": 0,
        }


async def test_extracted_facts_go_through_the_facts_part() -> None:
    model = ScriptedModel([Message.assistant('[{"category": "Home", "key": "city", "value": "Curitiba"}]')])
    settings = ConsolidationSettings(fast_model=model)
    async with caderno.connect("memory://", embedder=None, consolidation=settings) as memory:
        await memory.append_messages(
            resource_id="casa", thread_id="t", messages=[Message.user("Remember: I live in Curitiba.", importance=0.9)]
        )
        assert (await memory.consolidation.run(resource_id="casa"))["facts"] == 1
        (fact,) = await memory.facts.list(resource_id="casa")
        assert (fact.category, fact.key, fact.value, fact.source) == ("home", "city", "Curitiba", "consolidation")
