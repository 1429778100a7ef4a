"""Windowing rules of build_prompt, as properties over random conversations."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from caderno import Message, ToolCall
from caderno.memory.engines.context import (
    build_prompt,
    estimate_tokens,
    history_units,
    message_tokens,
    wordpiece_counter,
)

WORDS = st.text(alphabet="abcdefghij klmno", min_size=1, max_size=120)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Turns of user / assistant / assistant-with-tools (+ results), with seqs; sometimes cut at the front."""
    msgs: list[Message] = []
    for t in range(draw(st.integers(0, 25))):
        msgs.append(Message.user(draw(WORDS)))
        for k in range(draw(st.integers(0, 2))):
            ids = [f"c{t}-{k}-{i}" for i in range(draw(st.integers(1, 3)))]
            msgs.append(
                Message.assistant(tool_calls=[ToolCall(id=i, name="f", arguments={"x": draw(WORDS)}) for i in ids])
            )
            msgs += [Message.tool(draw(WORDS), tool_call_id=i) for i in ids]
        msgs.append(Message.assistant(draw(WORDS)))
    msgs = [m._stamped(seq=n + 1, id=f"m{n}") for n, m in enumerate(msgs)]
    return msgs[draw(st.integers(0, max(0, len(msgs) - 1))) :] if msgs else msgs


def check_window(window: list[Message]) -> None:
    assert not window or window[0].role != "tool"
    calls = {c.id for m in window for c in m.tool_calls or ()}
    results = {m.tool_call_id for m in window if m.role == "tool"}
    assert calls == results  # every kept call has all results and every result its call


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 3000), st.integers(0, 200))
def test_window_rules(history: list[Message], budget: int, reserve: int) -> None:
    turn = [Message.user("the new question")]
    blocks = {"instructions": "Be brief.", "working_memory": "WORKING MEMORY: {}"}
    p = build_prompt(blocks=blocks, history=history, turn=turn, max_tokens=budget, reply_reserve=reserve)
    window = [m for m in p.messages if m.role != "system" and m not in turn]
    check_window(window)
    assert p.messages[-1] == turn[-1]  # the new message is always in
    # The window is the newest units that fit: a contiguous suffix of the history.
    if window:
        ids = [m.id for m in history]
        start = ids.index(window[0].id)
        assert [m.id for m in window] == [i for i in ids[start:] if i in {w.id for w in window}]
    if p.usage["turn"] + sum(v for k, v in p.usage.items() if k in ("instructions", "working_memory")) <= max(
        0, budget - reserve
    ):
        assert p.usage["total"] <= max(0, budget - reserve)


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_history_units_cover_only_complete_exchanges(history: list[Message]) -> None:
    units = history_units(history)
    check_window([m for u in units for m in u])
    for u in units:
        assert u[0].role != "tool"


@given(st.integers(30, 400))
def test_blocks_are_trimmed_lowest_priority_first(budget: int) -> None:
    blocks = {
        "instructions": "I" * 200,
        "working_memory": "W" * 200,
        "notebook": ["N" * 200],
        "facts": "F" * 200,
        "summary": "S" * 200,
        "recalled": "R" * 200,
    }
    p = build_prompt(blocks=blocks, history=[], turn=[Message.user("q")], max_tokens=budget)
    order = ["instructions", "working_memory", "notebook", "facts", "summary", "recalled"]
    ranks = [order.index(c["block"]) for c in p.cut]
    assert ranks == sorted(ranks, reverse=True)  # the lowest priority goes first
    dropped = {c["block"] for c in p.cut if c["action"] == "dropped"}
    kept = [k for k in order if k in p.usage]
    assert kept == order[: len(kept)]  # what stays is a prefix of the priority order
    assert all(order.index(d) > order.index(k) for d in dropped for k in kept)
    assert p.usage["total"] <= budget or kept == ["instructions"]
    for c in p.cut:
        assert c["action"] in ("dropped", "shortened") and c["tokens"] > 0


def test_cut_is_reported_and_shortened_blocks_fit() -> None:
    blocks = {"instructions": "Be brief.", "recalled": "remembered line\n" * 100}
    p = build_prompt(blocks=blocks, history=[], turn=[Message.user("q")], max_tokens=150)
    assert p.cut and p.cut[0]["block"] == "recalled" and p.cut[0]["action"] == "shortened"
    assert p.usage["total"] <= 150 and any(m.content.endswith("[…]") for m in p.messages)
    none = build_prompt(blocks=blocks, history=[], turn=[Message.user("q")], max_tokens=None)
    assert none.cut == [] and "budget" not in none.usage


def test_token_counters() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    count = wordpiece_counter()
    assert count("hello world") == 2
    text = "We decided the Lisbon trip will be the second week of May, and the budget is EUR 3000."
    assert abs(estimate_tokens(text) - count(text)) / count(text) < 0.35
    # usage is stored in message metadata, so it must survive JSON unchanged: plain names and ints.
    turn = [Message.user("x")]
    usage = build_prompt(blocks={}, history=[], turn=turn, max_tokens=10).usage
    assert json.loads(json.dumps(usage)) == usage
    assert usage == {"history": 0, "turn": message_tokens(turn[0], estimate_tokens), "total": usage["turn"], "budget": 10}
    assert all(type(v) is int for v in usage.values())
