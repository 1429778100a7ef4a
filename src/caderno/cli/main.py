"""The ``caderno`` command line.

Nouns are groups (``caderno threads list``, ``caderno wm patch``). Output is
for people by default (rich tables) and for programs with ``--json``.
Every caderno error becomes one line on stderr and exit status 1; nothing is
written when a command fails. A usage error (an unknown option, a missing
argument) is click's: its message and exit status 2, before anything runs.
``--db`` and ``--config`` may stand anywhere on the line (``CadernoGroup``).
Each command imports the memory layer (and the rest of caderno it needs) when
it runs, not with this module: ``caderno --help`` and each start load only
what the command uses (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.errors import CadernoError
from ..core.files import atomic_write
from ..core.jsonvalue import loads_strict
from .common import (
    DEFAULT_DB,
    CadernoGroup,
    Progress,
    clip,
    emit_json,
    fail,
    json_option,
    opened,
    plural,
    rich_console,
    run_async,
)
from .import_commands import GROUPS as IMPORT_GROUPS
from .mcp_commands import COMMANDS as MCP_COMMANDS
from .server_commands import COMMANDS as SERVER_COMMANDS
from .server_commands import embed_lease_option
from .state_commands import GROUPS as STATE_GROUPS
from .state_commands import NO_MODEL, sync_report_text

if TYPE_CHECKING:
    from ..core.messages import Message, Thread


@click.group(cls=CadernoGroup)
@click.option(
    "--db",
    envvar="CADERNO_DB",
    default=None,
    help=(
        f"Database URL or SQLite file path (env CADERNO_DB; default: the config's [database] url, else {DEFAULT_DB})."
        " Before or after the command."
    ),
)
@click.option(
    "--config",
    envvar="CADERNO_CONFIG",
    default=None,
    help="caderno.toml: database, [model] and [[scheduled_tasks]] (env CADERNO_CONFIG). Before or after the command.",
)
@click.version_option(package_name="caderno")
@click.pass_context
def main(ctx: click.Context, db: str | None, config: str | None) -> None:
    """caderno: durable memory for AI agents.

    --db and --config may come before or after the command
    (caderno threads list casa --db notes.db), or from CADERNO_DB and CADERNO_CONFIG.

    \b
    Exit status:
      0  done
      1  a caderno error: one line on stderr (caderno: error: ...), nothing written
      2  a usage error (unknown option, missing argument), before anything runs
    """
    from ..agent.config import load_config

    try:
        loaded = load_config(config)
    except CadernoError as exc:
        fail(str(exc))
    # db_given: a database was named (option, environment or config), so "notes" reads its notebook.
    ctx.obj = {
        "db": db or loaded.database_url or DEFAULT_DB,
        "config": loaded,
        "db_given": bool(db or loaded.database_url),
    }


# -- threads -------------------------------------------------------------------


@main.group()
def threads() -> None:
    """Conversation threads."""


@threads.command("list")
@click.argument("resource")
@json_option
@click.pass_context
@run_async
async def threads_list(ctx: click.Context, resource: str, as_json: bool) -> None:
    """List RESOURCE's threads, most recent first."""
    async with opened(ctx) as memory:
        items = await memory.list_threads(resource_id=resource)
    if as_json:
        emit_json([_thread_json(t) for t in items])
        return
    from rich.table import Table

    table = Table("thread", "title", "messages", "updated", title=f"threads of {resource}")
    for t in items:
        table.add_row(t.id, t.title or "", str(t.message_count), f"{t.updated_at:%Y-%m-%d %H:%M}")
    rich_console().print(table)


