"""The CLI's commands for the HTTP server: ``serve`` and ``keys``.

Kept apart from ``caderno.cli.main`` for size; ``main`` registers them on
``main``. FastAPI and uvicorn (extra ``server``) are imported only when
``serve`` runs, so the rest of the CLI works without them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import subprocess
import sys
from typing import Any

import click

from ..agent.config import BACKGROUND_MODES, MAX_REQUEST_BYTES, ServerSettings, load_config
from ..core.errors import CadernoError, MissingExtra
from ..core.records import ApiKey
from ..memory.engines.indexer import LEASE_SECONDS
from .common import emit_json, fail, import_home_notebooks, json_option, opened, rich_console, run_async

__all__ = ["COMMANDS"]


#: ``--embed-lease`` of ``serve`` and ``worker``: how long a claimed embedding batch stays its worker's unless renewed.
embed_lease_option = click.option(
    "--embed-lease",
    type=click.FloatRange(min=1.0),
    default=LEASE_SECONDS,
    show_default=True,
    envvar="CADERNO_EMBED_LEASE",
    help="Seconds a claimed embedding batch stays this process's unless renewed (renewed every third of it while "
    "it embeds): a batch of a worker that died is taken up by another within this plus the 2 s poll.",
)


def _key_json(key: ApiKey) -> dict[str, Any]:
    return dataclasses.asdict(key)


# -- keys -------------------------------------------------------------------------------


@click.group()
def keys() -> None:
    """API keys of the HTTP server: each scoped to resources (or admin), only a hash stored."""


@keys.command("create")
@click.option("--resource", "resources", multiple=True, help="A resource the key may reach (repeat for more).")
@click.option("--admin", is_flag=True, help="Every resource, and the /v1/keys routes.")
@click.option("--name", default="", help="A label to recognise the key by.")
@json_option
@click.pass_context
@run_async
async def keys_create(ctx: click.Context, resources: tuple[str, ...], admin: bool, name: str, as_json: bool) -> None:
    """Create a key and print its token (shown this once: keep it)."""
    async with opened(ctx) as memory:
        token, key = await memory.keys.create(resources=resources, admin=admin, name=name)
    if as_json:
        emit_json({"token": token, "key": _key_json(key)})
        return
    scope = "admin (every resource)" if key.admin else ", ".join(key.resources)
    click.echo(f"created key {key.id}{f' ({key.name})' if key.name else ''} for {scope}")
    click.echo("token (shown once; only its hash is stored):", err=True)
    click.echo(token)


@keys.command("list")
@json_option
@click.pass_context
@run_async
async def keys_list(ctx: click.Context, as_json: bool) -> None:
    """List keys, revoked ones included (never a token)."""
    async with opened(ctx) as memory:
        items = await memory.keys.list()
    if as_json:
        emit_json([_key_json(k) for k in items])
        return
    if not items:
        click.echo("(no keys)")
        return
    from rich.table import Table

    table = Table("id", "name", "resources", "created", "state", title="keys")
    for k in items:
        table.add_row(
            k.id,
            k.name or "—",
            "admin" if k.admin else ", ".join(k.resources),
            f"{k.created_at:%Y-%m-%d %H:%M}" if k.created_at else "—",
            f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live",
        )
    rich_console().print(table)


@keys.command("revoke")
@click.argument("key_id")
@click.pass_context
@run_async
async def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Stop the key KEY_ID at once."""
    async with opened(ctx) as memory:
        await memory.keys.revoke(key_id=key_id)
    click.echo(f"revoked key {key_id}")


# -- serve ------------------------------------------------------------------------------


@click.command("serve")
@click.option("--config", "config_path", default=None, help="caderno.toml (overrides the group's --config).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--log-level", default="info", show_default=True, help="uvicorn's log level.")
@click.option("--docs", is_flag=True, default=None, help="Serve /docs and /redoc (off unless [server] docs = true).")
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=None,
    help=f"Most bytes of any request body (default: [server] max_body_bytes, else {MAX_REQUEST_BYTES}).",
)
@click.option(
    "--background",
    type=click.Choice(BACKGROUND_MODES),
    default=None,
    help="Where embedding, consolidation and due tasks run: this server's event loop, with batches embedded in "
    "a lower-priority thread (default: [server] background, else inline); a `caderno worker` child process at "
    "lower priority; or off (run `caderno worker` yourself).",
)
@embed_lease_option
@click.pass_context
def serve(
    ctx: click.Context,
    config_path: str | None,
    host: str,
    port: int,
    log_level: str,
    docs: bool | None,
    max_body_bytes: int | None,
    background: str | None,
    embed_lease: float,
) -> None:
    """Run the HTTP API (and the memory proxy, the inspector, background work) until SIGTERM or Ctrl-C.

    The edge's limits (body size, header and keep-alive timeouts, concurrency)
    come from caderno.toml's [server] table; --docs and --max-body-bytes win over it.
    """
    for package in ("fastapi", "uvicorn"):
        try:
            __import__(package)
        except ImportError:
            fail(str(MissingExtra("server", package)))
    config = ctx.obj["config"]
    if config_path is not None:
        try:
            config = load_config(config_path)
        except CadernoError as exc:
            fail(str(exc))
        if config.database_url and ctx.find_root().params.get("db") is None:
            ctx.obj["db"] = config.database_url
        ctx.obj["config"] = config  # opened reads its consolidation and cache settings
    try:
        wanted = config.tasks() if config.path is not None else None
        model = config.chat_model()
    except CadernoError as exc:
        fail(str(exc))
    # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again
    # so the handler installed before it runs: make that one a no-op, so a
    # graceful stop ends the process with status 0 instead of death by signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    settings = config.server
    if docs is not None:
        settings = dataclasses.replace(settings, docs=docs)
    if max_body_bytes is not None:
        settings = dataclasses.replace(settings, max_body_bytes=max_body_bytes)
    if background is not None:
        settings = dataclasses.replace(settings, background=background)
    run_async(_serve)(ctx, host, port, log_level, wanted, model, settings, embed_lease)


