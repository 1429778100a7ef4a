"""The ``caderno`` command line.

Nouns are groups (``caderno threads list``, ``caderno wm patch``). Output is
for people by default (rich tables) and for programs with ``--json``.
Every caderno error becomes one line on stderr and exit status 1; nothing is
written when a command fails.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .errors import CadernoError
from .memory import Memory, connect

T = TypeVar("T")


def _fail(message: str) -> None:
    click.echo(f"caderno: error: {message}", err=True)
    sys.exit(1)


def run_async(fn: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    """Run an async command body; turn caderno errors into one clear line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return asyncio.run(fn(*args, **kwargs))
        except CadernoError as exc:
            _fail(str(exc))

    return wrapper


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


async def _memory(ctx: click.Context) -> Memory:
    return await connect(ctx.obj["db"])


@click.group()
@click.option(
    "--db",
    envvar="CADERNO_DB",
    default="caderno.db",
    show_default=True,
    help="Database URL or SQLite file path (env CADERNO_DB).",
)
@click.version_option(package_name="caderno")
@click.pass_context
def main(ctx: click.Context, db: str) -> None:
    """caderno: durable memory for AI agents."""
    ctx.obj = {"db": db}


# -- threads -------------------------------------------------------------------


@main.group()
def threads() -> None:
    """Conversation threads."""


@threads.command("list")
@click.argument("resource")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@run_async
async def threads_list(ctx: click.Context, resource: str, as_json: bool) -> None:
    """List RESOURCE's threads, most recent first."""
    memory = await _memory(ctx)
    try:
        items = await memory.list_threads(resource_id=resource)
    finally:
        await memory.close()
    if as_json:
        _emit_json(
            [
                {
                    "id": t.id,
                    "title": t.title,
                    "metadata": t.metadata,
                    "created_at": t.created_at,
                    "updated_at": t.updated_at,
                    "message_count": t.message_count,
                }
                for t in items
            ]
        )
        return
    from rich.table import Table

    table = Table("thread", "title", "messages", "updated", title=f"threads of {resource}")
    for t in items:
        table.add_row(t.id, t.title or "", str(t.message_count), f"{t.updated_at:%Y-%m-%d %H:%M}")
    _console().print(table)


@threads.command("show")
@click.argument("resource")
@click.argument("thread")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show only the newest N messages.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@run_async
async def threads_show(ctx: click.Context, resource: str, thread: str, limit: int | None, as_json: bool) -> None:
    """Show the messages of THREAD of RESOURCE, oldest first."""
    memory = await _memory(ctx)
    try:
        messages = await memory.get_messages(resource_id=resource, thread_id=thread, limit=limit)
    finally:
        await memory.close()
    if as_json:
        _emit_json([m.to_dict() for m in messages])
        return
    console = _console()
    if not messages:
        console.print(f"(no messages in {resource}/{thread})")
    for m in messages:
        when = f"{m.created_at:%Y-%m-%d %H:%M}" if m.created_at else ""
        console.print(f"[bold]{m.role}[/bold] [dim]{when}[/dim]", markup=True)
        if m.content:
            console.print("  " + m.content.replace("\n", "\n  "), markup=False)
        for call in m.tool_calls or ():
            console.print(f"  → {call.name}({json.dumps(call.arguments, ensure_ascii=False)})", markup=False)


# -- working memory ------------------------------------------------------------


@main.group()
def wm() -> None:
    """Working memory (one JSON object per resource)."""


@wm.command("show")
@click.argument("resource")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@run_async
async def wm_show(ctx: click.Context, resource: str, as_json: bool) -> None:
    """Show RESOURCE's working memory."""
    memory = await _memory(ctx)
    try:
        state = await memory.get_working_memory_state(resource_id=resource)
    finally:
        await memory.close()
    if as_json:
        _emit_json({"data": state.data, "version": state.version} if state else None)
        return
    if state is None:
        _console().print(f"(no working memory for {resource})")
        return
    from rich.json import JSON

    console = _console()
    console.print(f"working memory of {resource} (version {state.version})")
    console.print(JSON.from_data(state.data, ensure_ascii=False))


@wm.command("patch")
@click.argument("resource")
@click.argument("patch")
@click.option("--expected-version", type=int, default=None, help="Apply only if the stored version is this.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@run_async
async def wm_patch(ctx: click.Context, resource: str, patch: str, expected_version: int | None, as_json: bool) -> None:
    """Merge-patch RESOURCE's working memory with PATCH (a JSON object)."""
    try:
        parsed = json.loads(patch)
    except json.JSONDecodeError as exc:
        _fail(f"PATCH is not valid JSON: {exc}")
    memory = await _memory(ctx)
    try:
        state = await memory.update_working_memory(
            resource_id=resource, patch=parsed, expected_version=expected_version, source="cli"
        )
    finally:
        await memory.close()
    if as_json:
        _emit_json({"data": state.data, "version": state.version})
    else:
        click.echo(f"working memory of {resource} is now at version {state.version}")


# -- whole resources -------------------------------------------------------------


@main.command("export")
@click.argument("resource")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@click.pass_context
@run_async
async def export_cmd(ctx: click.Context, resource: str, output: Path | None) -> None:
    """Export everything of RESOURCE as JSON."""
    memory = await _memory(ctx)
    try:
        dump = await memory.export_resource(resource_id=resource)
    finally:
        await memory.close()
    text = json.dumps(dump, ensure_ascii=False, indent=2)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"exported {resource} to {output}", err=True)


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
@run_async
async def import_cmd(ctx: click.Context, file: Path) -> None:
    """Restore an export FILE into a resource that holds nothing yet."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        _fail(f"{file} is not valid JSON: {exc}")
    memory = await _memory(ctx)
    try:
        await memory.import_resource(data)
    finally:
        await memory.close()
    click.echo(f"imported {data['resource_id']} ({len(data['threads'])} threads)")


@main.command("erase")
@click.argument("resource")
@click.option("--yes", is_flag=True, help="Confirm: this cannot be undone.")
@click.pass_context
@run_async
async def erase_cmd(ctx: click.Context, resource: str, yes: bool) -> None:
    """Erase everything of RESOURCE (needs --yes)."""
    if not yes:
        _fail(f"erase deletes everything of {resource!r} for good; add --yes to confirm")
    memory = await _memory(ctx)
    try:
        await memory.erase_resource(resource_id=resource)
    finally:
        await memory.close()
    click.echo(f"erased {resource}")


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

    click.echo(f"caderno demo — banco: {db} (SQLite, sem rede, sem chave de API)\n")
    for d in ("monday", "wednesday"):
        proc = subprocess.run([sys.executable, "-m", "caderno.cli", "--db", db, "demo", "--day", d])
        if proc.returncode != 0:
            sys.exit(proc.returncode)
        click.echo()
    click.echo(f"Veja o que ficou guardado: caderno --db {db} threads list {demo.RESOURCE}")


if __name__ == "__main__":  # pragma: no cover
    main()
