"""What every ``caderno`` command shares: errors as one line, the event loop, output, opening the database."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ..core.errors import CadernoError

if TYPE_CHECKING:
    from ..memory.facade import Memory

__all__ = [
    "DEFAULT_DB",
    "GLOBAL_OPTIONS",
    "CadernoGroup",
    "READ_ONLY",
    "Progress",
    "clip",
    "emit_json",
    "fail",
    "json_option",
    "opened",
    "plural",
    "rich_console",
    "run_async",
]

T = TypeVar("T")


#: The root's options that a command line may also give after the subcommand
#: (``caderno wm show alice --db quick.db``), as people type them.
GLOBAL_OPTIONS = ("--db", "--config")


class CadernoGroup(click.Group):
    """The root ``caderno`` group: ``--db`` and ``--config`` are taken wherever they stand on the line.

    click reads a group's options only before its subcommand's name; people
    add ``--db x.db`` at the end. Before parsing, each of them found after the
    subcommand is moved in front of it, unless that command has an option of
    the same name (``serve --config`` is serve's own). After ``--`` nothing moves.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, ctx, list(args)))


def hoist_global_options(root: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
    """``args`` with every ``GLOBAL_OPTIONS`` given after the subcommand moved before it."""
    start = _subcommand_at(args)
    if start is None:
        return args
    own = _leaf_options(root, ctx, args[start:])
    wanted = [name for name in GLOBAL_OPTIONS if name not in own]
    moved: list[str] = []
    kept: list[str] = args[:start]
    i = start
    while i < len(args):
        token = args[i]
        if token == "--":
            kept += args[i:]
            break
        name = token.split("=", 1)[0]
        if name in wanted and "=" in token:
            moved.append(token)
        elif token in wanted and i + 1 < len(args):
            moved += [token, args[i + 1]]
            i += 1
        else:
            kept.append(token)
        i += 1
    return moved + kept


def _subcommand_at(args: list[str]) -> int | None:
    """Where the subcommand's name is: the first word that is not a root option or its value."""
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            return None
        if token in GLOBAL_OPTIONS:
            i += 2
            continue
        if not token.startswith("-"):
            return i
        i += 1
    return None


def _leaf_options(root: click.Group, ctx: click.Context, words: list[str]) -> set[str]:
    """The option names of the command ``words`` name (groups followed down by the names they know)."""
    command: click.Command = root
    for word in words:
        if not isinstance(command, click.Group):
            break
        found = command.get_command(ctx, word)
        if found is not None:
            command = found
    if command is root:
        return set()
    return {opt for param in command.params if isinstance(param, click.Option) for opt in param.opts}


def fail(message: str) -> NoReturn:
    click.echo(f"caderno: error: {message}", err=True)
    sys.exit(1)


def run_async(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """Run an async command body; turn caderno errors into one clear line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return asyncio.run(fn(*args, **kwargs))
        except CadernoError as exc:
            fail(str(exc))

    return wrapper


def rich_console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


class Progress:
    """Long work shown as it goes: a rich bar on a terminal (stderr) that ends at 100 % with what was
    done; piped, nothing until the one summary line (stdout), so a script reads one line.

    ``total`` None: a spinner until ``done``, which fills the bar with what was counted.
    """

    def __init__(self, description: str, total: int | None = None, *, quiet: bool = False) -> None:
        self.description = description
        self.total = total
        self.completed = 0
        self._bar: Any = None
        self._task: Any = None
        self._quiet = quiet

    def __enter__(self) -> Progress:
        if not self._quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TaskProgressColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                SpinnerColumn(finished_text="✓"),
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True, highlight=False),
            )
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total)
        return self

    @property
    def interactive(self) -> bool:
        """Whether a bar is shown (a terminal): a command whose output follows prints its summary only then."""
        return self._bar is not None

    def update(self, completed: int, total: int | None = None) -> None:
        """``completed`` of ``total`` (kept when None) done so far."""
        self.completed = completed
        if total is not None:
            self.total = total
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, total=self.total)

    def done(self, summary: str, label: str | None = None, *, err: bool = False) -> None:
        """Fill the bar (it ends at 100 %, labelled with what was done: ``label``, else ``summary``), stop it,
        print ``summary`` (a long one is better printed whole than squeezed into the bar's label); on
        stderr with ``err`` (a command whose stdout is its data: ``export``, or the worker's log lines)."""
        if self._bar is not None:
            total = max(self.total or 0, self.completed, 1)
            self._bar.update(self._task, completed=total, total=total, description=label or summary)
            self._bar.stop()
            self._bar = None
        click.echo(summary, err=err)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:  # an error: stop the bar where it is; the error's line follows
            self._bar.stop()
            self._bar = None


#: The ``--json`` flag every listing command takes (its output: ``emit_json``).
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


#: Commands that only read: on a database file that does not exist they fail
#: instead of creating it (and its directories).
READ_ONLY = frozenset(
    {
        "threads list",
        "threads show",
        "wm show",
        "export",
        "recall",
        "messages log",
        "tasks list",
        "facts list",
        "facts history",
        "macros list",
        "prefixes list",
        "prefixes check",
    }
)


@contextlib.asynccontextmanager
async def opened(ctx: click.Context) -> AsyncIterator[Memory]:
    """The memory on ``--db`` with what caderno.toml sets (consolidation: its fast model, its period; the cache),
    open for an ``async with`` block and closed after it, with the fast model it built.

    Every command that uses the database opens it here: ``async with opened(ctx) as memory:``.
    ``caderno worker``, ``serve`` and ``consolidate`` summarise and extract
    facts with ``[model.fast]`` when the file names one.
    """
    db = ctx.obj["db"]
    command = ctx.command_path[len(ctx.find_root().command_path) :].strip()
    if command in READ_ONLY and not _database_exists(str(db)):
        fail(f"no database at {db} (nothing stored yet); commands that write create it")
    from ..memory.adapters.connect import connect

    options = ctx.obj["config"].connect_options()
    fast_model = options["consolidation"].fast_model
    try:
        async with connect(db, **options) as memory:
            yield memory
    finally:
        if fast_model is not None:
            await asyncio.shield(fast_model.aclose())


def _database_exists(db: str) -> bool:
    """Whether a SQLite URL or path names an existing file (other URLs: assumed to exist)."""
    if db.startswith("sqlite:///"):
        db = db[len("sqlite:///") :].split("?", 1)[0]
    elif "://" in db:
        return True
    return Path(db).exists()


#: The database when neither ``--db`` nor the config file names one.
DEFAULT_DB = "caderno.db"


def plural(count: int, one: str, many: str | None = None) -> str:
    """``count`` with its noun agreeing: "1 message", "2 messages" (``many``: an irregular plural)."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


async def import_home_notebooks(memory: Any, home: Path | None = None) -> dict[str, list[str]]:
    """File notebooks under ``$CADERNO_HOME/notebooks`` moved into the database, once (``serve`` and ``mcp`` at start).

    Each directory is named for its resource (a slug and a hash); it is
    matched against the database's resources, or against its own slug when
    the slug is the id itself. A target already written in the database is
    left alone, so this runs at every start and imports each file once. The
    files stay where they are. Returns ``{resource: [targets taken]}`` and
    logs what it took and which directories it could not match.
    """
    import logging

    from ..core.files import caderno_home
    from ..memory.adapters.notebook_files import Notebook, resource_directory

    home = home or caderno_home()
    root = home / "notebooks"
    if not root.is_dir():
        return {}
    by_dir = {resource_directory(home, rid).name: rid for rid in await memory.list_resources()}
    log = logging.getLogger("caderno.notebook")
    taken: dict[str, list[str]] = {}
    for directory in sorted(root.iterdir()):
        if directory.is_symlink() or not directory.is_dir():
            continue
        rid = by_dir.get(directory.name)
        slug = directory.name.rpartition("-")[0]
        if rid is None and slug and resource_directory(home, slug).name == directory.name:
            rid = slug
        if rid is None:
            log.warning("notebook directory %s matches no resource; not imported", directory.name)
            continue
        targets = await memory.notebook(rid).take_files(Notebook(directory))
        if targets:
            taken[rid] = targets
            log.info("imported the file notebook of %r (%s) into the database", rid, ", ".join(targets))
    return taken
