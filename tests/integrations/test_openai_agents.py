"""CadernoSession, memory_tools and memory_instructions under the SDK's real Runner.

The SDK's own ``ScriptedModel`` stands in for the LLM; everything else is
real: the Runner, its session persistence, a caderno store of each backend.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

import caderno
from caderno.core.errors import MissingExtra

agents = pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SessionSettings, function_tool  # noqa: E402
from agents.memory import Session  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from caderno.integrations.openai_agents import (  # noqa: E402
    METADATA_KEY,
    CadernoSession,
    item_to_message,
    memory_instructions,
    memory_tools,
    message_to_items,
)

RID = "household"
NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture
async def mem(db_url: str) -> AsyncIterator[caderno.Memory]:
    memory = await caderno.connect(db_url, embedder=None)
    try:
        yield memory
    finally:
        await memory.close()


def session(mem: caderno.Memory, sid: str = "chat", **kw: Any) -> CadernoSession:
    return CadernoSession(sid, memory=mem, resource_id=RID, **kw)


def texts(items: list[Any]) -> list[str]:
    """A compact view of items: role/kind and text."""
    out = []
    for item in items:
        if item.get("type") == "function_call":
            out.append(f"call {item['name']}{item['arguments']}")
        elif item.get("type") == "function_call_output":
            out.append(f"output {item['output']}")
        else:
            content = item["content"]
            text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            out.append(f"{item['role']}: {text}")
    return out


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def run(mem: caderno.Memory, s: CadernoSession, text: str, *steps: Any, **agent_kw: Any) -> Any:
    model = ScriptedModel(list(steps))
    agent = Agent(name="assistant", model=model, **agent_kw)
    result = await Runner.run(agent, text, session=s, run_config=NO_TRACING)
    model.assert_complete()
    return result, model


# -- the protocol ---------------------------------------------------------------------------


async def test_is_an_sdk_session_and_takes_the_run_context(mem: caderno.Memory) -> None:
    from agents.memory.session import _session_accepts_wrapper

    s = session(mem)
    assert isinstance(s, Session)
    assert _session_accepts_wrapper(s)  # the runner passes its context to every method
    assert s.session_settings == SessionSettings()


async def test_multi_turn_history_reaches_the_model_and_caderno(mem: caderno.Memory) -> None:
    s = session(mem)
    await run(mem, s, "What city is the Golden Gate Bridge in?", [assistant_message("San Francisco")])
    _, model = await run(mem, s, "What state is it in?", [assistant_message("California")])
    seen = model.last_call.input
    assert texts(seen) == [
        "user: What city is the Golden Gate Bridge in?",
        "assistant: San Francisco",
        "user: What state is it in?",
    ]
    stored = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "What city is the Golden Gate Bridge in?"),
        ("assistant", "San Francisco"),
        ("user", "What state is it in?"),
        ("assistant", "California"),
    ]
    hits = await mem.recall(resource_id=RID, query="Golden Gate", recent=0)
    assert any("Golden Gate" in h.message.content for h in hits)


async def test_tool_turn_maps_to_tool_calls_and_results(mem: caderno.Memory) -> None:
    s = session(mem)
    await run(
        mem,
        s,
        "weather?",
        [function_call("weather", {"city": "Paris"}, call_id="c1")],
        [assistant_message("It is sunny")],
        tools=[weather],
    )
    stored = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    call = stored[1].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("c1", "weather", {"city": "Paris"})
    assert (stored[2].tool_call_id, stored[2].name, stored[2].content) == ("c1", "weather", "sunny in Paris")
    items = await s.get_items()
    assert texts(items) == [
        "user: weather?",
        'call weather{"city":"Paris"}',
        "output sunny in Paris",
        "assistant: It is sunny",
    ]
    dump = await mem.export_resource(resource_id=RID)
    assert "sunny in Paris" in json.dumps(dump, ensure_ascii=False)


ODD_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "plain"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "a"},
            {"type": "input_image", "image_url": "data:x", "detail": "auto"},
            {"type": "input_text", "text": "b\nc"},
        ],
    },
    {"role": "developer", "content": "be brief"},
    {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}, {"type": "refusal", "refusal": "no"}],
    },
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{ "spaced": true }', "id": "fc1"},
    {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "not json"},
    {"type": "function_call", "call_id": "c3", "name": "f", "arguments": "[1, 2]"},
    {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "part"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "encrypted_content": "xyz",
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "item_reference", "id": "ref_1"},
]


async def test_items_come_back_exactly_as_written(mem: caderno.Memory) -> None:
    s = session(mem)
    await s.add_items(ODD_ITEMS)
    back = await s.get_items()
    assert back == ODD_ITEMS
    assert [json.dumps(i) for i in back] == [json.dumps(i) for i in ODD_ITEMS]  # key order too
    back[0]["content"] = "changed"
    assert (await s.get_items())[0]["content"] == "plain"  # copies, not the stored values
    stored = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert [m.role for m in stored] == ["user", "user", "system", "assistant"] + ["assistant"] * 3 + [
        "tool",
        "system",
        "system",
        "system",
    ]
    assert stored[1].content == "a\nb\nc"
    assert stored[5].tool_calls[0].arguments == "not json"
    assert stored[6].tool_calls[0].arguments in ("[1, 2]", [1, 2])  # SQL stores parse JSON text back
    assert stored[8].content == "[reasoning]\nthinking"
    assert stored[9].content == "[web_search_call]"
    for item in reversed(ODD_ITEMS):
        assert await s.pop_item() == item
    assert await s.pop_item() is None


async def test_text_is_stored_once_so_large_outputs_fit(mem: caderno.Memory) -> None:
    big = "x" * 200_000  # far past the metadata bound
    s = session(mem)
    await s.add_items([{"type": "function_call_output", "call_id": "c1", "output": big}])
    (m,) = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert m.content == big and big not in json.dumps(m.metadata)
    assert await s.get_items() == [{"type": "function_call_output", "call_id": "c1", "output": big}]


async def test_an_edit_in_caderno_reaches_the_sdk(mem: caderno.Memory) -> None:
    s = session(mem)
    await s.add_items([{"role": "user", "content": "my name is Ana"}])
    (m,) = await mem.get_messages(resource_id=RID, thread_id="chat")
    await mem.messages.edit(resource_id=RID, message_id=m.id, content="my name is Anabela")
    assert await s.get_items() == [{"role": "user", "content": "my name is Anabela"}]


async def test_messages_written_outside_the_sdk_read_as_items(mem: caderno.Memory) -> None:
    calls = [caderno.ToolCall(id="c9", name="weather", arguments={"city": "Rio"})]
    await mem.append_messages(
        resource_id=RID,
        thread_id="chat",
        messages=[
            caderno.Message.user("oi"),
            caderno.Message.assistant("", tool_calls=calls),
            caderno.Message.tool("hot", tool_call_id="c9"),
        ],
    )
    assert await session(mem).get_items() == [
        {"role": "user", "content": "oi"},
        {"type": "function_call", "call_id": "c9", "name": "weather", "arguments": '{"city":"Rio"}'},
        {"type": "function_call_output", "call_id": "c9", "output": "hot"},
    ]
    assert message_to_items(item_to_message({"role": "user", "content": "x"})) == [{"role": "user", "content": "x"}]
    assert METADATA_KEY == "openai_agents"


# -- limit and settings ---------------------------------------------------------------------


async def test_limit_returns_newest_items_oldest_first(mem: caderno.Memory) -> None:
    s = session(mem)
    await s.add_items([{"role": "user", "content": str(i)} for i in range(5)])
    assert [i["content"] for i in await s.get_items(limit=2)] == ["3", "4"]
    assert await s.get_items(limit=0) == []
    assert len(await s.get_items(limit=-1)) == 5  # as SQLiteSession: negative means all
    assert len(await s.get_items(limit=50)) == 5


async def test_session_settings_limit_caps_history_sent_to_the_model(mem: caderno.Memory) -> None:
    s = session(mem, session_settings=SessionSettings(limit=2))
    assert s.session_settings == SessionSettings(limit=2)
    await s.add_items([{"role": "user", "content": str(i)} for i in range(4)])
    assert [i["content"] for i in await s.get_items()] == ["2", "3"]
    assert len(await s.get_items(limit=3)) == 3  # an explicit limit wins
    _, model = await run(mem, s, "next", [assistant_message("ok")])
    assert texts(model.last_call.input) == ["user: 2", "user: 3", "user: next"]
    # RunConfig.session_settings overrides the session's own for one run.
    model = ScriptedModel([[assistant_message("ok")]])
    config = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=1))
    await Runner.run(Agent(name="a", model=model), "last", session=s, run_config=config)
    assert texts(model.last_call.input) == ["assistant: ok", "user: last"]
    assert session(mem, session_settings={"limit": 3}).session_settings == SessionSettings(limit=3)


# -- pop, clear, failures -------------------------------------------------------------------


async def test_pop_item_after_a_failed_turn(mem: caderno.Memory) -> None:
    s = session(mem)
    await run(mem, s, "first", [assistant_message("one")])
    with pytest.raises(RuntimeError, match="model down"):
        await run(mem, s, "second", RuntimeError("model down"))
    assert texts(await s.get_items())[-1] == "user: second"  # the input was stored before the model ran
    assert await s.pop_item() == {"role": "user", "content": "second"}
    _, model = await run(mem, s, "second, again", [assistant_message("two")])
    assert texts(model.last_call.input) == ["user: first", "assistant: one", "user: second, again"]
    log = await mem.messages.log(resource_id=RID)
    assert [(e["action"], e["actor"], e["reason"]) for e in log] == [("pop", "openai-agents", "pop_item")]


async def test_clear_session(mem: caderno.Memory) -> None:
    s = session(mem)
    await s.clear_session()  # nothing there yet: fine
    await run(mem, s, "hello", [assistant_message("hi")])
    other = session(mem, "other")
    await other.add_items([{"role": "user", "content": "kept"}])
    await s.clear_session()
    assert await s.get_items() == []
    assert await s.pop_item() is None
    assert [t.id for t in await mem.list_threads(resource_id=RID)] == ["other"]
    await run(mem, s, "again", [assistant_message("fresh")])
    assert texts(await s.get_items()) == ["user: again", "assistant: fresh"]


async def test_sessions_are_per_resource(mem: caderno.Memory) -> None:
    mine = session(mem)
    theirs = CadernoSession("chat", memory=mem, resource_id="neighbour")
    await mine.add_items([{"role": "user", "content": "private"}])
    assert await theirs.get_items() == []
    assert await theirs.pop_item() is None
    await theirs.clear_session()
    assert len(await mine.get_items()) == 1


async def test_unicode_round_trips(mem: caderno.Memory) -> None:
    s = session(mem)
    text = "Olá, ação 😀 — 日本語 עברית \u200d e \\n"
    await run(
        mem,
        s,
        text,
        [function_call("weather", {"city": "São Paulo 🌆"}, call_id="c1")],
        [assistant_message(f"eco: {text}")],
        tools=[weather],
    )
    items = await s.get_items()
    assert items[0] == {"content": text, "role": "user"}
    assert json.loads(items[1]["arguments"]) == {"city": "São Paulo 🌆"}
    assert items[2]["output"] == "sunny in São Paulo 🌆"
    assert items[3]["content"][0]["text"] == f"eco: {text}"
    stored = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert stored[0].content == text and stored[1].tool_calls[0].arguments == {"city": "São Paulo 🌆"}


async def test_text_caderno_cannot_store_is_refused_before_anything_is_written(mem: caderno.Memory) -> None:
    s = session(mem)
    with pytest.raises(caderno.UsageError):
        await s.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": "nul \x00"}])
    assert await s.get_items() == []


# -- concurrency ----------------------------------------------------------------------------


async def test_concurrent_runs_on_one_session_keep_each_write_whole(mem: caderno.Memory) -> None:
    s = session(mem)

    async def slow_tool_run(n: int) -> None:
        async def responder(call: Any) -> Any:
            await asyncio.sleep(0.01 * (n % 3))
            if call.input and call.input[-1].get("type") == "function_call_output":
                return [assistant_message(f"done {n}", item_id=f"m{n}")]
            return [function_call("weather", {"city": f"c{n}"}, call_id=f"call{n}")]

        from agents.testing import ModelStep

        model = ScriptedModel([ModelStep.respond(responder), ModelStep.respond(responder)])
        agent = Agent(name="a", model=model, tools=[weather])
        await Runner.run(agent, f"run {n}", session=s, run_config=NO_TRACING)

    await asyncio.gather(*(slow_tool_run(n) for n in range(6)))
    items = await s.get_items()
    assert len(items) == 6 * 4
    for n in range(6):
        mine = [
            i
            for i, item in enumerate(items)
            if f"{n}" in json.dumps(item)
            and (item.get("content") == f"run {n}" or item.get("call_id") == f"call{n}" or item.get("id") == f"m{n}")
        ]
        assert len(mine) == 4, n  # nothing lost, nothing duplicated
        user, call, output, reply = mine
        assert user < call < reply
        assert output == call + 1  # a call and its output were written together
    concurrent = [session(mem, "race") for _ in range(8)]
    await asyncio.gather(
        *(c.add_items([{"role": "user", "content": f"{k}-{j}"} for j in range(5)]) for k, c in enumerate(concurrent))
    )
    contents = [i["content"] for i in await concurrent[0].get_items()]
    for k in range(8):
        start = contents.index(f"{k}-0")
        assert contents[start : start + 5] == [f"{k}-{j}" for j in range(5)]


# -- human in the loop ----------------------------------------------------------------------


async def test_approval_interruption_and_resumption(mem: caderno.Memory) -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Move money."""
        ran.append(f"{amount}")
        return f"moved {amount}"

    s = session(mem)
    model = ScriptedModel(
        [[function_call("transfer", {"amount": 500}, call_id="t1")], [assistant_message("Transferred 500")]]
    )
    agent = Agent(name="a", model=model, tools=[transfer])
    first = await Runner.run(agent, "move 500 to savings", session=s, run_config=NO_TRACING)
    assert len(first.interruptions) == 1 and not ran
    state = first.to_state()
    # The pending state survives a process boundary as JSON.
    state = await agents.RunState.from_string(agent, state.to_string())
    state.approve(state.get_interruptions()[0])
    second = await Runner.run(agent, state, session=s, run_config=NO_TRACING)
    assert second.final_output == "Transferred 500" and ran == ["500"]
    model.assert_complete()
    assert texts(await s.get_items()) == [
        "user: move 500 to savings",
        'call transfer{"amount":500}',
        "output moved 500",
        "assistant: Transferred 500",
    ]
    stored = await mem.get_messages(resource_id=RID, thread_id="chat")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_rejected_call_is_stored_once_too(mem: caderno.Memory) -> None:
    @function_tool(needs_approval=True)
    def delete_all() -> str:
        """Delete everything."""
        raise AssertionError("must not run")

    s = session(mem)
    model = ScriptedModel([[function_call("delete_all", {}, call_id="d1")], [assistant_message("Not done")]])
    agent = Agent(name="a", model=model, tools=[delete_all])
    first = await Runner.run(agent, "wipe it", session=s, run_config=NO_TRACING)
    state = first.to_state()
    state.reject(first.interruptions[0])
    await Runner.run(agent, state, session=s, run_config=NO_TRACING)
    items = await s.get_items()
    assert [i.get("type", i.get("role")) for i in items] == ["user", "function_call", "function_call_output", "message"]


