"""Summaries, facts and consolidation on every backend."""

from __future__ import annotations

import asyncio
import json

import pytest

import caderno
from caderno import AgentChat, ChatSettings, Message, ScriptedModel, ToolCall
from caderno.core.errors import NotFound, UsageError
from caderno.memory.parts.consolidation import ConsolidationSettings, parse_facts
from caderno.stores import ops

R, T = "casa", "long"

SMALL = ConsolidationSettings(summarize_after_tokens=300, keep_recent_tokens=120, merge_after_tokens=150)


async def long_thread(memory: caderno.Memory, turns: int = 12, start: int = 0) -> list[Message]:
    stored = []
    for i in range(start, start + turns):
        stored += await memory.append_messages(
            resource_id=R,
            thread_id=T,
            messages=[
                Message.user(f"Turn {i}: we spent R$ {100 + i},00 at Mercado Central on 2026-05-{i % 28 + 1:02d}."),
                Message.assistant(
                    tool_calls=[ToolCall(id=f"c{i}", name="budget_total", arguments={"month": "2026-05"})]
                ),
                Message.tool(f'{{"total": {1000 + i}}}', tool_call_id=f"c{i}"),
                Message.assistant(f"Noted turn {i}; the May total is now R$ {1000 + i}."),
            ],
        )
    return stored


@pytest.fixture
async def small(db_url: str):
    async with caderno.connect(db_url, embedder=None, consolidation=SMALL) as memory:
        yield memory


async def test_summary_covers_the_oldest_turns_and_keeps_the_originals(small: caderno.Memory) -> None:
    stored = await long_thread(small)
    report = await small.consolidation.run(resource_id=R)
    assert report["summaries"] == 1 and report["failures"] == 0
    (summary, merged), *_ = await small.consolidation.summaries(resource_id=R, thread_id=T)
    first, last = summary.metadata["span"]
    assert first == stored[0].position and summary.metadata["summarizer"] == "extractive" and not merged
    covered = [m for m in stored if first <= (m.position or 0) <= last]
    assert covered[-1].role != "assistant" or not covered[-1].tool_calls  # never ends inside a tool pair
    assert any(m.role == "tool" for m in covered) and covered[-1].role == "assistant"
    assert "Mercado Central" in summary.content and "R$" in summary.content
    # Originals are never deleted.
    assert await small.get_messages(resource_id=R, thread_id=T) == stored
    # A second pass right away has nothing to do: no double summary.
    assert (await small.consolidation.run(resource_id=R))["summaries"] == 0


async def test_summaries_merge_and_the_old_ones_stay(small: caderno.Memory) -> None:
    for round_ in range(4):
        await long_thread(small, turns=10, start=round_ * 10)
        await small.consolidation.run(resource_id=R)
    summaries = await small.consolidation.summaries(resource_id=R, thread_id=T)
    merged = [s for s, m in summaries if m]
    live = [s for s, m in summaries if not m]
    assert merged and len(live) >= 1
    newest_merge = [s for s in live if s.metadata.get("merged_summaries")]
    assert newest_merge and newest_merge[-1].metadata["span"][0] <= min(s.metadata["span"][0] for s in merged)


async def others_write_first(memory: caderno.Memory) -> None:
    """Another resource and another thread of R write first, so seq and position part ways."""
    await memory.append_messages(
        resource_id="other", thread_id=T, messages=[Message.user(f"someone else's note {i}") for i in range(7)]
    )
    await memory.append_messages(resource_id=R, thread_id="side", messages=[Message.user("a side thread")] * 3)


async def test_summary_span_is_positions_of_its_thread_whatever_others_wrote(small: caderno.Memory) -> None:
    await others_write_first(small)
    stored = await long_thread(small)
    assert stored[0].position == 1 and stored[0].seq != 1  # the two numbers differ here
    assert (await small.consolidation.run(resource_id=R))["summaries"] == 1
    ((summary, _),) = await small.consolidation.summaries(resource_id=R, thread_id=T)
    assert "covers" not in summary.metadata and summary.position is None
    first, last = summary.metadata["span"]
    covered = [m for m in stored if first <= (m.position or 0) <= last]
    assert first == 1 and summary.metadata["count"] == len(covered) == last
    # The span names exactly the messages the pass took: the others are still free.
    free = await small.run(ops.ReadUnconsolidated(resource_id=R, thread_id=T))
    assert [m.id for m in free if m.role != "system"] == [m.id for m in stored if (m.position or 0) > last]


async def test_merged_summary_span_is_positions_too(small: caderno.Memory) -> None:
    await others_write_first(small)
    stored = []
    for round_ in range(4):
        stored += await long_thread(small, turns=10, start=round_ * 10)
        await small.consolidation.run(resource_id=R)
    summaries = await small.consolidation.summaries(resource_id=R, thread_id=T)
    assert any(s.metadata.get("merged_summaries") for s, merged in summaries if not merged)
    for s, _ in summaries:
        first, last = s.metadata["span"]
        assert 1 <= first <= last <= len(stored) and "covers" not in s.metadata
    assert min(s.metadata["span"][0] for s, _ in summaries) == 1


