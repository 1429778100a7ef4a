"""``caderno.toml``: the database, the model, and scheduled tasks from a file.

The path comes from ``--config`` or ``$CADERNO_CONFIG``. Every section is
optional; the two top-level settings must come before the first ``[table]``::

    consolidation_interval_hours = 6      # hours between consolidation passes (worker, serve)
    working_memory_cap = 50               # newest messages per thread kept in the SQLite store's cache

    [database]
    url = "sqlite:///caderno.db"          # or postgresql://…
    lock_timeout = 10                     # PostgreSQL: seconds a write waits for a lock (503 busy past it; 0: no bound)
    idle_in_transaction_timeout = 5       # PostgreSQL: seconds a stalled transaction keeps its locks (0: no bound)

    [model]                               # any OpenAI-compatible endpoint
    base_url = "http://localhost:11434/v1"
    model = "qwen2.5:7b"
    api_key_env = "OPENAI_API_KEY"        # the variable holding the key (never the key itself)

    [model.fast]                          # consolidation's summaries and facts (none: extractive only)
    model = "qwen2.5:1.5b"                # a key left out is [model]'s

    [[scheduled_tasks]]
    resource = "casa-gabriel"
    name = "resumo-semanal"
    schedule = "toda segunda às 8"        # any form caderno.core.cron accepts
    prompt = "Resuma os gastos da semana."
    timezone = "America/Sao_Paulo"        # default UTC
    trusted = false                       # true: its tools skip the approval question
    thread = "resumos"                    # default task:<name>

    [server]                              # caderno serve's edge (defaults below)
    max_body_bytes = 16777216             # most bytes of any request body (413 past it)
    header_timeout = 10                   # seconds to send a request's headers
    body_timeout = 60                     # seconds to send a request's body, after its headers (408 past it)
    keep_alive_timeout = 5                # seconds an idle keep-alive connection stays open
    limit_concurrency = 512               # connections + requests at once (503 past it)
    docs = false                          # true: /docs and /redoc (Swagger UI, ReDoc)

Config tasks are upserted by (resource, name) with ``source = "config"``
when a host starts (``caderno worker``, ``caderno serve``, ``caderno tasks
sync``); a config task removed from the file is deleted; tasks made by the
model or the app (``source = "tool"``) are never touched.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.records import ScheduledTask
from ..memory.parts.turns import TURN_LEASE, TURN_WAIT

__all__ = ["Config", "ServerSettings", "load_config"]

_TASK_KEYS = {"resource", "name", "schedule", "prompt", "timezone", "trusted", "thread"}
_MODEL_KEYS = {"base_url", "model", "api_key_env"}
#: The file's top-level settings (the design's names), beside its tables.
_SETTINGS = {"consolidation_interval_hours", "working_memory_cap"}
_TABLES = {"database", "model", "scheduled_tasks", "server"}
#: ``[database]``'s keys besides ``url``: the PostgreSQL store's keywords of the same names (seconds).
_DATABASE_OPTIONS = ("lock_timeout", "idle_in_transaction_timeout")

#: Most bytes of any request body, on every route (the memory proxy and /mcp
#: included): the largest body a route takes is an import (16 MiB, thousands of
#: long conversations), and past this a request is refused (413) as it streams in.
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: Seconds a client has to send a request's whole header block, counted from the
#: connection (or from the first byte of a keep-alive request). A real client sends
#: its headers in one packet; 10 s covers a slow mobile link and closes a
#: "slowloris" that holds a connection by trickling headers.
HEADER_TIMEOUT = 10.0
#: Seconds a client has to send a request's whole body, counted from the end of its
#: headers: a deadline, not an idle timer, so a client (keyed or not) trickling a
#: byte at a time cannot hold a connection for good. 60 s carries the largest
#: body (16 MiB, an import) at 2.3 Mbit/s; a JSON turn or a recall takes
#: milliseconds. Raise it for imports over slower links.
BODY_TIMEOUT = 60.0
#: Seconds an idle keep-alive connection stays open (uvicorn's own default).
KEEP_ALIVE_TIMEOUT = 5
#: Connections plus requests in progress before uvicorn answers 503: well under
#: the usual 1024 open files per process, leaving descriptors for the database,
#: the upstream model and the log.
LIMIT_CONCURRENCY = 512
#: ``[server] background``: where a server's background work runs (the first is the default).
BACKGROUND_MODES = ("inline", "process", "off")
#: ``[server] http``: uvicorn's HTTP/1.1 parser (``auto``: httptools when installed, else h11).
HTTP_PARSERS = ("auto", "httptools", "h11")


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerSettings:
    """``[server]``: the limits of ``caderno serve``'s edge (every one has a default)."""

    max_body_bytes: int = MAX_REQUEST_BYTES
    """Most bytes of any request body (413 past it, without reading the rest)."""
    header_timeout: float = HEADER_TIMEOUT
    """Seconds to send a request's headers before the connection is closed."""
    body_timeout: float = BODY_TIMEOUT
    """Seconds to send a request's body after its headers before a 408 and the connection closed."""
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT
    """Seconds an idle keep-alive connection stays open."""
    limit_concurrency: int = LIMIT_CONCURRENCY
    """Connections plus requests at once before uvicorn answers 503."""
    docs: bool = False
    """Serve ``/docs`` and ``/redoc`` (off: the OpenAPI JSON alone is served)."""
    turn_wait: float = TURN_WAIT
    """Seconds a proxy turn waits for another turn on its thread (any server) before a 409."""
    turn_lease: float = TURN_LEASE
    """Seconds a thread's turn lease lasts unrenewed (renewed every third of it while a turn runs):
    how soon a killed server's thread is free again."""
    http: str = "auto"
    """The HTTP/1.1 parser: ``httptools`` (C), ``h11`` (pure Python), ``auto`` (httptools when installed)."""
    background: str = "inline"
    """Where embedding, consolidation and due tasks run: ``inline`` (the server's event loop, batches
    embedded in a thread at lower CPU priority), ``process`` (a ``caderno worker`` child at lower
    priority), ``off`` (elsewhere: your own ``caderno worker``)."""

    @classmethod
    def from_table(cls, table: dict[str, Any], where: object) -> ServerSettings:
        """Check a ``[server]`` table: known keys, positive numbers, a boolean ``docs``.

        Raises:
            UsageError: naming the key and the file.
        """
        unknown = set(table) - set(cls.__dataclass_fields__)
        if unknown:
            raise UsageError(f"{where}: [server] has unknown key(s) {', '.join(sorted(unknown))}")
        for name, value in table.items():
            if name == "docs":
                if not isinstance(value, bool):
                    raise UsageError(f"{where}: [server] docs must be true or false")
                continue
            for choice, allowed in (("background", BACKGROUND_MODES), ("http", HTTP_PARSERS)):
                if name == choice and value not in allowed:
                    raise UsageError(f"{where}: [server] {name} must be one of {', '.join(allowed)}")
            if name in ("background", "http"):
                continue
            number = (int, float) if name in ("header_timeout", "body_timeout", "turn_wait", "turn_lease") else (int,)
            if isinstance(value, bool) or not isinstance(value, number) or value <= 0:
                raise UsageError(f"{where}: [server] {name} must be a positive number, not {value!r}")
        return cls(**table)


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """What ``caderno.toml`` says."""

    path: Path | None = None
    """Where it was read from (``None``: no file)."""
    database_url: str | None = None
    """``[database] url``."""
    database_options: dict[str, float] = field(default_factory=dict)
    """``[database]``'s other keys (``lock_timeout``, ``idle_in_transaction_timeout``): store keywords."""
    model: dict[str, Any] = field(default_factory=dict)
    """``[model]``: ``base_url``, ``model``, ``api_key_env``."""
    scheduled_tasks: list[dict[str, Any]] = field(default_factory=list)
    """``[[scheduled_tasks]]`` entries, checked for their keys."""
    server: ServerSettings = field(default_factory=ServerSettings)
    """``[server]``: the edge's limits."""
    consolidation_interval_hours: float | None = None
    """Hours between consolidation passes (``None``: ``ConsolidationSettings.interval_hours``)."""
    working_memory_cap: int | None = None
    """The SQLite store's ``cache_messages`` (``None``: the store's default)."""

    def tasks(self, *, now: datetime | None = None) -> list[ScheduledTask]:
        """The config tasks, validated (each a ``UsageError`` naming its entry when wrong)."""
        from ..memory.engines.task_rules import build_task

        built = []
        for i, entry in enumerate(self.scheduled_tasks, start=1):
            try:
                built.append(
                    build_task(
                        resource_id=entry.get("resource", ""),
                        name=entry.get("name", ""),
                        schedule=entry.get("schedule", ""),
                        prompt=entry.get("prompt", ""),
                        timezone=entry.get("timezone", "UTC"),
                        thread_id=entry.get("thread"),
                        trusted=bool(entry.get("trusted", False)),
                        source="config",
                        now=now,
                    )
                )
            except UsageError as exc:
                raise UsageError(f"{self.path}: [[scheduled_tasks]] entry {i}: {exc}") from None
        names = [(t.resource_id, t.name) for t in built]
        if len(set(names)) != len(names):
            raise UsageError(f"{self.path}: two [[scheduled_tasks]] entries share a resource and name")
        return built

    def chat_model(self) -> Any:
        """The ``[model]`` as an ``OpenAIChatModel``, or ``None`` when the file names none."""
        chat = {k: v for k, v in self.model.items() if k != "fast"}
        return _chat_model(chat) if chat else None

    def fast_model(self) -> Any:
        """``[model.fast]`` (a key it leaves out is ``[model]``'s) as an ``OpenAIChatModel``, else ``None``."""
        fast = self.model.get("fast")
        if fast is None:
            return None
        return _chat_model({**{k: v for k, v in self.model.items() if k != "fast"}, **fast})

    def connect_options(self) -> dict[str, Any]:
        """``caderno.connect`` keywords for what the file sets: consolidation and the recent-message cache.

        The fast model is built here (``None`` without ``[model.fast]``): whoever
        opens the memory with these options closes it
        (``memory.consolidation.settings.fast_model.aclose()``).
        """
        from ..memory.parts.consolidation import ConsolidationSettings

        settings = ConsolidationSettings(fast_model=self.fast_model())
        if self.consolidation_interval_hours is not None:
            settings = dataclasses.replace(settings, interval_hours=self.consolidation_interval_hours)
        options: dict[str, Any] = {"consolidation": settings, **self.database_options}
        if self.working_memory_cap is not None:
            options["cache_messages"] = self.working_memory_cap
        return options