@threads.command("show")
@click.argument("resource")
@click.argument("thread")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show only the newest N messages.")
@click.option("--raw", is_flag=True, help="Every original message in full, summaries left out.")
@json_option
@click.pass_context
@run_async
async def threads_show(
    ctx: click.Context, resource: str, thread: str, limit: int | None, raw: bool, as_json: bool
) -> None:
    """Show THREAD of RESOURCE, oldest first: summaries stand in for the turns they cover."""
    from ..memory.parts.consolidation import summary_span

    async with opened(ctx) as memory:
        messages = await memory.get_messages(resource_id=resource, thread_id=thread, limit=limit)
        summaries = [] if raw else await memory.consolidation.summaries(resource_id=resource, thread_id=thread)
    live = [s for s, merged in summaries if not merged]
    covered = [span for s, _ in summaries if (span := summary_span(s)) is not None]

    def is_covered(m: Message) -> bool:
        return any(a <= (m.position or 0) <= b for a, b in covered)

    entries = sorted([("message", m) for m in messages] + [("summary", s) for s in live], key=_shown_order)
    if as_json:
        emit_json(
            [
                {**m.to_dict(), "summary": True}
                if kind == "summary"
                else {**m.to_dict(), "consolidated": is_covered(m)}
                for kind, m in entries
            ]
        )
        return
    console = rich_console()
    if not messages:
        console.print(f"(no messages in {resource}/{thread})")
    for kind, m in entries:
        when = f"{m.created_at:%Y-%m-%d %H:%M}" if m.created_at else ""
        if kind == "summary":
            span = summary_span(m)
            of = f"of #{span[0]}–#{span[1]} " if span else ""
            how = (m.metadata or {}).get("summarizer", "?")
            console.print(f"[bold magenta]summary[/] {of}({how}) [dim]{when}[/dim]", markup=True)
            console.print("  " + m.content.replace("\n", "\n  "), markup=False)
            continue
        mark = " [yellow](summarised)[/]" if is_covered(m) else ""
        console.print(f"[bold]{m.role}[/bold] #{m.position} [dim]{when}[/dim]{mark}", markup=True)
        if m.content:
            text = m.content if raw or not is_covered(m) else clip(m.content)
            console.print("  " + text.replace("\n", "\n  "), markup=False)
        for call in m.tool_calls or ():
            console.print(f"  → {call.name}({json.dumps(call.arguments, ensure_ascii=False)})", markup=False)


def _shown_order(entry: tuple[str, Message]) -> tuple[float, int]:
    """Messages by position; a summary just before the first message it covers (as the inspector shows it).

    A summary has no position of its own; one that names no span (its
    messages were deleted before spans existed) goes last.
    """
    from ..memory.parts.consolidation import summary_span

    kind, m = entry
    if kind == "summary":
        span = summary_span(m)
        return (span[0] if span else float("inf"), 0)
    return (m.position or 0, 1)


def _thread_json(t: Thread) -> dict[str, Any]:
    return {
        "id": t.id,
        "title": t.title,
        "metadata": t.metadata,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "message_count": t.message_count,
    }


def _parse_metadata(text: str | None) -> Any:
    """``--metadata``: a JSON object, or ``null`` (which clears it on update)."""
    from ..stores import ops

    if text is None:
        return ops.UNSET
    try:
        return loads_strict(text, "--metadata")
    except CadernoError as exc:
        fail(str(exc))


def _thread_done(verb: str, t: Thread, as_json: bool) -> None:
    if as_json:
        emit_json(_thread_json(t))
        return
    title = f" {t.title!r}" if t.title else ""
    click.echo(f"{verb} thread {t.id}{title} of {t.resource_id} ({t.message_count} messages)")


@threads.command("create")
@click.argument("resource")
@click.argument("thread", required=False)
@click.option("--title", default=None, help="A human title.")
@click.option("--metadata", default=None, help="A JSON object.")
@json_option
@click.pass_context
@run_async
async def threads_create(
    ctx: click.Context, resource: str, thread: str | None, title: str | None, metadata: str | None, as_json: bool
) -> None:
    """Create an empty THREAD of RESOURCE (an id is made when THREAD is omitted)."""
    from ..stores import ops

    parsed = _parse_metadata(metadata)
    async with opened(ctx) as memory:
        made = await memory.threads.create(
            resource_id=resource, thread_id=thread, title=title, metadata=None if parsed is ops.UNSET else parsed
        )
    _thread_done("created", made, as_json)


@threads.command("update")
@click.argument("resource")
@click.argument("thread")
@click.option("--title", default=None, help="The new title.")
@click.option("--clear-title", is_flag=True, help="Remove the title.")
@click.option("--metadata", default=None, help="A JSON object that replaces the metadata; null removes it.")
@json_option
@click.pass_context
@run_async
async def threads_update(
    ctx: click.Context,
    resource: str,
    thread: str,
    title: str | None,
    clear_title: bool,
    metadata: str | None,
    as_json: bool,
) -> None:
    """Change THREAD's title and/or metadata (what is not given is kept)."""
    from ..stores import ops

    if title is not None and clear_title:
        fail("give --title or --clear-title, not both")
    if title is None and not clear_title and metadata is None:
        fail("nothing to change: give --title, --clear-title or --metadata")
    new_title: Any = None if clear_title else (title if title is not None else ops.UNSET)
    parsed = _parse_metadata(metadata)
    async with opened(ctx) as memory:
        updated = await memory.threads.update(resource_id=resource, thread_id=thread, title=new_title, metadata=parsed)
    _thread_done("updated", updated, as_json)


# -- messages ------------------------------------------------------------------

#: Who the message log says made a change from the command line.
CLI_ACTOR = "cli"

