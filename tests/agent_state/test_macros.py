"""Tool macros: a follow-up learned, suggested, then unlearned after failures."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caderno.core.errors import UsageError
from caderno.memory.engines.macros import (
    PENALTY,
    REWARD,
    START_CONFIDENCE,
    SUGGEST_THRESHOLD,
    Macro,
    arg_pattern,
    mark_used,
    observe,
    suggest_next,
)

STATUS = {"command": "git status -s", "cwd": "/repo"}
DIFF = {"command": "git diff --stat", "cwd": "/repo"}


def test_arg_pattern_keeps_keys_types_and_the_first_word_of_commands() -> None:
    assert json.loads(arg_pattern("shell", STATUS)) == {"command": "str:git", "cwd": "str"}
    assert arg_pattern("shell", STATUS) == arg_pattern("shell", {"cwd": "/other", "command": "git log"})
    assert arg_pattern("shell", STATUS) != arg_pattern("shell", {"command": "ls", "cwd": "/repo"})
    assert json.loads(arg_pattern("t", {"n": 1, "x": 1.5, "ok": True, "none": None, "xs": [1], "o": {"a": "b"}})) == {
        "n": "int",
        "x": "float",
        "ok": "bool",
        "none": "null",
        "xs": "list",
        "o": {"a": "str"},
    }
    assert arg_pattern("shell", {"command": "echo 'open"}) == '{"command":"str:echo"}'
    assert arg_pattern("shell", {"command": ""}) == '{"command":"str"}'
    assert arg_pattern("t", "raw text") == '"str"'
    with pytest.raises(UsageError):
        arg_pattern("", {})


def test_learned_suggested_then_unlearned() -> None:
    turn = [("shell", STATUS, True), ("shell", DIFF, True)]
    macros = observe({}, turn)
    (macro,) = macros.values()
    assert macro.confidence == START_CONFIDENCE + REWARD and macro.success_count == 1
    assert suggest_next(macros, "shell", STATUS) == []  # seen once: not yet trusted

    macros = observe(macros, turn)
    (macro,) = macros.values()
    assert macro.confidence == SUGGEST_THRESHOLD
    # Suggested after any "git ..." call in any directory: the pattern, not the exact args.
    assert suggest_next(macros, "shell", {"command": "git log", "cwd": "/x"}) == [macro]
    assert macro.next_tool == "shell" and macro.next_args == DIFF
    assert suggest_next(macros, "shell", {"command": "ls", "cwd": "/x"}) == []
    assert suggest_next(macros, "read_file", STATUS) == []

    macros = mark_used(macros, macro.key)
    assert macros[macro.key].used_count == 1

    # The follow-up starts failing: one failure stops the suggestion, more sink it.
    failing = [("shell", STATUS, True), ("shell", DIFF, False)]
    macros = observe(macros, failing)
    assert macros[macro.key].confidence == round(SUGGEST_THRESHOLD - PENALTY, 6)
    assert suggest_next(macros, "shell", STATUS) == []
    for _ in range(5):
        macros = observe(macros, failing)
    final = macros[macro.key]
    assert final.confidence == 0.0 and final.failure_count == 6 and final.success_count == 2
    assert suggest_next(macros, "shell", STATUS, threshold=0.0) == [final]  # kept, with its history


def test_only_successful_triggers_and_adjacent_calls_count() -> None:
    macros = observe({}, [("a", {}, False), ("b", {}, True)])
    assert macros == {}  # a failed trigger teaches nothing
    macros = observe({}, [("a", {}, True), ("b", {}, True), ("c", {}, True)])
    assert sorted((m.trigger_tool, m.next_tool) for m in macros.values()) == [("a", "b"), ("b", "c")]
    assert observe({}, [("poll", {"id": 1}, True), ("poll", {"id": 1}, True)]) == {}  # a repeat is not a macro
    assert len(observe({}, [("poll", {"id": 1}, True), ("poll", {"id": 2}, True)])) == 1
    assert observe({}, []) == {} and observe({}, [("a", {}, True)]) == {}


def test_observe_does_not_touch_its_input() -> None:
    first = observe({}, [("a", {}, True), ("b", {"x": 1}, True)])
    snapshot = dict(first)
    observe(first, [("a", {}, True), ("b", {"x": 1}, False)])
    assert first == snapshot


def test_suggestions_are_best_first() -> None:
    turns = [[("search", {"q": "x"}, True), ("open", {"id": 1}, True)]] * 4 + [
        [("search", {"q": "y"}, True), ("summarize", {}, True)]
    ] * 2
    macros: dict = {}
    for turn in turns:
        macros = observe(macros, turn)
    best = suggest_next(macros, "search", {"q": "anything"})
    assert [m.next_tool for m in best] == ["open", "summarize"]
    assert best[0].confidence == 0.9 and best[1].confidence == SUGGEST_THRESHOLD
    assert [m.next_tool for m in suggest_next(macros, "search", {"q": "z"}, threshold=0.8)] == ["open"]


def test_macros_serialise_as_json() -> None:
    from dataclasses import asdict

    macros = observe({}, [("shell", STATUS, True), ("shell", DIFF, True)])
    (macro,) = macros.values()
    assert Macro(**json.loads(json.dumps(asdict(macro)))) == macro


@given(outcomes=st.lists(st.booleans(), max_size=40))
def test_confidence_stays_in_range_and_counts_add_up(outcomes: list[bool]) -> None:
    macros: dict = {}
    for ok in outcomes:
        macros = observe(macros, [("a", {"k": 1}, True), ("b", {}, ok)])
    if not outcomes:
        assert macros == {}
        return
    (macro,) = macros.values()
    assert 0.0 <= macro.confidence <= 1.0
    assert macro.success_count == outcomes.count(True) and macro.failure_count == outcomes.count(False)
    suggested = suggest_next(macros, "a", {"k": 2}) == [macro]
    assert suggested == (macro.confidence >= SUGGEST_THRESHOLD)
