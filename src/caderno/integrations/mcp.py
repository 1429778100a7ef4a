"""caderno as an MCP server: a model's tools and resources over one ``Memory``.

``build_server(memory, pick)`` returns an ``MCPServer`` (the official SDK,
extra ``mcp``) whose tools read and change one resource's memory. The
resource is never the model's choice alone: ``pick`` turns the call's
context and the optional ``resource`` argument into the resource it may
reach — over stdio the one named by ``caderno mcp --resource``, over HTTP
(``caderno.server.mcp_http``) one of the bearer key's resources. A resource
out of reach reads as ``resource '…' not found``, the same words a missing
one gets from the HTTP API.

Tools answer JSON text. A refusal (bad id, invalid patch, version conflict,
a full notebook) comes back as an MCP tool error carrying caderno's own
message, never a traceback.

Resources: ``caderno://{resource}/working-memory`` (JSON) and
``caderno://{resource}/notebook/{memory|user}`` — the notebook block as the
model sees it in its instructions, frozen at this server's first read
(see ``caderno.memory.notebook``: the snapshot stays put while writes reach disk).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from ..core.clock import to_iso
from ..core.errors import CadernoError, MissingExtra
from ..core.files import caderno_home
from ..core.messages import WorkingMemory
from ..memory.facade import Memory
from ..memory.notebook import Notebook

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.types import ToolAnnotations
except ImportError:  # pragma: no cover - exercised without the extra
    raise MissingExtra("mcp", "mcp") from None
from pydantic import Field

__all__ = ["Pick", "build_server", "stdio_pick"]

#: Turns a call's context and its ``resource`` argument (``None``: not given)
#: into the resource the call may reach; raises ``NotFound`` or ``UsageError``.
Pick = Callable[[Context, "str | None"], Awaitable[str]]

#: Messages ``get_messages`` returns when the model asks for no limit: enough
#: for a thread's recent turns, small enough for a model's context window.
DEFAULT_MESSAGE_LIMIT = 50

#: Hits ``recall`` keeps by default (fused score); the model can ask for more.
DEFAULT_RECALL_TOP = 10

INSTRUCTIONS = (
    "caderno is your durable memory of one user (a 'resource'), kept across conversations. "
    "Read the notebook resources and get_working_memory at the start of a conversation; "
    "use recall to find what was said before; save durable knowledge with notebook or remember_fact, "
    "and keep the current state of ongoing work in working memory."
)

ResourceArg = Annotated[
    str | None,
    Field(
        description=(
            "Whose memory. Leave it out when you reach a single resource; "
            "pass it when the server says you reach several."
        )
    ),
]


def stdio_pick(resource: str) -> Pick:
    """The ``pick`` of a server bound to one resource (``caderno mcp --resource``)."""
    from ..core.errors import NotFound
    from ..core.validate import check_name

    check_name(resource, "resource")  # its tools write: the id a write would refuse is refused up front

    async def pick(ctx: Context, given: str | None) -> str:
        if given is not None and given != resource:
            raise NotFound(f"resource {given!r} not found", resource_id=given)
        return resource

    return pick


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, frozenset | set | tuple):
        return sorted(value) if isinstance(value, frozenset | set) else list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_default)


def _wm(state: WorkingMemory | None) -> dict[str, Any]:
    if state is None:
        return {"data": None, "version": 0, "updated_at": None}
    return {"data": state.data, "version": state.version, "updated_at": state.updated_at}


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """caderno's refusals as MCP tool errors: the model reads the message, no traceback."""
    try:
        yield
    except CadernoError as exc:
        raise ToolError(str(exc)) from None


@contextlib.contextmanager
def _resource_errors() -> Iterator[None]:
    from ..core.errors import NotFound, UsageError

    try:
        yield
    except (NotFound, UsageError) as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except CadernoError as exc:
        raise ResourceError(str(exc)) from None


