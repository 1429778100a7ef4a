"""Consolidation: summaries of old turns and facts drawn from them.

A thread grows without end; the model's context does not. When the
messages of a thread not yet covered by a summary pass
``summarize_after_tokens``, the oldest of them — outside the recent window,
never splitting a tool call from its results — are summarised, by the fast
model when one is configured, else by a deterministic extractive
summariser. The summary is stored as an event of kind ``summary`` whose
``metadata.span`` is the ``[first, last]`` positions (1, 2, 3… in its
thread) of the messages it covers; the originals get ``consolidated_at`` and
are never deleted. The span is in positions, never in the store's internal
``seq``: summaries reach clients, and ``seq`` counts every tenant's writes.
A summary has no position of its own (it is not a message of the thread).
When the summaries themselves pass
``merge_after_tokens`` they are merged into one new summary (the older ones
stay stored, marked as merged).

Facts: user messages with importance >= 0.7 are sent to the fast model,
which answers with a JSON array of ``{category, key, value}``; the facts are
upserted with source ``consolidation``. Output that is not such an array
marks nothing, so the next pass retries.

Every write is one transaction, and a thread is summarised by one worker at
a time (a lease on the thread row; PostgreSQL takes it with
``FOR UPDATE SKIP LOCKED``), so two workers never summarise the same range
and a crash never leaves half a summary. The lease names its holder (a fresh
id per claim): the worker renews only its own, writes a summary only while
the lease still names it, and gives back only its own, so a worker stalled
past its lease while another took the thread over stores nothing. A failing model (error, timeout,
garbage) is recorded in the consolidation log; nothing changes.

``Consolidation`` is the part a ``Memory`` offers as ``memory.consolidation``
(a pass, the summaries, the log, a background run after a turn, and the
settings); ``Consolidator`` applies the rules to one thread or resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.clock import new_id, utcnow
from ...core.errors import CadernoError, UsageError
from ...core.messages import Message
from ...core.records import Fact
from ...core.validate import check_id
from ...stores import ops
from ...stores.base import Runner
from ..engines.context import TokenCounter, estimate_tokens, message_tokens

logger = logging.getLogger("caderno.memory.parts.consolidation")

#: Most user messages sent to the fast model in one fact-extraction call.
FACT_BATCH = 50
#: A worker renews its consolidation lease this many times per lease while it
#: summarises, as a turn does: a late renewal or two still leaves it held, and
#: only a worker that died or stalled a whole lease loses the thread.
RENEWALS_PER_LEASE = 3

__all__ = [
    "FACTS_PROMPT",
    "SUMMARY_PROMPT",
    "Consolidation",
    "ConsolidationSettings",
    "Consolidator",
    "extractive_summary",
    "parse_facts",
    "summary_span",
]

SUMMARY_PROMPT = """You compress an old part of a conversation so it can leave the context window.
Write a faithful summary, in the conversation's language, that keeps:
- decisions and commitments (who will do what, by when);
- names of people, places, products and organisations;
- every number, amount, currency and date, exactly as written;
- preferences and corrections the user stated;
- questions still open.
Drop greetings and small talk. Use short bullet points. Do not invent anything."""

FACTS_PROMPT = """Extract durable facts about the user from these messages.
Answer with a JSON array only, each item {"category": ..., "key": ..., "value": ...}:
category is a short lowercase word (finance, family, health, travel, preferences, work, home…),
key names what the fact is about (snake_case), value states it in a few words, with exact numbers and dates.
Only facts that stay true for weeks or more. If there are none, answer []."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsolidationSettings:
    """How and when consolidation runs (``Memory(consolidation=...)``)."""

    fast_model: Any = None
    """Any ``caderno.Model`` (a cheaper one than the chat's); ``None`` = extractive summaries, no facts."""
    summarize_after_tokens: int = 2000
    """Unsummarised tokens in a thread that trigger a summary."""
    keep_recent_tokens: int = 800
    """The newest messages of this many tokens are never summarised."""
    merge_after_tokens: int = 1200
    """When a thread's unmerged summaries pass this, they are merged into one."""
    fact_min_importance: float = 0.7
    """User messages at or above this importance are read for facts."""
    interval_hours: float = 6.0
    """Period of the background pass in a long-running process."""
    model_timeout_seconds: float = 60.0
    """A fast-model call slower than this is a failure (retried next pass)."""
    lease_seconds: float = 300.0
    """How long a worker's lease on a thread lasts unrenewed (renewed every third while it summarises)."""
    token_counter: TokenCounter = estimate_tokens
    """How tokens are counted."""


