"""Connections of ``caderno serve``: a deadline for request headers, and an access log without tokens.

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

The access log writes each request's path with its query string; the API
refuses keys in the query, but a client that sends ``?token=…`` anyway must
not have it written to a log file: ``RedactQuery`` masks such values.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpTools

    HttpToolsProtocol: type[Any] | None = _HttpTools
except ImportError:  # httptools is not installed: the h11 protocol serves
    HttpToolsProtocol = None

from ..core.redact import redact_path, redact_query

__all__ = ["RedactQuery", "header_timeout_protocol"]


class _Deadline:
    """The deadline both protocols share: armed when a request's first byte may come, disarmed
    when its headers are in, closing the connection if it fires while they are not."""

    header_timeout: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    logger: logging.Logger

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

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
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

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self._in_headers


def header_timeout_protocol(seconds: float, *, parser: str | None = None) -> type[asyncio.Protocol]:
    """uvicorn's ``http=`` protocol class with a ``seconds`` deadline for request headers.

    ``parser``: ``"httptools"`` or ``"h11"``; by default httptools when it is installed.
    """
    if parser is None:
        parser = "httptools" if HttpToolsProtocol is not None else "h11"
    base = {"httptools": _HeaderDeadlineHttptools, "h11": _HeaderDeadline}[parser]
    if base is _HeaderDeadlineHttptools and HttpToolsProtocol is None:
        raise RuntimeError("httptools is not installed: pip install 'caderno[server]'")
    return type(f"HeaderDeadline{parser.capitalize()}", (base,), {"header_timeout": float(seconds)})


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
