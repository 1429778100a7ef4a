"""Every storage operation with work to do on a real PostgreSQL: the scene, the cases, what each one sends.

Shared by the checks that read the SQL the plans really send:
``test_one_statement.py`` (how many statements each operation sends) and
``test_shard_ready.py`` (whether each one names its resource). A scene is a
store holding something for every operation to do; ``cases`` holds at
least one operation of every type, more where a plan takes another path.
Both tests fail while an operation type has no case here, so a new
operation is added in one place: a line (or a few) in ``cases``, and
anything it needs in the scene.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import caderno
from caderno import Message
from caderno.core.clock import new_id, utcnow
from caderno.core.records import ApiKey, Item, Macro, ScheduledTask
from caderno.memory.engines.dump import check_dump
from caderno.memory.engines.task_rules import advance, build_task
from caderno.stores import ops, postgres
from caderno.stores._sql import Q, run_plan
from conftest import _fresh_url

R, T = "casa", "t1"
#: The resource an export of ``R`` is imported into.
COPY = "new"
#: Every resource the cases name (the shard check reads these values back from the statements).
RESOURCES = frozenset({R, COPY})
NOW = utcnow()
VECTOR = b"\x00\x00\x80\x3f" * 3
ROLES = frozenset({"user", "assistant"})


def _messages(*texts: str) -> tuple[Message, ...]:
    return tuple(
        Message.user(text)._stamped(id=new_id(), created_at=NOW, importance=0.9 if "!" in text else 0.5)
        for text in texts
    )


def _append(thread: str, *texts: str) -> ops.Append:
    messages = _messages(*texts)
    return ops.Append(resource_id=R, thread_id=thread, messages=messages, embed=frozenset(m.id for m in messages))


@dataclasses.dataclass
class Scene:
    """A store with something for every operation to do, and what the cases name."""

    store: postgres.PostgresStore
    stored: list[Message]
    task: ScheduledTask
    item: Item
    dump: dict[str, Any]


@asynccontextmanager
async def open_scene(url: str) -> AsyncIterator[Scene]:
    """Messages with vectors and a summary, facts, working memory, a task, a macro, a key, an item."""
    memory = await caderno.connect(url, embedder=None)
    store = memory.store
    assert isinstance(store, postgres.PostgresStore)
    try:
        (stored,) = await store.batch([_append(T, "Amsterdam costs EUR 6,000!", "ok then", "and the car?")])
        await store.batch([_append("t2", "another thread")])
        (jobs,) = await store.batch([ops.ClaimEmbeddings(limit=2, lease_seconds=0, now=NOW)])
        done = tuple((j.resource_id, j.seq, VECTOR) for j in jobs)
        summary = Message.system("summary")._stamped(id=new_id(), created_at=NOW)
        task = build_task(resource_id=R, name="daily", schedule="daily at 9", prompt="resumo", now=NOW)
        item = Item(resource_id=R, namespace=("docs",), key="k", value={"t": "cat"}, updated_at=NOW)
        await store.batch(
            [
                ops.FinishEmbeddings(model="m", dim=3, done=done, failed=(), now=NOW),
                ops.WriteSummary(resource_id=R, thread_id=T, summary=summary, covered=(stored[0].seq,), now=NOW),
                _fact("R$ 14,000"),
                _fact("R$ 15,000"),
                _patch(None),
                ops.PutTask(task=task, create=True),
                _learn("cat"),
                ops.AllowPrefix(resource_id=R, prefix="git status", now=NOW),
                ops.PutItem(item=item, embed=("cat",)),
                ops.PutItem(item=dataclasses.replace(item, key="v", value={"t": "cat", "n": 2}), embed=("cat",)),
                ops.CreateKey(key=ApiKey(id="k1", name="app", resources=(R,), created_at=NOW), token_hash="h"),
                ops.LogConsolidation(resource_id=R, thread_id=T, step="summary", outcome="ok", detail="", now=NOW),
            ]
        )
        # Item "v" has vectors (what RankItems ranks); "k"'s job stays due (lease 0).
        (item_jobs,) = await store.batch([ops.ClaimItemEmbeddings(limit=10, lease_seconds=0, now=NOW)])
        ranked = next(j for j in item_jobs if j.key == "v")
        await store.batch([ops.FinishItemEmbeddings(model="m", dim=3, done=((ranked, VECTOR),), failed=(), now=NOW)])
        yield Scene(store, stored, task, item, await memory.export_resource(resource_id=R))
    finally:
        await memory.close()


@pytest.fixture(params=["postgres", "pgvector"])
async def scene(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Scene]:
    """The scene on the system PostgreSQL and on the one with pgvector."""
    for url in _fresh_url(request, tmp_path):
        async with open_scene(url) as opened:
            yield opened


def _fact(value: str) -> ops.UpsertFact:
    return ops.UpsertFact(resource_id=R, category="finance", key="income", value=value, source="user", now=NOW)


def _patch(expected: int | None) -> ops.PatchWorkingMemory:
    return ops.PatchWorkingMemory(
        resource_id=R,
        update=lambda current: {**(current or {}), "goal": "Amsterdam"},
        patch={"goal": "Amsterdam"},
        expected_version=expected,
        source="test",
        now=NOW,
    )


def _task(name: str, source: str = "tool") -> ScheduledTask:
    return build_task(resource_id=R, name=name, schedule="hourly", prompt="p", source=source, now=NOW)


def _learn(next_tool: str) -> ops.LearnMacros:
    macro = Macro(trigger_tool="ls", trigger_pattern="ls", next_tool=next_tool, next_args={}, confidence=0.7)
    return ops.LearnMacros(resource_id=R, learn=lambda known: {**known, macro.key: macro}, now=NOW)


def cases(scene: Scene) -> list[ops.Op[Any]]:
    """At least one case per operation type; more where the plan takes another path."""
    stored, task, item = scene.stored, scene.task, scene.item
    first, second = stored[0], stored[1]
    later = NOW + timedelta(days=2)
    one_job = ops.ItemEmbeddingJob(
        resource_id=R, namespace=item.namespace, key=item.key, updated_at=item.updated_at, texts=("cat",), attempts=0
    )
    wide = _append(T, *(f"m{i}" for i in range(postgres._postgres_plans.APPEND_CHUNK + 1)))
    copy = check_dump({**scene.dump, "resource_id": COPY})
    edit = dict(resource_id=R, content="EUR 7,000", rescore=lambda m: (0.5, True), actor="t", reason=None, now=NOW)
    return [
        # history and thread records
        _append(T, "one more"),
        _append("new thread", "first", "second"),
        wide,
        ops.ReadThread(resource_id=R, thread_id=T),
        ops.ReadThread(resource_id=R, thread_id=T, limit=1, before=3),
        ops.ListThreads(resource_id=R),
        ops.GetThread(resource_id=R, thread_id=T),
        ops.PutThread(resource_id=R, thread_id="t3", create=True, title="x", now=NOW),
        ops.PutThread(resource_id=R, thread_id=T, create=False, title="x", now=NOW),
        ops.DeleteThread(resource_id=R, thread_id=T),
        ops.PopMessage(resource_id=R, thread_id=T, actor="t", reason=None, now=NOW),
        ops.EditMessage(message_id=first.id, **edit),
        ops.DeleteMessage(resource_id=R, message_id=second.id, actor="t", reason=None, now=NOW),
        ops.ReadMessageLog(resource_id=R),
        ops.ReadMessageLog(resource_id=R, message_id=first.id),
        ops.SetImportance(resource_id=R, message_id=first.id, value=0.1),
        # working memory and whole resources
        ops.ReadWorkingMemory(resource_id=R),
        _patch(1),
        ops.ReadWorkingMemoryLog(resource_id=R),
        ops.ListResources(),
        ops.EraseResource(resource_id=R),
        ops.ExportResource(resource_id=R),
        ops.ImportResource(dump=copy, now=NOW, embed_roles=ROLES),
        # facts
        _fact("R$ 16,000"),
        ops.ReadFacts(resource_id=R),
        ops.ReadFacts(resource_id=R, category="finance"),
        ops.ReadFactHistory(resource_id=R, category="finance", key="income"),
        ops.ForgetFact(resource_id=R, category="finance", key="income"),
        ops.ForgetFact(resource_id=R, category="finance", key="nope"),
        # recall
        ops.ClaimEmbeddings(limit=10, lease_seconds=60, now=later),
        ops.RenewEmbeddings(jobs=((R, stored[2].seq), (COPY, 1)), lease_seconds=60, now=NOW),
        ops.FinishEmbeddings(
            model="m", dim=3, done=((R, stored[2].seq, VECTOR),), failed=(), now=NOW, codes=(bytes(2 * 3 + 8),)
        ),
        ops.FinishEmbeddings(
            model="m",
            dim=3,
            done=((R, stored[2].seq, VECTOR),),
            failed=(),
            now=NOW,
            sparse=(b"\x07\x00\x00\x3c",),
            sparse_model="s",
        ),
        ops.CountPendingEmbeddings(),
        ops.ReadVectors(resource_id=R, model="m", after_id=0),
        ops.ReadSparse(resource_id=R, model="s", seqs=(stored[1].seq, stored[2].seq)),
        ops.SearchVectors(resource_id=R, model="m", query=(1.0, 1.0, 1.0), k=5, min_similarity=0.0),
        ops.SearchVectors(resource_id=R, model="m", query=(1.0, 1.0, 1.0), k=5, min_similarity=0.0, thread_id=T),
        ops.LexicalSearch(resource_id=R, terms=("amsterdam",), limit=5),
        ops.LexicalSearch(resource_id=R, terms=("amsterdam",), limit=5, thread_id=T),
        ops.ReadSalient(resource_id=R, threshold=0.8, limit=5),
        ops.ReadSalient(resource_id=R, threshold=0.8, limit=5, thread_id=T),
        ops.ReadBySeq(resource_id=R, seqs=(first.seq, second.seq)),
        ops.ReadNeighbours(resource_id=R, thread_id=T, seq=second.seq, before=1, after=1),
        ops.Reindex(resource_id=R, embed_roles=ROLES),
        ops.Reindex(resource_id=None, embed_roles=ROLES),
        # consolidation
        ops.FindConsolidationCandidates(resource_id=R, min_chars=1),
        ops.FindConsolidationCandidates(resource_id=None, min_chars=1),
        ops.ClaimConsolidation(resource_id=R, thread_id=T, holder="w", lease_seconds=60, now=NOW),
        ops.ClaimConsolidation(resource_id=R, thread_id=T, holder="w", lease_seconds=60, now=NOW, renew=True),
        ops.ReleaseConsolidation(resource_id=R, thread_id=T, holder="w"),
        ops.ReadUnconsolidated(resource_id=R, thread_id=T),
        ops.ReadSummaries(resource_id=R, thread_id=T),
        ops.WriteSummary(
            resource_id=R, thread_id=T, summary=_messages("s")[0], covered=(second.seq, stored[2].seq), now=NOW
        ),
        ops.ReadFactCandidates(resource_id=R, min_importance=0.7, limit=10),
        ops.ReadFactCandidates(resource_id=None, min_importance=0.7, limit=10),
        ops.MarkFactsExtracted(resource_id=R, seqs=(first.seq, second.seq), now=NOW),
        ops.LogConsolidation(resource_id=R, thread_id=T, step="facts", outcome="failed", detail="x", now=NOW),
        ops.ReadConsolidationLog(resource_id=R),
        # agent state
        ops.PutTask(task=_task("other"), create=True),
        ops.PutTask(task=dataclasses.replace(task, is_paused=True), create=False),
        ops.ListTasks(resource_id=R),
        ops.ListTasks(resource_id=None),
        ops.DeleteTask(resource_id=R, name="daily"),
        ops.ClaimDueTasks(now=later, limit=10, lease_seconds=60, advance=advance, claimant="w"),
        ops.RenewTaskClaims(claimant="w", lease_seconds=60, now=later),
        ops.FinishTask(resource_id=R, task_id=task.id, ran_at=later, delete=False, claimant="w"),
        ops.FinishTask(resource_id=R, task_id=task.id, ran_at=later, delete=True, claimant="w"),
        ops.SyncConfigTasks(tasks=(_task("c", source="config"),), now=NOW),
        ops.ReadMacros(resource_id=R),
        ops.ReadMacros(resource_id=R, trigger_tool="ls"),
        _learn("head"),
        ops.MarkMacroUsed(resource_id=R, key=("ls", "ls", "cat", "{}"), now=NOW),
        ops.AllowPrefix(resource_id=R, prefix="ls", now=NOW),
        ops.RevokePrefix(resource_id=R, prefix="git status"),
        ops.ListPrefixes(resource_id=R),
        # keys
        ops.CreateKey(key=ApiKey(id="k2", name="x", resources=(), admin=True, created_at=NOW), token_hash="h2"),
        ops.FindKey(token_hash="h"),
        ops.ListKeys(),
        ops.RevokeKey(key_id="k1", now=NOW),
        # items
        ops.PutItem(item=dataclasses.replace(item, value={"t": "dog"}), embed=("dog",)),
        ops.PutItem(item=dataclasses.replace(item, key="k2")),
        ops.DeleteItem(resource_id=R, namespace=item.namespace, key=item.key),
        ops.GetItem(resource_id=R, namespace=item.namespace, key=item.key),
        ops.SearchItems(resource_id=R, prefix=("docs",), where=((("t",), "$ne", "cat"), (("n",), "$gt", 1)), limit=5),
        ops.ListItemNamespaces(resource_id=R),
        ops.ClaimItemEmbeddings(limit=10, lease_seconds=60, now=later),
        ops.FinishItemEmbeddings(model="m", dim=3, done=((one_job, VECTOR),), failed=(), now=NOW),
        ops.ReadItemVectors(resource_id=R, prefix=(), model="m"),
        ops.ReadItemVectors(resource_id=R, prefix=(), model="m", where=((("t",), "$eq", "dog"),)),
        ops.RankItems(resource_id=R, prefix=(), model="m", query=(1.0, 0.0, 0.0), k=1),
        ops.RankItems(
            resource_id=R, prefix=("docs",), model="m", query=(1.0, 0.0, 0.0), k=1, where=((("n",), "$gt", 1),)
        ),
        ops.SearchItems(resource_id=R, prefix=(), limit=1),
        # notebook and turn leases
        ops.EditNotebook(resource_id=R, target="memory", edit=lambda entries, version: [*entries, "nota"], now=NOW),
        ops.ReadNotebook(resource_id=R),
        ops.FreezeNotebook(resource_id=R, thread_id=T, snapshot={"memory": "bloco", "user": None}, now=NOW),
        ops.ReadNotebookSnapshot(resource_id=R, thread_id=T),
        ops.ClaimTurn(resource_id=R, thread_id=T, holder="h", lease_seconds=30, now=NOW),
        ops.ReleaseTurn(resource_id=R, thread_id=T, holder="h"),
    ]


def runnable(scene: Scene) -> frozenset[type[ops.Op[Any]]]:
    """The operation types the scene's store handles: every one, and vector search where pgvector is."""
    return ops.ALL | (ops.VECTOR_SEARCH if scene.store.pgvector_schema else frozenset())


async def sent(store: postgres.PostgresStore, op: ops.Op[Any]) -> list[Q]:
    """The statements ``op``'s plan sends, in order, run in a transaction that is rolled back.

    An ``executemany`` is one ``Q`` whose ``params`` are its rows (one
    statement per row reaches the server; none when it has no rows, as the
    store sends nothing then).
    """
    out: list[Q] = []
    async with store._pool.connection() as conn:

        async def execute(q: Q) -> Any:
            if q.fetch != "many" or q.params:
                out.append(q)
            return await postgres._execute(conn, q)

        async with conn.transaction(force_rollback=True):
            if local := store._local(store._pooled):  # behind a pooler the search path is the transaction's
                await conn.execute(local)
            await run_plan(store._handler(op)(postgres.DIALECT, op), execute)
    return out
