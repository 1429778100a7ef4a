"""caderno as an MCP server: the catalog's tools and two resources over one ``Memory``.

``build_server(memory, pick)`` returns an ``MCPServer`` (the official SDK,
extra ``mcp``) that binds every tool ``caderno.tools.catalog`` offers to MCP.
Each tool keeps the catalog's schema, validator and result text, so a call
reads the same here as through AgentChat or the Agents SDK adapter: unknown
or wrong-typed arguments are refused with caderno's sentences, never the
SDK's pydantic text. MCP adds two things of its own: each tool's
annotations (read-only, or destructive) and the optional ``resource``
argument.

The resource is never the model's choice alone: ``pick`` turns the call's
context and that ``resource`` argument into the resource it may reach —
over stdio the one named by ``caderno mcp --resource``, over HTTP
(``caderno.server.mcp_http``) one of the bearer key's resources. A resource
out of reach reads as ``resource '…' not found``, the same words a missing
one gets from the HTTP API.

A tool answers the catalog's JSON text; a refusal (bad argument, invalid
patch, version conflict, a full notebook) is an MCP tool error whose text is
``{"ok": false, "error": …}``, never a traceback.

Resources: ``caderno://{resource}/working-memory`` (JSON, as
``get_working_memory`` answers) and ``caderno://{resource}/notebook/{memory|user}``
— the notebook block as a conversation starting now sees it in its
instructions, read from the database notebook (``memory.notebook``) shared
by every process. MCP names no conversation, so the client keeps the block
it read for the rest of its conversation; this server keeps nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ..core.errors import CadernoError, MissingExtra
from ..memory.engines.notebook_rules import NotebookPort
from ..memory.facade import Memory
from ..tools.base import Effect, Outcome, Scope, ToolDef, check_value, refused
from ..tools.catalog import offered
from ..tools.working_memory import state_payload

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
except ImportError:  # pragma: no cover - exercised without the extra
    raise MissingExtra("mcp", "mcp") from None

__all__ = ["ANNOTATIONS", "INSTRUCTIONS", "RESOURCE_ARGUMENT", "Pick", "build_server", "stdio_pick"]

#: Turns a call's context and its ``resource`` argument (``None``: not given)
#: into the resource the call may reach; raises ``NotFound`` or ``UsageError``.
Pick = Callable[[Context, "str | None"], Awaitable[str]]

INSTRUCTIONS = (
    "caderno is your durable memory of one user (a 'resource'), kept across conversations. "
    "Read the notebook resources and get_working_memory at the start of a conversation; "
    "use recall to find what was said before; save durable knowledge with the memory tool (your notebook) "
    "or remember_fact, and keep the current state of ongoing work in working memory."
)

#: The argument MCP adds to every catalog tool.
RESOURCE_ARGUMENT: dict[str, Any] = {
    "type": "string",
    "description": (
        "Whose memory. Leave it out when you reach a single resource; pass it when the server says you reach several."
    ),
}

#: MCP's annotations for each kind of tool.
ANNOTATIONS: dict[Effect, ToolAnnotations] = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    "delete": ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
}


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
    memory: Memory,
    pick: Pick,
    *,
    listed: tuple[str, ...] = (),
    notebook: Callable[[str], NotebookPort] | None = None,
) -> MCPServer[Any]:
    """The MCP server over ``memory``.

    Args:
        memory: an opened ``Memory`` (the caller owns its lifetime).
        pick: chooses the resource each call reaches (``stdio_pick``, or the
            HTTP mount's key check).
        listed: resources whose MCP resources are listed by ``resources/list``
            (stdio: the one resource); the URI templates serve every resource
            ``pick`` allows either way.
        notebook: the resource's notebook (default: the database one,
            ``memory.notebook(resource)``).
    """
    from ..core.version import __version__

    def notebook_of(rid: str) -> NotebookPort:
        return notebook(rid) if notebook is not None else memory.notebook(rid)

    tools: list[Tool] = [_CatalogTool.bind(tool, memory, pick, notebook_of) for tool in offered("mcp")]
    server: MCPServer[Any] = MCPServer(name="caderno", version=__version__, instructions=INSTRUCTIONS, tools=tools)

    async def read_working_memory(rid: str) -> str:
        with _resource_errors():
            return Outcome(state_payload(await memory.working_memory.state(resource_id=rid))).text

    async def read_notebook(rid: str, target: str) -> str:
        if target not in ("memory", "user"):
            raise ResourceNotFoundError(f"no notebook {target!r}: use memory or user")
        with _resource_errors():
            return (await notebook_of(rid).snapshot_now())[target] or ""

    @server.resource(
        "caderno://{resource}/working-memory",
        name="working-memory",
        description="The resource's working memory, as get_working_memory answers it.",
        mime_type="application/json",
    )
    async def working_memory_template(resource: str, ctx: Context) -> str:
        with _resource_errors():
            rid = await pick(ctx, resource)
        return await read_working_memory(rid)

    @server.resource(
        "caderno://{resource}/notebook/{target}",
        name="notebook",
        description="The notebook block (target memory or user) as a conversation starting now sees it.",
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
            description=f"The notebook block of {what}, as a conversation starting now sees it.",
            mime_type="text/markdown",
        )(_reader(read_notebook, rid, target))


def _reader(read: Callable[[str, str], Awaitable[str]], rid: str, target: str) -> Callable[[], Awaitable[str]]:
    async def block() -> str:
        return await read(rid, target)

    return block


class _CatalogTool(Tool):
    """A catalog tool served by ``MCPServer``: the raw arguments go to the catalog's validator.

    The SDK's own tools validate with a pydantic model built from a Python
    signature, which accepts unknown arguments and answers with pydantic's
    text; this one hands the call's arguments, as sent, to
    ``ToolDef.call`` and answers its text (an error result when refused).
    """

    @classmethod
    def bind(
        cls, tool: ToolDef[Any], memory: Memory, pick: Pick, notebook_of: Callable[[str], NotebookPort]
    ) -> _CatalogTool:
        schema = {**tool.parameters, "properties": {**tool.parameters["properties"], "resource": RESOURCE_ARGUMENT}}

        async def invoke(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
            args = dict(arguments)
            given = args.pop("resource", None)
            try:
                rid = await pick(ctx, None if given is None else check_value("resource", RESOURCE_ARGUMENT, given))
            except CadernoError as exc:
                outcome = Outcome(refused(str(exc)))
            else:
                scope = Scope(memory=memory, resource_id=rid, notebook=lambda: notebook_of(rid))
                outcome = await tool.call(scope, args)
            return CallToolResult(content=[TextContent(type="text", text=outcome.text)], is_error=not outcome.ok)

        return cls(
            fn=invoke,
            name=tool.name,
            title=None,
            description=tool.description,
            parameters=schema,
            fn_metadata=FuncMetadata(arg_model=ArgModelBase),
            is_async=True,
            context_kwarg=None,
            annotations=ANNOTATIONS[tool.effect],
        )

    async def run(self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False) -> Any:
        return await self.fn(arguments, context)
