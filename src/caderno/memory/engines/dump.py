"""Checking a resource's export before it is imported (the format is ``caderno.stores.export``).

``check_dump`` validates every field with the one validation layer and
parses the messages, so ``ImportResource`` receives only what every backend
can store.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import UsageError
from ...core.jsonvalue import check_json
from ...core.messages import Message, check_text
from ...core.validate import (
    DUMP_DEPTH,
    check_fact,
    check_id,
    check_message,
    check_metadata,
    check_name,
    check_time,
    check_title,
)
from ...stores.export import FACT_FIELDS, FACT_HISTORY_FIELDS, FORMAT, MESSAGE_LOG_FIELDS, VERSION

#: Versions, counters and positions are 64-bit integers in SQLite and
#: PostgreSQL: a larger Python int overflows the driver (a crash, not a refusal).
MAX_INT64 = 2**63 - 1


def check_dump(data: Any) -> dict[str, Any]:
    """Validate an export before anything is written: every field, by the rules of a live write.

    Returns a checked copy (the caller's dict is left as it was) in which each
    thread's ``messages`` are also parsed, as ``Message`` values, under
    ``_parsed``. A value ``append_messages``, ``update_working_memory`` or
    ``remember_fact`` would refuse is refused here too (an id that is a path
    anywhere: ``check_name``), and so are wrong
    types and shapes, timestamps that do not parse, and duplicate ids.

    Raises:
        UsageError: what is wrong and where (``threads[2].messages[5].id``).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"not a caderno export (expected format {FORMAT!r})")
    version = data.get("version")
    if version != VERSION:
        # Not echoed whole: an integer past 64 bits may have thousands of digits (repr of one refuses
        # past 4,300), and a string any length.
        shown = (
            "an integer past 64 bits" if isinstance(version, int) and abs(version) > MAX_INT64 else repr(version)[:40]
        )
        raise UsageError(f"unsupported export version {shown}; this caderno reads {VERSION}")
    check_json(data, "export", max_bytes=None, max_depth=DUMP_DEPTH)  # JSON only, bounded depth, no NaN
    check_name(data.get("resource_id"), "export resource_id")
    unknown = set(data) - {"format", "version", "resource_id", "working_memory", "notebook", "threads", *_LISTS}
    if unknown:
        raise UsageError(f"export has unknown section(s): {', '.join(sorted(unknown))}")
    # New lists: entries are replaced by checked copies, never in the caller's lists.
    out = {**data, **{name: list(_list(data, name)) for name in _LISTS}, "threads": list(_list(data, "threads"))}

    wm = data.get("working_memory")
    if wm is not None:
        wm = out["working_memory"] = _fields(
            wm, "working_memory", {"data": dict, "version": int, "updated_at": str | None}
        )
        if not 1 <= wm["version"] <= MAX_INT64:
            raise UsageError(f"export working_memory.version must be within [1, 2**63-1], not {wm['version']}")
        check_time(wm.get("updated_at"), "working_memory.updated_at", optional=True)
    for i, e in enumerate(out["working_memory_log"]):
        where = f"working_memory_log[{i}]"
        _fields(e, where, {"version": int, "patch": dict, "source": str, "created_at": str})
        if not 1 <= e["version"] <= MAX_INT64:
            raise UsageError(f"export {where}.version must be within [1, 2**63-1]")
        check_id(e["source"], f"{where}.source")
        check_time(e["created_at"], f"{where}.created_at")
    for name, fields in (("facts", FACT_FIELDS), ("fact_history", FACT_HISTORY_FIELDS)):
        seen: set[tuple[str, str]] = set()
        for i, f in enumerate(out[name]):
            where = f"{name}[{i}]"
            _fields(f, where, dict.fromkeys(fields, str))
            check_fact(f["category"], f["key"], f["value"], f["source"])
            for when in fields[4:]:
                check_time(f[when], f"{where}.{when}")
            if name == "facts":
                if (f["category"], f["key"]) in seen:
                    raise UsageError(f"export facts hold {f['category']}/{f['key']} twice")
                seen.add((f["category"], f["key"]))
    for i, e in enumerate(out["message_log"]):
        where = f"message_log[{i}]"
        e = out["message_log"][i] = _fields(
            e, where, {f: (str | None if f in ("old_content", "reason") else str) for f in MESSAGE_LOG_FIELDS}
        )
        if e["action"] not in ("edit", "pop", "delete"):
            raise UsageError(f"export {where}.action must be edit, pop or delete")
        for f in ("message_id", "thread_id"):
            check_name(e[f], f"{where}.{f}")
        check_id(e["actor"], f"{where}.actor")
        check_time(e["created_at"], f"{where}.created_at")
    _check_state(out)
    _check_items(out["items"])
    out["notebook"] = _check_notebook(data.get("notebook"))

    ids: set[str] = set()
    threads = []
    for i, t in enumerate(out["threads"]):
        where = f"threads[{i}]"
        t = _fields(t, where, {"id": str, "title": str | None, "metadata": dict | None, "messages": list})
        check_name(t["id"], f"{where}.id")
        check_title(t.get("title"))
        check_metadata(t.get("metadata"), f"{where}.metadata")
        for when in ("created_at", "updated_at"):
            check_time(t.get(when), f"{where}.{when}", optional=True)
        parsed = []
        for j, raw in enumerate(t["messages"]):
            parsed.append(_message(raw, f"{where}.messages[{j}]"))
            if parsed[-1].id in ids:
                raise UsageError(f"export holds message id {parsed[-1].id!r} twice")
            ids.add(parsed[-1].id or "")
        threads.append({**t, "_parsed": parsed})
    if len({t["id"] for t in threads}) != len(threads):
        raise UsageError("export holds a thread id twice")
    out["threads"] = threads
    return out