_reason_option = click.option("--reason", default=None, help="Why: kept in the message log.")


@main.group()
def messages() -> None:
    """Change stored messages; every change goes to the message log (see `threads show` to read them)."""


def _message_done(verb: str, m: Message | None, as_json: bool, empty: str) -> None:
    if as_json:
        emit_json(m.to_dict() if m else None)
        return
    if m is None:
        click.echo(empty)
        return
    click.echo(f"{verb} {m.role} message #{m.position} ({m.id}): {clip(m.content)}")


@messages.command("pop")
@click.argument("resource")
@click.argument("thread")
@_reason_option
@json_option
@click.pass_context
@run_async
async def messages_pop(ctx: click.Context, resource: str, thread: str, reason: str | None, as_json: bool) -> None:
    """Remove THREAD's newest message (undo a turn, one message at a time)."""
    async with opened(ctx) as memory:
        popped = await memory.messages.pop(resource_id=resource, thread_id=thread, actor=CLI_ACTOR, reason=reason)
    _message_done("popped", popped, as_json, f"(no messages in {resource}/{thread}; nothing popped)")


@messages.command("edit")
@click.argument("resource")
@click.argument("message_id")
@click.argument("content")
@_reason_option
@json_option
@click.pass_context
@run_async
async def messages_edit(
    ctx: click.Context, resource: str, message_id: str, content: str, reason: str | None, as_json: bool
) -> None:
    """Replace the text of MESSAGE_ID with CONTENT (the old text goes to the message log)."""
    async with opened(ctx) as memory:
        edited = await memory.messages.edit(
            resource_id=resource, message_id=message_id, content=content, actor=CLI_ACTOR, reason=reason
        )
    _message_done("edited", edited, as_json, "")


@messages.command("delete")
@click.argument("resource")
@click.argument("message_id")
@_reason_option
@json_option
@click.pass_context
@run_async
async def messages_delete(
    ctx: click.Context, resource: str, message_id: str, reason: str | None, as_json: bool
) -> None:
    """Delete MESSAGE_ID of RESOURCE (the log keeps who, when and why, not the text)."""
    async with opened(ctx) as memory:
        deleted = await memory.messages.delete(
            resource_id=resource, message_id=message_id, actor=CLI_ACTOR, reason=reason
        )
    _message_done("deleted", deleted, as_json, "")


@messages.command("log")
@click.argument("resource")
@click.option("--message", "message_id", default=None, help="Only this message's changes.")
@json_option
@click.pass_context
@run_async
async def messages_log(ctx: click.Context, resource: str, message_id: str | None, as_json: bool) -> None:
    """Show the edits, pops and deletions of RESOURCE's messages, oldest first."""
    async with opened(ctx) as memory:
        entries = await memory.messages.log(resource_id=resource, message_id=message_id)
    if as_json:
        emit_json(entries)
        return
    if not entries:
        click.echo(f"(no changes to the messages of {resource})")
        return
    from rich.table import Column, Table

    # Ids fold rather than clip: they are copied into `messages edit`.
    message = Column("message", overflow="fold")
    table = Table("when", "action", message, "by", "why", "old text", title=f"message log of {resource}")
    for e in entries:
        table.add_row(
            f"{datetime.fromisoformat(e['created_at']):%Y-%m-%d %H:%M}",
            e["action"],
            f"{e['thread_id']} {e['message_id']} ({e['role']})",
            e["actor"],
            e["reason"] or "",
            clip(e["old_content"]) if e["old_content"] is not None else "",
        )
    rich_console().print(table)


# -- working memory ------------------------------------------------------------


@main.group()
def wm() -> None:
    """Working memory (one JSON object per resource)."""


@wm.command("show")
@click.argument("resource")
@json_option
@click.pass_context
@run_async
async def wm_show(ctx: click.Context, resource: str, as_json: bool) -> None:
    """Show RESOURCE's working memory."""
    async with opened(ctx) as memory:
        state = await memory.working_memory.state(resource_id=resource)
    if as_json:
        emit_json({"data": state.data, "version": state.version} if state else None)
        return
    if state is None:
        rich_console().print(f"(no working memory for {resource})")
        return
    from rich.json import JSON

    console = rich_console()
    console.print(f"working memory of {resource} (version {state.version})")
    console.print(JSON.from_data(state.data, ensure_ascii=False))


