"""The CLI's commands for an agent's other state: ``tasks``, ``facts``, ``macros``, ``prefixes``.

Kept apart from ``caderno.cli.main`` for size; ``main`` registers these groups on
``main``. The helpers (``run_async``, ``opened``, ``--json`` output, one-line
errors) are the ones every other command uses.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import click

from .common import clip, emit_json, fail, json_option, opened, rich_console, run_async

if TYPE_CHECKING:
    from ..core.records import ScheduledTask

__all__ = ["GROUPS", "NO_MODEL", "sync_report_text"]


def _local(moment: datetime | None, timezone: str, *, with_utc: bool = True) -> str:
    """A moment as the task's time zone reads it (and in UTC beside it, unless told not to)."""
    if moment is None:
        return "—"
    local = moment.astimezone(ZoneInfo(timezone))
    text = f"{local:%Y-%m-%d %H:%M} {timezone}"
    if with_utc and timezone != "UTC":
        text += f" ({moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"
    return text


def _task_json(task: ScheduledTask) -> dict[str, Any]:
    return dataclasses.asdict(task)


def _when_text(task: ScheduledTask) -> str:
    """The cron line, or the one-shot's moment."""
    if task.is_oneshot:
        return f"once at {_local(task.next_run_at, task.timezone)}"
    return f"cron {task.cron_expr} ({task.timezone})"


# -- tasks --------------------------------------------------------------------------


@click.group()
def tasks() -> None:
    """Scheduled tasks: a prompt the agent is asked on a schedule."""


@tasks.command("list")
@click.argument("resource", required=False)
@json_option
@click.pass_context
@run_async
async def tasks_list(ctx: click.Context, resource: str | None, as_json: bool) -> None:
    """List RESOURCE's tasks by name (every resource's when omitted)."""
    async with opened(ctx) as memory:
        items = await memory.tasks.list(resource_id=resource)
    if as_json:
        emit_json([_task_json(t) for t in items])
        return
    if not items:
        click.echo(f"(no scheduled tasks{f' for {resource}' if resource else ''})")
        return
    from rich.table import Table

    table = Table("resource", "name", "schedule", "cron", "next run", "state", "source", "prompt", title="tasks")
    for t in items:
        state = "paused" if t.is_paused else "active"
        table.add_row(
            t.resource_id,
            t.name,
            t.original_schedule,
            t.cron_expr or "once",
            "—" if t.is_paused else _local(t.next_run_at, t.timezone, with_utc=False),
            state + (", trusted" if t.is_trusted else ""),
            t.source,
            clip(t.prompt, 40),
        )
    rich_console().print(table)


def _task_done(verb: str, task: ScheduledTask, as_json: bool) -> None:
    if as_json:
        emit_json(_task_json(task))
        return
    state = " (paused)" if task.is_paused else ""
    click.echo(f"{verb} task {task.name!r} of {task.resource_id}: {_when_text(task)}{state}")
    if not task.is_paused:
        click.echo(f"next run: {_local(task.next_run_at, task.timezone)}")


@tasks.command("add")
@click.argument("resource")
@click.argument("name")
@click.argument("schedule")
@click.argument("prompt")
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone the schedule is read in.")
@click.option("--thread", default=None, help="The thread the runs go to (default task:NAME).")
@click.option("--trusted", is_flag=True, help="The task's tools skip the approval question.")
@json_option
@click.pass_context
@run_async
async def tasks_add(
    ctx: click.Context,
    resource: str,
    name: str,
    schedule: str,
    prompt: str,
    timezone: str,
    thread: str | None,
    trusted: bool,
    as_json: bool,
) -> None:
    """Ask the agent PROMPT as RESOURCE on SCHEDULE ("daily at 9am", "todo dia às 9h", "in 2 hours", a cron line…)."""
    async with opened(ctx) as memory:
        task = await memory.tasks.add(
            resource_id=resource,
            name=name,
            schedule=schedule,
            prompt=prompt,
            timezone=timezone,
            thread_id=thread,
            trusted=trusted,
        )
    _task_done("added", task, as_json)


def _task_change(verb: str, method: str) -> Any:
    @click.argument("resource")
    @click.argument("name")
    @json_option
    @click.pass_context
    @run_async
    async def command(ctx: click.Context, resource: str, name: str, as_json: bool) -> None:
        async with opened(ctx) as memory:
            task = await getattr(memory.tasks, method)(resource_id=resource, name=name)
        _task_done(verb, task, as_json)

    return command


tasks.command("pause", help="Stop task NAME of RESOURCE from firing until it is resumed.")(
    _task_change("paused", "pause")
)
tasks.command("resume", help="Let paused task NAME of RESOURCE fire again, from its next slot.")(
    _task_change("resumed", "resume")
)


