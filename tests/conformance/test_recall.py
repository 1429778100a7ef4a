"""Recall on every backend, with the real embedding model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import caderno
from caderno import Message
from caderno.core.errors import NotFound, UsageError
from caderno.stores import ops

R = "casa"

THREADS = {
    "viagem": [
        Message.user("We decided the Lisbon trip happens in May, with a budget of EUR 3000."),
        Message.assistant("Noted: Lisbon in May, EUR 3000."),
    ],
    "jantar": [
        Message.user("What should we cook for dinner tonight?"),
        Message.assistant("A mushroom risotto would be nice."),
    ],
    "carro": [
        Message.user("The car needs new tyres before winter."),
        Message.assistant("I will remind you in October."),
    ],
    "pets": [
        Message.user("ok"),
        Message.user("Remember: the dog's vet appointment is on 2026-12-03."),
        Message.assistant("Got it."),
    ],
}


@pytest.fixture
async def seeded(memory: caderno.Memory) -> caderno.Memory:
    for tid, msgs in THREADS.items():
        await memory.append_messages(resource_id=R, thread_id=tid, messages=msgs)
    await memory.append_messages(
        resource_id="other", thread_id="viagem", messages=[Message.user("Our Lisbon trip budget is EUR 9999.")]
    )
    await memory.flush()
    return memory


def contents(hits: list) -> list[str]:
    return [h.message.content for h in hits]


async def test_relevant_leg_finds_meaning_not_words(seeded: caderno.Memory) -> None:
    hits = await seeded.recall(
        resource_id=R, query="how much money for the Portugal holiday?", recent=0, salient=0, lexical=0, relevant=2
    )
    assert hits and hits[0].message.content.startswith("We decided the Lisbon trip")
    assert "relevant" in hits[0].reasons and 0 < hits[0].scores["relevant"] <= 1
    assert all("9999" not in c for c in contents(hits))  # never another resource's data


async def test_lexical_leg(seeded: caderno.Memory) -> None:
    hits = await seeded.recall(resource_id=R, query="tyres", recent=0, salient=0, relevant=0)
    # The hit, and (by context, with a smaller score) the reply beside it.
    assert contents(hits) == ["The car needs new tyres before winter.", "I will remind you in October."]
    assert hits[0].reasons == {"lexical"} and hits[0].score > hits[1].score


async def test_lexical_leg_matches_word_forms_in_english_and_portuguese(memory: caderno.Memory) -> None:
    """Stems, not spellings: another form of the word, with or without its accents, finds the message."""
    said = {
        "pt": "Estamos economizando para a poupança das férias",
        "en": "We planned the budgets for the kitchen",
    }
    for tid, text in said.items():
        await memory.append_messages(resource_id=R, thread_id=tid, messages=[Message.user(text)])

    async def lexical(query: str) -> list[str]:
        return contents(await memory.recall(resource_id=R, query=query, recent=0, salient=0, relevant=0))

    assert await lexical("economizar") == [said["pt"]]
    assert await lexical("poupanca") == [said["pt"]]  # typed without the cedilla
    assert await lexical("ferias") == [said["pt"]]
    assert await lexical("planning") == [said["en"]]
    assert await lexical("budget") == [said["en"]]
    assert await lexical("cozinha") == []  # a translation is the relevant leg's job, not the lexical one's

    # An edited message is found by its new words only; a deleted one not at all.
    (m,) = await memory.get_messages(resource_id=R, thread_id="en")
    await memory.messages.edit(resource_id=R, message_id=m.id or "", content="We are renovating the bathrooms")
    assert await lexical("budget") == []
    assert await lexical("bathroom renovation") == ["We are renovating the bathrooms"]
    await memory.messages.delete(resource_id=R, message_id=m.id or "")
    assert await lexical("bathroom") == []


async def test_lexical_leg_finds_the_answer_by_the_words_of_its_neighbour(memory: caderno.Memory) -> None:
    """Context: the reply says "R$ 310 a month", the turn before it says "car insurance"."""
    await memory.append_messages(
        resource_id=R,
        thread_id="carro",
        messages=[Message.assistant("How much is the car insurance now?"), Message.user("R$ 310 a month")],
    )
    # Appended right after it, but in another thread: never its context.
    await memory.append_messages(resource_id=R, thread_id="outro", messages=[Message.user("Nothing to add")])
    hits = await memory.recall(resource_id=R, query="car insurance", recent=0, salient=0, relevant=0, lexical=5)
    assert contents(hits) == ["How much is the car insurance now?", "R$ 310 a month"]
    first, second = sorted(hits, key=lambda h: -h.score)
    assert first.message.content.startswith("How much") and second.reasons == {"lexical"}

    # The context follows the thread as it is now.
    (question, _) = await memory.get_messages(resource_id=R, thread_id="carro")
    await memory.messages.delete(resource_id=R, message_id=question.id or "")
    assert await memory.recall(resource_id=R, query="car insurance", recent=0, salient=0, relevant=0) == []


async def test_a_question_that_names_a_day_prefers_what_was_said_that_day(memory: caderno.Memory) -> None:
    now = datetime(2026, 3, 24, 21, 0, tzinfo=UTC)
    said = [
        ("2026-03-10", "The electricity bill came to R$ 410."),
        ("2026-03-17", "The electricity bill came to R$ 380."),
        ("2026-03-23", "The electricity bill came to R$ 395."),
    ]
    for day, text in said:
        when = datetime.fromisoformat(day + "T20:00:00+00:00")
        await memory.append_messages(resource_id=R, thread_id=day, messages=[Message.user(text, created_at=when)])

    async def best(query: str) -> str:
        hits = await memory.recall(resource_id=R, query=query, recent=0, salient=0, now=now)
        return max(hits, key=lambda h: h.score).message.content

    assert await best("What was the electricity bill two weeks ago?") == "The electricity bill came to R$ 410."
    assert await best("Qual foi a electricity bill na semana passada?") == "The electricity bill came to R$ 380."
    assert await best("electricity bill yesterday") == "The electricity bill came to R$ 395."
    hits = await memory.recall(resource_id=R, query="electricity bill on March 17", recent=0, salient=0, now=now)
    assert [h.reasons >= {"when"} for h in hits] == [False, True, False]
    with pytest.raises(UsageError, match="timezone-aware"):
        await memory.recall(resource_id=R, query="x", now=datetime(2026, 3, 24))  # noqa: DTZ001 - the error under test


async def test_salient_leg_and_importance(seeded: caderno.Memory) -> None:
    hits = await seeded.recall(resource_id=R, query="x", recent=0, relevant=0, lexical=0)
    assert "Remember: the dog's vet appointment is on 2026-12-03." in contents(hits)
    assert "ok" not in contents(hits)
    assert all(h.message.importance >= 0.8 for h in hits)
    stored = await seeded.get_messages(resource_id=R, thread_id="pets")
    assert stored[0].importance < 0.5 < stored[1].importance  # chit-chat down, memory cue up
    await seeded.messages.set_importance(resource_id=R, message_id=stored[0].id, value=0.95)
    again = await seeded.recall(resource_id=R, query="x", recent=0, relevant=0, lexical=0)
    assert "ok" in contents(again)
    assert (await seeded.get_messages(resource_id=R, thread_id="pets"))[0].importance == 0.95
    with pytest.raises(NotFound):
        await seeded.messages.set_importance(resource_id="other", message_id=stored[0].id, value=0.1)
    with pytest.raises(UsageError, match="within"):
        await seeded.messages.set_importance(resource_id=R, message_id=stored[0].id, value=2)


async def test_recent_leg_skips_tool_traffic(memory: caderno.Memory) -> None:
    from caderno import ToolCall

    await memory.append_messages(
        resource_id=R,
        thread_id="t",
        messages=[
            Message.user("quanto gastamos?"),
            Message.assistant(tool_calls=[ToolCall(id="c", name="budget_total", arguments={})]),
            Message.tool("42", tool_call_id="c"),
            Message.assistant("R$ 42"),
        ],
    )
    hits = await memory.recall(resource_id=R, query="", thread_id="t", salient=0, relevant=0, lexical=0)
    assert contents(hits) == ["quanto gastamos?", "R$ 42"] and all(h.reasons == {"recent"} for h in hits)


async def test_fused_results_are_deduplicated_and_in_conversation_order(seeded: caderno.Memory) -> None:
    hits = await seeded.recall(resource_id=R, query="Lisbon trip budget", thread_id="carro")
    ids = [h.message.id for h in hits]
    assert len(ids) == len(set(ids))
    lisbon = next(h for h in hits if h.message.content.startswith("We decided"))
    assert {"relevant", "lexical"} <= lisbon.reasons
    order = [(h.thread_id, h.message.seq) for h in hits]
    firsts: dict[str, int] = {}
    for tid, seq in order:
        firsts.setdefault(tid, seq)
    # Thread by thread, threads in order of their first hit, then by sequence.
    assert len(firsts) >= 2, order  # otherwise the ordering says nothing
    assert order == sorted(order, key=lambda x: (firsts[x[0]], x[1]))
    assert list(firsts.values()) == sorted(firsts.values())
    top = await seeded.recall(resource_id=R, query="Lisbon trip budget", thread_id="carro", top=1)
    assert contents(top) == ["We decided the Lisbon trip happens in May, with a budget of EUR 3000."]


async def test_a_text_said_again_fills_one_place(memory: caderno.Memory) -> None:
    """Three facts, each answered "Noted." (spelled three ways): five places hold four different texts."""
    facts = ["The gym costs R$ 120 a month.", "The gym opens at six.", "The gym is next to the bakery."]
    for i, (fact, ack) in enumerate(zip(facts, ["Noted.", "  noted. ", "NOTED."], strict=True)):
        await memory.append_messages(
            resource_id=R, thread_id=f"gym-{i}", messages=[Message.user(fact), Message.assistant(ack)]
        )
    hits = await memory.recall(resource_id=R, query="gym noted", top=5)
    texts = sorted(" ".join(h.message.content.lower().split()) for h in hits)
    assert texts == sorted([f.lower() for f in facts] + ["noted."]), texts
    # Each is whole: a repeat is dropped, not merged into the one kept.
    assert all(h.message.content in facts or h.message.content in ("Noted.", "  noted. ", "NOTED.") for h in hits)


async def test_thread_scope_and_message_range(seeded: caderno.Memory) -> None:
    hits = await seeded.recall(resource_id=R, query="Lisbon budget", thread_id="jantar", scope="thread", recent=0)
    assert all(h.thread_id == "jantar" for h in hits)
    around = await seeded.recall(
        resource_id=R, query="tyres", recent=0, salient=0, relevant=0, top=1, message_range=(0, 1)
    )
    assert contents(around) == ["The car needs new tyres before winter.", "I will remind you in October."]
    assert around[1].reasons == {"context"}


async def test_legs_switch_off_and_bad_arguments(seeded: caderno.Memory) -> None:
    assert await seeded.recall(resource_id=R, query="Lisbon", recent=0, salient=0, relevant=0, lexical=0) == []
    with pytest.raises(UsageError, match="scope"):
        await seeded.recall(resource_id=R, query="x", scope="everything")
    with pytest.raises(UsageError, match="needs a thread_id"):
        await seeded.recall(resource_id=R, query="x", scope="thread")
    with pytest.raises(UsageError, match="non-negative"):
        await seeded.recall(resource_id=R, query="x", relevant=-1)


async def test_deleted_and_erased_messages_are_never_recalled(seeded: caderno.Memory) -> None:
    assert await seeded.recall(resource_id=R, query="tyres", recent=0, salient=0)
    await seeded.delete_thread(resource_id=R, thread_id="carro")
    assert "The car needs new tyres before winter." not in contents(
        await seeded.recall(resource_id=R, query="car tyres winter", recent=0, salient=0)
    )
    await seeded.erase_resource(resource_id=R)
    assert await seeded.recall(resource_id=R, query="Lisbon trip budget") == []
    assert await seeded.run(ops.CountPendingEmbeddings()) == 0


async def test_reindex_embeds_again(seeded: caderno.Memory) -> None:
    queued = await seeded.reindex(resource_id=R)
    assert queued == 9  # every user and assistant message with text
    question = "how much money for the Portugal holiday?"
    # The old vectors are gone: searching only what is stored finds nothing by meaning...
    assert await seeded.recall(resource_id=R, query=question, recent=0, salient=0, lexical=0, embed_pending=False) == []
    # ...and a recall embeds the resource's pending messages first, with no flush.
    hits = await seeded.recall(resource_id=R, query=question, recent=0, salient=0, lexical=0)
    assert hits and hits.not_searchable == 0
