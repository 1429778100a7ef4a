"""Tools: plain Python functions the model may call.

A function with type hints and a Google-style docstring becomes a tool. Its
JSON Schema is derived from the signature with pydantic, and the model's
arguments are validated against the same pydantic model before the call, so
a bad call becomes an error message for the model, never a crash.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints

from ..core.errors import InvalidToolArguments, UsageError
from ..core.messages import ToolSpec

__all__ = ["Tool", "ToolSpec", "collect_tools", "tool"]

_MARK = "__caderno_tool__"


def _doc_parts(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and per-argument text."""
    doc = inspect.cleandoc(doc or "")
    summary, _, rest = doc.partition("\nArgs:")
    args: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # next section (Returns:, Raises:)
            break
        m = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if m and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = m.group(1)
            args[current] = m.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    return summary.strip(), args


class Tool:
    """A callable plus its schema; ``await tool.run(arguments)`` validates and calls."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool = False,
    ) -> None:
        from pydantic import ConfigDict, create_model

        self.fn = fn
        self.needs_approval = needs_approval
        """``AgentChat`` asks its approval callback before running it (see ``caderno.agent.approval``)."""
        self.name = name or fn.__name__
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise UsageError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        summary, arg_docs = _doc_parts(fn.__doc__ or "")
        self.description = description or summary or self.name
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            if pname in ("self", "cls") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            from pydantic import Field

            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (hints.get(pname, Any), Field(default, description=arg_docs.get(pname)))
        self.model = create_model(f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Parse the model's arguments into keyword arguments, or raise ``InvalidToolArguments``."""
        from pydantic import ValidationError

        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:  # not JSON, or an integer past Python's digit limit
                raise InvalidToolArguments(f"arguments are not valid JSON: {exc}", tool=self.name) from None
        if not isinstance(arguments, dict):
            raise InvalidToolArguments(
                f"arguments must be a JSON object, not {type(arguments).__name__}", tool=self.name
            )
        try:
            parsed = self.model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidToolArguments(f"invalid arguments for {self.name}: {problems}", tool=self.name) from None
        return {k: getattr(parsed, k) for k in type(parsed).model_fields}

    async def run(self, arguments: Any) -> Any:
        kwargs = self.validate(arguments)
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
) -> Any:
    """Mark a function (or method) as a tool; usable bare or with arguments.

    Methods marked on a class are collected when an instance is passed in
    ``tools=``, so one object can contribute several tools.
    ``needs_approval=True``: ``AgentChat`` asks before each call (see
    ``caderno.agent.approval``).
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, _MARK, {"name": name, "description": description, "needs_approval": needs_approval})
        return f

    return mark(fn) if fn is not None else mark


def collect_tools(items: Iterable[Any]) -> list[Tool]:
    """Turn functions, ``Tool`` objects and tool-bearing instances into tools."""
    tools: list[Tool] = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif inspect.isfunction(item) or inspect.ismethod(item) or inspect.isbuiltin(item):
            tools.append(Tool(item, **getattr(item, _MARK, {})))
        else:
            methods = [
                getattr(item, n) for n in dir(type(item)) if not n.startswith("_") and callable(getattr(item, n, None))
            ]
            marked = [m for m in methods if hasattr(m, _MARK)]
            chosen = marked or [m for m in methods if inspect.ismethod(m)]
            if not chosen:
                raise UsageError(f"{type(item).__name__} has no methods to offer as tools")
            tools.extend(Tool(m, **getattr(m, _MARK, {})) for m in chosen)
    names = [t.name for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"two tools share the name(s): {', '.join(dupes)}")
    return tools