async def test_agent_prompt_shows_the_summary_instead_of_covered_turns(db_url: str) -> None:
    async with caderno.connect(db_url, embedder=None, consolidation=SMALL) as memory:
        await others_write_first(memory)
        await long_thread(memory)
        await memory.consolidation.run(resource_id=R)
        (summary, _), *_ = await memory.consolidation.summaries(resource_id=R, thread_id=T)
        model = ScriptedModel([Message.assistant("ok")])
        result = await AgentChat(model=model, memory=memory).ask(messages="e o total?", resource_id=R, thread_id=T)
        text = model.requests[0].text()
        assert "SUMMARY OF EARLIER TURNS" in text and summary.content in text
        last = summary.metadata["span"][1]
        assert f"(messages 1–{last}, extractive summary)" in text  # numbered in this thread, nothing else
        assert "Turn 0:" not in text.replace(summary.content, "")  # covered turns only via the summary
        assert "Turn 11:" in text  # the recent window is there verbatim
        assert result.usage["summary"] > 0 and result.usage["history"] > 0


async def test_fast_model_summaries_facts_and_their_failures(db_url: str) -> None:
    calls: list[str] = []

    async def fast(messages, tools):
        calls.append(messages[0].content)
        if "Extract durable facts" in messages[0].content:
            return Message.assistant(
                '```json\n[{"category": "Finance", "key": "monthly_income", "value": "R$ 14,000"}]\n```'
            )
        return Message.assistant("- the couple logged May grocery spending at Mercado Central")

    settings = ConsolidationSettings(
        fast_model=ScriptedModel([fast] * 10), summarize_after_tokens=300, keep_recent_tokens=120
    )
    async with caderno.connect(db_url, embedder=None, consolidation=settings) as memory:
        await long_thread(memory)
        await memory.append_messages(
            resource_id=R, thread_id="t2", messages=[Message.user("Remember: our income is R$ 14,000 a month.")]
        )
        report = await memory.consolidation.run(resource_id=R)
        assert report == {"summaries": 1, "merges": 0, "facts": 1, "failures": 0}
        assert any("decisions and commitments" in c for c in calls)
        (summary, _), *_ = await memory.consolidation.summaries(resource_id=R, thread_id=T)
        assert summary.metadata["summarizer"] == "model"
        (fact,) = await memory.facts.list(resource_id=R)
        assert (fact.category, fact.key, fact.value, fact.source) == (
            "finance",
            "monthly_income",
            "R$ 14,000",
            "consolidation",
        )
        again = await memory.consolidation.run(resource_id=R)
        assert again["facts"] == 0  # already extracted


@pytest.mark.parametrize("failure", ["raises", "times out", "garbage"])
async def test_a_failing_fast_model_changes_nothing_and_is_retried(db_url: str, failure: str) -> None:
    state = {"broken": True}

    async def fast(messages, tools):
        if state["broken"]:
            if failure == "raises":
                raise RuntimeError("fast model is down")
            if failure == "times out":
                await asyncio.sleep(5)
            return Message.assistant("this is not JSON at all")  # garbage for facts
        if "Extract durable facts" in messages[0].content:
            return Message.assistant('[{"category": "home", "key": "city", "value": "Curitiba"}]')
        return Message.assistant("- summary")

    settings = ConsolidationSettings(
        fast_model=ScriptedModel([fast] * 10),
        summarize_after_tokens=300 if failure != "garbage" else 10**6,
        keep_recent_tokens=120,
        model_timeout_seconds=0.2,
    )
    async with caderno.connect(db_url, embedder=None, consolidation=settings) as memory:
        stored = await long_thread(memory) if failure != "garbage" else []
        await memory.append_messages(
            resource_id=R, thread_id="t2", messages=[Message.user("Remember: we live in Curitiba.")]
        )
        report = await memory.consolidation.run(resource_id=R)
        assert report["failures"] >= 1 and report["summaries"] == 0 and report["facts"] == 0
        assert await memory.consolidation.summaries(resource_id=R, thread_id=T) == []
        assert await memory.facts.list(resource_id=R) == []
        log = await memory.consolidation.log(resource_id=R)
        assert log and all(e["outcome"] == "failed" for e in log)
        if stored:
            assert await memory.get_messages(resource_id=R, thread_id=T) == stored
        state["broken"] = False
        retry = await memory.consolidation.run(resource_id=R)
        assert retry["failures"] == 0 and retry["facts"] == 1
        assert retry["summaries"] == (1 if stored else 0)


async def test_two_workers_never_summarise_the_same_range(db_url: str) -> None:
    # Two Memory objects share one database; memory:// lives inside one
    # Memory, so there the concurrent passes share it.
    second = db_url if db_url != "memory://" else None
    async with caderno.connect(db_url, embedder=None, consolidation=SMALL) as a:
        b = await caderno.connect(second, embedder=None, consolidation=SMALL) if second else a
        await long_thread(a)
        reports = await asyncio.gather(*(m.consolidation.run(resource_id=R) for m in (a, b, a, b)))
        assert sum(r["summaries"] for r in reports) == 1
        assert len(await a.consolidation.summaries(resource_id=R, thread_id=T)) == 1
        if b is not a:
            await b.close()


