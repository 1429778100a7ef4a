"""Every error caderno raises, and the signals it raises and catches inside itself.

The tree of what a caller may see (``CadernoError``)::

    CadernoError
    ├── UsageError (ValueError)        the caller did something wrong
    │   ├── InvalidPatch               a working-memory patch that cannot be applied
    │   ├── InvalidToolArguments       a model's tool call that does not fit the tool
    │   ├── KeyReused                  an idempotency key sent again with other messages
    │   ├── Unsupported                the store does not handle an operation
    │   └── SyncCallInEventLoop        a LangGraph store's sync method called on its own event loop
    ├── NotFound (LookupError)         missing, including a thread owned by another resource
    ├── Conflict                       expected_version mismatch
    │   ├── ThreadBusy                 another turn holds the thread (any process)
    │   └── Erased                     the thread or its resource was erased while a turn ran
    ├── NotebookError                  carries the message the model will read
    ├── ModelError                     a model adapter failed or ran out of steps
    ├── MissingExtra (ImportError)     an optional dependency is not installed
    ├── EmbeddingUnavailable           the embedding model is missing or corrupt
    ├── StorageError                   a database problem, wrapping the driver error; nothing was stored
    │   ├── SchemaTooNew               the database was written by a newer caderno
    │   ├── StorageBusy                a lock stayed held past the lock timeout; nothing was stored
    │   └── OutcomeUnknown             the connection died with the commit in flight: maybe stored
    ├── Unauthorized                   HTTP: no API key, or a malformed, unknown or revoked one (401)
    ├── Forbidden                      HTTP: a valid key asking for what only an admin key may do (403)
    └── TooLarge (HTTPException)       HTTP: a request body past the server's limit (413)

The signals (``InternalSignal``): raised and caught inside caderno, so no
caller ever sees one, and an ``except CadernoError`` (the CLI's one line,
the server's problem bodies, MCP tool errors) never has to consider one::

    InternalSignal
    ├── UniqueViolation                a statement broke a unique constraint: thrown into a store's plan
    ├── ForeignKeyViolation            a statement broke a foreign key: thrown into a store's plan
    ├── StandbyGone                    the read replica is no standby (any longer): reads go to the primary
    ├── _Malformed                     a model server's answer of the wrong shape (becomes a ModelError)
    │   └── _ErrorEvent                an error the model server reported mid-stream
    └── _Retry                         a model call's failure worth another try

A few are defined beside the code that raises them, because they need an
optional package's base class or belong to one module's inner workings:
``SyncCallInEventLoop`` (``caderno.integrations.langgraph``, an
``asyncio.InvalidStateError`` too), ``TooLarge`` (``caderno.server.edge``,
starlette's ``HTTPException`` first, so FastAPI answers it as a 413),
``UniqueViolation`` and ``ForeignKeyViolation`` (``caderno.stores._sql``),
``StandbyGone`` (``caderno.stores._replica``), ``_Malformed``,
``_ErrorEvent`` and ``_Retry`` (``caderno.agent.models``).
``tests/test_errors.py`` checks that every exception class in caderno
derives from one of the two roots and is drawn here.

Errors carry the ids they are about as attributes, so callers can react
without parsing messages.
"""

from __future__ import annotations

__all__ = [
    "CadernoError",
    "Conflict",
    "EmbeddingUnavailable",
    "Erased",
    "Forbidden",
    "InternalSignal",
    "InvalidPatch",
    "InvalidToolArguments",
    "KeyReused",
    "MissingExtra",
    "ModelError",
    "NotFound",
    "NotebookError",
    "OutcomeUnknown",
    "SchemaTooNew",
    "StorageBusy",
    "StorageError",
    "ThreadBusy",
    "Unauthorized",
    "Unsupported",
    "UsageError",
]


class CadernoError(Exception):
    """Base class of every caderno error."""


class UsageError(CadernoError, ValueError):
    """The caller passed something caderno cannot accept."""


class InvalidPatch(UsageError):
    """A working-memory patch is not an object, or its result fails the schema.

    Nothing is written when this is raised.
    """

    def __init__(self, message: str, *, resource_id: str | None = None) -> None:
        super().__init__(message)
        self.resource_id = resource_id


class InvalidToolArguments(UsageError):
    """Arguments from the model do not match a tool's signature."""

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class KeyReused(UsageError):
    """An idempotency key names a stored turn whose messages differ from the ones sent now.

    HTTP 422. Nothing was stored: a retry must send the same messages, a new turn a new key.
    """


class Unsupported(UsageError):
    """The store behind this ``Memory`` does not handle an operation a method needs."""

    def __init__(self, message: str, *, operation: str) -> None:
        super().__init__(message)
        self.operation = operation