_LISTS = (
    "working_memory_log",
    "facts",
    "fact_history",
    "message_log",
    "scheduled_tasks",
    "macros",
    "allowed_prefixes",
    "items",
)


def _list(data: dict[str, Any], name: str) -> list[Any]:
    items = data.get(name)
    if items is None:
        return []  # an export made before that section existed
    if not isinstance(items, list):
        raise UsageError(f"export {name} must be a list, not {type(items).__name__}")
    return items


def _fields(item: Any, where: str, kinds: dict[str, Any]) -> dict[str, Any]:
    """``item`` is an object whose listed fields have these types (``None`` allowed where the type says).

    Returns a copy in which a missing field that may be ``None`` is ``None``:
    stores read every listed field by name, so an absent one must not reach
    them as a ``KeyError``.
    """
    if not isinstance(item, dict):
        raise UsageError(f"export {where} must be an object, not {type(item).__name__}")
    for name, kind in kinds.items():
        value = item.get(name)
        allowed = kind.__args__ if hasattr(kind, "__args__") else (kind,)
        if isinstance(value, bool) and bool not in allowed:
            raise UsageError(f"export {where}.{name} must be {_kind_name(allowed)}, not a boolean")
        if not isinstance(value, tuple(a for a in allowed if a is not type(None))) and not (
            value is None and type(None) in allowed
        ):
            raise UsageError(f"export {where}.{name} must be {_kind_name(allowed)}, not {type(value).__name__}")
    return {**dict.fromkeys(kinds), **item}


def _kind_name(kinds: tuple[Any, ...]) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "text",
        int: "an integer",
        float: "a number",
        bool: "true or false",
    }
    return " or ".join(names.get(k, "null") for k in kinds)


def _message(raw: Any, where: str) -> Message:
    _fields(raw, where, {"id": str, "role": str, "created_at": str})
    try:
        m = Message.from_dict(raw)
    except (KeyError, TypeError, ValueError, AttributeError, UsageError) as exc:
        raise UsageError(f"export {where} is not a message: {exc}") from None
    try:
        check_message(m)
    except UsageError as exc:
        raise UsageError(f"export {where}: {exc}") from None
    return m


def _check_notebook(raw: Any) -> dict[str, list[str]]:
    """The notebook section: each entry by the notebook's own rules (it reaches the model's instructions)."""
    from ...core.errors import NotebookError
    from .notebook_rules import check_entry

    if raw is None:
        return {"memory": [], "user": []}
    if not isinstance(raw, dict) or set(raw) - {"memory", "user"}:
        raise UsageError("export notebook must be an object with the lists memory and user")
    out: dict[str, list[str]] = {}
    for target in ("memory", "user"):
        entries = raw.get(target) or []
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise UsageError(f"export notebook.{target} must be a list of strings")
        try:
            out[target] = list(dict.fromkeys(check_entry(e) for e in entries))
        except NotebookError as exc:
            raise UsageError(f"export notebook.{target}: {exc}") from None
    return out


