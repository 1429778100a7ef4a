"""The CLI's ``mcp`` command: caderno as an MCP server over stdio, for desktop MCP clients.

Kept apart from ``caderno.cli.main`` for size; ``main`` registers it on ``main``.
The SDK (extra ``mcp``) is imported only when the command runs.
"""

from __future__ import annotations

import click

from ..core.errors import CadernoError
from .common import fail, import_home_notebooks, opened, run_async

__all__ = ["COMMANDS"]


@click.command("mcp")
@click.option("--resource", required=True, help="The resource (user) every tool reads and changes.")
@click.pass_context
def mcp(ctx: click.Context, resource: str) -> None:
    """Serve one resource's memory to an MCP client over stdio (stdout carries the protocol).

    A desktop client starts it itself, for example:

    \b
    caderno --db /path/caderno.db mcp --resource me
    """
    try:
        from ..integrations.mcp import stdio_pick

        stdio_pick(resource)  # a bad id fails here, before the client waits on us
    except CadernoError as exc:  # MissingExtra included: the install line
        fail(str(exc))
    run_async(_serve)(ctx, resource)


async def _serve(ctx: click.Context, resource: str) -> None:
    from ..integrations.mcp import build_server, stdio_pick

    async with opened(ctx) as memory:
        await import_home_notebooks(memory)
        server = build_server(memory, stdio_pick(resource), listed=(resource,))
        await server.run_stdio_async()


COMMANDS = (mcp,)
