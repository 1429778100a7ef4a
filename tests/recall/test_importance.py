"""Importance scoring rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from caderno import Message
from caderno.memory.engines.importance import SALIENT, score


def test_role_baselines() -> None:
    assert score(Message.user("quanto gastamos em junho passado?")) == 0.5
    assert score(Message.assistant("Vocês gastaram pouco em junho passado.")) == 0.5
    assert score(Message.tool("{}", tool_call_id="c")) == 0.3
    assert score(Message.system("You are helpful.")) == 0.1


def test_cues_raise_and_chitchat_lowers() -> None:
    assert score(Message.user("Lembra que a meta é EUR 6000 até 2026-09-01")) >= SALIENT
    assert score(Message.user("Please remember my daughter is allergic to peanuts")) >= SALIENT
    assert score(Message.user("Importante: não esqueça o aniversário da Ana")) >= SALIENT
    assert score(Message.user("Decidimos ir para Lisboa em maio, orçamento de R$ 12.000")) >= SALIENT
    assert 0.5 < score(Message.user("Actually I prefer window seats")) < SALIENT
    assert score(Message.user("ok")) < 0.5 and score(Message.user("obrigado!")) < 0.5
    # The assistant's own words move less than the user's.
    assert score(Message.assistant("Remember: EUR 6000")) < score(Message.user("Remember: EUR 6000"))


def test_explicit_importance_wins() -> None:
    assert score(Message.user("ok", importance=0.99)) == 0.99
    assert score(Message.user("remember this!", importance=0.0)) == 0.0


@given(st.sampled_from(["user", "assistant", "system"]), st.text(max_size=300))
def test_always_within_bounds(role: str, text: str) -> None:
    value = score(Message(role=role, content=text))  # type: ignore[arg-type]
    assert 0.0 <= value <= 1.0
