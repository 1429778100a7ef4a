"""caderno as the memory of an OpenAI Agents SDK agent (``pip install 'caderno[openai-agents]'``).

Four pieces:

- ``CadernoSession``: the SDK's ``Session`` protocol over one caderno thread,
  ``(resource_id, session_id)``. Pass it as ``Runner.run(..., session=...)``.
- ``model_settings``: the SDK's ``ModelSettings`` with ``store=False``, for
  ``Agent(model_settings=...)`` or ``RunConfig(model_settings=...)``: the
  session owns the history, so the provider should keep no copy (the SDK
  itself asks OpenAI to store every chat completion unless told otherwise).
- ``memory_tools``: the catalog's ``update_working_memory``, ``recall`` and
  the notebook's ``memory`` tool as SDK function tools (``caderno.tools``).
- ``memory_instructions``: dynamic instructions that show the working memory
  (read again at every model call) and the notebook (frozen at the first call,
  so the prompt prefix stays cache-stable).

How items are stored. Every SDK item becomes exactly one caderno message, so
``limit`` and ``pop_item`` count the same things in both worlds, and recall,
summaries, the inspector and export see the conversation:

===========================  ==================================================
SDK item                     caderno message
===========================  ==================================================
message, role ``user``       ``user``, the text parts
message, role ``assistant``  ``assistant``, the ``output_text``/refusal parts
message, ``system``/         ``system``, the text parts
``developer``
``function_call``            ``assistant`` with one tool call (id = ``call_id``,
                             arguments parsed from JSON, else the raw text)
``function_call_output``     ``tool`` (``tool_call_id`` = ``call_id``), the output
anything else (reasoning,    ``system`` whose text is ``[<type>]`` plus any
hosted tool calls, …)        summary text: never embedded, low importance, and
                             the transcript of a summary still says it happened
===========================  ==================================================

The item itself rides in ``metadata["openai_agents"]["item"]`` and comes
back verbatim (the runner compares what it pops with what it wrote when it
rewinds a retried turn). Its text fields are not stored twice: they are
lifted into the message text and recorded as ``[*path, start, end]`` slices,
because message metadata is bounded (``MAX_METADATA_BYTES``) while a tool
output can be far larger. A message whose text was edited in caderno comes
back with the edited text in its first text field.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.errors import MissingExtra, NotFound
from ..core.messages import Message, ToolCall

if TYPE_CHECKING:
    from agents import Agent, FunctionTool, ModelSettings, RunContextWrapper, TResponseInputItem
    from agents.memory import SessionSettings

    from ..memory.adapters.notebook_files import Notebook
    from ..memory.facade import Memory
    from ..tools.base import Scope, ToolDef

__all__ = [
    "METADATA_KEY",
    "CadernoSession",
    "item_to_message",
    "memory_instructions",
    "memory_tools",
    "message_to_items",
    "model_settings",
]

#: The key of ``Message.metadata`` that holds the SDK's item.
METADATA_KEY = "openai_agents"
#: Joins the text parts of one item into the message text (slices make it reversible).
_PART_SEPARATOR = "\n"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

T = TypeVar("T")


def _sdk() -> Any:
    """The ``agents`` package, imported on first use so ``import caderno`` never pays for it."""
    try:
        import agents
    except ImportError:
        raise MissingExtra("openai-agents", "openai-agents") from None
    return agents


async def _settled(awaitable: Awaitable[T]) -> T:
    """Let a write finish even when the caller is cancelled, then re-raise the cancellation.

    A cancelled ``add_items`` must not leave the caller unsure whether its
    items were stored (the SDK's own sessions do the same).
    """
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    result = task.result()  # a failed write wins over the cancellation
    if cancelled is not None:
        raise cancelled
    return result


# -- items <-> messages ---------------------------------------------------------------------


def _plain(item: Any) -> dict[str, Any]:
    """A deep, JSON-able copy of an SDK item (pydantic models are dumped as the SDK would)."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True, mode="json")
    if not isinstance(item, dict):
        raise TypeError(f"session items must be dicts (TResponseInputItem), got {type(item).__name__}")
    copied: dict[str, Any] = json.loads(json.dumps(item, ensure_ascii=False))
    return copied


def _text_fields(item: dict[str, Any], key: str) -> list[list[Any]]:
    """Paths of the text an item holds under ``key``: the string itself, or its parts' text."""
    value = item.get(key)
    if isinstance(value, str):
        return [[key]]
    paths: list[list[Any]] = []
    if isinstance(value, list):
        for i, part in enumerate(value):
            if isinstance(part, dict):
                for field in ("text", "refusal"):
                    if isinstance(part.get(field), str):
                        paths.append([key, i, field])
                        break
    return paths


def _get(item: Any, path: Sequence[Any]) -> Any:
    for step in path:
        item = item[step]
    return item


def _set(item: Any, path: Sequence[Any], value: Any) -> None:
    for step in path[:-1]:
        item = item[step]
    item[path[-1]] = value


def _compact(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def item_to_message(item: Any, *, tool_names: dict[str, str] | None = None) -> Message:
    """The caderno message that stores one SDK item (see the module docstring for the mapping)."""
    stored = _plain(item)
    kind = stored.get("type", "message" if "role" in stored else None)
    meta: dict[str, Any] = {}
    prefix = ""
    role: Any = "system"
    tool_calls: tuple[ToolCall, ...] | None = None
    call_id = stored.get("call_id")
    paths: list[list[Any]] = []
    if kind == "message" and stored.get("role") in _ROLES:
        role = _ROLES[stored["role"]]
        paths = _text_fields(stored, "content")
    elif kind == "function_call" and isinstance(call_id, str) and call_id and isinstance(stored.get("name"), str):
        role = "assistant"
        raw = stored.get("arguments")
        arguments: Any = raw if isinstance(raw, str) else {}
        if isinstance(raw, str):
            try:
                parsed = json.loads(raw) if raw.strip() else {}
            except ValueError:  # not JSON (or digits Python will not read): the call keeps the raw text
                meta["arguments"] = "raw"
                stored["arguments"] = ""
            else:
                if isinstance(parsed, dict):
                    arguments = parsed
                # Text the tool call rebuilds exactly is not stored twice; other JSON (spaced,
                # or not an object, which caderno's stores parse back) stays in the item.
                if isinstance(parsed, dict) and _compact(parsed) == raw:
                    meta["arguments"] = "compact"
                    stored["arguments"] = ""
        tool_calls = (ToolCall(id=call_id, name=stored["name"], arguments=arguments),)
    elif kind == "function_call_output" and isinstance(call_id, str) and call_id:
        role = "tool"
        paths = _text_fields(stored, "output")
    else:
        prefix = f"[{kind or 'item'}]"
        if isinstance(stored.get("summary"), list):
            paths = _text_fields(stored, "summary")
        if paths:
            prefix += _PART_SEPARATOR
    texts, slices, at = [], [], len(prefix)
    for path in paths:
        text = _get(stored, path)
        _set(stored, path, "")
        slices.append([*path, at, at + len(text)])
        texts.append(text)
        at += len(text) + len(_PART_SEPARATOR)
    content = prefix + _PART_SEPARATOR.join(texts)
    meta.update(item=stored, text=slices, chars=len(content))
    if role == "tool":
        name = (tool_names or {}).get(call_id or "")
        return Message.tool(content, tool_call_id=str(call_id), name=name, metadata={METADATA_KEY: meta})
    return Message(role=role, content=content, tool_calls=tool_calls, metadata={METADATA_KEY: meta})


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """The SDK item a stored message holds; a message written outside the SDK becomes plain items."""
    meta = (message.metadata or {}).get(METADATA_KEY)
    if not isinstance(meta, dict) or not isinstance(meta.get("item"), dict):
        return _foreign_items(message)
    item = copy.deepcopy(meta["item"])
    edited = meta.get("chars") != len(message.content)
    for n, (*path, start, end) in enumerate(meta.get("text") or ()):
        _set(item, path, message.content if edited and n == 0 else "" if edited else message.content[start:end])
    call = message.tool_calls[0] if message.tool_calls else None
    if meta.get("arguments") == "compact" and call is not None:
        item["arguments"] = _compact(call.arguments)
    elif meta.get("arguments") == "raw" and call is not None:
        item["arguments"] = call.arguments if isinstance(call.arguments, str) else _compact(call.arguments)
    return [item]


def _foreign_items(message: Message) -> list[dict[str, Any]]:
    """Items for a message caderno's own agent (or an import) wrote: easy input messages and calls."""
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content}]
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        items.append({"role": message.role, "content": message.content})
    for call in message.tool_calls or ():
        arguments = call.arguments if isinstance(call.arguments, str) else _compact(call.arguments)
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments})
    return items