def build_server(
    memory: Memory, pick: Pick, *, listed: tuple[str, ...] = (), notebooks: dict[str, Notebook] | None = None
) -> MCPServer[Any]:
    """The MCP server over ``memory``.

    Args:
        memory: an opened ``Memory`` (the caller owns its lifetime).
        pick: chooses the resource each call reaches (``stdio_pick``, or the
            HTTP mount's key check).
        listed: resources whose MCP resources are listed by ``resources/list``
            (stdio: the one resource); the URI templates serve every resource
            ``pick`` allows either way.
        notebooks: the notebooks by resource, shared with the HTTP API when
            mounted there (one frozen snapshot per process).
    """
    from ..core.version import __version__

    server: MCPServer[Any] = MCPServer(name="caderno", version=__version__, instructions=INSTRUCTIONS)
    books: dict[str, Notebook] = {} if notebooks is None else notebooks

    def notebook_of(rid: str) -> Notebook:
        # Loaded (snapshot frozen) on first use, then kept: the model's
        # instructions stay the same for the life of this server.
        if rid not in books:
            books.setdefault(rid, Notebook.for_resource(caderno_home(), rid).load())
        return books[rid]

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    deletes = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only, structured_output=False)
    async def recall(
        query: Annotated[str, Field(description="What to look for, in the user's words: a topic, a name, a phrase.")],
        ctx: Context,
        thread_id: Annotated[
            str | None, Field(description="The current conversation's thread id, if you know it.")
        ] = None,
        scope: Annotated[
            Literal["resource", "thread"],
            Field(description="'resource': every conversation of the user (default); 'thread': only thread_id."),
        ] = "resource",
        top: Annotated[
            int, Field(ge=1, le=100, description="Most messages to return, best first.")
        ] = DEFAULT_RECALL_TOP,
        resource: ResourceArg = None,
    ) -> str:
        """Search past conversations for messages that matter to the current one.

        Combines meaning (embeddings), words (full-text), recency and importance.
        Returns the messages in conversation order, each with its thread, why it
        was found and a score. Use it before answering anything that may have
        come up before ("what did I say about…", names, plans, preferences).
        """
        with _tool_errors():
            rid = await pick(ctx, resource)
            hits = await memory.recall(resource_id=rid, query=query, thread_id=thread_id, scope=scope, top=top)
            return _json(
                {
                    "hits": [
                        {
                            "thread_id": h.thread_id,
                            "message": h.message.to_dict(),
                            "reasons": h.reasons,
                            "score": h.score,
                        }
                        for h in hits
                    ]
                }
            )

    @server.tool(annotations=read_only, structured_output=False)
    async def get_working_memory(ctx: Context, resource: ResourceArg = None) -> str:
        """Read the user's working memory: one JSON object with the current state of things.

        Returns {"data": {...} or null, "version": N, "updated_at": ...}. Pass the
        version as expected_version to update_working_memory so that a change made
        meanwhile is not overwritten.
        """
        with _tool_errors():
            rid = await pick(ctx, resource)
            return _json(_wm(await memory.get_working_memory_state(resource_id=rid)))

    @server.tool(annotations=writes, structured_output=False)
    async def update_working_memory(
        patch: Annotated[
            dict[str, Any],
            Field(
                description=(
                    "A JSON Merge Patch (RFC 7396): objects merge key by key, any other value replaces, "
                    "null deletes the key. Send only what changes."
                )
            ),
        ],
        ctx: Context,
        expected_version: Annotated[
            int | None,
            Field(description="The version you read; the update is refused if it changed since. Omit to force."),
        ] = None,
        resource: ResourceArg = None,
    ) -> str:
        """Change the user's working memory with a merge patch, atomically.

        Keep here the current, changing state (tasks in progress, the plan, open
        questions), not long-term knowledge (use notebook or remember_fact). A
        version conflict means someone else changed it: read it again and retry.
        Returns the new {"data", "version", "updated_at"}.
        """
        with _tool_errors():
            rid = await pick(ctx, resource)
            state = await memory.update_working_memory(
                resource_id=rid, patch=patch, expected_version=expected_version, source="mcp"
            )
            return _json(_wm(state))

    @server.tool(annotations=writes, structured_output=False)
    async def notebook(
        action: Annotated[Literal["add", "replace", "remove"], Field(description="What to do.")],
        target: Annotated[
            Literal["memory", "user"],
            Field(description="'memory': your own notes (MEMORY.md); 'user': what you know about the user (USER.md)."),
        ],
        ctx: Context,
        content: Annotated[str | None, Field(description="The entry text (add, replace).")] = None,
        old_text: Annotated[
            str | None, Field(description="A short unique piece of the entry to change (replace, remove).")
        ] = None,
        resource: ResourceArg = None,
    ) -> str:
        """Your notebook, kept across sessions and shown in your instructions from the next one on.

        Save durable things: preferences, corrections the user made, facts about
        them and their world, lessons that will matter next time. Not task
        progress or temporary state. Each store is bounded in characters: when one
        is full, merge entries with 'replace' or drop stale ones with 'remove' and
        retry. Entries are found by a short unique substring (old_text); there are
        no ids.
        """
        with _tool_errors():
            rid = await pick(ctx, resource)

            def apply() -> dict[str, Any]:
                outcome = notebook_of(rid).apply(action, target, content, old_text)
                return {"success": True, **dataclasses.asdict(outcome)}

            return _json(await asyncio.to_thread(apply))

    @server.tool(annotations=writes, structured_output=False)
    async def remember_fact(
        category: Annotated[str, Field(description="A short grouping: family, work, health, finance, home…")],
        key: Annotated[str, Field(description="What the fact is about, unique within the category: 'daughter'.")],
        value: Annotated[str, Field(description="The fact itself, one sentence: 'Ana, born 2015, likes chess'.")],
        ctx: Context,
        resource: ResourceArg = None,
    ) -> str:
        """Record a durable fact about the user, keyed by (category, key).

        Saving the same category and key again replaces the value (the old one is
        kept in its history). Use it for stable facts the user told you.
        """
        with _tool_errors():
            rid = await pick(ctx, resource)
            fact = await memory.remember_fact(resource_id=rid, category=category, key=key, value=value, source="agent")
            return _json(dataclasses.asdict(fact))

    @server.tool(annotations=read_only, structured_output=False)
    async def get_facts(
        ctx: Context,
        category: Annotated[str | None, Field(description="Only this category; omit for all.")] = None,
        resource: ResourceArg = None,
    ) -> str:
        """List the facts recorded about the user, most recently updated first."""
        with _tool_errors():
            rid = await pick(ctx, resource)
            facts = await memory.get_facts(resource_id=rid, category=category)
            return _json({"facts": [dataclasses.asdict(f) for f in facts]})

    @server.tool(annotations=deletes, structured_output=False)
    async def forget_fact(
        category: Annotated[str, Field(description="The fact's category.")],
        key: Annotated[str, Field(description="The fact's key.")],
        ctx: Context,
        resource: ResourceArg = None,
    ) -> str:
        """Delete a fact that is wrong or no longer true (only when the user asks, or it is clearly outdated)."""
        with _tool_errors():
            rid = await pick(ctx, resource)
            await memory.forget_fact(resource_id=rid, category=category, key=key)
            return _json({"forgotten": {"category": category.strip().lower(), "key": key}})

    @server.tool(annotations=read_only, structured_output=False)
    async def list_threads(ctx: Context, resource: ResourceArg = None) -> str:
        """List the user's conversations (threads): id, title, message count, first and last activity."""
        with _tool_errors():
            rid = await pick(ctx, resource)
            threads = await memory.list_threads(resource_id=rid)
            return _json({"threads": [dataclasses.asdict(t) for t in threads]})

    @server.tool(annotations=read_only, structured_output=False)
    async def get_messages(
        thread_id: Annotated[str, Field(description="The conversation, as list_threads names it.")],
        ctx: Context,
        limit: Annotated[
            int, Field(ge=1, le=500, description="Keep only the newest N messages.")
        ] = DEFAULT_MESSAGE_LIMIT,
        before: Annotated[int | None, Field(description="Page backwards: only messages before this position in the thread.")] = None,
        resource: ResourceArg = None,
    ) -> str:
        """Read a conversation's messages, oldest first (the newest `limit` of them).

        A thread that does not exist reads as no messages.
        """
        with _tool_errors():
            rid = await pick(ctx, resource)
            messages = await memory.get_messages(resource_id=rid, thread_id=thread_id, limit=limit, before=before)
            return _json({"messages": [m.to_dict() for m in messages]})

    async def read_working_memory(rid: str) -> str:
        with _resource_errors():
            return _json(_wm(await memory.get_working_memory_state(resource_id=rid)))

    async def read_notebook(rid: str, target: str) -> str:
        if target not in ("memory", "user"):
            raise ResourceNotFoundError(f"no notebook {target!r}: use memory or user")
        with _resource_errors():
            return await asyncio.to_thread(lambda: notebook_of(rid).snapshot(target) or "")

    @server.resource(
        "caderno://{resource}/working-memory",
        name="working-memory",
        description="The resource's working memory: {data, version, updated_at}.",
        mime_type="application/json",
    )
    async def working_memory_template(resource: str, ctx: Context) -> str:
        with _resource_errors():
            rid = await pick(ctx, resource)
        return await read_working_memory(rid)

    @server.resource(
        "caderno://{resource}/notebook/{target}",
        name="notebook",
        description="The notebook block (target memory or user) as it appears in the instructions, frozen.",
        mime_type="text/markdown",
    )
    async def notebook_template(resource: str, target: str, ctx: Context) -> str:
        with _resource_errors():
            rid = await pick(ctx, resource)
        return await read_notebook(rid, target)

    for rid in listed:
        _list_resources(server, rid, read_working_memory, read_notebook)
    return server


def _list_resources(
    server: MCPServer[Any],
    rid: str,
    read_working_memory: Callable[[str], Awaitable[str]],
    read_notebook: Callable[[str, str], Awaitable[str]],
) -> None:
    """Concrete resources of ``rid`` for ``resources/list`` (a client shows these to the user)."""

    async def working_memory() -> str:
        return await read_working_memory(rid)

    server.resource(
        f"caderno://{rid}/working-memory",
        name=f"{rid} working memory",
        description="The current state of things: a JSON object with its version.",
        mime_type="application/json",
    )(working_memory)
    for target, what in (("memory", "the agent's notes (MEMORY.md)"), ("user", "the user's profile (USER.md)")):
        server.resource(
            f"caderno://{rid}/notebook/{target}",
            name=f"{rid} notebook: {target}",
            description=f"The notebook's frozen snapshot of {what}, as the model's instructions show it.",
            mime_type="text/markdown",
        )(_reader(read_notebook, rid, target))


def _reader(read: Callable[[str, str], Awaitable[str]], rid: str, target: str) -> Callable[[], Awaitable[str]]:
    async def block() -> str:
        return await read(rid, target)

    return block
