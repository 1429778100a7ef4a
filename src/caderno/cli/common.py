"""What every ``caderno`` command shares: errors as one line, the event loop, output, opening the database."""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from ..core.errors import CadernoError
from ..memory.connect import connect
from ..memory.facade import Memory

__all__ = ["DEFAULT_DB", "READ_ONLY", "clip", "emit_json", "fail", "json_option", "open_memory", "rich_console", "run_async"]

T = TypeVar("T")


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


async def open_memory(ctx: click.Context) -> Memory:
    """The memory on ``--db`` with what caderno.toml sets: consolidation (its fast model, its period) and the cache.

    ``caderno worker``, ``serve`` and ``consolidate`` summarise and extract
    facts with ``[model.fast]`` when the file names one.
    """
    db = ctx.obj["db"]
    command = ctx.command_path[len(ctx.find_root().command_path) :].strip()
    if command in READ_ONLY and not _database_exists(str(db)):
        fail(f"no database at {db} (nothing stored yet); commands that write create it")
    return await connect(db, **ctx.obj["config"].connect_options())


def _database_exists(db: str) -> bool:
    """Whether a SQLite URL or path names an existing file (other URLs: assumed to exist)."""
    if db.startswith("sqlite:///"):
        db = db[len("sqlite:///") :].split("?", 1)[0]
    elif "://" in db:
        return True
    return Path(db).exists()


#: The database when neither ``--db`` nor the config file names one.
DEFAULT_DB = "caderno.db"


def clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