def _chat_model(table: dict[str, Any]) -> Any:
    """An ``OpenAIChatModel`` from a checked ``[model]``-shaped table."""
    from .models import OpenAIChatModel

    key_env = table.get("api_key_env")
    return OpenAIChatModel(
        model=str(table.get("model", "")),
        base_url=table.get("base_url"),
        api_key=os.environ.get(key_env) if key_env else None,
    )


def _check_model(model: dict[str, Any], where: object) -> None:
    """``[model]`` and ``[model.fast]``: known keys, each a string.

    Raises:
        UsageError: naming the table, the key and the file.
    """
    fast = model.get("fast")
    if fast is not None and not isinstance(fast, dict):
        raise UsageError(f"{where}: [model] fast must be a table: [model.fast]")
    for name, table, allowed in (("[model]", model, _MODEL_KEYS | {"fast"}), ("[model.fast]", fast or {}, _MODEL_KEYS)):
        unknown = set(table) - allowed
        if unknown:
            hint = " (top-level settings go before the first [table])" if unknown & _SETTINGS else ""
            raise UsageError(f"{where}: {name} has unknown key(s) {', '.join(sorted(unknown))}{hint}")
        for key in _MODEL_KEYS & set(table):
            if not isinstance(table[key], str) or not table[key]:
                raise UsageError(f"{where}: {name} {key} must be a non-empty string, not {table[key]!r}")