@tasks.command("delete")
@click.argument("resource")
@click.argument("name")
@click.pass_context
@run_async
async def tasks_delete(ctx: click.Context, resource: str, name: str) -> None:
    """Delete task NAME of RESOURCE."""
    async with opened(ctx) as memory:
        await memory.tasks.delete(resource_id=resource, name=name)
    click.echo(f"deleted task {name!r} of {resource}")


def sync_report_text(report: dict[str, int]) -> str:
    """``tasks sync``'s and the worker's one line about a config sync."""
    return (
        f"config tasks: {report['added']} added, {report['updated']} updated, {report['deleted']} deleted, "
        f"{report['skipped']} skipped (a tool-made task holds the name)"
    )


@tasks.command("sync")
@json_option
@click.pass_context
@run_async
async def tasks_sync(ctx: click.Context, as_json: bool) -> None:
    """Make the config file's [[scheduled_tasks]] the config tasks: add, update, delete (tool-made tasks are kept)."""
    config = ctx.obj["config"]
    if config.path is None:
        fail("tasks sync needs a config file: give --config caderno.toml or set CADERNO_CONFIG")
    wanted = config.tasks()
    async with opened(ctx) as memory:
        report = await memory.tasks.sync_config(wanted)
    if as_json:
        emit_json(report)
    else:
        click.echo(sync_report_text(report))


#: What ``run-due`` and the worker say when the config names no model.
NO_MODEL = "scheduled tasks need a model: set [model] in caderno.toml (give it with --config or CADERNO_CONFIG)"