class NotFound(CadernoError, LookupError):
    """The thing asked for does not exist for this resource.

    A thread of another resource is reported exactly like a missing one, so
    this error never reveals that another resource's thread exists.
    """

    def __init__(self, message: str, *, resource_id: str | None = None, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.resource_id = resource_id
        self.thread_id = thread_id


class Conflict(CadernoError):
    """A compare-and-swap lost: the stored version is not the expected one."""

    def __init__(self, message: str, *, resource_id: str, expected: int | None, actual: int | None) -> None:
        super().__init__(message)
        self.resource_id = resource_id
        self.expected = expected
        self.actual = actual


class ThreadBusy(Conflict):
    """Another turn holds the thread (in this process or another one) past the wait, or took it over.

    HTTP 409. Nothing of the refused turn was stored; the client may retry.
    """

    def __init__(self, message: str, *, resource_id: str, thread_id: str) -> None:
        super().__init__(message, resource_id=resource_id, expected=None, actual=None)
        self.thread_id = thread_id


class Erased(Conflict):
    """The thread (or its whole resource) was erased while a turn on it ran.

    HTTP 409. The turn's prompt was built before the erase, so nothing of it
    may be stored: its messages, working-memory patches, facts and tasks are
    all dropped. Model calls already made cannot be undone; nothing they
    produced is kept.
    """

    def __init__(self, message: str, *, resource_id: str, thread_id: str) -> None:
        super().__init__(message, resource_id=resource_id, expected=None, actual=None)
        self.thread_id = thread_id


class NotebookError(CadernoError):
    """A notebook operation failed; the message is written for the model."""


class ModelError(CadernoError):
    """A model adapter failed, returned nothing usable, or ran out of steps."""


def install_line(extra: str) -> str:
    """The pip command that adds ``extra`` to the caderno that is running, from where it came.

    caderno is not on the package index, so ``pip install 'caderno[x]'`` fails.
    pip records where it installed a package from (``direct_url.json``): a
    checkout (editable or not), a wheel or sdist file, a git URL; the line
    names that source. Anything else (a copy on ``sys.path``, a source that
    is gone) gets a line with a placeholder that says what to put there.
    """
    import json
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    try:
        recorded = metadata.distribution("caderno").read_text("direct_url.json")
        source = json.loads(recorded) if recorded else {}
    except (metadata.PackageNotFoundError, ValueError):
        source = {}
    url = str(source.get("url", ""))
    vcs = source.get("vcs_info")
    if isinstance(vcs, dict) and url:
        return f"pip install 'caderno[{extra}] @ {vcs.get('vcs', 'git')}+{url}'"
    if url.startswith("file://") and Path(unquote(urlparse(url).path)).exists():
        path = unquote(urlparse(url).path)
        editable = isinstance(source.get("dir_info"), dict) and source["dir_info"].get("editable")
        return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"
    return f"pip install '/path/to/caderno[{extra}]' (the path of your caderno checkout)"


class MissingExtra(CadernoError, ImportError):
    """An optional dependency is missing; the message holds the install line (``install_line``)."""

    def __init__(self, extra: str, package: str) -> None:
        super().__init__(f"{package} is not installed; run: {install_line(extra)}")
        self.extra = extra
        self.package = package


class EmbeddingUnavailable(CadernoError):
    """The embedding model cannot be loaded; recall falls back to lexical search."""


class StorageError(CadernoError):
    """The database failed or is not usable (wraps the driver's error)."""


class SchemaTooNew(StorageError):
    """The database was migrated by a newer caderno; it is never downgraded."""


class StorageBusy(StorageError):
    """Another transaction held a lock this call needed (a thread, working memory, a notebook page)
    past the store's lock timeout: a stalled or stopped process, usually. Nothing was stored; retry later.

    HTTP 503 ``busy``.
    """


class OutcomeUnknown(StorageError):
    """The connection died after the write was sent to be committed: it may or may not be stored.

    Every other ``StorageError`` of a write means nothing was stored. After
    this one a blind retry could store the write twice: retry with the same
    ``Idempotency-Key`` (the server answers with what is stored), or read
    before writing again. HTTP 503 ``storage-unknown``.
    """


class Unauthorized(CadernoError):
    """No API key, a malformed one, an unknown one or a revoked one: HTTP 401 (``caderno.server.auth``)."""


class Forbidden(CadernoError):
    """A valid API key asking for something only an admin key may do: HTTP 403 (``caderno.server.auth``)."""


class InternalSignal(Exception):
    """Base of the exceptions caderno raises and catches inside itself; none reaches a caller.

    Not a ``CadernoError``: the handlers of those (the CLI's one line, the
    server's problem bodies, MCP tool errors) show a caller the error's
    text, and a signal's text may be a driver's. The code that raises one
    catches it, or turns it into a ``CadernoError`` (a store: ``StorageError``).
    """