@wm.command("patch")
@click.argument("resource")
@click.argument("patch")
@click.option("--expected-version", type=int, default=None, help="Apply only if the stored version is this.")
@json_option
@click.pass_context
@run_async
async def wm_patch(ctx: click.Context, resource: str, patch: str, expected_version: int | None, as_json: bool) -> None:
    """Merge-patch RESOURCE's working memory with PATCH (a JSON object)."""
    try:
        parsed = loads_strict(patch, "PATCH")
    except CadernoError as exc:
        fail(str(exc))
    async with opened(ctx) as memory:
        state = await memory.update_working_memory(
            resource_id=resource, patch=parsed, expected_version=expected_version, source="cli"
        )
    if as_json:
        emit_json({"data": state.data, "version": state.version})
    else:
        click.echo(f"working memory of {resource} is now at version {state.version}")


# -- whole resources -------------------------------------------------------------


@main.command("export")
@click.argument("resource")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@click.pass_context
@run_async
async def export_cmd(ctx: click.Context, resource: str, output: Path | None) -> None:
    """Export everything of RESOURCE as JSON.

    A file given with -o is written whole or not at all, readable by its
    owner only (0600, whatever the umask), and never through a symbolic link:
    an export holds every message and fact of the resource.
    """
    # The export is one read: a spinner while it runs, then the bar full with what it held (on stderr,
    # as the summary: stdout may be the export itself).
    with Progress(f"exporting {resource}") as progress:
        async with opened(ctx) as memory:
            dump = await memory.export_resource(resource_id=resource)
        text = json.dumps(dump, ensure_ascii=False, indent=2)
        messages = sum(len(t["messages"]) for t in dump["threads"])
        progress.update(messages, messages)
        held = f"{plural(len(dump['threads']), 'thread')}, {plural(messages, 'message')}"
        if output is None:
            if progress.interactive:
                progress.done(f"exported {resource} ({held})", err=True)
            click.echo(text)
            return
        try:
            atomic_write(output, text + "\n")  # a private temp file (0600), renamed over the path
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                fail(f"cannot write {output}: it is a symbolic link, and caderno never writes an export through one")
            fail(f"cannot write {output}: {exc.strerror or exc}")
        progress.done(f"exported {resource} to {output}", f"exported {resource} ({held})", err=True)


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
@run_async
async def import_cmd(ctx: click.Context, file: Path) -> None:
    """Restore an export FILE into a resource that holds nothing yet."""
    try:
        data = loads_strict(file.read_bytes(), str(file))
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except CadernoError as exc:
        fail(str(exc))
    # One transaction: a spinner while it runs, then the bar full with what was restored.
    with Progress("importing") as progress:
        async with opened(ctx) as memory:
            await memory.import_resource(data)
        messages = sum(len(t["messages"]) for t in data["threads"])  # a valid export: import_resource checked it
        progress.update(messages, messages)
        progress.done(
            f"imported {data['resource_id']} ({plural(len(data['threads']), 'thread')})",
            f"imported {data['resource_id']} ({plural(len(data['threads']), 'thread')}, {plural(messages, 'message')})",
        )


@main.command("erase")
@click.argument("resource")
@click.option("--yes", is_flag=True, help="Confirm: this cannot be undone.")
@click.pass_context
@run_async
async def erase_cmd(ctx: click.Context, resource: str, yes: bool) -> None:
    """Erase everything of RESOURCE (needs --yes)."""
    if not yes:
        fail(f"erase deletes everything of {resource!r} for good; add --yes to confirm")
    async with opened(ctx) as memory:
        await memory.erase_resource(resource_id=resource)
    click.echo(f"erased {resource}")


# -- recall ------------------------------------------------------------------------


@main.command("recall")
@click.argument("resource")
@click.argument("query")
@click.option("--thread", default=None, help="The current thread (recent leg; required with --scope thread).")
@click.option("--scope", type=click.Choice(["resource", "thread"]), default="resource", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=None, help="Keep the best N hits.")
@json_option
@click.pass_context
@run_async
async def recall_cmd(
    ctx: click.Context, resource: str, query: str, thread: str | None, scope: str, top: int | None, as_json: bool
) -> None:
    """Find RESOURCE's past messages about QUERY (embeds pending messages first)."""
    from ..stores import ops

    async with opened(ctx) as memory:
        memory.indexer.elsewhere = lambda: None  # this command embeds what it needs itself, below
        # Every pending message of the resource, not only recall's bound, with a bar on a terminal:
        # the first recall after an import may embed thousands.
        pending = await memory.run(ops.CountPendingEmbeddings(resource_id=resource))
        if pending:
            with Progress("embedding pending messages", pending, quiet=as_json) as progress:
                left = await memory.indexer.embed_pending(resource, everything=True, progress=progress.update)
                summary = f"embedded {pending - left} pending message(s)" + (f"; {left} still wait" if left else "")
                if progress.interactive:
                    progress.done(summary)
        hits = await memory.recall(resource_id=resource, query=query, thread_id=thread, scope=scope, top=top)
    if as_json:
        emit_json(
            [
                {
                    "thread_id": h.thread_id,
                    "message": h.message.to_dict(),
                    "reasons": sorted(h.reasons),
                    "score": h.score,
                    "scores": h.scores,
                }
                for h in hits
            ]
        )
        return
    if not hits:
        click.echo("(nothing found)")
        return
    from rich.table import Table

    table = Table("thread", "when", "role", "message", "found by", title=f"recall: {query}")
    for h in hits:
        when = f"{h.message.created_at:%Y-%m-%d %H:%M}" if h.message.created_at else ""
        table.add_row(h.thread_id, when, h.message.role, h.message.content, ", ".join(sorted(h.reasons)))
    rich_console().print(table)


