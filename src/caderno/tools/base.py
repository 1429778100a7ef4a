"""What a memory tool is, and the one way every interface calls one.

A ``ToolDef`` holds everything about a tool: its name, the description a
model reads, the JSON Schema of its arguments, the typed request its
arguments become, its handler, and which interfaces offer it. A binding
(AgentChat, MCP, the Agents SDK adapter) builds a ``Scope`` — whose memory,
which thread, the notebook, the open turn if there is one — and calls
``await tool.call(scope, arguments)``; it gets an ``Outcome`` back and hands
``outcome.text`` to the model. So the same call reads the same everywhere.

One result shape, a JSON object:

- success: ``{"ok": true, …the tool's fields…}``;
- refusal: ``{"ok": false, "error": "<caderno's sentence>"}`` (the notebook
  adds its ``usage`` figure, so a model told "full" sees how full).

The validator (``check_arguments``) reads the tool's schema: unknown,
missing and wrong-typed arguments, values outside an ``enum`` or a range,
and values caderno cannot store (too deep, NaN, too large, NUL…: the
checks of ``caderno.core.jsonvalue``) are refused with one sentence each,
never a framework's error text.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from ..core.errors import CadernoError, InvalidToolArguments, UsageError
from ..core.jsonvalue import MAX_PATCH_BYTES, check_json
from ..core.messages import ToolSpec
from ..memory.engines.notebook_rules import NotebookPort
from ..memory.facade import AgentMemory, Memory
from ..stores import ops

__all__ = [
    "INTERFACES",
    "NoArguments",
    "SCHEMA_KEYWORDS",
    "Effect",
    "Interface",
    "Outcome",
    "Scope",
    "ToolDef",
    "Turn",
    "as_text",
    "check_arguments",
    "check_value",
    "done",
    "refused",
    "signature",
]

#: Who binds the catalog. ``agent`` is ``AgentChat``, and so also the memory
#: proxy (each of its requests is one AgentChat turn).
Interface = Literal["agent", "mcp", "openai-agents"]
INTERFACES: tuple[Interface, ...] = ("agent", "mcp", "openai-agents")

#: What a call does to the memory (MCP's tool annotations come from it).
Effect = Literal["read", "write", "delete"]

#: The JSON Schema keywords an argument's schema may use: the ones
#: ``check_value`` enforces (``description`` and ``default`` only inform).
SCHEMA_KEYWORDS = frozenset({"type", "description", "enum", "minimum", "maximum", "default"})

_JSON_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
    (type(None), "null"),
)
_TYPES: dict[str, type] = {"string": str, "integer": int, "object": dict, "boolean": bool}


def _json_name(value: Any) -> str:
    """``an integer``, ``an array``…: a value's JSON type, as a model knows it."""
    return next((name for kind, name in _JSON_NAMES if isinstance(value, kind)), type(value).__name__)


@dataclass(kw_only=True, slots=True)
class Turn:
    """An open turn's transaction (``AgentChat``): what its tools hold until it commits.

    Patches are checked against the turn's own view (the state loaded when
    the turn began, plus its earlier patches) and written at commit, in
    order, each merged with the stored state inside the transaction. Other
    writes (facts, scheduled tasks) wait in ``writes``. A turn that fails
    keeps none of them.
    """

    working_memory: dict[str, Any] | None
    """The working memory as the turn sees it (after its held patches)."""
    version: int
    """Its version as the turn sees it: the loaded one plus one per held patch."""
    patches: list[dict[str, Any]] = field(default_factory=list)
    """The patches to apply at commit, in order."""
    writes: list[ops.Op[Any]] = field(default_factory=list)
    """Other operations to run in the commit's batch."""

    def hold_patch(self, patch: dict[str, Any], merged: dict[str, Any]) -> None:
        self.patches.append(patch)
        self.working_memory = merged
        self.version += 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Scope:
    """Where one call acts: whose memory, and what its binding knows."""

    memory: Memory | AgentMemory
    """The memory (only ``update_working_memory`` runs on a four-method ``AgentMemory``)."""
    resource_id: str
    """Whose memory: the binding decides it, never the model."""
    thread_id: str | None = None
    """The conversation the call belongs to, when the binding knows it."""
    notebook: Callable[[], NotebookPort] | None = None
    """The resource's notebook (files or database), fetched when a call needs it."""
    turn: Turn | None = None
    """The open turn to join; ``None``: each write is its own transaction, at once."""
    now: datetime | None = None
    """The moment of the call ("in 2 hours" counts from it); ``None``: the clock."""
    timezone: str = "UTC"
    """The user's IANA zone, for schedules."""

    @property
    def full(self) -> Memory:
        """The memory as a full ``Memory`` (every tool but ``update_working_memory`` needs one)."""
        if not isinstance(self.memory, Memory):
            raise UsageError(f"this tool needs a caderno.Memory, not {type(self.memory).__name__}")
        return self.memory

    async def write(self, op: ops.Op[Any]) -> None:
        """Hold ``op`` in the open turn (it commits with it), or run it now in its own transaction."""
        if self.turn is not None:
            self.turn.writes.append(op)
        else:
            await self.full.run(op)


def done(**fields: Any) -> dict[str, Any]:
    """A success payload: ``{"ok": true, **fields}``."""
    return {"ok": True, **fields}


def refused(error: str, **fields: Any) -> dict[str, Any]:
    """A refusal payload: ``{"ok": false, "error": error, **fields}``."""
    return {"ok": False, "error": error, **fields}


