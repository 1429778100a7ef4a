"""``caderno import-from``: bring another memory system's data in (``caderno.integrations.importers``).

Kept apart from ``caderno.cli.main`` for size; ``main`` registers the group on ``main``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from ..core.errors import CadernoError
from .common import Progress, emit_json, fail, json_option, opened, run_async

__all__ = ["GROUPS"]

_file_arg = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))


def _show(reports: list[Any], as_json: bool, pending: int = 0, progress: Progress | None = None) -> None:
    """The reports; the last line also says how many messages wait for embedding and how to embed them."""
    if as_json:
        emit_json([r.to_dict() for r in reports] if len(reports) != 1 else reports[0].to_dict())
        return
    lines = [r.summary() for r in reports] or ["nothing to import"]
    if pending:
        lines[-1] += (
            f"; {pending} message(s) wait for embedding: `caderno worker` embeds them "
            "(a recall embeds its resource's first; `caderno reindex` embeds everything again)"
        )
    for line in lines[:-1]:
        click.echo(line)
    if progress is not None:
        added = sum(getattr(r, "messages", 0) for r in reports)
        progress.done(
            lines[-1], f"imported {added} message(s)" + (f", {pending} wait for embedding" if pending else "")
        )
    else:
        click.echo(lines[-1])
    for r in reports:
        for refused in r.refused:
            click.echo(f"  refused ({refused['target']}): {refused['reason']}")


async def _imported(ctx: click.Context, as_json: bool, work: Callable[[Any], Awaitable[Any]]) -> None:
    """Run an import with a bar on a terminal, then show its report(s) and what waits for embedding.

    The import's own embedding is left to a worker (or a recall): this command does not wait for it.
    """
    from ..stores import ops

    async with opened(ctx) as memory:
        memory.indexer.elsewhere = lambda: None  # not embedded here: the summary says how
        with Progress("importing", quiet=as_json) as progress:
            got = await work(memory)
            reports = got if isinstance(got, list) else [got]
            progress.update(sum(getattr(r, "messages", 0) for r in reports))
            pending = (
                await memory.run(ops.CountPendingEmbeddings()) if memory.supports(ops.CountPendingEmbeddings) else 0
            )
            _show(reports, as_json, pending, progress)


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

    await _imported(
        ctx, as_json, lambda memory: import_openai_agents(memory, file, resource_id=resource, session=session)
    )


@import_from.command("mastra")
@_file_arg
@click.option("--resource", default=None, help="Put everything in this resource (default: Mastra's resource ids).")
@json_option
@click.pass_context
@run_async
async def import_mastra_cmd(ctx: click.Context, file: Path, resource: str | None, as_json: bool) -> None:
    """Import a Mastra LibSQL/SQLite database FILE: threads, messages, resource working memory."""
    from ..integrations.importers import import_mastra

    await _imported(ctx, as_json, lambda memory: import_mastra(memory, file, resource_id=resource))


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
    from ..memory.adapters.notebook_files import Notebook

    if notebook_dir is not None:
        try:
            report = await import_notes(directory, Notebook(notebook_dir), resource_id=resource)
        except CadernoError as exc:
            fail(str(exc))
        _show([report], as_json)
        return
    async with opened(ctx) as memory:
        try:
            report = await import_notes(directory, memory.notebook(resource), resource_id=resource)
        except CadernoError as exc:
            fail(str(exc))
    _show([report], as_json)


@import_from.command("aidaemon")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--resource",
    required=True,
    help="The caderno resource that receives aidaemon's conversations, facts, macros, tasks and prefixes.",
)
@json_option
@click.pass_context
@run_async
async def import_aidaemon_cmd(ctx: click.Context, file: Path | None, resource: str, as_json: bool) -> None:
    """Import aidaemon's SQLite database FILE (default: the --db database) into caderno's tables, in place.

    Its conversations (the event log, the older messages table), facts,
    macros, scheduled tasks and approved prefixes move into RESOURCE, in one
    transaction; what caderno has no place for stays in the file as it was
    (legacy_events…), and so do aidaemon's other tables. The file is a caderno
    database afterwards: until this runs, caderno refuses to open it.
    """
    from ..memory.adapters.connect import connect
    from ..stores import ops

    named = str(file if file is not None else ctx.obj["db"])
    path = named[len("sqlite:///") :].split("?", 1)[0] if named.startswith("sqlite:///") else named
    if "://" in path:
        fail(f"import-from aidaemon imports a SQLite file in place: give its path (FILE or --db), not {named}")
    if not Path(path).is_file():
        fail(f"no database at {path}")
    async with connect(path, embedder=None, import_from="aidaemon", legacy_resource_id=resource) as memory:
        imported = getattr(memory.store, "imported", None)  # the SQLiteStore's: what its open moved
        pending = await memory.run(ops.CountPendingEmbeddings(resource_id=resource))
    report = imported.to_dict() if imported is not None else {"resource_id": resource, "moved": {}, "left": {}}
    if as_json:
        emit_json({**report, "path": path, "pending_embeddings": pending})
        return
    click.echo(_aidaemon_summary(path, report, pending))


def _aidaemon_summary(path: str, report: dict[str, Any], pending: int) -> str:
    """``import-from aidaemon``'s line: rows taken from each table, rows left, and how to embed what came."""
    moved = ", ".join(f"{n} from {table}" for table, n in report["moved"].items())
    line = (
        f"imported aidaemon's {path} into {report['resource_id']}: {moved} (rows)"
        if moved
        else f"nothing of aidaemon's to import in {path}"
    )
    if report["left"]:
        left = ", ".join(f"{table} {n}" for table, n in report["left"].items())
        line += f"; left in the file, as they were (caderno has no place for them): {left}"
    if report["moved"].get("events"):
        line += f"; aidaemon kept no vectors of its events: `caderno reindex {report['resource_id']}` embeds them"
    elif pending:
        line += f"; {pending} message(s) wait for embedding: `caderno worker` embeds them"
    return line


GROUPS = (import_from,)
