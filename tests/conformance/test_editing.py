"""Thread records, message edits and their log, paging, per-turn usage — on every backend."""

from __future__ import annotations

import json

import pytest

import caderno
from caderno import AgentChat, Message, ScriptedModel
from caderno.core.errors import NotFound, UsageError

R, T = "casa-gabriel", "thread-1"


async def _three(memory: caderno.Memory, rid: str = R, tid: str = T) -> list[Message]:
    return await memory.append_messages(
        resource_id=rid,
        thread_id=tid,
        messages=[
            Message.user("Qual o orçamento da viagem a Lisboa?"),
            Message.assistant("O orçamento é EUR 3000, em maio."),
            Message.user("obrigado"),
        ],
    )


def _same_but_ids(a: Exception, a_id: str, b: Exception, b_id: str) -> bool:
    """Two errors read alike once the ids are masked: a caller learns nothing about which exists."""
    return str(a).replace(a_id, "X") == str(b).replace(b_id, "X")


# -- thread records ----------------------------------------------------------------


@pytest.mark.core
async def test_create_get_and_list_an_empty_thread(memory: caderno.Memory) -> None:
    made = await memory.threads.create(resource_id=R, thread_id=T, title="Viagem", metadata={"tag": ["férias"]})
    assert (made.id, made.resource_id, made.title, made.metadata, made.message_count) == (
        T,
        R,
        "Viagem",
        {"tag": ["férias"]},
        0,
    )
    assert made.created_at and made.updated_at
    assert await memory.threads.get(resource_id=R, thread_id=T) == made
    assert [(t.id, t.message_count) for t in await memory.list_threads(resource_id=R)] == [(T, 0)]
    assert await memory.get_messages(resource_id=R, thread_id=T) == []


@pytest.mark.core
async def test_create_makes_an_id_and_refuses_a_second_create(memory: caderno.Memory) -> None:
    made = await memory.threads.create(resource_id=R)
    assert made.id and made.title is None and made.metadata is None
    await memory.append_messages(resource_id=R, thread_id=T, messages=[Message.user("oi")])
    for tid in (made.id, T):
        with pytest.raises(UsageError, match="already has a thread"):
            await memory.threads.create(resource_id=R, thread_id=tid, title="outra")
    # The refused create changed nothing.
    kept = await memory.threads.get(resource_id=R, thread_id=T)
    assert kept.title is None and kept.message_count == 1
    # The same id under another resource is another thread.
    other = await memory.threads.create(resource_id="outra-casa", thread_id=T)
    assert other.message_count == 0


@pytest.mark.core
async def test_update_keeps_what_is_not_given_and_none_clears(memory: caderno.Memory) -> None:
    await memory.threads.create(resource_id=R, thread_id=T, title="Viagem", metadata={"a": 1})
    t = await memory.threads.update(resource_id=R, thread_id=T, title="Lisboa")
    assert (t.title, t.metadata) == ("Lisboa", {"a": 1})
    t = await memory.threads.update(resource_id=R, thread_id=T, metadata={"b": [2]})
    assert (t.title, t.metadata) == ("Lisboa", {"b": [2]})
    t = await memory.threads.update(resource_id=R, thread_id=T)
    assert (t.title, t.metadata) == ("Lisboa", {"b": [2]})
    t = await memory.threads.update(resource_id=R, thread_id=T, title=None)
    assert (t.title, t.metadata) == (None, {"b": [2]})
    t = await memory.threads.update(resource_id=R, thread_id=T, metadata=None)
    assert (t.title, t.metadata) == (None, None)
    assert await memory.threads.get(resource_id=R, thread_id=T) == t


@pytest.mark.core
async def test_update_of_a_thread_made_by_appending(memory: caderno.Memory) -> None:
    await _three(memory)
    t = await memory.threads.update(resource_id=R, thread_id=T, title="Lisboa")
    assert t.title == "Lisboa" and t.message_count == 3
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T)][-1] == "obrigado"


@pytest.mark.core
@pytest.mark.parametrize("bad", [{"title": 5}, {"title": "x" * 501}, {"metadata": [1]}, {"metadata": {"x": object()}}])
async def test_bad_title_or_metadata_is_refused(memory: caderno.Memory, bad: dict) -> None:
    with pytest.raises(UsageError):
        await memory.threads.create(resource_id=R, thread_id=T, **bad)
    with pytest.raises(NotFound):
        await memory.threads.get(resource_id=R, thread_id=T)


