"""Recall must reach the prompt: a fact from thread-1 shows up in thread-7's prompt."""

from __future__ import annotations

import json

import caderno
from caderno import AgentChat, Message, RecallSettings, ScriptedModel, ToolCall
from caderno.agent.chat import RECALL_HEADER

R = "casa"
FACT = "The Lisbon trip budget is EUR 3000; we decided to fly on May 12."


async def seed(memory: caderno.Memory) -> None:
    await memory.append_messages(
        resource_id=R, thread_id="thread-1", messages=[Message.user(FACT), Message.assistant("Combinado!")]
    )
    noise = [
        ("What should we cook tonight?", "A mushroom risotto."),
        ("The car needs new tyres.", "I'll remind you in October."),
        ("How do I reset the router?", "Hold the button for ten seconds."),
        ("Recommend a sci-fi book.", "Try The Left Hand of Darkness."),
        ("Is it going to rain tomorrow?", "I can't check the weather."),
    ]
    for i, (q, a) in enumerate(noise, start=2):
        await memory.append_messages(
            resource_id=R, thread_id=f"thread-{i}", messages=[Message.user(q), Message.assistant(a)]
        )
    await memory.flush()


async def test_fact_from_thread_1_reaches_thread_7_only_through_the_block(memory: caderno.Memory) -> None:
    await seed(memory)
    question = "How much did we plan to spend in Portugal?"

    without = ScriptedModel([Message.assistant("I don't know.")])
    await AgentChat(model=without, memory=memory).ask(messages=question, resource_id=R, thread_id="thread-7")
    assert "3000" not in without.requests[0].text()

    model = ScriptedModel([Message.assistant("EUR 3000.")])
    chat = AgentChat(model=model, memory=memory, recall=RecallSettings(top=3))
    await chat.ask(messages=question, resource_id=R, thread_id="thread-8")
    prompt = model.requests[0].messages
    blocks = [m for m in prompt if m.role == "system" and m.content.startswith(RECALL_HEADER)]
    assert len(blocks) == 1 and FACT in blocks[0].content and "thread 'thread-1'" in blocks[0].content
    assert [m for m in prompt if FACT in m.content] == blocks  # nowhere else
    # Messages already in the history window are not repeated in the block.
    model2 = ScriptedModel([Message.assistant("ok")])
    await AgentChat(model=model2, memory=memory, recall=True).ask(
        messages="What was the Lisbon budget again?", resource_id=R, thread_id="thread-1"
    )
    block2 = [m.content for m in model2.requests[0].messages if m.content.startswith(RECALL_HEADER)]
    assert all(FACT not in b for b in block2)
    assert any(m.content == FACT for m in model2.requests[0].messages)  # it is in the history instead


async def test_the_recall_tool(memory: caderno.Memory) -> None:
    await seed(memory)
    model = ScriptedModel(
        [
            Message.assistant(tool_calls=[ToolCall(id="r1", name="recall", arguments={"query": "Lisbon budget"})]),
            Message.assistant(tool_calls=[ToolCall(id="r2", name="recall", arguments={"q": 1})]),
            Message.assistant("EUR 3000."),
        ]
    )
    result = await AgentChat(model=model, memory=memory).ask(messages="e Lisboa?", resource_id=R, thread_id="t9")
    found = result.tool_calls[0].result["hits"]
    assert found[0]["content"] == FACT and found[0]["thread_id"] == "thread-1" and "lexical" in found[0]["found_by"]
    assert json.loads(result.tool_calls[1].error)["error"].startswith("recall has no argument 'q'")
    assert FACT in model.requests[1].messages[-1].content  # the tool result the model read
