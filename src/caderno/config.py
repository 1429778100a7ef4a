"""``caderno.toml``: the database, the model, and scheduled tasks from a file.

The path comes from ``--config`` or ``$CADERNO_CONFIG``. Every section is
optional::

    [database]
    url = "sqlite:///caderno.db"          # or postgresql://…

    [model]                               # any OpenAI-compatible endpoint
    base_url = "http://localhost:11434/v1"
    model = "qwen2.5:7b"
    api_key_env = "OPENAI_API_KEY"        # the variable holding the key (never the key itself)

    [[scheduled_tasks]]
    resource = "casa-gabriel"
    name = "resumo-semanal"
    schedule = "toda segunda às 8"        # any form caderno.schedule accepts
    prompt = "Resuma os gastos da semana."
    timezone = "America/Sao_Paulo"        # default UTC
    trusted = false                       # true: its tools skip the approval question
    thread = "resumos"                    # default task:<name>

Config tasks are upserted by (resource, name) with ``source = "config"``
when a host starts (``caderno worker``, ``caderno serve``, ``caderno tasks
sync``); a config task removed from the file is deleted; tasks made by the
model or the app (``source = "tool"``) are never touched.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import UsageError
from .messages import ScheduledTask

__all__ = ["Config", "load_config"]

_TASK_KEYS = {"resource", "name", "schedule", "prompt", "timezone", "trusted", "thread"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """What ``caderno.toml`` says."""

    path: Path | None = None
    """Where it was read from (``None``: no file)."""
    database_url: str | None = None
    """``[database] url``."""
    model: dict[str, Any] = field(default_factory=dict)
    """``[model]``: ``base_url``, ``model``, ``api_key_env``."""
    scheduled_tasks: list[dict[str, Any]] = field(default_factory=list)
    """``[[scheduled_tasks]]`` entries, checked for their keys."""

    def tasks(self, *, now: datetime | None = None) -> list[ScheduledTask]:
        """The config tasks, validated (each a ``UsageError`` naming its entry when wrong)."""
        from .state import build_task

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
        if not self.model:
            return None
        from .agent.models import OpenAIChatModel

        key_env = self.model.get("api_key_env")
        return OpenAIChatModel(
            model=str(self.model.get("model", "")),
            base_url=self.model.get("base_url"),
            api_key=os.environ.get(key_env) if key_env else None,
        )


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
    unknown = set(data) - {"database", "model", "scheduled_tasks", "server"}
    if unknown:
        raise UsageError(f"{where}: unknown section(s) {', '.join(sorted(unknown))}")
    tasks = data.get("scheduled_tasks", [])
    if not isinstance(tasks, list) or any(not isinstance(t, dict) for t in tasks):
        raise UsageError(f"{where}: scheduled_tasks must be [[scheduled_tasks]] tables")
    for i, t in enumerate(tasks, start=1):
        extra = set(t) - _TASK_KEYS
        if extra:
            raise UsageError(f"{where}: [[scheduled_tasks]] entry {i} has unknown key(s) {', '.join(sorted(extra))}")
    database = data.get("database", {})
    model = data.get("model", {})
    if not isinstance(database, dict) or not isinstance(model, dict):
        raise UsageError(f"{where}: [database] and [model] must be tables")
    return Config(path=where, database_url=database.get("url"), model=model, scheduled_tasks=tasks)