@pytest.mark.core
async def test_another_resources_thread_is_not_found_like_a_missing_one(memory: caderno.Memory) -> None:
    await memory.threads.create(resource_id="b", thread_id="private", title="segredo")
    for call in (memory.threads.get, memory.threads.update):
        with pytest.raises(NotFound) as hidden:
            await call(resource_id="a", thread_id="private")
        with pytest.raises(NotFound) as missing:
            await call(resource_id="a", thread_id="never-existed")
        assert _same_but_ids(hidden.value, "private", missing.value, "never-existed")
    with pytest.raises(NotFound):
        await memory.threads.update(resource_id="a", thread_id="private", title="roubado")
    assert (await memory.threads.get(resource_id="b", thread_id="private")).title == "segredo"


# -- pop, edit, delete and the message log ------------------------------------------


@pytest.mark.core
async def test_pop_returns_the_newest_and_logs_it_without_text(memory: caderno.Memory) -> None:
    stored = await _three(memory)
    popped = await memory.messages.pop(resource_id=R, thread_id=T, actor="undo", reason="regenerate")
    assert popped is not None and popped.id == stored[-1].id and popped.content == "obrigado"
    assert await memory.get_messages(resource_id=R, thread_id=T) == stored[:2]
    assert (await memory.threads.get(resource_id=R, thread_id=T)).message_count == 2
    (entry,) = await memory.messages.log(resource_id=R)
    assert entry["action"] == "pop" and entry["old_content"] is None
    assert (entry["message_id"], entry["thread_id"], entry["role"]) == (stored[-1].id, T, "user")
    assert (entry["actor"], entry["reason"]) == ("undo", "regenerate") and entry["created_at"]


@pytest.mark.core
async def test_pop_of_an_empty_or_missing_thread_is_none(memory: caderno.Memory) -> None:
    await memory.threads.create(resource_id=R, thread_id=T)
    assert await memory.messages.pop(resource_id=R, thread_id=T) is None
    assert await memory.messages.pop(resource_id=R, thread_id="never-existed") is None
    await _three(memory, rid="b", tid="private")
    assert await memory.messages.pop(resource_id=R, thread_id="private") is None
    assert len(await memory.get_messages(resource_id="b", thread_id="private")) == 3
    assert await memory.messages.log(resource_id=R) == []


async def test_edit_changes_the_text_logs_the_old_one_and_lexical_search_follows(memory: caderno.Memory) -> None:
    stored = await _three(memory)
    target = stored[1]
    edited = await memory.messages.edit(
        resource_id=R, message_id=target.id, content="O orçamento é EUR 4500, em junho.", actor="gabriel", reason="typo"
    )
    assert edited.id == target.id and edited.content == "O orçamento é EUR 4500, em junho."
    assert edited.seq == target.seq and edited.role == "assistant"
    got = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.content for m in got] == [stored[0].content, edited.content, stored[2].content]
    (entry,) = await memory.messages.log(resource_id=R, message_id=target.id)
    assert (entry["action"], entry["old_content"], entry["actor"], entry["reason"]) == (
        "edit",
        "O orçamento é EUR 3000, em maio.",
        "gabriel",
        "typo",
    )
    assert (entry["message_id"], entry["thread_id"], entry["role"]) == (target.id, T, "assistant")

    async def lexical(query: str) -> list[str]:
        hits = await memory.recall(resource_id=R, query=query, relevant=0, salient=0, recent=0, lexical=5)
        return [h.message.content for h in hits]

    assert edited.content in await lexical("junho 4500")
    assert await lexical("maio") == []


@pytest.mark.core
async def test_every_change_is_logged_oldest_first(memory: caderno.Memory) -> None:
    stored = await _three(memory)
    await memory.messages.edit(resource_id=R, message_id=stored[0].id, content="v2")
    await memory.messages.edit(resource_id=R, message_id=stored[0].id, content="v3")
    await memory.messages.delete(resource_id=R, message_id=stored[1].id)
    await memory.messages.pop(resource_id=R, thread_id=T)
    log = await memory.messages.log(resource_id=R)
    assert [(e["action"], e["old_content"]) for e in log] == [
        ("edit", stored[0].content),
        ("edit", "v2"),
        ("delete", None),
        ("pop", None),
    ]
    assert all(e["actor"] == "app" and e["reason"] is None for e in log)
    assert [e["action"] for e in await memory.messages.log(resource_id=R, message_id=stored[0].id)] == ["edit", "edit"]
    assert [m.content for m in await memory.get_messages(resource_id=R, thread_id=T)] == ["v3"]