def _parse_now(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--now is not an ISO 8601 moment: {text!r}")
    if moment.tzinfo is None:
        fail(f"--now needs a time zone offset, such as {text}+00:00 or {text}Z")
    return moment


@tasks.command("run-due")
@click.option("--now", "now_text", default=None, help="The moment to run as (ISO 8601 with an offset; default: now).")
@json_option
@click.pass_context
@run_async
async def tasks_run_due(ctx: click.Context, now_text: str | None, as_json: bool) -> None:
    """Run the tasks due now, once each, with the config's [model]; print what ran."""
    from ..agent import scheduler
    from ..agent.chat import AgentChat

    now = _parse_now(now_text)
    model = ctx.obj["config"].chat_model()
    if model is None:
        fail(NO_MODEL)
    try:
        async with opened(ctx) as memory:
            runs = await scheduler.run_due(memory, AgentChat(model=model, memory=memory, schedule_tool=True), now=now)
    finally:
        await model.aclose()
    if as_json:
        emit_json(
            [
                {
                    "resource_id": r.task.resource_id,
                    "name": r.task.name,
                    "thread_id": r.task.thread_id,
                    "reply": r.result.reply.content if r.result else None,
                    "error": r.error,
                }
                for r in runs
            ]
        )
        return
    if not runs:
        click.echo("(no tasks due)")
    for r in runs:
        where = f"{r.task.resource_id}/{r.task.name} (thread {r.task.thread_id})"
        if r.result is not None:
            click.echo(f"ran {where}: {clip(r.result.reply.content)}")
        else:
            click.echo(f"failed {where}: {r.error}")


# -- facts --------------------------------------------------------------------------


@click.group()
def facts() -> None:
    """Facts: one value per (resource, category, key), with the earlier values kept."""


@facts.command("list")
@click.argument("resource")
@click.option("--category", default=None, help="Only this category.")
@json_option
@click.pass_context
@run_async
async def facts_list(ctx: click.Context, resource: str, category: str | None, as_json: bool) -> None:
    """List RESOURCE's facts, most recently updated first."""
    async with opened(ctx) as memory:
        items = await memory.facts.list(resource_id=resource, category=category)
    if as_json:
        emit_json([dataclasses.asdict(f) for f in items])
        return
    from rich.table import Table

    table = Table("category", "key", "value", "source", "updated", title=f"facts of {resource}")
    for f in items:
        table.add_row(f.category, f.key, f.value, f.source, f"{f.updated_at:%Y-%m-%d %H:%M}" if f.updated_at else "")
    rich_console().print(table)


@facts.command("add")
@click.argument("resource")
@click.argument("category")
@click.argument("key")
@click.argument("value")
@json_option
@click.pass_context
@run_async
async def facts_add(ctx: click.Context, resource: str, category: str, key: str, value: str, as_json: bool) -> None:
    """Set fact CATEGORY/KEY of RESOURCE to VALUE (source user; an earlier value goes to its history)."""
    async with opened(ctx) as memory:
        fact = await memory.facts.remember(resource_id=resource, category=category, key=key, value=value, source="user")
    if as_json:
        emit_json(dataclasses.asdict(fact))
    else:
        click.echo(f"fact {fact.category}/{fact.key} of {resource} = {fact.value}")


@facts.command("forget")
@click.argument("resource")
@click.argument("category")
@click.argument("key")
@click.pass_context
@run_async
async def facts_forget(ctx: click.Context, resource: str, category: str, key: str) -> None:
    """Delete fact CATEGORY/KEY of RESOURCE (its history stays)."""
    async with opened(ctx) as memory:
        await memory.facts.forget(resource_id=resource, category=category, key=key)
    click.echo(f"forgot fact {category.lower()}/{key} of {resource}")


@facts.command("history")
@click.argument("resource")
@click.argument("category")
@click.argument("key")
@json_option
@click.pass_context
@run_async
async def facts_history(ctx: click.Context, resource: str, category: str, key: str, as_json: bool) -> None:
    """Show the earlier values of fact CATEGORY/KEY of RESOURCE, oldest first."""
    async with opened(ctx) as memory:
        entries = await memory.facts.history(resource_id=resource, category=category, key=key)
    if as_json:
        emit_json(entries)
        return
    if not entries:
        click.echo(f"(no earlier values of {category.lower()}/{key})")
        return
    from rich.table import Table

    table = Table("value", "source", "from", "replaced", title=f"history of {category.lower()}/{key}")
    for e in entries:
        table.add_row(str(e.get("value")), str(e.get("source")), str(e.get("valid_from")), str(e.get("replaced_at")))
    rich_console().print(table)


# -- macros -------------------------------------------------------------------------


@click.group()
def macros() -> None:
    """Tool macros the agent learned: after one tool, which call usually follows."""


@macros.command("list")
@click.argument("resource")
@json_option
@click.pass_context
@run_async
async def macros_list(ctx: click.Context, resource: str, as_json: bool) -> None:
    """List RESOURCE's macros, most confident first."""
    import json

    async with opened(ctx) as memory:
        items = await memory.macros.list(resource_id=resource)
    if as_json:
        emit_json([dataclasses.asdict(m) for m in items])
        return
    from rich.table import Table

    table = Table("after tool", "pattern", "next tool", "args", "confidence", "uses", title=f"macros of {resource}")
    for m in items:
        table.add_row(
            m.trigger_tool,
            m.trigger_pattern,
            m.next_tool,
            json.dumps(m.next_args, ensure_ascii=False),
            f"{m.confidence:.2f}",
            str(m.used_count),
        )
    rich_console().print(table)


# -- prefixes -----------------------------------------------------------------------


@click.group()
def prefixes() -> None:
    """Command prefixes approved for good: a command starting with one runs unasked."""


@prefixes.command("list")
@click.argument("resource")
@json_option
@click.pass_context
@run_async
async def prefixes_list(ctx: click.Context, resource: str, as_json: bool) -> None:
    """List RESOURCE's approved prefixes."""
    async with opened(ctx) as memory:
        items = await memory.prefixes.list(resource_id=resource)
    if as_json:
        emit_json(items)
        return
    if not items:
        click.echo(f"(no approved prefixes for {resource})")
    for p in items:
        click.echo(p)


@prefixes.command("allow")
@click.argument("resource")
@click.argument("prefix")
@click.pass_context
@run_async
async def prefixes_allow(ctx: click.Context, resource: str, prefix: str) -> None:
    """Approve every command of RESOURCE that starts with PREFIX's words ("git status", "ls")."""
    async with opened(ctx) as memory:
        normalised = await memory.prefixes.allow_always(resource_id=resource, prefix=prefix)
    click.echo(f"allowed {normalised!r} for {resource}")


@prefixes.command("revoke")
@click.argument("resource")
@click.argument("prefix")
@click.pass_context
@run_async
async def prefixes_revoke(ctx: click.Context, resource: str, prefix: str) -> None:
    """Withdraw RESOURCE's approval of PREFIX."""
    async with opened(ctx) as memory:
        await memory.prefixes.revoke(resource_id=resource, prefix=prefix)
    click.echo(f"revoked {prefix!r} for {resource}")


@prefixes.command("check")
@click.argument("resource")
@click.argument("command")
@json_option
@click.pass_context
@run_async
async def prefixes_check(ctx: click.Context, resource: str, command: str, as_json: bool) -> None:
    """Say whether COMMAND would run unasked for RESOURCE.

    Prints "allowed" or "not allowed" and exits 0 either way, so a script
    can tell the answer from a failure (a failure exits 1 with a line on
    stderr); with --json it prints {"command": …, "allowed": true|false}.
    """
    async with opened(ctx) as memory:
        allowed = await memory.prefixes.is_allowed(resource_id=resource, command=command)
    if as_json:
        emit_json({"command": command, "allowed": allowed})
    else:
        click.echo("allowed" if allowed else "not allowed")


#: The groups ``caderno.cli`` adds to ``main``.
GROUPS = (tasks, facts, macros, prefixes)