def _uvicorn_config(app: Any, host: str, port: int, log_level: str, settings: ServerSettings) -> Any:
    """uvicorn's settings: our header and body deadlines, keep-alive and concurrency limits, a token-free access log."""
    import logging

    import uvicorn

    from ..server.connections import RedactQuery, header_timeout_protocol

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        http=header_timeout_protocol(
            settings.header_timeout,
            body_timeout=settings.body_timeout,
            parser=None if settings.http == "auto" else settings.http,
        ),
        timeout_keep_alive=settings.keep_alive_timeout,
        limit_concurrency=settings.limit_concurrency,
    )
    # After uvicorn.Config: it configures its loggers when built.
    logging.getLogger("uvicorn.access").addFilter(RedactQuery())
    return config


async def _serve(
    ctx: click.Context,
    host: str,
    port: int,
    log_level: str,
    wanted: Any,
    model: Any,
    settings: ServerSettings,
    embed_lease: float,
) -> None:
    import uvicorn

    try:
        async with opened(ctx) as memory:  # the lifespan closes it already unless startup failed: no harm
            memory.indexer.lease_seconds = embed_lease
            memory.turns.lease_seconds = settings.turn_lease
            worker: ChildWorker | None = None
            try:
                await import_home_notebooks(memory)
                if wanted is not None:
                    report = await memory.tasks.sync_config(wanted)
                    from .state_commands import sync_report_text

                    click.echo(f"config tasks: {sync_report_text(report)}", err=True)
                from ..server import create_app
                from ..server.routes import default_routers

                if settings.background == "process":
                    worker = ChildWorker(str(ctx.obj["db"]), ctx.obj["config"].path, embed_lease=embed_lease)
                    worker.start()
                    memory.indexer.elsewhere = worker.wake
                elif settings.background == "off":
                    memory.indexer.elsewhere = lambda: None  # another process's `caderno worker` embeds
                app = create_app(
                    memory,
                    model=model,
                    background=settings.background == "inline",
                    routers=default_routers(),
                    max_body_bytes=settings.max_body_bytes,
                    docs=settings.docs,
                )
                app.state.turn_wait = settings.turn_wait
                server = uvicorn.Server(_uvicorn_config(app, host, port, log_level, settings))
                await server.serve()
            finally:
                if worker is not None:
                    await worker.stop()
    finally:
        if model is not None:  # the chat model; consolidation's [model.fast] is closed with the memory
            await asyncio.shield(model.aclose())


#: How much lower ``serve``'s worker child runs than the server (``nice``): requests go first on a busy machine.
WORKER_NICE = 10
#: Seconds ``serve`` waits, on its way out, for its worker to finish the batch in flight.
WORKER_STOP_WAIT = 30.0


class ChildWorker:
    """``caderno worker`` as ``serve``'s child: embedding, consolidation and due tasks off the request process.

    The request process spends its CPU on requests; the worker runs at a
    lower priority (``WORKER_NICE``), so on a busy machine it embeds with what
    the requests leave. Its stdin is a pipe from the server: ``wake`` (the
    indexer's ``elsewhere`` hook, called after each append) writes a byte,
    and the pipe's end — the server stopping or being killed — stops the
    worker. The database URL and config path go by environment, not argv
    (a URL may hold a password, and argv is visible to every user). A worker
    that died is started again at the next append's wake-up (at most once
    every 5 s); its pending work waits in the database meanwhile.
    """

    def __init__(self, db: str, config_path: Any, *, embed_lease: float = LEASE_SECONDS) -> None:
        self.env = {**os.environ, "CADERNO_DB": db, "CADERNO_EMBED_LEASE": str(embed_lease)}
        if config_path is not None:
            self.env["CADERNO_CONFIG"] = str(config_path)
        self.process: subprocess.Popen[bytes] | None = None
        self._restarted = 0.0

    def start(self) -> None:
        command = [sys.executable, "-m", "caderno.cli", "worker", "--parent-pipe", "--nice", str(WORKER_NICE)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, env=self.env)
        assert self.process.stdin is not None
        os.set_blocking(self.process.stdin.fileno(), False)

    def wake(self) -> None:
        """Tell the worker new messages are queued (never blocks the event loop)."""
        process = self.process
        if process is None or process.stdin is None:
            return
        try:
            os.write(process.stdin.fileno(), b".")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups the worker has not read: it is awake
        except (BrokenPipeError, OSError):
            self._restart()

    def _restart(self) -> None:
        """The worker exited: start another, at most once every 5 s (the queue waits in the database)."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._restarted < 5:
            return
        self._restarted = loop.time()
        code = self.process.poll() if self.process is not None else None
        log.warning("the background worker exited (status %s); starting another", code)
        self.start()

    async def stop(self) -> None:
        """Close the pipe (the worker finishes its batch and exits); kill it past ``WORKER_STOP_WAIT``."""
        process, self.process = self.process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.to_thread(process.wait, WORKER_STOP_WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)


log = logging.getLogger("caderno.server")

COMMANDS = (keys, serve)