@main.command("consolidate")
@click.argument("resource", required=False)
@json_option
@click.pass_context
@run_async
async def consolidate_cmd(ctx: click.Context, resource: str | None, as_json: bool) -> None:
    """Run one consolidation pass: summarise long threads (all resources when RESOURCE is omitted)."""
    with Progress("consolidating", quiet=as_json) as progress:
        async with opened(ctx) as memory:
            report = await memory.consolidation.run(resource_id=resource, progress=progress.update)
        if as_json:
            emit_json(report)
            return
        progress.done(
            f"consolidated: {plural(report['summaries'], 'summary', 'summaries')}, "
            f"{plural(report['merges'], 'merge')}, {plural(report['facts'], 'fact')}, "
            f"{plural(report['failures'], 'failure')}"
        )


@main.command("worker")
@click.option(
    "--interval-hours",
    type=float,
    default=None,
    help="Time between consolidation passes (default: the config's consolidation_interval_hours, else 6).",
)
@click.option(
    "--nice",
    "niceness",
    type=click.IntRange(0, 19),
    default=0,
    show_default=True,
    help="Lower this process's CPU priority by N, so request-serving processes on the machine go first.",
)
@click.option("--parent-pipe", is_flag=True, hidden=True, help="serve's own worker: see _follow_parent.")
@embed_lease_option
@click.pass_context
@run_async
async def worker_cmd(
    ctx: click.Context, interval_hours: float | None, niceness: int, parent_pipe: bool, embed_lease: float
) -> None:
    """Run until stopped: embed pending messages, consolidate every INTERVAL, run due scheduled tasks.

    Messages appended by any process are embedded as they come: the worker
    looks at the queue every 2 s (on PostgreSQL also at once, on the
    appending process's notice), and takes up a batch whose worker died once
    its lease (--embed-lease) runs out. It prints a line per batch.

    With a config file, its [[scheduled_tasks]] are synced at start, and due
    tasks are looked for every few seconds when it names a [model].
    Ctrl-C or SIGTERM stops it; a turn in flight is committed whole or not at all.
    caderno serve starts one of these as its own child.
    """
    from ..agent import scheduler

    if niceness:
        os.nice(niceness)
    config = ctx.obj["config"]
    model = config.chat_model()
    wanted = config.tasks() if config.path is not None and not parent_pipe else None  # serve synced them
    try:
        async with opened(ctx) as memory:
            memory.indexer.lease_seconds = embed_lease
            every = interval_hours if interval_hours is not None else memory.consolidation.settings.interval_hours
            if not parent_pipe:
                click.echo(f"caderno worker on {ctx.obj['db']}: a pass every {every:g} h (Ctrl-C to stop)", err=True)
            if wanted is not None:
                click.echo(sync_report_text(await memory.tasks.sync_config(wanted)), err=True)
            if parent_pipe:
                jobs = [memory.run_background(interval_hours=every)]
            else:
                jobs = [_backlog_first(memory, lambda: memory.run_background(interval_hours=every))]
            if parent_pipe:
                jobs.append(_follow_parent(memory))
            if model is None:
                click.echo(f"{NO_MODEL}; this worker only embeds and consolidates", err=True)
            else:
                from ..agent.chat import AgentChat

                chat = AgentChat(model=model, memory=memory, schedule_tool=True)
                jobs.append(scheduler.run_forever(memory, chat))
                if not parent_pipe:
                    click.echo(f"running due tasks every {scheduler.POLL_SECONDS:g} s", err=True)
            await _until_stopped(jobs)
            if not parent_pipe:
                click.echo("caderno worker stopped", err=True)
    finally:
        if model is not None:  # the chat model; consolidation's [model.fast] is closed with the memory
            await model.aclose()


