"""Index-time context and dates on every backend: a message is found by its neighbours' words and its day.

Each message is indexed with the words of the messages around it in its
thread (``caderno.core.text.CONTEXT_BEFORE`` / ``CONTEXT_AFTER``) and its day as
words; an append, an edit or a deletion changes what its neighbours are
found by at once. Only the lexical leg runs here, so what is found is what
the full-text index holds.
"""

from __future__ import annotations

from datetime import UTC, datetime

import caderno
from caderno import Message

R, T = "casa", "seguro"


async def lexical(memory: caderno.Memory, query: str, *, rid: str = R, thread_id: str | None = None) -> list[str]:
    """The contents the lexical leg alone finds for ``query``, best first."""
    hits = await memory.recall(
        resource_id=rid,
        query=query,
        thread_id=thread_id,
        scope="resource" if thread_id is None else "thread",
        recent=0,
        salient=0,
        relevant=0,
        lexical=10,
    )
    return [h.message.content for h in sorted(hits, key=lambda h: -h.score)]


async def _insurance(memory: caderno.Memory) -> list[Message]:
    return await memory.append_messages(
        resource_id=R,
        thread_id=T,
        messages=[
            Message.user("how much is the car insurance?"),
            Message.assistant("Let me look it up."),
            Message.assistant("R$ 310 a month"),
        ],
    )


async def test_a_message_is_found_by_its_neighbours_words(memory: caderno.Memory) -> None:
    await _insurance(memory)
    found = await lexical(memory, "car insurance")
    # Two messages after the question: no word of its own says "car insurance".
    assert "R$ 310 a month" in found
    assert found[0] == "how much is the car insurance?"  # its own words weigh more than context


async def test_an_answer_before_the_question_is_found_too(memory: caderno.Memory) -> None:
    await memory.append_messages(
        resource_id=R,
        thread_id=T,
        messages=[Message.assistant("The plumber charges R$ 180 a visit."), Message.user("ok, book the plumber")],
    )
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("and the electrician?")])
    assert "The plumber charges R$ 180 a visit." in await lexical(memory, "book")


async def test_an_append_extends_the_context_of_the_messages_before_it(memory: caderno.Memory) -> None:
    await _insurance(memory)
    assert await lexical(memory, "theft") == []  # indexed now, before the next message exists
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("does it cover theft?")])
    found = await lexical(memory, "theft")
    assert found[0] == "does it cover theft?"
    assert set(found) == {"does it cover theft?", "R$ 310 a month", "Let me look it up."}


async def test_an_edit_changes_what_its_neighbours_are_found_by_at_once(memory: caderno.Memory) -> None:
    question, *_ = await _insurance(memory)
    assert "R$ 310 a month" in await lexical(memory, "car insurance")
    await memory.messages.edit(resource_id=R, message_id=question.id or "", content="how much is the gym membership?")
    assert await lexical(memory, "car insurance") == []
    assert set(await lexical(memory, "gym membership")) == {
        "how much is the gym membership?",
        "Let me look it up.",
        "R$ 310 a month",
    }


async def test_a_delete_takes_its_words_out_of_its_neighbours_context_at_once(memory: caderno.Memory) -> None:
    question, *_ = await _insurance(memory)
    assert "R$ 310 a month" in await lexical(memory, "car insurance")
    await memory.messages.delete(resource_id=R, message_id=question.id or "")
    assert await lexical(memory, "car insurance") == []


async def test_a_pop_takes_its_words_out_of_its_neighbours_context(memory: caderno.Memory) -> None:
    await _insurance(memory)
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("ask about the boat permit")])
    assert "R$ 310 a month" in await lexical(memory, "boat permit")
    await memory.messages.pop(resource_id=R, thread_id=T)
    assert await lexical(memory, "boat permit") == []


async def test_context_never_crosses_threads_or_resources(memory: caderno.Memory) -> None:
    await _insurance(memory)
    # Appended right after, so next in the store's sequence: another thread, another resource.
    await memory.append_messages(resource_id=R, thread_id="jantar", messages=[Message.user("Risotto tonight.")])
    await memory.append_messages(resource_id="outra", thread_id=T, messages=[Message.user("Pizza tonight.")])
    await memory.append_messages(resource_id="outra", thread_id=T, messages=[Message.user("the car insurance again")])
    assert await lexical(memory, "risotto") == ["Risotto tonight."]
    assert await lexical(memory, "risotto", rid="outra") == []  # the message just before it in the store
    assert await lexical(memory, "pizza") == []
    assert "Risotto tonight." not in await lexical(memory, "car insurance")
    assert set(await lexical(memory, "car insurance", rid="outra")) == {"Pizza tonight.", "the car insurance again"}
    assert await lexical(memory, "car insurance", thread_id="jantar") == []


async def test_the_day_as_words_finds_a_message_by_its_month(memory: caderno.Memory) -> None:
    may = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    july = datetime(2023, 7, 1, 9, 0, tzinfo=UTC)
    await memory.append_messages(
        resource_id=R, thread_id="casa", messages=[Message(role="user", content="We signed the lease.", created_at=may)]
    )
    await memory.append_messages(
        resource_id=R,
        thread_id="obra",
        messages=[Message(role="user", content="We painted the kitchen.", created_at=july)],
    )
    assert (await lexical(memory, "May 2023"))[0] == "We signed the lease."
    assert await lexical(memory, "maio") == ["We signed the lease."]
    assert await lexical(memory, "julho") == ["We painted the kitchen."]