@pytest.mark.core
async def test_delete_removes_the_message_and_logs_no_text(memory: caderno.Memory) -> None:
    stored = await _three(memory)
    gone = await memory.messages.delete(resource_id=R, message_id=stored[1].id, actor="gabriel", reason="privacy")
    assert gone.id == stored[1].id and gone.content == stored[1].content
    assert await memory.get_messages(resource_id=R, thread_id=T) == [stored[0], stored[2]]
    (entry,) = await memory.messages.log(resource_id=R)
    assert (entry["action"], entry["old_content"], entry["actor"], entry["reason"]) == (
        "delete",
        None,
        "gabriel",
        "privacy",
    )
    assert stored[1].content not in json.dumps(await memory.export_resource(resource_id=R), ensure_ascii=False)
    with pytest.raises(NotFound):
        await memory.messages.delete(resource_id=R, message_id=stored[1].id)
    with pytest.raises(NotFound):
        await memory.messages.edit(resource_id=R, message_id=stored[1].id, content="back")


@pytest.mark.core
async def test_another_resources_message_is_not_found_and_unchanged(memory: caderno.Memory) -> None:
    theirs = await _three(memory, rid="b", tid="private")
    await _three(memory, rid="a")
    secret = theirs[1]
    with pytest.raises(NotFound) as hidden:
        await memory.messages.edit(resource_id="a", message_id=secret.id, content="pwned")
    with pytest.raises(NotFound) as missing:
        await memory.messages.edit(resource_id="a", message_id="never-existed", content="pwned")
    assert _same_but_ids(hidden.value, secret.id, missing.value, "never-existed")
    with pytest.raises(NotFound) as hidden:
        await memory.messages.delete(resource_id="a", message_id=secret.id)
    with pytest.raises(NotFound) as missing:
        await memory.messages.delete(resource_id="a", message_id="never-existed")
    assert _same_but_ids(hidden.value, secret.id, missing.value, "never-existed")
    assert await memory.get_messages(resource_id="b", thread_id="private") == theirs
    assert await memory.messages.log(resource_id="a") == []
    assert await memory.messages.log(resource_id="b") == []


@pytest.mark.core
async def test_bad_edit_arguments_change_nothing(memory: caderno.Memory) -> None:
    stored = await _three(memory)
    with pytest.raises(UsageError):
        await memory.messages.edit(resource_id=R, message_id=stored[0].id, content="nul \x00")
    with pytest.raises(UsageError):
        await memory.messages.edit(resource_id=R, message_id=stored[0].id, content="ok", actor="")
    assert await memory.get_messages(resource_id=R, thread_id=T) == stored
    assert await memory.messages.log(resource_id=R) == []


# -- paging ---------------------------------------------------------------------------


@pytest.mark.core
async def test_before_pages_backwards(memory: caderno.Memory) -> None:
    stored = await memory.append_messages(
        resource_id=R, thread_id=T, messages=[Message.user(f"m{i}") for i in range(7)]
    )

    async def page(before: int | None, limit: int | None = 3) -> list[str]:
        got = await memory.get_messages(resource_id=R, thread_id=T, limit=limit, before=before)
        return [m.content for m in got]

    assert await page(None) == ["m4", "m5", "m6"]
    assert await page(stored[4].seq) == ["m1", "m2", "m3"]
    assert await page(stored[1].seq) == ["m0"]
    assert await page(stored[0].seq) == []
    assert await page(stored[4].seq, limit=None) == ["m0", "m1", "m2", "m3"]
    # Walking the pages visits every message once.
    seen: list[str] = []
    cursor = None
    while batch := await memory.get_messages(resource_id=R, thread_id=T, limit=2, before=cursor):
        seen = [m.content for m in batch] + seen
        cursor = batch[0].seq
    assert seen == [f"m{i}" for i in range(7)]
    with pytest.raises(UsageError, match="before"):
        await memory.get_messages(resource_id=R, thread_id=T, before="3")  # type: ignore[arg-type]


# -- whole resources --------------------------------------------------------------------


async def _edited(memory: caderno.Memory) -> None:
    await memory.threads.create(resource_id=R, thread_id="vazia", title="nada ainda", metadata={"k": "v"})
    stored = await _three(memory)
    await memory.threads.update(resource_id=R, thread_id=T, title="Lisboa")
    await memory.messages.edit(resource_id=R, message_id=stored[1].id, content="EUR 4500", actor="gabriel", reason="x")
    await memory.messages.delete(resource_id=R, message_id=stored[0].id)
    await memory.messages.pop(resource_id=R, thread_id=T)
    await _three(memory, tid="outra")