# -- tools and instructions -----------------------------------------------------------------


async def test_memory_tools_and_instructions_under_the_runner(mem: caderno.Memory, tmp_path: Any) -> None:
    await mem.append_messages(
        resource_id=RID, thread_id="old", messages=[caderno.Message.user("the boat is called Gaivota")]
    )
    home = tmp_path / "nb"
    tools = memory_tools(mem, RID, notebook=home)
    assert [t.name for t in tools] == ["update_working_memory", "recall", "memory"]
    instructions = memory_instructions(mem, RID, "Be kind.", notebook=home)
    model = ScriptedModel(
        [
            [
                function_call("update_working_memory", {"patch": {"city": "Lisboa"}}, call_id="w1"),
                function_call("recall", {"query": "Gaivota"}, call_id="r1"),
                function_call("memory", {"action": "add", "target": "user", "content": "Likes boats"}, call_id="n1"),
                function_call("update_working_memory", {"wrong": 1}, call_id="w2"),
            ],
            [assistant_message("noted")],
        ]
    )
    agent = Agent(name="a", model=model, tools=tools, instructions=instructions)
    await Runner.run(agent, "I moved to Lisboa", session=session(mem), run_config=NO_TRACING)
    first, second = model.calls
    assert first.system_instructions.startswith("Be kind.")
    assert "empty" in first.system_instructions and "USER PROFILE" not in first.system_instructions
    assert '"city": "Lisboa"' in second.system_instructions  # working memory is read at every call
    assert "USER PROFILE" not in second.system_instructions  # the notebook is frozen for the session
    outputs = {i["call_id"]: i["output"] for i in second.input if i.get("type") == "function_call_output"}
    assert json.loads(outputs["w1"]) == {"ok": True, "working_memory": {"city": "Lisboa"}, "version": 1}
    assert [h["content"] for h in json.loads(outputs["r1"])["hits"]] == ["the boat is called Gaivota"]
    assert json.loads(outputs["n1"])["ok"] is True
    refusal = json.loads(outputs["w2"])
    assert refusal["ok"] is False and refusal["error"].startswith("update_working_memory has no argument 'wrong'")
    assert await mem.get_working_memory(resource_id=RID) == {"city": "Lisboa"}
    # The next session's instructions show the note.
    fresh = memory_instructions(mem, RID, notebook=home)
    text = await fresh(None, agent)  # type: ignore[arg-type]
    assert "Likes boats" in text and "Lisboa" in text


# -- packaging ------------------------------------------------------------------------------


def test_import_caderno_does_not_import_the_sdk() -> None:
    code = "import sys, caderno, caderno.integrations; assert 'agents' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(MissingExtra, match=r"pip install .*\[openai-agents\]'"):
        CadernoSession("s", memory=object(), resource_id=RID)  # type: ignore[arg-type]