def as_text(value: Any) -> str:
    """What a model reads for a tool's result: text as it is, anything else as JSON (non-ASCII kept)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call gave: the payload, and the text the model reads."""

    payload: dict[str, Any]
    """The JSON object (``ok`` first)."""

    @property
    def ok(self) -> bool:
        return bool(self.payload["ok"])

    @property
    def text(self) -> str:
        return as_text(self.payload)


@dataclass(frozen=True, kw_only=True, slots=True)
class NoArguments:
    """The request of a tool that takes no arguments."""


R = TypeVar("R")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDef(Generic[R]):
    """One memory tool, defined once; every interface binds this."""

    name: str
    """The name the model calls."""
    description: str
    """What it does and when to use it, for the model."""
    parameters: dict[str, Any]
    """JSON Schema of the arguments: an object, ``additionalProperties`` false,
    each property using only ``SCHEMA_KEYWORDS``."""
    request: Callable[..., R]
    """Builds the typed request from the checked arguments (every property as
    a keyword; absent ones as their ``default``, else ``None``). It may refuse
    with ``InvalidToolArguments`` for a rule the schema cannot say."""
    handler: Callable[[Scope, R], Awaitable[dict[str, Any]]]
    """Runs the request; returns ``done(...)`` or ``refused(...)``, or raises a ``CadernoError``."""
    result: tuple[str, ...]
    """The fields a success payload may carry after ``ok`` (the table in docs/guides/agents.md shows them; a test checks them)."""
    effect: Effect
    """What a call does to the memory."""
    offered: frozenset[Interface]
    """The interfaces that offer it."""
    why: str = ""
    """Why the others do not (empty when every interface offers it)."""

    @property
    def spec(self) -> ToolSpec:
        """What a model is told about it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @property
    def strict(self) -> bool:
        """Whether OpenAI's strict mode takes the schema as it is: every property required, none an open object."""
        props = self.parameters["properties"]
        return set(self.parameters.get("required", ())) == set(props) and all(
            p.get("type") != "object" for p in props.values()
        )

    def parse(self, arguments: Any) -> R:
        """The model's arguments (an object, or its JSON text) as the typed request.

        Raises:
            UsageError: with the sentence the model reads.
        """
        return self.request(**check_arguments(self.name, self.parameters, arguments))

    async def call(self, scope: Scope, arguments: Any) -> Outcome:
        """Check the arguments, run the handler, and shape the result; a refusal never raises."""
        try:
            payload = await self.handler(scope, self.parse(arguments))
        except CadernoError as exc:
            payload = refused(str(exc))
        return Outcome(payload)


def signature(name: str, parameters: dict[str, Any]) -> str:
    """``recall(query: string, top?: integer)``: how to call a tool, for error sentences and tables."""
    required = set(parameters.get("required", ()))
    parts = [
        f"{arg}{'' if arg in required else '?'}: {prop.get('type', 'any')}"
        for arg, prop in parameters["properties"].items()
    ]
    return f"{name}({', '.join(parts)})"


def check_arguments(name: str, parameters: dict[str, Any], arguments: Any) -> dict[str, Any]:
    """Every property of ``parameters``, checked: the model's value, or the default (else ``None``).

    ``arguments`` is an object, or its JSON text (read as the OpenAI model
    adapter reads a tool call's text, so both paths refuse alike). An
    optional argument sent as ``null`` counts as not sent.

    Raises:
        UsageError: the first problem, in one sentence.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, too many digits, too deep
            raise InvalidToolArguments(f"the arguments are not valid JSON: {exc}", tool=name) from None
    if not isinstance(arguments, dict):
        raise InvalidToolArguments(
            f"the arguments must be a JSON object, not {_json_name(arguments)}: call it as "
            f"{signature(name, parameters)}",
            tool=name,
        )
    props: dict[str, Any] = parameters["properties"]
    unknown = [k for k in arguments if k not in props]
    if unknown:
        raise InvalidToolArguments(
            f"{name} has no argument {unknown[0]!r}; call it as {signature(name, parameters)}", tool=name
        )
    values: dict[str, Any] = {}
    for arg, prop in props.items():
        value = arguments.get(arg)
        if value is None:
            if arg in parameters.get("required", ()):
                raise InvalidToolArguments(f"{name} needs {arg!r}; call it as {signature(name, parameters)}", tool=name)
            values[arg] = prop.get("default")
        else:
            values[arg] = check_value(arg, prop, value)
    return values


def check_value(arg: str, prop: dict[str, Any], value: Any) -> Any:
    """One argument by its schema: storable, then its type, enum and range; returns the value to use.

    An ``object`` may arrive as its JSON text (models do send that) and is
    parsed.

    Raises:
        UsageError: naming the argument.
    """
    check_json(value, arg, max_bytes=MAX_PATCH_BYTES)
    kind = prop.get("type")
    if kind == "object" and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            check_json(parsed, arg, max_bytes=MAX_PATCH_BYTES)
            value = parsed
    if kind is not None:
        expected = _TYPES[kind]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            article = "an" if kind[0] in "aeiou" else "a"
            raise InvalidToolArguments(f"{arg!r} must be {article} {kind}, not {_json_name(value)}")
    if "enum" in prop and value not in prop["enum"]:
        raise InvalidToolArguments(f"{arg!r} must be one of {', '.join(prop['enum'])}, not {value!r}")
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and value < low:
        raise InvalidToolArguments(f"{arg!r} must be at least {low}, not {value}")
    if high is not None and value > high:
        raise InvalidToolArguments(f"{arg!r} must be at most {high}, not {value}")
    return value