@pytest.mark.core
async def test_export_erase_import_keeps_threads_and_message_log(memory: caderno.Memory) -> None:
    await _edited(memory)
    dump = json.loads(json.dumps(await memory.export_resource(resource_id=R)))
    assert [e["action"] for e in dump["message_log"]] == ["edit", "delete", "pop"]
    assert {t["id"]: t["title"] for t in dump["threads"]} == {"vazia": "nada ainda", T: "Lisboa", "outra": None}
    await memory.erase_resource(resource_id=R)
    assert await memory.messages.log(resource_id=R) == []
    assert await memory.list_threads(resource_id=R) == []
    pristine = json.dumps(dump)
    await memory.import_resource(dump)
    assert json.dumps(dump) == pristine  # importing leaves the caller's dict alone
    assert json.loads(json.dumps(await memory.export_resource(resource_id=R))) == dump
    log = await memory.messages.log(resource_id=R)
    assert [(e["action"], e["old_content"], e["actor"]) for e in log] == [
        ("edit", "O orçamento é EUR 3000, em maio.", "gabriel"),
        ("delete", None, "app"),
        ("pop", None, "app"),
    ]
    empty = await memory.threads.get(resource_id=R, thread_id="vazia")
    assert (empty.title, empty.metadata, empty.message_count) == ("nada ainda", {"k": "v"}, 0)


@pytest.mark.core
async def test_delete_thread_removes_its_log_rows_only(memory: caderno.Memory) -> None:
    await _edited(memory)
    other = await memory.get_messages(resource_id=R, thread_id="outra")
    await memory.messages.delete(resource_id=R, message_id=other[0].id)
    await memory.delete_thread(resource_id=R, thread_id=T)
    log = await memory.messages.log(resource_id=R)
    assert [(e["thread_id"], e["action"]) for e in log] == [("outra", "delete")]


@pytest.mark.core
async def test_erase_removes_threads_and_the_log_of_that_resource_only(memory: caderno.Memory) -> None:
    await _edited(memory)
    theirs = await _three(memory, rid="b")
    await memory.messages.edit(resource_id="b", message_id=theirs[0].id, content="dela")
    await memory.erase_resource(resource_id=R)
    assert await memory.messages.log(resource_id=R) == []
    assert await memory.list_threads(resource_id=R) == []
    with pytest.raises(NotFound):
        await memory.threads.get(resource_id=R, thread_id="vazia")
    dump = await memory.export_resource(resource_id=R)
    assert dump["threads"] == [] and dump["message_log"] == []
    assert [e["old_content"] for e in await memory.messages.log(resource_id="b")] == [theirs[0].content]


# -- per-turn usage -----------------------------------------------------------------------


@pytest.mark.core
async def test_a_turns_usage_is_stored_on_the_reply(memory: caderno.Memory) -> None:
    reported = Message.assistant("Anotado.", metadata={"usage": {"prompt_tokens": 120, "completion_tokens": 7}})
    chat = AgentChat(model=ScriptedModel([reported, Message.assistant("Sem números do modelo.")]), memory=memory)
    await chat.ask(messages="Anote: viagem em maio.", resource_id=R, thread_id=T)
    await chat.ask(messages="E agora?", resource_id=R, thread_id=T)
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].metadata["usage"] == {"model_calls": 1, "prompt_tokens": 120, "completion_tokens": 7}
    estimated = stored[3].metadata["usage"]
    assert estimated["model_calls"] == 1 and estimated["estimated"] == 1
    assert estimated["prompt_tokens"] > 0 and estimated["completion_tokens"] > 0


@pytest.mark.core
async def test_usage_sums_every_model_call_of_the_turn(memory: caderno.Memory) -> None:
    from caderno import ToolCall

    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(
                        id="c1", name="remember_fact", arguments={"category": "trip", "key": "month", "value": "May"}
                    )
                ],
                metadata={"usage": {"prompt_tokens": 100, "completion_tokens": 10}},
            ),
            Message.assistant("Guardado.", metadata={"usage": {"prompt_tokens": 130, "completion_tokens": 4}}),
        ]
    )
    await AgentChat(model=model, memory=memory).ask(messages="A viagem é em maio.", resource_id=R, thread_id=T)
    stored = await memory.get_messages(resource_id=R, thread_id=T)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].metadata["usage"] == {"model_calls": 2, "prompt_tokens": 230, "completion_tokens": 14}
