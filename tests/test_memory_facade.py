"""``Memory`` is flat where the contract names it and reaches everything else through a part.

The rule is in ``caderno/memory/facade.py``'s docstring, with the table of
old flat names and their new spelling; these tests hold the rule, the
table and the delegations to the code, so none of them can drift.
"""

from __future__ import annotations

import re

import caderno
from caderno import Message, ScriptedModel
from caderno.memory import facade
from caderno.memory.consolidation import ConsolidationSettings

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
    "tasks", "macros", "prefixes", "keys",
}  # fmt: skip
#: What a part is built on, kept as attributes for the integrations that need the machinery.
MACHINERY = {"store", "embedder", "indexer", "vectors", "retriever"}

TABLE_ROW = re.compile(r"^``memory\.(\w+)((?:\(\.\.\.\))?)``\s+``memory\.(\w+)\.(\w+)\2``$", re.M)


def moved() -> dict[str, tuple[str, str]]:
    """Old flat name → (part, method), read from the delegations themselves."""
    return {
        name: (attr._part, attr._name)
        for name, attr in vars(caderno.Memory).items()
        if isinstance(attr, facade._Moved)  # the transition's own bookkeeping
    }


def test_every_public_name_is_flat_a_part_or_a_delegation() -> None:
    memory = caderno.Memory(caderno.InMemoryStore(), embedder=None)
    public = {name for name in dir(memory) if not name.startswith("_")}
    delegations = set(moved()) | {"working_memory_json_schema"}
    assert public - delegations == FLAT | PARTS | MACHINERY


def test_the_docstring_table_is_the_delegations() -> None:
    table = {old: (part, new) for old, _, part, new in TABLE_ROW.findall(facade.__doc__ or "")}
    assert table.pop("working_memory_json_schema") == ("working_memory", "json_schema")
    assert table == moved()


async def test_an_old_name_is_the_parts_method_itself() -> None:
    async with caderno.connect("memory://", embedder=None) as memory:
        for old, (part, new) in moved().items():
            assert getattr(memory, old) == getattr(getattr(memory, part), new), old
        fact = await memory.remember_fact(resource_id="casa", category="home", key="city", value="Curitiba")
        assert await memory.facts.list(resource_id="casa") == [fact]
        assert memory.working_memory_json_schema is memory.working_memory.json_schema is None


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