def _check_state(out: dict[str, Any]) -> None:
    """Scheduled tasks, macros and prefixes of a dump."""
    from ...core.cron import MAX_SCHEDULE_CHARS, next_run
    from ...core.prefixes import normalize_prefix
    from ...core.validate import check_zone
    from .task_rules import MAX_TASK_NAME, MAX_TASK_PROMPT

    names: set[str] = set()
    for i, raw in enumerate(out["scheduled_tasks"]):
        where = f"scheduled_tasks[{i}]"
        if isinstance(raw, dict) and raw.get("next_run_at") is None:
            # The store reads it by name, and a task without it would never fire.
            raise UsageError(f"export {where}.next_run_at is missing: every task needs the moment it runs next")
        # The checked copy (absent optional fields as None) is what the store reads.
        t = out["scheduled_tasks"][i] = _fields(
            raw,
            where,
            {
                "id": str,
                "name": str,
                "cron_expr": str | None,
                "original_schedule": str,
                "prompt": str,
                "source": str,
                "is_oneshot": bool,
                "is_paused": bool,
                "is_trusted": bool,
                "timezone": str,
                "thread_id": str,
                "next_run_at": str,
                "last_run_at": str | None,
            },
        )
        for f in ("id", "name", "thread_id"):
            check_name(t[f], f"{where}.{f}")
        if len(t["name"]) > MAX_TASK_NAME or len(t["prompt"]) > MAX_TASK_PROMPT or not t["prompt"].strip():
            raise UsageError(f"export {where}: name or prompt empty or too long")
        check_text(t["prompt"], f"{where}.prompt")
        check_text(t["original_schedule"], f"{where}.original_schedule")
        if len(t["original_schedule"]) > MAX_SCHEDULE_CHARS:
            raise UsageError(f"export {where}.original_schedule is longer than {MAX_SCHEDULE_CHARS} characters")
        if t["source"] not in ("tool", "config") or t["is_oneshot"] != (t["cron_expr"] is None):
            raise UsageError(f"export {where}: source must be tool or config, and only a one-shot has no cron")
        check_zone(t["timezone"], f"export {where}.timezone")
        if t["cron_expr"] is not None:
            try:
                created = check_time(t.get("created_at"), f"{where}.created_at")
                assert created is not None
                next_run(t["cron_expr"], after=created, tz=t["timezone"])
            except UsageError as exc:
                raise UsageError(f"export {where}.cron_expr: {exc}") from None
        for when in ("next_run_at", "last_run_at", "created_at", "updated_at"):
            check_time(t.get(when), f"{where}.{when}", optional=when in ("next_run_at", "last_run_at"))
        if t["name"] in names:
            raise UsageError(f"export holds the task name {t['name']!r} twice")
        names.add(t["name"])
    for i, m in enumerate(out["macros"]):
        where = f"macros[{i}]"
        _fields(
            m,
            where,
            {
                "trigger_tool": str,
                "trigger_pattern": str,
                "next_tool": str,
                "confidence": float | int,
                "used_count": int,
                "success_count": int,
                "failure_count": int,
            },
        )
        if (
            set(m)
            - {"trigger_tool", "trigger_pattern", "next_tool", "next_args", "confidence"}
            - {
                "used_count",
                "success_count",
                "failure_count",
            }
        ):
            raise UsageError(f"export {where} has unknown fields")
        counts = (m["used_count"], m["success_count"], m["failure_count"])
        if not 0 <= m["confidence"] <= 1 or min(counts) < 0 or max(counts) > MAX_INT64:
            raise UsageError(f"export {where}: confidence must be within [0, 1] and counts not negative")
        for f in ("trigger_tool", "trigger_pattern", "next_tool"):
            check_id(m[f], f"{where}.{f}")
    for i, prefix in enumerate(out["allowed_prefixes"]):
        if not isinstance(prefix, str) or normalize_prefix(prefix) != prefix:
            raise UsageError(f"export allowed_prefixes[{i}] is not a normalised command prefix")


def _check_items(items: list[Any]) -> None:
    """The LangGraph store's documents of a dump."""
    seen: set[tuple[tuple[str, ...], str]] = set()
    for i, it in enumerate(items):
        where = f"items[{i}]"
        _fields(
            it,
            where,
            {"namespace": list, "key": str, "value": dict, "created_at": str, "updated_at": str, "embed": list | None},
        )
        for j, text in enumerate(it.get("embed") or ()):
            if not isinstance(text, str):
                raise UsageError(f"export {where}.embed[{j}] must be text, not {type(text).__name__}")
            check_text(text, f"{where}.embed[{j}]")
        labels = it["namespace"]
        if not labels or any(not isinstance(x, str) or not x or "." in x for x in labels):
            raise UsageError(f"export {where}.namespace must be non-empty labels without '.'")
        for label in labels:
            check_id(label, f"{where}.namespace label")
        check_id(it["key"], f"{where}.key")
        check_time(it["created_at"], f"{where}.created_at")
        check_time(it["updated_at"], f"{where}.updated_at")
        key = (tuple(labels), it["key"])
        if key in seen:
            raise UsageError(f"export holds the item {'.'.join(labels)}/{it['key']} twice")
        seen.add(key)