def _check_database(database: dict[str, Any], where: object) -> dict[str, float]:
    """``[database]``: known keys, and its timeouts each a number of seconds, 0 or more.

    Raises:
        UsageError: naming the key and the file.
    """
    unknown = set(database) - {"url", *_DATABASE_OPTIONS}
    if unknown:
        raise UsageError(f"{where}: [database] has unknown key(s) {', '.join(sorted(unknown))}")
    options = {}
    for name in _DATABASE_OPTIONS:
        value = database.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise UsageError(f"{where}: [database] {name} must be a number of seconds (0 or more), not {value!r}")
        options[name] = float(value)
    return options


def _check_settings(data: dict[str, Any], where: object) -> dict[str, Any]:
    """The top-level settings: a positive number of hours, a cache of zero or more messages.

    Raises:
        UsageError: naming the setting, its value and the file.
    """
    hours = data.get("consolidation_interval_hours")
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or not 0 < hours < 1e6):
        raise UsageError(f"{where}: consolidation_interval_hours must be a positive number of hours, not {hours!r}")
    cap = data.get("working_memory_cap")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
        raise UsageError(f"{where}: working_memory_cap must be a whole number of messages (0 or more), not {cap!r}")
    return {
        "consolidation_interval_hours": float(hours) if hours is not None else None,
        "working_memory_cap": cap,
    }


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Read ``path``, else ``$CADERNO_CONFIG``, else nothing (an empty ``Config``).

    Raises:
        UsageError: the file is missing, is not TOML, or has unknown keys.
    """
    path = path or os.environ.get("CADERNO_CONFIG")
    if not path:
        return Config()
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"config file {where} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config file {where}: {exc}") from None
    unknown = set(data) - _TABLES - _SETTINGS
    if unknown:
        raise UsageError(f"{where}: unknown section(s) or setting(s) {', '.join(sorted(unknown))}")
    tasks = data.get("scheduled_tasks", [])
    if not isinstance(tasks, list) or any(not isinstance(t, dict) for t in tasks):
        raise UsageError(f"{where}: scheduled_tasks must be [[scheduled_tasks]] tables")
    for i, t in enumerate(tasks, start=1):
        extra = set(t) - _TASK_KEYS
        if extra:
            raise UsageError(f"{where}: [[scheduled_tasks]] entry {i} has unknown key(s) {', '.join(sorted(extra))}")
    database = data.get("database", {})
    model = data.get("model", {})
    server = data.get("server", {})
    if not isinstance(database, dict) or not isinstance(model, dict) or not isinstance(server, dict):
        raise UsageError(f"{where}: [database], [model] and [server] must be tables")
    _check_model(model, where)
    return Config(
        path=where,
        database_url=database.get("url"),
        database_options=_check_database(database, where),
        model=model,
        scheduled_tasks=tasks,
        server=ServerSettings.from_table(server, where),
        **_check_settings(data, where),
    )
