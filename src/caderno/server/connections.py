"""Connections of ``caderno serve``: deadlines for request headers and bodies, and an access log without tokens.

uvicorn (0.54) times out idle keep-alive connections but not a request
whose headers never finish: a client trickling a header byte at a time
("slowloris") held a connection for good (50 of 50 still open after 65 s).
uvicorn has no option for it, so ``header_timeout_protocol`` subclasses its
HTTP protocol — the ``httptools`` one (a C parser: about 0.3 ms less server
CPU a request than h11 in ``bench/server_load.py``) when that package is
installed, as the ``server`` extra does, else the pure-Python h11 one:

- a timer starts when a connection opens, and again when the first byte of a
  later request on a kept-alive connection arrives;
- it stops when the parser has read the whole header block (the request begins);
- if it fires first, the connection is closed. It is a deadline, not an idle
  timer: trickling bytes does not extend it.

A request's body has a deadline of its own (``body_timeout``), from the end
of its headers to its last byte: a client with a valid key trickling a
16 MiB body at a byte a second held its connection (and a place under
``limit_concurrency``) for days. When it fires before the body is in, the
client gets a 408 problem (if nothing was answered yet) and the connection
closes; the route waiting for the body sees a disconnect. (A body nobody
reads, on a route that answered without it, is ended sooner: ``Edge``
closes such a connection with its answer.)

The access log writes each request's path with its query string; the API
refuses keys in the query, but a client that sends ``?token=…`` anyway must
not have it written to a log file: ``RedactQuery`` masks such values.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpTools

    HttpToolsProtocol: type[Any] | None = _HttpTools
except ImportError:  # httptools is not installed: the h11 protocol serves
    HttpToolsProtocol = None

from ..agent.config import BODY_TIMEOUT, HEADER_TIMEOUT
from ..core.errors import install_line
from ..core.redact import redact_path, redact_query
from .problems import TYPE_BASE

__all__ = ["RedactQuery", "header_timeout_protocol"]


def _too_slow(seconds: float) -> bytes:
    """The 408 problem (RFC 9110 15.5.9) for a body past its deadline, as raw HTTP: the request's
    own response cycle may be waiting for that body, and it is told the client left."""
    body = json.dumps(
        {
            "type": TYPE_BASE + "request-timeout",
            "title": "Request timeout",
            "status": 408,
            "detail": f"the body of a request must arrive within {seconds:g} seconds of its headers",
        }
    ).encode()
    head = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/problem+json\r\n"
    return head + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body


class _Deadline:
    """The deadline both protocols share: armed when a request's first byte may come, disarmed
    when its headers are in, closing the connection if it fires while they are not."""

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    logger: logging.Logger
    cycle: Any

    def _waiting_for_headers(self) -> bool:
        raise NotImplementedError

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers took over %ss", self.header_timeout)
            self.transport.close()

    def _arm_body(self) -> None:
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_too_slow)

    def _disarm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        self.logger.info("closing a connection whose request body took over %ss", self.body_timeout)
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.transport.write(_too_slow(self.body_timeout))
        if cycle is not None:
            # What the route writes from now on is dropped (uvicorn's own flag for a client that left).
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


class _HeaderDeadline(_Deadline, H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers take too long."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first bytes of a new request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the headers are in: the request runs under its own rules
        if self.conn.their_state is h11.SEND_BODY:
            self._arm_body()  # (once: a deadline, from the end of the headers)
        else:
            self._disarm_body()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_body()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE


class _HeaderDeadlineHttptools(_Deadline, HttpToolsProtocol or object):  # type: ignore[misc]
    """uvicorn's httptools protocol with the same deadline: the parser says when a request's
    first byte arrives (``on_message_begin``) and when its headers are complete."""

    _in_headers = True

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        if self._header_timer is None:
            self._arm()  # the first bytes of a new request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._disarm()  # the headers are in: the request runs under its own rules
        super().on_headers_complete()
        self._arm_body()  # disarmed at once by on_message_complete when there is no body

    def on_message_complete(self) -> None:
        self._disarm_body()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_body()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self._in_headers


def header_timeout_protocol(
    seconds: float, *, body_timeout: float = BODY_TIMEOUT, parser: str | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's ``http=`` protocol class with a ``seconds`` deadline for request headers, and
    ``body_timeout`` seconds from the end of the headers to a body's last byte.

    ``parser``: ``"httptools"`` or ``"h11"``; by default httptools when it is installed.
    """
    if parser is None:
        parser = "httptools" if HttpToolsProtocol is not None else "h11"
    base = {"httptools": _HeaderDeadlineHttptools, "h11": _HeaderDeadline}[parser]
    if base is _HeaderDeadlineHttptools and HttpToolsProtocol is None:
        raise RuntimeError(f"httptools is not installed: {install_line('server')}")
    deadlines = {"header_timeout": float(seconds), "body_timeout": float(body_timeout)}
    return type(f"HeaderDeadline{parser.capitalize()}", (base,), deadlines)


class RedactQuery(logging.Filter):
    """A filter for ``uvicorn.access``: credential values in the logged query string, and key-shaped
    path segments, become ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args: Any = record.args
        # uvicorn's record: (client address, method, path with query, HTTP version, status).
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path, mark, query = args[2].partition("?")
            record.args = (*args[:2], redact_path(path) + mark + redact_query(query), *args[3:])
        return True
