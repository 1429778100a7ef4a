"""Keep database passwords out of everything caderno shows: URLs, errors, logs.

A PostgreSQL URL can carry a password in three places: the user-info
(``postgresql://user:pw@host/db``), a query parameter (``?password=pw``,
``sslpassword``, ``passfile``) or the environment (``PGPASSWORD``). Users
paste passwords as they are, so a password may hold unescaped ``@``, ``:``,
``/``, ``?``, ``#`` or spaces, and the driver then reports a mangled URL:
libpq splits the user-info at the *first* ``@``, so a password ``a@b`` makes
it try to resolve the host ``b@host`` and print that in its error.

Two tools, used together:

- :func:`redact_url` for the URL caderno displays;
- :func:`secrets_of` + :func:`scrub` for any text that came back from a
  driver (every form of the password, and every long piece of it, is
  replaced by ``***``, and the text is folded to one line).

The same goes for the other secrets a server handles: an upstream model's
API key and its URL's password. :func:`redact_text` makes free text (an
upstream's error body, an HTTP library's message) safe for a log — URL
user-info and query strings, bearer tokens, ``sk-…``/``cad_…``-like keys —
and :func:`redact_query` does it for a request's query string in an access
log. Neither text ever goes to a client: a client reads caderno's own words.

:func:`split_url` takes caderno's own parameters out of a URL without
re-encoding the others (``urlencode`` turns ``options=-c statement_timeout=1``
into text libpq no longer accepts).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote

__all__ = [
    "LIBRARY_LOGGERS",
    "MASK",
    "RedactRecords",
    "one_line",
    "redact_library_logs",
    "redact_path",
    "redact_query",
    "redact_text",
    "redact_url",
    "scrub",
    "secrets_of",
    "split_url",
]

MASK = "***"

#: Query / keyword parameters whose value is a secret (or, for ``passfile``,
#: points at one). libpq keywords are lowercase; matched case-insensitively to
#: err on the side of hiding.
SECRET_PARAMS = ("password", "sslpassword", "passfile")

#: Pieces of a password shorter than this are not scrubbed on their own: a
#: 1–3 character fragment ("db", "5432"'s "543") would blank out unrelated
#: words of the error and make it unreadable, while revealing little.
_MIN_PIECE = 4

#: What may follow the user-info ``@``: host names, IPv4/IPv6 literals,
#: ports, comma-separated multi-host lists, percent-escapes (unix sockets).
_HOST = re.compile(r"[A-Za-z0-9._~%!$'()*+,;=\[\]:-]*")

#: ``password=...`` in a keyword/value conninfo (``host=h password='a b'``).
_KEYWORD_SECRET = re.compile(
    r"\b(" + "|".join(SECRET_PARAMS) + r")(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)",
    re.I,
)


#: ``?password=...`` anywhere in a URL. Found by pattern, not by parsing the
#: query, so it holds even when an unescaped ``@`` or ``?`` makes the URL's
#: structure ambiguous; a value runs to the next ``&key=`` so a raw ``&``
#: inside a password does not cut it short.
_QUERY_SECRET = re.compile(
    r"([?&](?:" + "|".join(SECRET_PARAMS) + r")=)(.*?)(?=&[A-Za-z_][A-Za-z0-9_.%-]*=|$)",
    re.I | re.S,
)


def _authority_split(rest: str) -> int:
    """Index of the ``@`` ending the user-info in ``rest`` (text after ``://``), or -1.

    Takes the *last* ``@`` followed by something shaped like a host: a
    password may hold ``@`` (and ``/``, ``?``, ``#``) unescaped, and splitting
    late hides more rather than less. An ``@`` inside the query can make the
    split too late; that over-redacts the display, it never leaks.
    """
    index = len(rest)
    while True:
        index = rest.rfind("@", 0, index)
        if index < 0:
            return -1
        host = _HOST.match(rest, index + 1)
        end = host.end() if host else index + 1
        if end == len(rest) or rest[end] in "/?#":
            return index


def _parts(url: str) -> tuple[str, str | None, str] | None:
    """``(scheme://, userinfo, remainder)`` of a URL, or ``None`` when it has no ``://``."""
    scheme_end = url.find("://")
    if scheme_end < 0 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", url[:scheme_end]):
        return None
    head, rest = url[: scheme_end + 3], url[scheme_end + 3 :]
    at = _authority_split(rest)
    if at < 0:
        return head, None, rest
    return head, rest[:at], rest[at + 1 :]


def redact_url(url: str) -> str:
    """``url`` with every password replaced by ``***``; safe to display or log.

    Handles URL user-info (``user:pw@host``, a password holding unescaped
    ``@``/``:``/``/`` included), percent-encoded passwords, the ``password``,
    ``sslpassword`` and ``passfile`` query parameters, and keyword/value
    conninfo strings (``host=h password=pw``).

    Args:
        url: a database URL or libpq conninfo string.

    Returns:
        The same text with each secret value masked.
    """
    parts = _parts(url)
    if parts is None:
        return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", url)
    head, userinfo, remainder = parts
    if userinfo is not None:
        user, colon, _password = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if colon else user
    shown = head + (f"{userinfo}@" if userinfo is not None else "") + remainder
    return _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, shown)


def _raw_passwords(url: str) -> list[str]:
    parts = _parts(url)
    if parts is None:
        return [m.group(3).strip("'") for m in _KEYWORD_SECRET.finditer(url)]
    _head, userinfo, _remainder = parts
    found = [m.group(2) for m in _QUERY_SECRET.finditer(url)]
    if userinfo is not None and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    return found


def _pieces(password: str) -> list[str]:
    """Every run of whole ``@``/``:``-separated pieces of ``password`` longer than 3 chars.

    A driver that split the URL at an unescaped ``@`` or ``:`` shows the
    fragments (``failed to resolve host "tail@host"``); each must go.
    """
    cuts = [0] + [i + 1 for i, ch in enumerate(password) if ch in "@:"] + [len(password) + 1]
    found = []
    for a in range(len(cuts) - 1):
        for b in range(a + 1, len(cuts)):
            piece = password[cuts[a] : cuts[b] - 1]
            if len(piece) >= _MIN_PIECE:
                found.append(piece)
    return found


def secrets_of(url: str) -> list[str]:
    """Every form of every password in ``url`` (and ``$PGPASSWORD``), longest first.

    Forms: as written, percent-decoded, percent-encoded, folded to one line,
    and each piece longer than 3 characters between ``@`` and ``:``.

    Args:
        url: the database URL as the user gave it.

    Returns:
        Distinct non-empty strings to hand to :func:`scrub`.
    """
    raw = _raw_passwords(url)
    if os.environ.get("PGPASSWORD"):
        raw.append(os.environ["PGPASSWORD"])
    forms: set[str] = set()
    for password in raw:
        for form in (password, unquote(password)):
            forms.update((form, quote(form, safe=""), one_line(form)))
            forms.update(_pieces(form))
    forms.discard("")
    return sorted(forms, key=lambda s: (-len(s), s))


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) made one space."""
    return " ".join(text.split())


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with each secret replaced by ``***``, folded to one line.

    Drivers put newlines and context lines in their errors; one line keeps a
    log entry or CLI error whole. Replacing can join text around a mask into
    a new occurrence of a secret, so this repeats until none is left.

    Args:
        text: an error message or any text that may hold a secret.
        secrets: what to hide, usually from :func:`secrets_of`.

    Returns:
        One line of text without any of ``secrets``.
    """
    # A secret inside the mask itself ("*", "**") can never be removed; it
    # reveals nothing the mask does not.
    forms = {form for s in secrets for form in (s, one_line(s))}
    wanted = sorted((s for s in forms if s and s not in MASK), key=len, reverse=True)
    if not wanted:
        return one_line(text)
    pattern = re.compile("|".join(re.escape(s) for s in wanted))
    text = one_line(pattern.sub(MASK, text))
    # Each pass strictly shortens the text's non-mask characters, so this ends.
    while pattern.search(text):
        text = one_line(pattern.sub(MASK, text))
    return text


def split_url(url: str, ours: set[str]) -> tuple[str, dict[str, str]]:
    """Take caderno's own query parameters out of ``url``, leaving the rest as written.

    Other parameters keep their exact text (spaces, ``%``-escapes and all), so
    libpq reads them as the user wrote them.

    Args:
        url: the database URL.
        ours: names of the parameters caderno reads itself (``schema``, ``pool_size``).

    Returns:
        ``(conninfo, params)``: the URL without our parameters (and without
        ``?`` when nothing is left), and our parameters percent-decoded (the
        last one wins when repeated).
    """
    scheme_end = url.find("://")
    if scheme_end < 0:
        return url, {}
    # Find the query where libpq will: the user-info ends at the first "@"
    # seen before any "/", and the query starts at the next "?". Whatever
    # libpq takes for a parameter is what this takes, and nothing else.
    start = scheme_end + 3
    userinfo_end = re.compile(r"[@/]").search(url, start)
    if userinfo_end and userinfo_end.group() == "@":
        start = userinfo_end.end()
    mark = url.find("?", start)
    if mark < 0:
        return url, {}
    kept: list[str] = []
    params: dict[str, str] = {}
    for piece in url[mark + 1 :].split("&"):
        key, _, value = piece.partition("=")
        if unquote(key) in ours:
            params[unquote(key)] = unquote(value)
        elif piece:
            kept.append(piece)
    return url[:mark] + ("?" + "&".join(kept) if kept else ""), params


# -- free text and query strings (upstream errors, access logs) ---------------------------

#: A URL inside free text: scheme, then anything up to whitespace or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
#: ``Authorization`` values (``Bearer abc``, ``Basic abc``) quoted back in an error.
_AUTH_VALUE = re.compile(r"\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]+", re.I)
#: Keys by their shape: OpenAI-style ``sk-…`` (also ``sk-proj-…``), and caderno's ``cad_…``.
#: Eight characters after the prefix keeps words like "sk-learn" readable.
_KEY_SHAPED = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{8,}|\bcad_[A-Za-z0-9_-]{8,}")
#: Query parameter names that carry a credential (``?token=``, ``?api_key=``, ``?key=``, ``?sig=``…).
_SECRET_NAME = re.compile(r"token|key|secret|passw|pwd|auth|sig|credential|session|code", re.I)
#: A query value this long and this random is treated as a credential whatever its name.
_RANDOM_VALUE = re.compile(r"[A-Za-z0-9_~+/=.-]{24,}")


def _redact_link(url: str) -> str:
    """``url`` without its user-info secret and without its query values."""
    parts = _parts(url)
    if parts is None:
        return url
    head, userinfo, remainder = parts
    if userinfo is not None:
        user, colon, _password = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if colon else MASK
    path, mark, _query = remainder.partition("?")
    return head + (f"{userinfo}@" if userinfo is not None else "") + path + (f"?{MASK}" if mark else "")


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text made safe for a server log, folded to one line.

    Masks every given secret (an API key, a URL's password: every form, as
    :func:`scrub` does), every URL's user-info and query, ``Bearer``/``Basic``
    credentials, and anything shaped like an ``sk-…`` or ``cad_…`` key: an
    upstream's error often quotes the key it refused ("Incorrect API key
    provided: sk-…"), and an HTTP library's message may name the URL.

    Args:
        text: an upstream's answer, an exception's message.
        secrets: values known to be secret (the configured key, the URL's password).

    Returns:
        One line of text holding none of them.
    """
    known = [s for s in secrets if s]
    text = scrub(text, known) if known else one_line(text)
    text = _URL_IN_TEXT.sub(lambda m: _redact_link(m.group()), text)
    text = _AUTH_VALUE.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return _KEY_SHAPED.sub(MASK, text)


def redact_path(path: str) -> str:
    """A request's path for an access log: key-shaped segments (``cad_…``, ``sk-…``) masked.

    A client that puts its key where a resource id goes gets a 401 or 404,
    and the key must not stay behind in the log either.
    """
    return _KEY_SHAPED.sub(MASK, path)


def redact_query(query: str) -> str:
    """A request's query string for an access log: credential values masked.

    A value is masked when its name looks like a credential's (``token``,
    ``api_key``, ``key``, ``password``, ``sig``…) or when the value itself
    looks like a key (``sk-…``, ``cad_…``, or 24+ random-looking characters).
    The API refuses keys in the query string, but a client that sends one
    anyway must not have it written to a log file.

    Args:
        query: the raw query string, without ``?``.

    Returns:
        The same parameters in the same order, secret values replaced by ``***``.
    """
    if not query:
        return query
    kept = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        plain = unquote(value)
        if eq and (_SECRET_NAME.search(unquote(name)) or _KEY_SHAPED.search(plain) or _RANDOM_VALUE.fullmatch(plain)):
            value = MASK
        elif not eq and (_KEY_SHAPED.search(unquote(name)) or _RANDOM_VALUE.fullmatch(unquote(name))):
            name = MASK
        kept.append(name + eq + value)
    return "&".join(kept)


# -- other libraries' loggers -------------------------------------------------------------

#: The loggers of the libraries caderno runs that can write a URL or an exception's
#: text. httpx logs every request's full URL at info (``HTTP Request: POST
#: http://user:pw@host/v1/…``); httpcore (debug) names hosts and failed
#: connections; uvicorn's error logger writes tracebacks; the OpenAI SDK (under
#: the Agents integration) logs its requests' URLs at debug. A filter on a logger
#: does not run for its children's records, so each module's logger is named.
LIBRARY_LOGGERS = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "uvicorn.error",
    "openai._base_client",
    "openai.agents",
)


class RedactRecords(logging.Filter):
    """Makes another library's log records safe: :func:`redact_text` over the message and any traceback.

    Known secrets (:meth:`add`: an upstream's key, every form of its URL's
    password) are masked wherever they appear; URL user-info and query
    values, bearer tokens and key-shaped words are masked by their shape.
    The record's level and logger are kept: only its text changes.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` too, from now on (the set only grows: a process holds few)."""
        with self._lock:
            self._secrets = self._secrets | {s for s in secrets if s}

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit: the handler reports it, with no text of ours
            message = str(record.msg)
        record.msg, record.args = redact_text(message, secrets), ()
        # uvicorn's coloured copy of the message formats the original arguments again.
        record.__dict__.pop("color_message", None)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            # Line by line: a traceback stays readable, and each line is masked as a message is.
            record.exc_text = "\n".join(redact_text(line, secrets) for line in record.exc_text.splitlines())
        if record.stack_info:
            record.stack_info = "\n".join(redact_text(line, secrets) for line in record.stack_info.splitlines())
        return True


_LIBRARY_FILTER = RedactRecords()


def redact_library_logs(secrets: Iterable[str] = ()) -> None:
    """Give every logger of :data:`LIBRARY_LOGGERS` caderno's redaction, masking ``secrets`` too.

    Called where caderno takes a secret that a library may log: each
    ``OpenAIChatModel`` (its key and URL) installs it, so library use, the CLI
    and ``caderno serve`` (whose uvicorn set-up keeps a logger's filters) are
    all covered before the first request. Idempotent: one filter per logger,
    however often it is called. Handlers and levels stay as the application
    set them.
    """
    _LIBRARY_FILTER.add(secrets)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).addFilter(_LIBRARY_FILTER)