# -- extractive summaries ------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_NUMBERISH = re.compile(r"\d")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-ZÀ-Ý][\wÀ-ÿ'-]+")


def extractive_summary(messages: Sequence[Message], *, max_chars: int = 1200) -> str:
    """A deterministic summary: the most salient sentences, with names and numbers.

    Sentences are scored by the message's importance, plus numbers, dates
    and capitalised names they carry; the best are kept, in conversation
    order, within ``max_chars``.
    """
    candidates: list[tuple[float, int, str]] = []
    order = 0
    for m in messages:
        if m.role not in ("user", "assistant") or not m.content.strip():
            continue
        for raw in _SENTENCE.findall(m.content):
            sentence = " ".join(raw.split())
            if len(sentence) < 12:
                continue
            score = (m.importance or 0.5) * 2
            score += 0.6 * min(3, len(_NUMBERISH.findall(sentence)) // 2 + (1 if _NUMBERISH.search(sentence) else 0))
            score += 0.3 * min(3, len(_NAME.findall(sentence)))
            score += 0.2 if m.role == "user" else 0.0
            candidates.append((score, order, f"{m.role}: {sentence}"))
            order += 1
    chosen: list[tuple[int, str]] = []
    used = 0
    for _score, pos, text in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if used + len(text) + 3 > max_chars:
            continue
        chosen.append((pos, text))
        used += len(text) + 3
    return "\n".join(f"- {text}" for _, text in sorted(chosen))


def parse_facts(text: str) -> list[dict[str, str]] | None:
    """The model's JSON array of facts (code fences tolerated), or None when it is not one."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:  # not JSON, or an integer past Python's digit limit
        start, end = body.find("["), body.rfind("]")
        if start < 0 or end <= start:
            return None
        try:
            data = json.loads(body[start : end + 1])
        except ValueError:
            return None
    if not isinstance(data, list):
        return None
    facts = []
    for item in data:
        if not isinstance(item, dict):
            return None
        try:
            category, key, value = (str(item[k]).strip() for k in ("category", "key", "value"))
        except KeyError:
            return None
        if category and key and value:
            facts.append({"category": category.lower(), "key": key, "value": value})
    return facts


def split_for_summary(
    messages: Sequence[Message], keep_recent_tokens: int, count: TokenCounter
) -> tuple[list[Message], list[Message]]:
    """(old, recent): the newest units within ``keep_recent_tokens`` stay; never splits a tool pair."""
    units = _all_units(messages)
    kept: list[list[Message]] = []
    room = keep_recent_tokens
    for unit in reversed(units):
        tokens = sum(message_tokens(m, count) for m in unit)
        if tokens > room and kept:
            break
        kept.append(unit)
        room -= tokens
    cut = len(units) - len(kept)
    return [m for u in units[:cut] for m in u], [m for u in units[cut:] for m in u]


def _all_units(messages: Sequence[Message]) -> list[list[Message]]:
    """Like ``history_units`` but keeps everything: a call and its results stay together."""
    units: list[list[Message]] = []
    for m in messages:
        if m.role == "tool" and units and units[-1][0].tool_calls:
            units[-1].append(m)
        else:
            units.append([m])
    return units


def summary_message(
    text: str, span: tuple[int, int] | None, summarizer: str, *, covered: int, merged: int = 0
) -> Message:
    """The summary event: ``metadata.span`` is the [first, last] positions in its thread it stands for.

    ``span`` is ``None`` only when merging summaries none of which has a span
    left (their messages were all deleted before spans existed).
    """
    meta: dict[str, Any] = {"count": covered, "summarizer": summarizer}
    if span is not None:
        meta["span"] = [span[0], span[1]]
    if merged:
        meta["merged_summaries"] = merged
    return Message.system(text, id=new_id(), created_at=utcnow(), importance=0.5, metadata=meta)


def summary_span(summary: Message) -> tuple[int, int] | None:
    """The [first, last] positions a summary covers, or ``None`` when it names none.

    Every summary written since spans exist has one; a summary migrated from
    the old form whose messages were all deleted before the migration has
    none (nothing left to name), and covers nothing.
    """
    span = (summary.metadata or {}).get("span")
    if isinstance(span, list) and len(span) == 2 and all(isinstance(p, int) for p in span):
        return span[0], span[1]
    return None


def positions_of(messages: Sequence[Message]) -> tuple[int, int]:
    """The [first, last] positions of stored messages (every stored message has one)."""
    positions = [m.position for m in messages]
    if any(p is None for p in positions):
        raise ValueError("a message to summarise has no position: it was not read from a store")
    return min(p for p in positions if p is not None), max(p for p in positions if p is not None)


def transcript(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        if m.role == "system" and "summarizer" in (m.metadata or {}):
            lines.append(f"[earlier summary]\n{m.content}")
        elif m.tool_calls:
            lines.append(
                "assistant called "
                + ", ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in m.tool_calls)
            )
        elif m.content:
            lines.append(f"{m.role}: {m.content}")
    return "\n".join(lines)


async def ask_model(model: Any, system: str, user: str, timeout: float) -> str:
    reply = await asyncio.wait_for(model.complete([Message.system(system), Message.user(user)], []), timeout)
    if not isinstance(reply, Message) or not reply.content.strip():
        raise ValueError("the fast model returned an empty answer")
    return reply.content.strip()


#: Upserts one fact (``memory.facts.remember``): what extraction writes through, so the fact rules are one.
Remember = Callable[..., Awaitable[Fact]]


class Consolidator:
    """Runs the consolidation rules over a store (used by ``Consolidation``)."""

    def __init__(self, run: Runner, settings: ConsolidationSettings, remember: Remember) -> None:
        self.run = run
        self.settings = settings
        self.remember = remember

    async def thread(self, resource_id: str, thread_id: str, report: dict[str, int]) -> None:
        """Summarise (and merge summaries of) one thread, if it needs it; failures are logged."""
        settings = self.settings
        count = settings.token_counter
        if not await self.needs(resource_id, thread_id):
            return  # checked before claiming: most turns need nothing, and a claim is a write
        holder = new_id()  # the lease's fencing token: renewal, summaries and release name it

        def claim(*, renew: bool = False) -> ops.ClaimConsolidation:
            return ops.ClaimConsolidation(
                resource_id=resource_id,
                thread_id=thread_id,
                holder=holder,
                lease_seconds=settings.lease_seconds,
                now=utcnow(),
                renew=renew,
            )

        if not await self.run(claim()):
            return  # another worker has it

        async def renew() -> None:
            while True:
                await asyncio.sleep(settings.lease_seconds / RENEWALS_PER_LEASE)
                try:
                    if not await self.run(claim(renew=True)):
                        logger.warning("consolidation lease on %s/%s was taken over", resource_id, thread_id)
                        return  # the summary's own lease check stores nothing
                except CadernoError as exc:  # the database is away: the summary's lease check decides
                    logger.warning("consolidation lease on %s/%s not renewed: %s", resource_id, thread_id, exc)

        renewing = asyncio.create_task(renew())
        try:
            free = await self.run(ops.ReadUnconsolidated(resource_id=resource_id, thread_id=thread_id))
            if sum(message_tokens(m, count) for m in free) > settings.summarize_after_tokens:
                old, _recent = split_for_summary(free, settings.keep_recent_tokens, count)
                if old:
                    text, how = await self.summarize(old)
                    summary = summary_message(text, positions_of(old), how, covered=len(old))
                    if await self._write_summary(resource_id, thread_id, summary, [m.seq for m in old], holder):
                        report["summaries"] += 1
            open_summaries = await self._open_summaries(resource_id, thread_id)
            if self._merge_due(open_summaries):
                text, how = await self.summarize(open_summaries, merging=True)
                spans = [span for m in open_summaries if (span := summary_span(m)) is not None]
                summary = summary_message(
                    text,
                    (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None,
                    how,
                    covered=sum((m.metadata or {}).get("count", 0) for m in open_summaries),
                    merged=len(open_summaries),
                )
                seqs = [m.seq for m in open_summaries]
                if await self._write_summary(resource_id, thread_id, summary, seqs, holder):
                    report["merges"] += 1
        except Exception as exc:  # noqa: BLE001 - recorded; the next pass retries
            report["failures"] += 1
            await self._log(resource_id, thread_id, "summary", f"{type(exc).__name__}: {exc}")
            logger.warning("summary of %s/%s failed: %s", resource_id, thread_id, exc)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            await self.run(ops.ReleaseConsolidation(resource_id=resource_id, thread_id=thread_id, holder=holder))

    async def needs(self, resource_id: str, thread_id: str) -> bool:
        """Whether the thread has outgrown its thresholds (a read; no claim)."""
        settings = self.settings
        count = settings.token_counter
        free = await self.run(ops.ReadUnconsolidated(resource_id=resource_id, thread_id=thread_id))
        if sum(message_tokens(m, count) for m in free) > settings.summarize_after_tokens:
            return True
        return self._merge_due(await self._open_summaries(resource_id, thread_id))

    async def _open_summaries(self, resource_id: str, thread_id: str) -> list[Message]:
        """The thread's summaries not yet merged into a newer one, oldest first."""
        summaries = await self.run(ops.ReadSummaries(resource_id=resource_id, thread_id=thread_id))
        return [m for m, merged in summaries if not merged]

    def _merge_due(self, open_summaries: list[Message]) -> bool:
        """Whether two or more open summaries have outgrown ``merge_after_tokens`` together."""
        count = self.settings.token_counter
        total = sum(message_tokens(m, count) for m in open_summaries)
        return len(open_summaries) > 1 and total > self.settings.merge_after_tokens

    async def summarize(self, messages: list[Message], *, merging: bool = False) -> tuple[str, str]:
        """(text, \"model\" | \"extractive\")."""
        settings = self.settings
        if settings.fast_model is not None:
            text = await ask_model(
                settings.fast_model, SUMMARY_PROMPT, transcript(messages), settings.model_timeout_seconds
            )
            return text, "model"
        if merging:  # the bullets of the summaries are the sentences to choose from
            lines = [
                Message.assistant(line.lstrip("- ").split(": ", 1)[-1], importance=0.6)
                for m in messages
                for line in m.content.splitlines()
                if line.strip()
            ]
            return extractive_summary(lines), "extractive"
        return extractive_summary(messages), "extractive"

    async def extract_facts(self, resource_id: str | None, report: dict[str, int]) -> None:
        """Ask the fast model for facts in salient user messages; upsert them."""
        settings = self.settings
        candidates = await self.run(
            ops.ReadFactCandidates(
                resource_id=resource_id, min_importance=settings.fact_min_importance, limit=FACT_BATCH
            )
        )
        by_resource: dict[str, list[Message]] = {}
        for rid, m in candidates:
            by_resource.setdefault(rid, []).append(m)
        for rid, msgs in by_resource.items():
            text = "\n".join(f"- {m.content}" for m in msgs)
            try:
                answer = await ask_model(settings.fast_model, FACTS_PROMPT, text, settings.model_timeout_seconds)
                facts = parse_facts(answer)
                if facts is None:
                    raise ValueError(f"not a JSON array of facts: {answer[:200]!r}")
            except Exception as exc:  # noqa: BLE001 - recorded; nothing marked, so retried next pass
                report["failures"] += 1
                await self._log(rid, None, "facts", f"{type(exc).__name__}: {exc}")
                continue
            for fact in facts:
                try:
                    await self.remember(resource_id=rid, source="consolidation", **fact)
                    report["facts"] += 1
                except UsageError as exc:
                    logger.info("skipped an extracted fact: %s", exc)
            await self.run(ops.MarkFactsExtracted(resource_id=rid, seqs=tuple(m.seq or 0 for m in msgs), now=utcnow()))

    async def _write_summary(
        self, resource_id: str, thread_id: str, summary: Message, seqs: list[Any], holder: str
    ) -> bool:
        op = ops.WriteSummary(
            resource_id=resource_id,
            thread_id=thread_id,
            summary=summary,
            covered=tuple(seqs),
            now=utcnow(),
            holder=holder,
        )
        return await self.run(op)

    async def _log(self, resource_id: str, thread_id: str | None, step: str, detail: str) -> None:
        op = ops.LogConsolidation(
            resource_id=resource_id, thread_id=thread_id, step=step, outcome="failed", detail=detail, now=utcnow()
        )
        await self.run(op)


def _empty_report() -> dict[str, int]:
    return {"summaries": 0, "merges": 0, "facts": 0, "failures": 0}


class Consolidation:
    """Summaries and fact extraction for every resource (``memory.consolidation``).

    Args:
        run: the memory's runner (one operation, one transaction).
        settings: thresholds, the fast model, the interval (``self.settings``).
        remember: upserts one extracted fact (``memory.facts.remember``).
        background: the memory's set of background tasks; a scheduled run
            joins it, so ``Memory.flush`` waits for it and ``Memory.close``
            cancels it.
    """

    def __init__(
        self,
        run: Runner,
        settings: ConsolidationSettings,
        remember: Remember,
        background: set[asyncio.Task[Any]],
    ) -> None:
        self._run = run
        self.settings = settings
        """How and when consolidation runs (``ConsolidationSettings``)."""
        self._consolidator = Consolidator(run, settings, remember)
        self._background = background
        self._scheduled: set[tuple[str, str]] = set()

    async def run(
        self, *, resource_id: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, int]:
        """One consolidation pass: summarise long threads, merge summaries, extract facts.

        Returns counts: ``summaries``, ``merges``, ``facts``, ``failures``.
        Failures are recorded in ``log`` and retried next pass. ``progress(done,
        total)`` is called after each step (a thread, then the facts): the
        CLI's ``consolidate`` shows a bar with it.
        """
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        report = _empty_report()
        settings = self.settings
        # Characters are a cheap upper bound to find candidates (>= 2 chars a token).
        find = ops.FindConsolidationCandidates(resource_id=resource_id, min_chars=settings.summarize_after_tokens * 2)
        candidates = await self._run(find)
        steps = len(candidates) + (settings.fast_model is not None)
        for done, (rid, tid) in enumerate(candidates, 1):
            await self._consolidator.thread(rid, tid, report)
            if progress is not None:
                progress(done, steps)
        if settings.fast_model is not None:
            await self._consolidator.extract_facts(resource_id, report)
            if progress is not None:
                progress(steps, steps)
        return report

    async def summaries(self, *, resource_id: str, thread_id: str) -> list[tuple[Message, bool]]:
        """The thread's summary events, oldest first, each with ``merged`` (folded into a later one)."""
        check_id(resource_id, "resource_id")
        check_id(thread_id, "thread_id")
        return await self._run(ops.ReadSummaries(resource_id=resource_id, thread_id=thread_id))

    async def log(self, *, resource_id: str) -> list[dict[str, Any]]:
        """Consolidation outcomes recorded for the resource (failures, mostly), oldest first."""
        check_id(resource_id, "resource_id")
        return await self._run(ops.ReadConsolidationLog(resource_id=resource_id))

    def schedule(self, *, resource_id: str, thread_id: str) -> None:
        """Consolidate one thread in the background (after a turn); never delays the caller."""
        key = (resource_id, thread_id)
        if key in self._scheduled:
            return
        self._scheduled.add(key)

        async def run() -> None:
            try:
                report = _empty_report()
                await self._consolidator.thread(resource_id, thread_id, report)
                if self.settings.fast_model is not None:
                    await self._consolidator.extract_facts(resource_id, report)
            except Exception:  # the store failed; the next pass will retry
                logger.warning("background consolidation of %s/%s failed", resource_id, thread_id, exc_info=True)
            finally:
                self._scheduled.discard(key)

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