async def test_facts_upsert_history_and_forget(memory: caderno.Memory) -> None:
    f1 = await memory.facts.remember(resource_id=R, category="Finance", key="income", value="R$ 14,000", source="user")
    assert f1.category == "finance" and f1.source == "user"
    await memory.facts.remember(resource_id=R, category="finance", key="income", value="R$ 15,500")
    await memory.facts.remember(resource_id=R, category="home", key="city", value="Curitiba")
    await memory.facts.remember(resource_id="other", category="home", key="city", value="Recife")
    facts = await memory.facts.list(resource_id=R)
    assert {(f.key, f.value) for f in facts} == {("income", "R$ 15,500"), ("city", "Curitiba")}
    assert [f.key for f in await memory.facts.list(resource_id=R, category="finance")] == ["income"]
    history = await memory.facts.history(resource_id=R, category="finance", key="income")
    assert [(h["value"], h["source"]) for h in history] == [("R$ 14,000", "user")]
    await memory.facts.forget(resource_id=R, category="home", key="city")
    with pytest.raises(NotFound):
        await memory.facts.forget(resource_id=R, category="home", key="city")
    with pytest.raises(UsageError, match="source"):
        await memory.facts.remember(resource_id=R, category="x", key="y", value="z", source="rumour")
    with pytest.raises(UsageError, match="non-empty"):
        await memory.facts.remember(resource_id=R, category="x", key=" ", value="z")
    assert [f.value for f in await memory.facts.list(resource_id="other")] == ["Recife"]
    await memory.erase_resource(resource_id=R)
    assert await memory.facts.list(resource_id=R) == []
    assert await memory.facts.history(resource_id=R, category="finance", key="income") == []


async def test_remember_fact_tool_and_facts_in_the_prompt(memory: caderno.Memory) -> None:
    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(
                        id="f1",
                        name="remember_fact",
                        arguments={"category": "travel", "key": "next_trip", "value": "Amsterdam"},
                    ),
                    ToolCall(id="f2", name="remember_fact", arguments={"category": "travel"}),
                ]
            ),
            Message.assistant("Anotado."),
            Message.assistant("Amsterdam."),
        ]
    )
    chat = AgentChat(model=model, memory=memory)
    first = await chat.ask(messages="Vamos para Amsterdam.", resource_id=R, thread_id="t")
    assert first.tool_calls[0].result == {"ok": True, "fact": "travel/next_trip"}
    assert json.loads(first.tool_calls[1].error)["error"].startswith("remember_fact needs 'key'")
    await chat.ask(messages="Para onde vamos?", resource_id=R, thread_id="other-thread")
    assert "KNOWN FACTS" in model.requests[2].text() and "travel/next_trip: Amsterdam" in model.requests[2].text()


async def test_after_a_turn_consolidation_runs_in_the_background(db_url: str) -> None:
    release = asyncio.Event()

    async def held_summary(messages, tools):
        await release.wait()  # the summary cannot finish until the test says so
        return Message.assistant("- held summary")

    settings = ConsolidationSettings(
        fast_model=ScriptedModel([held_summary] * 3), summarize_after_tokens=300, keep_recent_tokens=120
    )
    async with caderno.connect(db_url, embedder=None, consolidation=settings) as memory:
        await long_thread(memory)
        chat = AgentChat(model=ScriptedModel([Message.assistant("ok")]), memory=memory, settings=ChatSettings(facts=0))
        result = await chat.ask(messages="mais um", resource_id=R, thread_id=T)
        # ask returned while the summary was still held: the reply never waits for it.
        assert result.reply.content == "ok" and not release.is_set()
        assert await memory.consolidation.summaries(resource_id=R, thread_id=T) == []
        release.set()
        await memory.flush()
        (summary, _), *_ = await memory.consolidation.summaries(resource_id=R, thread_id=T)
        assert summary.content == "- held summary"


def test_parse_facts_is_tolerant_but_strict_about_shape() -> None:
    assert parse_facts('[{"category": "a", "key": "b", "value": "c"}]') == [{"category": "a", "key": "b", "value": "c"}]
    assert parse_facts('Sure!\n```json\n[{"category": "A", "key": "b", "value": 3}]\n```') == [
        {"category": "a", "key": "b", "value": "3"}
    ]
    assert parse_facts("[]") == []
    for bad in ("no", '{"category": "a"}', '[{"category": "a"}]', "[1, 2]"):
        assert parse_facts(bad) is None


async def test_background_passes_run_on_their_own(small: caderno.Memory) -> None:
    await long_thread(small)
    task = asyncio.create_task(small.run_background(interval_hours=0.0001))
    try:
        for _ in range(100):
            if await small.consolidation.summaries(resource_id=R, thread_id=T):
                break
            await asyncio.sleep(0.05)
        assert await small.consolidation.summaries(resource_id=R, thread_id=T)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