async def _backlog_first(memory: Any, background: Callable[[], Awaitable[None]]) -> None:
    """The worker's start-up: the messages already waiting embedded behind a bar (one summary line when
    piped), then the background work, a line per batch.

    A backlog of thousands (after an import) took minutes that passed as a
    line per batch. Progress is counted from the queue, as ``reindex`` does:
    batches other workers take count too. One job of the worker's, so a stop
    during the backlog stops it as any other time.
    """
    from ..stores import ops

    count = ops.CountPendingEmbeddings()
    if memory.indexer.active and memory.supports(ops.CountPendingEmbeddings) and (backlog := await memory.run(count)):
        with Progress("embedding the waiting messages", backlog) as progress:
            while await memory.indexer.run_once():
                progress.update(max(0, backlog - await memory.run(count)))
            left = await memory.run(count)
            progress.done(
                f"embedded {backlog - left} waiting message(s)"
                + (f"; {left} still wait (failed and retried later, or embedding in another worker)" if left else ""),
                err=True,
            )
    memory.indexer.reported = _report_batch
    await background()


def _report_batch(queue: str, embedded: int, failed: int) -> None:
    """The worker's line per embedding batch (on stderr, as its other lines)."""
    line = f"embedded {embedded} {queue}"
    click.echo(line + (f", {failed} failed (retried later)" if failed else ""), err=True)


