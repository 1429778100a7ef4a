"""The port itself, operation by operation, on every backend that claims it.

Each operation type of ``caderno.stores.ops`` is run here directly through
``batch`` at least once (a test checks the list is complete), and a batch
is shown to be one transaction: all or nothing, and one snapshot for reads.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

import caderno
from caderno import Message
from caderno.core.clock import utcnow
from caderno.core.errors import Conflict, UsageError
from caderno.memory.engines.importance import EMBEDDED_ROLES
from caderno.stores import ops

#: One xdist worker runs the module, in order: ``test_every_operation_ran`` reads what the others ran.
pytestmark = pytest.mark.xdist_group("port")

R, T = "casa", "t1"
RAN: set[type[Any]] = set()


async def run(memory: caderno.Memory, *batch: ops.Op[Any]) -> list[Any]:
    RAN.update(type(op) for op in batch)
    return await memory.batch(list(batch))


def append(memory: caderno.Memory, *texts: str, thread: str = T) -> ops.Append:
    return memory.turns.append_op(R, thread, memory.turns.prepare_messages([Message.user(t) for t in texts]))


def patch(memory: caderno.Memory, data: dict[str, Any], expected: int | None = None) -> ops.PatchWorkingMemory:
    return memory.working_memory.patch_op(R, data, expected, "test")


async def test_every_backend_claims_every_operation(memory: caderno.Memory) -> None:
    # Beyond ALL, only optional groups: VECTOR_SEARCH where the database searches (PostgreSQL with pgvector).
    assert memory.store.supports >= ops.ALL
    assert memory.store.supports - ops.ALL <= ops.VECTOR_SEARCH


@pytest.mark.core
async def test_history_and_thread_records(memory: caderno.Memory) -> None:
    now = utcnow()
    created, stored = await run(
        memory,
        ops.PutThread(resource_id=R, thread_id=T, create=True, title="Amsterdam", now=now),
        append(memory, "um", "dois", "três"),
    )
    assert created.title == "Amsterdam" and [m.content for m in stored] == ["um", "dois", "três"]
    page, listed, one = await run(
        memory,
        ops.ReadThread(resource_id=R, thread_id=T, limit=1, before=stored[2].seq),
        ops.ListThreads(resource_id=R),
        ops.GetThread(resource_id=R, thread_id=T),
    )
    assert [m.content for m in page] == ["dois"]
    assert [t.id for t in listed] == [T] and one.message_count == 3
    (renamed,) = await run(memory, ops.PutThread(resource_id=R, thread_id=T, create=False, title=None, now=now))
    assert renamed.title is None
    popped, edited, deleted, missing = await run(
        memory,
        ops.PopMessage(resource_id=R, thread_id=T, actor="t", reason=None, now=now),
        ops.EditMessage(
            resource_id=R,
            message_id=stored[0].id,
            content="UM",
            rescore=lambda m: (0.9, True),
            actor="t",
            reason="typo",
            now=now,
        ),
        ops.DeleteMessage(resource_id=R, message_id=stored[1].id, actor="t", reason=None, now=now),
        ops.DeleteMessage(resource_id=R, message_id="nope", actor="t", reason=None, now=now),
    )
    assert (popped.content, edited.content, edited.importance, deleted.content, missing) == (
        "três",
        "UM",
        0.9,
        "dois",
        None,
    )
    log, ok, left = await run(
        memory,
        ops.ReadMessageLog(resource_id=R),
        ops.SetImportance(resource_id=R, message_id=stored[0].id, value=0.1),
        ops.ReadThread(resource_id=R, thread_id=T),
    )
    assert [(e["action"], e["old_content"]) for e in log] == [("pop", None), ("edit", "um"), ("delete", None)]
    assert ok is True and [(m.content, m.importance) for m in left] == [("UM", 0.1)]
    (gone,) = await run(memory, ops.DeleteThread(resource_id=R, thread_id=T))
    assert gone is True and await run(memory, ops.ListThreads(resource_id=R)) == [[]]


async def test_working_memory_resources_and_facts(memory: caderno.Memory) -> None:
    now = utcnow()
    wm, fact = await run(
        memory,
        patch(memory, {"goal": "Amsterdam"}),
        ops.UpsertFact(resource_id=R, category="finance", key="income", value="R$ 14,000", source="user", now=now),
    )
    assert wm.version == 1 and fact.value == "R$ 14,000"
    await run(
        memory,
        ops.UpsertFact(resource_id=R, category="finance", key="income", value="R$ 15,000", source="user", now=now),
    )
    read, log, facts, history = await run(
        memory,
        ops.ReadWorkingMemory(resource_id=R),
        ops.ReadWorkingMemoryLog(resource_id=R),
        ops.ReadFacts(resource_id=R, category="finance"),
        ops.ReadFactHistory(resource_id=R, category="finance", key="income"),
    )
    assert read.data == {"goal": "Amsterdam"} and [e["patch"] for e in log] == [{"goal": "Amsterdam"}]
    assert [f.value for f in facts] == ["R$ 15,000"] and [h["value"] for h in history] == ["R$ 14,000"]
    await run(memory, append(memory, "oi"))
    assert await run(memory, ops.ListResources()) == [[R]]
    (dump,) = await run(memory, ops.ExportResource(resource_id=R))
    await run(memory, ops.EraseResource(resource_id=R))
    assert await run(
        memory, ops.ExportResource(resource_id=R), ops.ForgetFact(resource_id=R, category="finance", key="income")
    ) == [
        caderno.stores.export.new_dump(R),
        False,
    ]
    await run(
        memory,
        ops.ImportResource(dump=caderno.memory.engines.dump.check_dump(dump), now=now, embed_roles=EMBEDDED_ROLES),
    )
    assert await run(memory, ops.ExportResource(resource_id=R)) == [dump]


async def test_recall_and_consolidation_operations(memory: caderno.Memory) -> None:
    now = utcnow()
    (stored,) = await run(memory, append(memory, "Remember: the Amsterdam goal is EUR 6,000.", "ok then"))
    pending, jobs = await run(
        memory, ops.CountPendingEmbeddings(), ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=now)
    )
    assert pending == 2 and {j.seq for j in jobs} == {m.seq for m in stored}
    vector = b"\x00\x00\x80\x3f" * 3
    await run(
        memory,
        ops.FinishEmbeddings(
            model="m",
            dim=3,
            done=((R, stored[0].seq, vector),),
            failed=((R, stored[1].seq, "boom", 60.0),),
            now=now,
            sparse=(b"\x07\x00\x00\x3c",),
            sparse_model="s",
        ),
    )
    rows, sparse, other, lexical, salient, by_seq, around = await run(
        memory,
        ops.ReadVectors(resource_id=R, model="m", after_id=0),
        ops.ReadSparse(resource_id=R, model="s", seqs=(stored[0].seq, stored[1].seq)),
        ops.ReadSparse(resource_id="elsewhere", model="s", seqs=(stored[0].seq,)),
        ops.LexicalSearch(resource_id=R, terms=("amsterdam",), limit=5),
        ops.ReadSalient(resource_id=R, threshold=0.8, limit=5),
        ops.ReadBySeq(resource_id=R, seqs=(stored[1].seq,)),
        ops.ReadNeighbours(resource_id=R, thread_id=T, seq=stored[0].seq, before=1, after=1),
    )
    assert (
        rows.seqs == [stored[0].seq]
        and b"".join(rows.vectors) == vector
        and {t: set(seqs) for t, seqs in rows.threads.items()} == {T: {stored[0].seq, stored[1].seq}}
    )
    assert sparse == {stored[0].seq: b"\x07\x00\x00\x3c"} and other == {}  # stored beside its vector alone
    # The word's own message first, then the reply it is context for (index-time context).
    assert [s for s, _ in lexical] == [stored[0].seq, stored[1].seq]
    assert [m.id for _, m in salient] == [stored[0].id]
    assert [(t, m.content) for t, m in by_seq] == [(T, "ok then")]
    assert [m.content for m in around] == ["ok then"]
    assert await run(memory, ops.Reindex(resource_id=R, embed_roles=EMBEDDED_ROLES)) == [2]
    candidates, claimed, again, free = await run(
        memory,
        ops.FindConsolidationCandidates(resource_id=R, min_chars=10),
        ops.ClaimConsolidation(resource_id=R, thread_id=T, holder="w1", lease_seconds=60, now=now),
        ops.ClaimConsolidation(resource_id=R, thread_id=T, holder="w2", lease_seconds=60, now=now),
        ops.ReadUnconsolidated(resource_id=R, thread_id=T),
    )
    assert candidates == [(R, T)] and (claimed, again) == (True, False) and len(free) == 2
    summary = memory.turns.prepare_messages([Message.system("summary", metadata={"span": [1, 2]})])[0]
    written, twice, summaries = await run(
        memory,
        ops.WriteSummary(resource_id=R, thread_id=T, summary=summary, covered=(stored[0].seq, stored[1].seq), now=now),
        ops.WriteSummary(
            resource_id=R, thread_id=T, summary=summary._stamped(id="s2"), covered=(stored[0].seq,), now=now
        ),
        ops.ReadSummaries(resource_id=R, thread_id=T),
    )
    assert (written, twice) == (True, False) and [(s.content, merged) for s, merged in summaries] == [
        ("summary", False)
    ]
    candidates, _, _, _, log = await run(
        memory,
        ops.ReadFactCandidates(resource_id=R, min_importance=0.7, limit=10),
        ops.MarkFactsExtracted(resource_id=R, seqs=(stored[0].seq,), now=now),
        ops.ReleaseConsolidation(resource_id=R, thread_id=T, holder="w1"),
        ops.LogConsolidation(resource_id=R, thread_id=T, step="summary", outcome="failed", detail="x", now=now),
        ops.ReadConsolidationLog(resource_id=R),
    )
    assert [m.id for _, m in candidates] == [stored[0].id] and [e["detail"] for e in log] == ["x"]
    assert await run(memory, ops.ReadFactCandidates(resource_id=R, min_importance=0.7, limit=10)) == [[]]


@pytest.mark.parametrize("failing", ["conflict", "duplicate id"])
async def test_a_batch_is_one_transaction(memory: caderno.Memory, failing: str) -> None:
    (first,) = await run(memory, append(memory, "antes"))
    before = await memory.export_resource(resource_id=R)
    bad: ops.Op[Any] = (
        patch(memory, {"x": 2}, expected=7)
        if failing == "conflict"
        else memory.turns.append_op(R, "t2", [first[0]._stamped(seq=None)])
    )
    with pytest.raises(Conflict if failing == "conflict" else UsageError):
        await run(
            memory,
            append(memory, "depois"),
            patch(memory, {"x": 1}),
            ops.UpsertFact(resource_id=R, category="c", key="k", value="v", source="agent", now=utcnow()),
            bad,
        )
    assert await memory.export_resource(resource_id=R) == before


async def test_agent_state_operations(memory: caderno.Memory) -> None:
    from datetime import timedelta

    from caderno.memory.engines.task_rules import advance, build_task

    now = utcnow()
    daily = build_task(resource_id=R, name="daily", schedule="daily at 9", prompt="resumo", now=now)
    once = build_task(resource_id=R, name="once", schedule="in 2 hours", prompt="lembrete", now=now)
    created, _ = await run(memory, ops.PutTask(task=daily, create=True), ops.PutTask(task=once, create=True))
    assert created == daily
    with pytest.raises(UsageError, match="already has a task named"):
        await run(
            memory,
            ops.PutTask(task=build_task(resource_id=R, name="daily", schedule="hourly", prompt="x"), create=True),
        )
    later = now + timedelta(days=2)
    claimed, again = await run(
        memory,
        ops.ClaimDueTasks(now=later, limit=10, lease_seconds=60, advance=advance, claimant="w1"),
        ops.ClaimDueTasks(now=later, limit=10, lease_seconds=60, advance=advance, claimant="w2"),
    )
    assert sorted(t.name for t in claimed) == ["daily", "once"] and again == []  # never twice
    renewed, others = await run(
        memory,
        ops.RenewTaskClaims(claimant="w1", lease_seconds=60, now=later),
        ops.RenewTaskClaims(claimant="w2", lease_seconds=60, now=later),
    )
    assert renewed == {(R, t.id) for t in claimed} and others == set()  # a claim renews its own tasks only
    await run(
        memory,
        *(ops.FinishTask(resource_id=R, task_id=t.id, ran_at=later, delete=True, claimant="w2") for t in claimed),
    )
    assert len(await memory.tasks.list(resource_id=R)) == 2  # not w2's to finish: nothing changed
    await run(
        memory,
        *(
            ops.FinishTask(resource_id=R, task_id=t.id, ran_at=later, delete=t.is_oneshot, claimant="w1")
            for t in claimed
        ),
    )
    (tasks,) = await run(memory, ops.ListTasks(resource_id=R))
    assert [t.name for t in tasks] == ["daily"]  # the one-shot deleted itself
    assert tasks[0].last_run_at == later and tasks[0].next_run_at == advance(daily, later)
    paused = dataclasses.replace(tasks[0], is_paused=True)
    assert await run(memory, ops.PutTask(task=paused, create=False)) == [paused]
    assert await run(
        memory,
        ops.ClaimDueTasks(now=later + timedelta(days=9), limit=10, lease_seconds=60, advance=advance, claimant="w3"),
    ) == [[]]
    config = build_task(resource_id=R, name="cfg", schedule="weekly", prompt="p", source="config", now=now)
    clash = build_task(resource_id=R, name="daily", schedule="weekly", prompt="p", source="config", now=now)
    (report,) = await run(memory, ops.SyncConfigTasks(tasks=(config, clash), now=now))
    assert report == {"added": 1, "updated": 0, "deleted": 0, "skipped": 1}
    (report,) = await run(memory, ops.SyncConfigTasks(tasks=(), now=now))
    assert report == {"added": 0, "updated": 0, "deleted": 1, "skipped": 0}
    assert await run(
        memory, ops.DeleteTask(resource_id=R, name="daily"), ops.DeleteTask(resource_id=R, name="daily")
    ) == [True, False]

    from caderno.memory.engines import macros as rules

    calls = [("ls", {"command": "ls"}, True), ("cat", {"path": "a"}, True)]
    learn = memory.macros.learn_op(R, calls)
    await run(memory, learn, learn)
    (known,) = await run(memory, ops.ReadMacros(resource_id=R, trigger_tool="ls"))
    assert [(m.next_tool, m.confidence, m.success_count) for m in known] == [("cat", 0.7, 2)]
    assert rules.suggest_next({m.key: m for m in known}, "ls", {"command": "ls -la"}) == known
    marked, missing = await run(
        memory,
        ops.MarkMacroUsed(resource_id=R, key=known[0].key, now=now),
        ops.MarkMacroUsed(resource_id=R, key=("x", "y", "z", "w"), now=now),
    )
    assert (marked, missing) == (True, False)

    added, twice, listed = await run(
        memory,
        ops.AllowPrefix(resource_id=R, prefix="git status", now=now),
        ops.AllowPrefix(resource_id=R, prefix="git status", now=now),
        ops.ListPrefixes(resource_id=R),
    )
    assert (added, twice, listed) == (True, False, ["git status"])
    await run(memory, ops.PutTask(task=build_task(resource_id=R, name="t", schedule="hourly", prompt="p"), create=True))
    (dump,) = await run(memory, ops.ExportResource(resource_id=R))
    assert dump["allowed_prefixes"] == ["git status"] and [m["used_count"] for m in dump["macros"]] == [1]
    assert [t["name"] for t in dump["scheduled_tasks"]] == ["t"]
    await run(memory, ops.EraseResource(resource_id=R))
    assert await run(
        memory, ops.ListPrefixes(resource_id=R), ops.ListTasks(resource_id=R), ops.ReadMacros(resource_id=R)
    ) == [[], [], []]
    await run(
        memory,
        ops.ImportResource(dump=caderno.memory.engines.dump.check_dump(dump), now=now, embed_roles=EMBEDDED_ROLES),
    )
    assert await run(memory, ops.ExportResource(resource_id=R)) == [dump]
    assert await run(memory, ops.RevokePrefix(resource_id=R, prefix="git status"), ops.ListPrefixes(resource_id=R)) == [
        True,
        [],
    ]


async def test_api_key_operations(memory: caderno.Memory) -> None:
    token, key = await memory.keys.create(resources=["casa", "casa"], name="app")
    RAN.update({ops.CreateKey, ops.FindKey, ops.ListKeys, ops.RevokeKey})
    assert key.resources == ("casa",) and token.startswith("cad_")
    assert await memory.keys.verify(token) == key
    assert await memory.keys.verify(token + "x") is None and await memory.keys.verify("nope") is None
    admin_token, admin = await memory.keys.create(admin=True, name="ops")
    assert [k.id for k in await memory.keys.list()] == [key.id, admin.id]
    await memory.keys.revoke(key_id=key.id)
    assert await memory.keys.verify(token) is None  # at once
    assert (await memory.keys.verify(admin_token)) == admin
    with pytest.raises(caderno.NotFound):
        await memory.keys.revoke(key_id=key.id)
    with pytest.raises(UsageError):
        await memory.keys.create(resources=[])
    dump = json.dumps([dataclasses.asdict(k) for k in await memory.keys.list()], default=str)
    assert token not in dump and admin_token not in dump  # only hashes are kept


async def test_item_operations(memory: caderno.Memory) -> None:
    from caderno.core.records import Item

    t0 = utcnow()
    a = Item(resource_id=R, namespace=("memories", "ana"), key="k1", value={"x": 1}, updated_at=t0)
    b = Item(resource_id=R, namespace=("memories", "anabela"), key="k2", value={"y": [1, 2]}, updated_at=t0)
    c = Item(resource_id=R, namespace=("memories",), key="k3", value={}, updated_at=t0)
    await run(memory, ops.PutItem(item=a), ops.PutItem(item=b), ops.PutItem(item=c))
    later = dataclasses.replace(a, value={"x": 2}, updated_at=t0 + timedelta(seconds=1))
    (_, got, missing) = await run(
        memory,
        ops.PutItem(item=later),
        ops.GetItem(resource_id=R, namespace=("memories", "ana"), key="k1"),
        ops.GetItem(resource_id=R, namespace=("memories", "ana"), key="nope"),
    )
    assert got.value == {"x": 2} and got.created_at == t0 and got.updated_at == later.updated_at and missing is None
    under_ana, under_all, spaces = await run(
        memory,
        ops.SearchItems(resource_id=R, prefix=("memories", "ana")),
        ops.SearchItems(resource_id=R, prefix=()),
        ops.ListItemNamespaces(resource_id=R),
    )
    assert [i.key for i in under_ana] == ["k1"]  # whole labels: "anabela" is not under "ana"
    assert [i.key for i in under_all] == ["k1", "k3", "k2"]  # newest first, then by namespace
    assert spaces == [("memories",), ("memories", "ana"), ("memories", "anabela")]
    assert await run(memory, ops.DeleteItem(resource_id=R, namespace=("memories",), key="k3")) == [True]
    (dump,) = await run(memory, ops.ExportResource(resource_id=R))
    assert [(i["namespace"], i["key"], i["value"]) for i in dump["items"]] == [
        (["memories", "ana"], "k1", {"x": 2}),
        (["memories", "anabela"], "k2", {"y": [1, 2]}),
    ]
    await run(memory, ops.EraseResource(resource_id=R))
    await run(
        memory,
        ops.ImportResource(
            dump=caderno.memory.engines.dump.check_dump(dump), now=utcnow(), embed_roles=EMBEDDED_ROLES
        ),
    )
    assert await run(memory, ops.ExportResource(resource_id=R)) == [dump]  # items come back exact
    await run(memory, ops.EraseResource(resource_id=R))
    assert await run(memory, ops.ListItemNamespaces(resource_id=R)) == [[]]


async def test_item_vector_operations(memory: caderno.Memory) -> None:
    from caderno.core.records import Item

    t0 = utcnow()
    a = Item(resource_id=R, namespace=("docs", "ana"), key="k1", value={"t": "cat"}, updated_at=t0)
    b = Item(resource_id=R, namespace=("docs",), key="k2", value={"t": "rain"}, updated_at=t0)
    await run(memory, ops.PutItem(item=a, embed=("cat", "mat")), ops.PutItem(item=b, embed=("rain",)))
    (jobs,) = await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
    assert sorted((j.namespace, j.key, j.texts, j.attempts) for j in jobs) == [
        (("docs",), "k2", ("rain",), 0),
        (("docs", "ana"), "k1", ("cat", "mat"), 0),
    ]
    assert {j.updated_at for j in jobs} == {t0}
    assert await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow())) == [[]]  # leased
    one, two = b"\x00\x00\x80\x3f\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00\x80\x3f"
    job_a = next(j for j in jobs if j.key == "k1")
    job_b = next(j for j in jobs if j.key == "k2")
    # k2 is written again while its job is out: the old job's vectors must not land on the new value.
    b2 = dataclasses.replace(b, value={"t": "sun"}, updated_at=t0 + timedelta(seconds=1))
    await run(memory, ops.PutItem(item=b2, embed=("sun",)))
    await run(
        memory,
        ops.FinishItemEmbeddings(model="m", dim=2, done=((job_a, one + two), (job_b, one)), failed=(), now=utcnow()),
    )
    under_docs, under_ana, other_model = await run(
        memory,
        ops.ReadItemVectors(resource_id=R, prefix=("docs",), model="m"),
        ops.ReadItemVectors(resource_id=R, prefix=("docs", "ana"), model="m"),
        ops.ReadItemVectors(resource_id=R, prefix=(), model="other"),
    )
    assert [(v.namespace, v.key, v.updated_at, v.dim, v.vectors) for v in under_docs] == [
        (("docs", "ana"), "k1", t0, 2, one + two)
    ]
    assert [v.key for v in under_ana] == ["k1"] and other_model == []
    # Ranked: k1's best text matches (one + two: the dot products 1 and 0); k2 has no vectors.
    best, too_few, filtered, elsewhere = await run(
        memory,
        ops.RankItems(resource_id=R, prefix=("docs",), model="m", query=(0.0, 1.0), k=1),
        ops.RankItems(resource_id=R, prefix=("docs",), model="m", query=(1.0, 0.0), k=2),
        ops.RankItems(resource_id=R, prefix=(), model="m", query=(1.0, 0.0), k=1, where=((("t",), "$eq", "dog"),)),
        ops.RankItems(resource_id=R, prefix=("docs", "bob"), model="m", query=(1.0, 0.0), k=1),
    )
    assert [(it.key, it.value, score) for it, score in best] == [("k1", {"t": "cat"}, 1.0)]
    assert [it.key for it, _ in too_few] == ["k1"] and filtered == [] and elsewhere == []
    # The new value's job is due; a failure is recorded and retried later, not now.
    (again,) = await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
    assert [(j.key, j.texts, j.updated_at) for j in again] == [("k2", ("sun",), b2.updated_at)]
    await run(
        memory, ops.FinishItemEmbeddings(model="m", dim=2, done=(), failed=((again[0], "boom", 3600.0),), now=utcnow())
    )
    assert await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow())) == [[]]
    # Export carries the texts, not the vectors; an import queues them again.
    (dump,) = await run(memory, ops.ExportResource(resource_id=R))
    assert [(i["key"], i.get("embed")) for i in dump["items"]] == [("k2", ["sun"]), ("k1", ["cat", "mat"])]
    await run(memory, ops.EraseResource(resource_id=R))
    assert await run(memory, ops.ReadItemVectors(resource_id=R, prefix=(), model="m")) == [[]]
    await run(
        memory,
        ops.ImportResource(
            dump=caderno.memory.engines.dump.check_dump(dump), now=utcnow(), embed_roles=EMBEDDED_ROLES
        ),
    )
    assert await run(memory, ops.ExportResource(resource_id=R)) == [dump]
    (queued,) = await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
    assert sorted(j.key for j in queued) == ["k1", "k2"]
    await run(
        memory,
        ops.FinishItemEmbeddings(
            model="m", dim=2, done=tuple((j, one * len(j.texts)) for j in queued), failed=(), now=utcnow()
        ),
    )
    assert len((await run(memory, ops.ReadItemVectors(resource_id=R, prefix=(), model="m")))[0]) == 2
    # A reindex (a new model) queues the items again; a put without texts and a delete drop their vectors.
    await run(memory, ops.Reindex(resource_id=R, embed_roles=EMBEDDED_ROLES))
    assert await run(memory, ops.ReadItemVectors(resource_id=R, prefix=(), model="m")) == [[]]
    (requeued,) = await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow()))
    await run(
        memory,
        ops.FinishItemEmbeddings(
            model="m2", dim=2, done=tuple((j, one * len(j.texts)) for j in requeued), failed=(), now=utcnow()
        ),
    )
    k1 = dataclasses.replace(a, updated_at=t0 + timedelta(seconds=2))
    await run(memory, ops.PutItem(item=k1), ops.DeleteItem(resource_id=R, namespace=("docs",), key="k2"))
    assert await run(memory, ops.ReadItemVectors(resource_id=R, prefix=(), model="m2")) == [[]]
    assert await run(memory, ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=utcnow())) == [[]]


async def test_notebook_and_turn_lease_operations(memory: caderno.Memory) -> None:
    now = utcnow()
    assert await run(memory, ops.ReadNotebook(resource_id=R)) == [{"memory": ((), 0), "user": ((), 0)}]
    seen: list[tuple[list[str], int]] = []

    def add(entries: list[str], version: int) -> list[str]:
        seen.append((entries, version))
        return [*entries, "nota"]

    written, pages = await run(
        memory,
        ops.EditNotebook(resource_id=R, target="memory", edit=add, now=now),
        ops.ReadNotebook(resource_id=R),
    )
    assert written == ["nota"] and seen == [([], 0)] and pages["memory"] == (("nota",), 1)
    # An edit that returns None writes nothing; one that raises rolls the whole batch back.
    assert await run(memory, ops.EditNotebook(resource_id=R, target="memory", edit=lambda e, v: None, now=now)) == [
        ["nota"]
    ]

    def refuse(entries: list[str], version: int) -> list[str]:
        raise caderno.errors.NotebookError("no")

    with pytest.raises(caderno.errors.NotebookError):
        await run(
            memory,
            ops.EditNotebook(resource_id=R, target="user", edit=lambda e, v: ["x"], now=now),
            ops.EditNotebook(resource_id=R, target="memory", edit=refuse, now=now),
        )
    assert (await run(memory, ops.ReadNotebook(resource_id=R)))[0] == {"memory": (("nota",), 1), "user": ((), 0)}
    frozen = {"memory": "bloco", "user": None}
    first, second, read = await run(
        memory,
        ops.FreezeNotebook(resource_id=R, thread_id=T, snapshot=frozen, now=now),
        ops.FreezeNotebook(resource_id=R, thread_id=T, snapshot={"memory": "outro", "user": None}, now=now),
        ops.ReadNotebookSnapshot(resource_id=R, thread_id=T),
    )
    assert first == second == read == frozen  # the first snapshot stored wins
    assert await run(memory, ops.ReadNotebookSnapshot(resource_id=R, thread_id="t2")) == [None]
    lease = {"resource_id": R, "thread_id": T, "lease_seconds": 30, "now": now}
    assert await run(memory, ops.ClaimTurn(holder="a", **lease), ops.ClaimTurn(holder="a", **lease)) == [True, True]
    assert await run(memory, ops.ClaimTurn(holder="b", **lease)) == [False]
    with pytest.raises(caderno.errors.ThreadBusy):
        await run(memory, ops.ClaimTurn(holder="b", required=True, **lease))
    later = {**lease, "now": now + timedelta(seconds=31)}
    assert await run(memory, ops.ClaimTurn(holder="b", **later)) == [True]  # expired: taken over
    await run(memory, ops.ReleaseTurn(resource_id=R, thread_id=T, holder="a"))  # not a's any more: nothing
    assert await run(memory, ops.ClaimTurn(holder="c", **lease)) == [False]
    await run(memory, ops.ReleaseTurn(resource_id=R, thread_id=T, holder="b"))
    assert await run(memory, ops.ClaimTurn(holder="c", **lease)) == [True]


async def test_an_embedding_lease_is_renewed_while_it_runs_and_only_then(memory: caderno.Memory) -> None:
    now = utcnow()
    (stored,) = await run(memory, append(memory, "a viagem a Amsterdam", "a meta de EUR 6.000"))
    first, second = ((R, m.seq) for m in stored)
    (jobs,) = await run(memory, ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=now))
    assert len(jobs) == 2
    # The first job's lease renewed at 30 s for 120 s; the second ran out at 60 s, and a renewal at 70 s is too late.
    await run(memory, ops.RenewEmbeddings(jobs=(first,), lease_seconds=120, now=now + timedelta(seconds=30)))
    await run(memory, ops.RenewEmbeddings(jobs=(second,), lease_seconds=120, now=now + timedelta(seconds=70)))
    (taken,) = await run(memory, ops.ClaimEmbeddings(limit=10, lease_seconds=120, now=now + timedelta(seconds=71)))
    assert [(j.resource_id, j.seq) for j in taken] == [second]
    (taken,) = await run(memory, ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=now + timedelta(seconds=151)))
    assert [(j.resource_id, j.seq) for j in taken] == [first]


def test_every_operation_ran() -> None:
    """Runs last in this module: the tests above exercised the whole port."""
    assert RAN >= ops.ALL, sorted(t.__name__ for t in ops.ALL - RAN)