# -- the session ----------------------------------------------------------------------------


class CadernoSession:
    """The OpenAI Agents SDK ``Session`` protocol over one caderno thread.

    The thread is ``(resource_id, session_id)``; each SDK item is one caderno
    message. Each ``add_items`` call is one transaction, so the items of one
    call are never split or interleaved with another run's.

    Every method also takes the ``wrapper`` keyword (the run context): with
    it the SDK's runner passes its context to the session; caderno does not
    need it and ignores it.

    Args:
        session_id: the SDK's session id, used as the caderno thread id.
        memory: an open ``caderno.Memory``.
        resource_id: whose thread it is (the user, the household).
        session_settings: the SDK's ``SessionSettings`` (or a dict of them);
            its ``limit`` caps ``get_items`` when no limit is given.

    Raises:
        MissingExtra: the SDK is not installed.
    """

    def __init__(
        self,
        session_id: str,
        *,
        memory: Memory,
        resource_id: str,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        _sdk()
        from agents.memory.session_settings import SessionSettings, coerce_session_settings

        from ..core.validate import check_id

        self.session_id = check_id(session_id, "session_id")
        self.resource_id = check_id(resource_id, "resource_id")
        self.memory = memory
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )

    def __repr__(self) -> str:
        return f"CadernoSession(session_id={self.session_id!r}, resource_id={self.resource_id!r})"

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The session's items, oldest first; ``limit`` (or the settings' limit) keeps the newest N.

        A negative limit means all items, as in the SDK's ``SQLiteSession``.
        """
        from agents.memory.session_settings import resolve_session_limit

        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit < 0:
            limit = None
        messages = await self.memory.get_messages(resource_id=self.resource_id, thread_id=self.session_id, limit=limit)
        items = [item for m in messages for item in message_to_items(m)]
        return items[-limit:] if limit else items  # type: ignore[return-value]

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Store items at the end of the session, all in one transaction."""
        if not items:
            return
        names: dict[str, str] = {}
        messages = []
        for item in items:
            message = item_to_message(item, tool_names=names)
            for call in message.tool_calls or ():
                names[call.id] = call.name
            messages.append(message)
        await _settled(
            self.memory.append_messages(resource_id=self.resource_id, thread_id=self.session_id, messages=messages)
        )

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None) -> TResponseInputItem | None:
        """Remove and return the newest item, exactly as it was added (``None`` when empty)."""
        popped = await _settled(
            self.memory.messages.pop(
                resource_id=self.resource_id, thread_id=self.session_id, actor="openai-agents", reason="pop_item"
            )
        )
        if popped is None:
            return None
        return message_to_items(popped)[-1]  # type: ignore[return-value]

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Delete the thread and everything in it (a session that holds nothing is left as it is)."""
        try:
            await _settled(self.memory.delete_thread(resource_id=self.resource_id, thread_id=self.session_id))
        except NotFound:
            pass


# -- tools and instructions -----------------------------------------------------------------


def _notebook(resource_id: str, notebook: Notebook | str | Path | None) -> Notebook:
    from ..core.files import caderno_home
    from ..memory.adapters.notebook_files import Notebook

    if isinstance(notebook, Notebook):
        return notebook
    return Notebook.for_resource(notebook if notebook is not None else caderno_home(), resource_id)


def memory_tools(
    memory: Memory,
    resource_id: str,
    *,
    notebook: Notebook | str | Path | None = None,
) -> list[FunctionTool]:
    """The catalog's tools for the SDK (``caderno.tools.catalog``): ``update_working_memory``, ``recall``, ``memory``.

    Each catalog tool becomes a ``FunctionTool`` with the catalog's schema,
    validator and result text, so the model reads what AgentChat and MCP
    would answer. Each write is its own transaction, at once (the SDK has no
    turn transaction to join). A refusal reaches the model as
    ``{"ok": false, "error": …}``, which it can act on.

    Args:
        memory: an open ``caderno.Memory``.
        resource_id: whose memory the tools read and change.
        notebook: a ``Notebook``, or the home directory under which the
            resource's notebook lives (default ``$CADERNO_HOME``).

    Raises:
        MissingExtra: the SDK is not installed.
    """
    sdk = _sdk()
    from ..tools.base import Scope
    from ..tools.catalog import offered

    book = _notebook(resource_id, notebook)
    port = book.port()
    scope = Scope(memory=memory, resource_id=resource_id, notebook=lambda: port)
    return [_function_tool(sdk, tool, scope) for tool in offered("openai-agents")]


def _function_tool(sdk: Any, tool: ToolDef[Any], scope: Scope) -> FunctionTool:
    """One catalog tool as the SDK's ``FunctionTool``: the raw argument text goes to the catalog's validator."""

    async def invoke(ctx: Any, raw: str) -> str:
        return (await tool.call(scope, raw)).text

    function_tool: FunctionTool = sdk.FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=copy.deepcopy(tool.parameters),
        on_invoke_tool=invoke,
        # Strict mode makes every property required and refuses free-form objects (the patch):
        # only a schema it takes as it is asks for it.
        strict_json_schema=tool.strict,
    )
    return function_tool


def memory_instructions(
    memory: Memory,
    resource_id: str,
    instructions: str | None = None,
    *,
    notebook: Notebook | str | Path | None = None,
) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
    """Dynamic instructions for ``Agent(instructions=...)``: yours, the working memory and the notebook.

    The working memory is read again at every model call, so a patch the
    model just made shows at its next step. The notebook is frozen at the
    first call (``Notebook.load``), which keeps the prompt prefix stable;
    notes written later appear in the next session's instructions.

    Args:
        memory: an open ``caderno.Memory``.
        resource_id: whose memory to show.
        instructions: what comes first (default: caderno's agent instructions).
        notebook: a ``Notebook``, or the home directory of the resource's notebook.
    """
    from ..agent.chat import DEFAULT_INSTRUCTIONS, working_memory_block

    book = _notebook(resource_id, notebook)
    frozen: list[str] = []
    loaded = False

    async def render(ctx: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        nonlocal loaded
        if not loaded:
            await asyncio.to_thread(book.load)
            frozen.extend(block for block in (book.snapshot("memory"), book.snapshot("user")) if block)
            loaded = True
        state = await memory.working_memory.state(resource_id=resource_id)
        blocks = [instructions or DEFAULT_INSTRUCTIONS, working_memory_block(state, memory.working_memory.json_schema)]
        return "\n\n".join(blocks + frozen)

    return render


def model_settings(**settings: Any) -> ModelSettings:
    """The SDK's ``ModelSettings(store=False, **settings)``: give it to the agent whose session is caderno's.

    With ``CadernoSession`` the conversation lives in caderno, so the model
    provider is asked not to keep a copy (the owned-conversation rule every
    model call caderno makes follows). caderno builds no model for the SDK —
    the agent's own ``model`` is called — so this is how that call says so::

        Agent(name="household", model="gpt-4.1-mini", model_settings=model_settings(temperature=0.2))

    Any other ``ModelSettings`` field passes through; ``store`` given here wins.
    """
    sdk = _sdk()
    fields: dict[str, Any] = {"store": False, **settings}
    return sdk.ModelSettings(**fields)