async def _follow_parent(memory: Any) -> None:
    """Serve's worker: each byte on stdin wakes the embedder (an append landed); end of file stops the worker.

    The server writes a byte after each append instead of embedding in its
    own process, and holds the pipe's other end: when the server exits, even
    killed, the pipe closes and this worker finishes its batch and stops.
    """
    loop = asyncio.get_running_loop()
    closed = loop.create_future()

    class Wakes(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            memory.indexer.notify()

        def connection_lost(self, exc: Exception | None) -> None:
            if not closed.done():
                closed.set_result(None)

    transport, _ = await loop.connect_read_pipe(Wakes, sys.stdin)
    try:
        await closed
    finally:
        transport.close()


async def _until_stopped(jobs: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``jobs`` until SIGINT or SIGTERM (or one of them fails), then cancel and await them all."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl-C still ends asyncio.run
            pass
    running = [asyncio.ensure_future(job) for job in jobs]
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait([*running, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (*running, stopper):
            task.cancel()
        await asyncio.gather(*running, stopper, return_exceptions=True)
    for task in done:
        if task is not stopper and not task.cancelled() and (exc := task.exception()) is not None:
            raise exc


@main.command("reindex")
@click.argument("resource", required=False)
@click.pass_context
@run_async
async def reindex_cmd(ctx: click.Context, resource: str | None) -> None:
    """Embed RESOURCE's messages again (all resources when omitted), e.g. after a model change."""
    from ..stores import ops

    async with opened(ctx) as memory:
        # This command embeds in its own loop: the background worker that reindex's notify would
        # start here took every other batch unseen by the bar, which stopped at 15-49 %.
        memory.indexer.elsewhere = lambda: None
        with Progress("embedding") as progress:
            queued = await memory.reindex(resource_id=resource)
            count = ops.CountPendingEmbeddings(resource_id=resource)
            progress.update(0, queued)
            while await memory.indexer.run_once():
                # Counted from the queue: batches other workers take count too.
                progress.update(max(0, queued - await memory.run(count)))
            left = await memory.run(count)
            if memory.indexer.unavailable:
                fail(f"cannot embed: {memory.indexer.unavailable}")
            progress.done(
                f"re-embedded {queued - left} message(s)"
                + (f"; {left} wait (failed and retried later, or embedding in another worker)" if left else "")
            )


# -- notebook -------------------------------------------------------------------


def _notebook(directory: Path | None) -> Any:
    from ..core.files import caderno_home
    from ..memory.adapters.notebook_files import Notebook

    return Notebook(directory or caderno_home() / "notebook")


_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Notebook directory (default $CADERNO_HOME/notebook).",
)
_resource_option = click.option(
    "--resource",
    default=None,
    help="The resource's notebook in the database (--db) instead of a directory: what serve, MCP and the proxy use.",
)
_target_arg = click.argument("target", type=click.Choice(["memory", "user"]))


@main.group()
def notes() -> None:
    """The notebook: MEMORY.md and USER.md, in the database (--resource) or in a folder (--dir).

    With a database named (--db, CADERNO_DB or the config's [database]) the
    commands read and write its notebook and need --resource; otherwise they use
    the folder --dir (default $CADERNO_HOME/notebook).
    """


async def _stored(ctx: click.Context, resource: str, work: Any) -> Any:
    async with opened(ctx) as memory:
        return await work(memory.notebook(resource))


@notes.command("show")
@click.option("--target", type=click.Choice(["memory", "user"]), default=None, help="Only one of the two files.")
@_dir_option
@_resource_option
@json_option
@click.pass_context
def notes_show(
    ctx: click.Context, target: str | None, directory: Path | None, resource: str | None, as_json: bool
) -> None:
    """Show the notebook as the model sees it at the start of a session."""
    targets = [target] if target else ["memory", "user"]
    _check_notebook_choice(ctx, directory, resource)
    try:
        if resource is not None:

            async def read(book: Any) -> tuple[dict[str, Any], dict[str, Any]]:
                found = await book.read()
                return {t: found[t] for t in targets}, book.render(found)

            entries, blocks = run_async(_stored)(ctx, resource, read)
        else:
            nb = _notebook(directory).load()
            entries = {t: nb.readable_entries(t) for t in targets}  # null: that file cannot be read
            blocks = {t: nb.snapshot(t) for t in targets}
        if as_json:
            emit_json(entries)
            return
        for t in targets:
            click.echo(blocks[t] or f"({t}: empty)")
            click.echo()
    except CadernoError as exc:
        fail(str(exc))


def _check_notebook_choice(ctx: click.Context, directory: Path | None, resource: str | None) -> None:
    """With a database named (--db, CADERNO_DB or the config) the notebook is the database's: it needs --resource.

    Reading the home directory's files instead, as before, showed a notebook
    no server, MCP or proxy ever writes, while the user asked for the database.
    """
    if directory is None and resource is None and ctx.obj.get("db_given"):
        fail(
            f"the notebook in {ctx.obj['db']} belongs to a resource: add --resource NAME "
            "(or --dir DIR for a notebook folder)"
        )


def _notes_run(
    ctx: click.Context, action: str, target: str, directory: Path | None, resource: str | None, content: str | None,
    old: str | None,
) -> None:  # fmt: skip
    _check_notebook_choice(ctx, directory, resource)
    try:
        if resource is not None:

            async def edit(book: Any) -> Any:
                return await book.apply(action, target, content, old)

            outcome = run_async(_stored)(ctx, resource, edit)
        else:
            outcome = _notebook(directory).apply(action, target, content, old)
    except CadernoError as exc:
        fail(str(exc).replace("\n", " | "))
    click.echo(
        f"{outcome.message} {outcome.target}: {plural(outcome.entry_count, 'entry', 'entries')}, {outcome.usage}"
    )


@notes.command("add")
@_target_arg
@click.argument("content")
@_dir_option
@_resource_option
@click.pass_context
def notes_add(ctx: click.Context, target: str, content: str, directory: Path | None, resource: str | None) -> None:
    """Add CONTENT as a new entry of TARGET."""
    _notes_run(ctx, "add", target, directory, resource, content, None)


@notes.command("replace")
@_target_arg
@click.argument("old_text")
@click.argument("content")
@_dir_option
@_resource_option
@click.pass_context
def notes_replace(
    ctx: click.Context, target: str, old_text: str, content: str, directory: Path | None, resource: str | None
) -> None:
    """Replace the entry containing OLD_TEXT with CONTENT."""
    _notes_run(ctx, "replace", target, directory, resource, content, old_text)


@notes.command("remove")
@_target_arg
@click.argument("old_text")
@_dir_option
@_resource_option
@click.pass_context
def notes_remove(ctx: click.Context, target: str, old_text: str, directory: Path | None, resource: str | None) -> None:
    """Remove the entry containing OLD_TEXT."""
    _notes_run(ctx, "remove", target, directory, resource, None, old_text)


_folder = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The notebook folder (MEMORY.md, USER.md).",
)


@notes.command("export")
@click.option("--resource", required=True, help="Whose notebook, in the database (--db).")
@_folder
@click.pass_context
def notes_export(ctx: click.Context, resource: str, directory: Path) -> None:
    """Write a resource's database notebook to a folder as MEMORY.md and USER.md (replacing them)."""
    from ..memory.adapters.notebook_files import Notebook

    try:
        entries: dict[str, list[str]] = run_async(_stored)(ctx, resource, lambda book: book.read())
        folder = Notebook(directory)
        for target, found in entries.items():
            folder.replace_all(target, found)
    except CadernoError as exc:
        fail(str(exc))
    counts = f"{plural(len(entries['memory']), 'memory entry', 'memory entries')} and {plural(len(entries['user']), 'user entry', 'user entries')}"
    click.echo(f"exported {counts} to {directory}")


@notes.command("import")
@click.option("--resource", required=True, help="Whose notebook, in the database (--db).")
@_folder
@click.pass_context
def notes_import(ctx: click.Context, resource: str, directory: Path) -> None:
    """Replace a resource's database notebook with a folder's MEMORY.md and USER.md (each entry checked)."""
    from ..memory.adapters.notebook_files import Notebook

    folder = Notebook(directory)

    async def take(book: Any) -> dict[str, int]:
        counts = {}
        for target in ("memory", "user"):
            entries = folder.entries(target)  # an unreadable file refuses the import: nothing is half-done
            await book.replace_all(target, entries)
            counts[target] = len(await book.entries(target))
        return counts

    try:
        counts = run_async(_stored)(ctx, resource, take)
    except CadernoError as exc:
        fail(str(exc).replace("\n", " | "))
    took = f"{plural(counts['memory'], 'memory entry', 'memory entries')} and {plural(counts['user'], 'user entry', 'user entries')}"
    click.echo(f"imported {took} into {resource!r}")


# -- journals ---------------------------------------------------------------------


@main.group("memory")
@click.argument("store")
@click.pass_context
def journal(ctx: click.Context, store: str) -> None:
    """The journals: append-only JSONL records; STORE is episodic, semantic, procedural, decision or transcript.

    "memory" is the design's name for the journals (caderno memory semantic add
    --record '{...}'); "caderno journal STORE ..." is the same group under
    another name, with the same output. The conversation memory itself (threads,
    working memory, notebook, recall) is in the other commands: threads, wm,
    notes, recall.
    """
    from ..memory.adapters.journal import Journal

    try:
        Journal.check_store(store)
    except CadernoError as exc:
        fail(str(exc))
    ctx.obj = {**ctx.obj, "store": store}


_journal_dir = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Journal directory (default $CADERNO_HOME/journal).",
)


@journal.command("add")
@click.option("--record", default=None, help="The record, a JSON object.")
@click.option("--agent", default="cli", show_default=True, help="Who writes it.")
@_journal_dir
@click.pass_context
def journal_add(ctx: click.Context, record: str | None, agent: str, directory: Path | None) -> None:
    """Append one record; prints its id, then the file it went to."""
    from ..memory.adapters.journal import Journal

    store = ctx.obj["store"]
    if record is None:
        fail("memory add requires --record <json>")
    try:
        data = loads_strict(record, "--record")
    except CadernoError as exc:
        fail(str(exc))
    if not isinstance(data, dict):
        fail(f"--record must be a JSON object, not {type(data).__name__}")
    j = Journal(directory)
    try:
        entry_id = j.append(store, data, agent=agent)
    except CadernoError as exc:
        fail(str(exc))
    click.echo(f"memory {store}: appended {entry_id} (agent {agent})")
    click.echo(f"  {j.path(store)}")


@journal.command("list")
@click.option("--agent", default=None, help="Only this agent's records.")
@_journal_dir
@json_option
@click.pass_context
def journal_list(ctx: click.Context, agent: str | None, directory: Path | None, as_json: bool) -> None:
    """List records, newest first, as the design prints them.

    A header, memory <store>: N record(s) under <file>, then one indented line
    per record: <id> [agent <name>] at <timestamp>.
    """
    from ..memory.adapters.journal import Journal

    store = ctx.obj["store"]
    j = Journal(directory)
    entries = j.list(store, agent=agent)
    if as_json:
        emit_json(entries)
        return
    click.echo(f"memory {store}: {len(entries)} record(s) under {j.path(store)}")
    for e in entries:
        click.echo(f"  {e['id']} [agent {e.get('agent')}] at {e.get('timestamp')}")


main.add_command(journal, "journal")


@main.command("demo")
@click.option(
    "--day",
    type=click.Choice(["monday", "wednesday"]),
    default=None,
    help="Play one day only (the demo runs each day in its own process).",
)
@click.pass_context
def demo_cmd(ctx: click.Context, day: str | None) -> None:
    """Monday and Wednesday as two processes on one SQLite file."""
    from . import demo

    db = ctx.obj["db"]
    if day is not None:
        fn = demo.monday if day == "monday" else demo.wednesday
        run_async(fn)(db, click.echo)
        return
    import subprocess

    click.echo(f"caderno demo — banco: {db} (SQLite, sem rede, sem chave de API)")
    click.echo(f"{demo.STORY_DATES}\n")
    for d in ("monday", "wednesday"):
        proc = subprocess.run([sys.executable, "-m", "caderno.cli", "--db", db, "demo", "--day", d])
        if proc.returncode != 0:
            sys.exit(proc.returncode)
        click.echo()
    click.echo(
        f"Veja o que ficou guardado: {demo.self_command()} --db {shlex.quote(str(db))} threads list {demo.RESOURCE}"
    )


for command in (*STATE_GROUPS, *IMPORT_GROUPS, *SERVER_COMMANDS, *MCP_COMMANDS):
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    main()
