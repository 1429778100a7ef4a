"""``caderno import-from``: bring another memory system's data in (``caderno.integrations.importers``).

Kept apart from ``caderno.cli.main`` for size; ``main`` registers the group on ``main``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..core.errors import CadernoError
from .common import emit_json, fail, json_option, open_memory, run_async

__all__ = ["GROUPS"]

_file_arg = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))


def _show(reports: list[Any], as_json: bool) -> None:
    if as_json:
        emit_json([r.to_dict() for r in reports] if len(reports) != 1 else reports[0].to_dict())
        return
    if not reports:
        click.echo("nothing to import")
    for r in reports:
        click.echo(r.summary())
        for refused in r.refused:
            click.echo(f"  refused ({refused['target']}): {refused['reason']}")


@click.group("import-from")
def import_from() -> None:
    """Import another system's memory; running it again adds nothing twice."""


@import_from.command("openai-agents")
@_file_arg
@click.option("--resource", required=True, help="The caderno resource that receives the sessions.")
@click.option("--session", default=None, help="Only this session (default: every session in FILE).")
@json_option
@click.pass_context
@run_async
async def import_openai_agents_cmd(
    ctx: click.Context, file: Path, resource: str, session: str | None, as_json: bool
) -> None:
    """Import an OpenAI Agents SDK SQLiteSession database FILE (each session becomes a thread)."""
    from ..integrations.importers import import_openai_agents

    memory = await open_memory(ctx)
    try:
        report = await import_openai_agents(memory, file, resource_id=resource, session=session)
    finally:
        await memory.close()
    _show([report], as_json)


@import_from.command("mastra")
@_file_arg
@click.option("--resource", default=None, help="Put everything in this resource (default: Mastra's resource ids).")
@json_option
@click.pass_context
@run_async
async def import_mastra_cmd(ctx: click.Context, file: Path, resource: str | None, as_json: bool) -> None:
    """Import a Mastra LibSQL/SQLite database FILE: threads, messages, resource working memory."""
    from ..integrations.importers import import_mastra

    memory = await open_memory(ctx)
    try:
        reports = await import_mastra(memory, file, resource_id=resource)
    finally:
        await memory.close()
    _show(reports, as_json)


@import_from.command("notes")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--resource", required=True, help="The resource whose notebook receives the entries.")
@click.option(
    "--notebook-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write to this notebook directory instead of the resource's notebook in the database (--db).",
)
@json_option
@click.pass_context
def import_notes_cmd(
    ctx: click.Context, directory: Path, resource: str, notebook_dir: Path | None, as_json: bool
) -> None:
    """Import DIRECTORY's MEMORY.md / USER.md (entries split on a line holding only §) into a notebook."""
    run_async(_import_notes)(ctx, directory, resource, notebook_dir, as_json)


async def _import_notes(
    ctx: click.Context, directory: Path, resource: str, notebook_dir: Path | None, as_json: bool
) -> None:
    from ..integrations.importers import import_notes
    from ..memory.notebook import Notebook

    if notebook_dir is not None:
        try:
            report = await import_notes(directory, Notebook(notebook_dir), resource_id=resource)
        except CadernoError as exc:
            fail(str(exc))
        _show([report], as_json)
        return
    memory = await open_memory(ctx)
    try:
        report = await import_notes(directory, memory.notebook(resource), resource_id=resource)
    except CadernoError as exc:
        fail(str(exc))
    finally:
        await memory.close()
    _show([report], as_json)


GROUPS = (import_from,)
