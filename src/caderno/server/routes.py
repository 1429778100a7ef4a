"""The REST API under ``/v1``: one resource per path, checked against the key on every route.

Every route that names a resource takes it as ``rid: OwnResource``
(``auth.own_resource``), checked before anything else, so a key for resource
A gets, for B's data, the same 404 as for a resource that does not exist; the
app's ``Memory`` comes in as ``memory: Mem``. Errors are
``application/problem+json`` (see ``problems``); a route adds only the
statuses HTTP itself defines:

- ``412``: ``If-Match`` on a working-memory ``PATCH`` names another version,
  or is a weak tag (``W/"3"``: RFC 9110 compares ``If-Match`` strongly);
  without ``If-Match`` a conflict stays a ``409``.
- ``403``: a resource key asking for approval bypass (a trusted task, an
  import holding approved prefixes or trusted tasks): admin keys only.
- ``413``: a body over the size limits (``BodyLimit``, below).
- ``415``: a working-memory ``PATCH`` that is neither ``application/merge-patch+json``
  nor ``application/json`` (read as a merge patch too: what curl users send).

Choices worth knowing when writing a client:

- Working memory never set reads as ``{"data": null, "version": 0}`` with
  ``ETag: "0"``; ``If-Match: "0"`` then means "only if still unset".
- The newest message of a thread is popped with
  ``DELETE …/threads/{thread}/messages/last`` (200 with the message, 404 when
  the thread has none).
- A notebook lives in the database (every server shows the same one). Its
  ``snapshot`` is what a conversation starting now would freeze, or, with
  ``?thread_id=``, the snapshot that conversation froze at its first turn
  (``null`` blocks before it has one); ``entries`` are live.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core import messages as m
from ..core.errors import Conflict, KeyReused, NotFound, UsageError
from ..core.jsonvalue import MAX_PATCH_BYTES, loads_strict
from ..core.records import ApiKey
from ..core.validate import DUMP_DEPTH, check_id, check_name
from ..memory.engines.idempotency import MAX_IDEMPOTENCY_KEY, check_key
from ..memory.facade import Memory
from ..memory.parts.appends import Replayed, append_once
from ..memory.parts.notebook import StoredNotebook
from ..stores import ops
from . import schemas as s
from .auth import AdminKey, CurrentKey, Forbidden, OwnResource
from .problems import problem
from .proxy_turn import IDEMPOTENCY_HEADER

__all__ = ["BodyLimit", "MAX_BODY_BYTES", "MAX_IMPORT_BYTES", "default_routers", "install_routes"]

#: Most bytes of an import body: an export holds every message of a resource;
#: 16 MiB is thousands of long conversations, and bounds what one request buffers.
MAX_IMPORT_BYTES = 16 * 1024 * 1024
#: Most bytes of any other body under /v1/resources and /v1/keys (a turn of
#: appended messages is the largest; the library caps each message's text).
MAX_BODY_BYTES = 16 * 1024 * 1024

MERGE_PATCH = "application/merge-patch+json"
#: Content types a working-memory ``PATCH`` is read from, always as a merge patch: plain JSON is what
#: ``curl --json`` and most HTTP clients send, and no other patch format is offered it could be confused with.
PATCH_TYPES = (MERGE_PATCH, "application/json")


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for problem responses: the router's for every route, a route's own on top."""
    what = {
        400: "Invalid request (the library refused it)",
        401: "Missing, unknown or revoked key",
        403: "Needs an admin key",
        404: "Not found (also: a resource this key may not see)",
        409: "Conflict (already exists, or a version mismatch)",
        412: "If-Match does not name the stored version",
        413: "Body too large",
        415: "Unsupported content type",
        422: "Invalid body or parameters",
        501: "Not supported by this store",
        503: "Storage unavailable",
    }
    return {
        code: {"model": s.Problem, "description": what[code], "content": {"application/problem+json": {}}}
        for code in statuses
    }


Thread = Annotated[str, Path(description="A thread of the resource.")]


async def _memory(request: Request) -> Memory:
    # async: FastAPI runs a plain ``def`` dependency in its thread pool, a hop on every request.
    memory: Memory = request.app.state.memory
    return memory


#: The ``Memory`` this app serves (``create_app`` leaves it in ``app.state``).
Mem = Annotated[Memory, Depends(_memory)]


def _message(msg: m.Message) -> dict[str, Any]:
    # ``to_dict`` carries the message's ``position`` in its thread; the
    # database-wide ``seq`` stays internal (it would tell a tenant how much
    # the others write).
    return msg.to_dict()


def _thread(t: m.Thread) -> dict[str, Any]:
    return dataclasses.asdict(t)


def _wm(state: m.WorkingMemory | None) -> tuple[dict[str, Any], str]:
    if state is None:
        return {"data": None, "version": 0, "updated_at": None}, '"0"'
    return {"data": state.data, "version": state.version, "updated_at": state.updated_at}, f'"{state.version}"'


#: ``If-Match`` as this API writes its ETags: a quoted version, ASCII digits only
#: (``str.isdigit`` also takes "²", which ``int`` refuses).
_STRONG_TAG = re.compile(r'"([0-9]{1,32})"', re.ASCII)
#: A weak entity tag (RFC 9110 8.8.1: ``W/`` is case-sensitive).
_WEAK_TAG = re.compile(r'W/"[\x21\x23-\x7e]*"', re.ASCII)


class _NeverMatches:
    """An ``If-Match`` that is well formed but can match no version: a weak tag, or past 64 bits."""


NEVER_MATCHES = _NeverMatches()


def _if_match(header: str | None) -> int | _NeverMatches | None:
    """The version an ``If-Match`` header names (``None``: no condition).

    RFC 9110 13.1.1 has ``If-Match`` use strong comparison: a weak tag
    (``W/"3"``) never matches, so it is a 412 like any other version that is
    not the stored one, not a 400. So is a version past 64 bits, which no
    store can hold. Anything else that is not one quoted run of ASCII
    digits (or ``*``) is a malformed header: 400.
    """
    if header is None or header.strip() == "*":
        return None
    text = header.strip()
    found = _STRONG_TAG.fullmatch(text)
    if found is not None:
        digits = found.group(1)
        version = int(digits)
        # Strong comparison is of the opaque tag, character for character: only
        # the ETag this API writes ("1", never "01") names a version.
        return version if version <= s.MAX_INT64 and digits == str(version) else NEVER_MATCHES
    if _WEAK_TAG.fullmatch(text):
        return NEVER_MATCHES
    raise UsageError(f'If-Match must be a working-memory ETag such as "3", not {header!r}')


class BodyLimit:
    """Refuse request bodies over the limits with 413, before the app reads them.

    Checks ``Content-Length`` first and counts the streamed bytes too (a
    chunked body has no length). Only the routes of this module are limited:
    ``/v1/resources…`` and ``/v1/keys…``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @staticmethod
    def limit(path: str) -> int | None:
        if not path.startswith(("/v1/resources", "/v1/keys")):
            return None
        if path.endswith("/import"):
            return MAX_IMPORT_BYTES
        if path.endswith("/working-memory"):
            return MAX_PATCH_BYTES
        return MAX_BODY_BYTES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit(scope.get("path", "")) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        too_large = problem(
            413, "too-large", "Body too large", f"the body of this request may be at most {limit} bytes"
        )
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await too_large(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending the whole body: nobody to answer
            body += message.get("body", b"")
            if len(body) > limit:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# -- health ----------------------------------------------------------------------------

health = APIRouter(tags=["health"])


@health.get("/healthz", operation_id="health", response_model=s.Status, summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@health.get(
    "/readyz",
    operation_id="ready",
    response_model=s.Status,
    summary="The database is reachable and migrated",
    responses={503: {"model": s.Problem, "content": {"application/problem+json": {}}}},
)
async def readyz(memory: Mem) -> Any:
    try:
        # One indexed lookup in a migrated table on the primary (the keys live there): the same cost at
        # ten resources as at ten million, where listing the resources was not.
        await memory.run(ops.FindKey(token_hash=""))
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        return problem(503, "not-ready", "Not ready", f"the database is not ready: {type(exc).__name__}")
    return {"status": "ok"}


# -- resources and threads ---------------------------------------------------------------

#: Every /v1 route may answer these; a route documents only its further statuses.
v1 = APIRouter(prefix="/v1", responses=_problems(400, 401, 404, 422))
RP = "/resources/{resource}"


@v1.get("/resources", operation_id="list_resources", tags=["resources"], response_model=list[str])
async def list_resources(auth: CurrentKey, memory: Mem) -> list[str]:
    """The resources this key may reach (an admin key: every resource that holds anything)."""
    if auth.admin:
        return await memory.list_resources()
    return list(auth.resources)


@v1.get(RP + "/threads", operation_id="list_threads", tags=["threads"], response_model=list[s.ThreadOut])
async def list_threads(memory: Mem, rid: OwnResource) -> list[dict[str, Any]]:
    """The resource's threads, most recently active first."""
    return [_thread(t) for t in await memory.list_threads(resource_id=rid)]


@v1.post(
    RP + "/threads",
    operation_id="create_thread",
    tags=["threads"],
    status_code=201,
    response_model=s.ThreadOut,
    responses=_problems(409),
)
async def create_thread(memory: Mem, rid: OwnResource, body: s.ThreadIn) -> Any:
    """Create an empty thread (409 when the resource already has that id)."""
    try:
        thread = await memory.threads.create(
            resource_id=rid, thread_id=body.thread_id, title=body.title, metadata=body.metadata
        )
    except UsageError:
        if body.thread_id is not None and await _thread_exists(memory, rid, body.thread_id):
            return problem(
                409, "conflict", "Already exists", f"resource {rid!r} already has a thread {body.thread_id!r}"
            )
        raise
    return _thread(thread)


async def _thread_exists(memory: Memory, rid: str, tid: str) -> bool:
    try:
        await memory.threads.get(resource_id=rid, thread_id=tid)
    except NotFound:
        return False
    return True


@v1.get(RP + "/threads/{thread}", operation_id="get_thread", tags=["threads"], response_model=s.ThreadOut)
async def get_thread(memory: Mem, rid: OwnResource, thread: Thread) -> dict[str, Any]:
    return _thread(await memory.threads.get(resource_id=rid, thread_id=thread))


@v1.patch(
    RP + "/threads/{thread}",
    operation_id="update_thread",
    tags=["threads"],
    response_model=s.ThreadOut,
)
async def update_thread(memory: Mem, rid: OwnResource, thread: Thread, body: s.ThreadPatch) -> dict[str, Any]:
    """Change the title and/or metadata: a field left out is kept, ``null`` clears it."""
    given = body.model_fields_set
    updated = await memory.threads.update(
        resource_id=rid,
        thread_id=thread,
        title=body.title if "title" in given else ops.UNSET,
        metadata=body.metadata if "metadata" in given else ops.UNSET,
    )
    return _thread(updated)


@v1.delete(RP + "/threads/{thread}", operation_id="delete_thread", tags=["threads"], status_code=204)
async def delete_thread(memory: Mem, rid: OwnResource, thread: Thread) -> Response:
    """Delete the thread, its messages, their vectors and their edit log."""
    await memory.delete_thread(resource_id=rid, thread_id=thread)
    return Response(status_code=204)


# -- messages ---------------------------------------------------------------------------


@v1.get(
    RP + "/threads/{thread}/messages",
    operation_id="list_messages",
    tags=["messages"],
    response_model=list[s.MessageOut],
)
async def list_messages(
    memory: Mem,
    rid: OwnResource,
    thread: Thread,
    limit: Annotated[int | None, Query(ge=0, le=s.MAX_INT64, description="Only the newest N.")] = None,
    before: Annotated[
        int | None,
        Query(
            ge=-s.MAX_INT64 - 1,
            le=s.MAX_INT64,
            description="Only messages before this position in the thread (paging back).",
        ),
    ] = None,
) -> list[dict[str, Any]]:
    """The thread's messages, oldest first (a thread that does not exist reads as ``[]``)."""
    found = await memory.get_messages(resource_id=rid, thread_id=thread, limit=limit, before=before)
    return [_message(x) for x in found]


@v1.post(
    RP + "/threads/{thread}/messages",
    operation_id="append_messages",
    tags=["messages"],
    status_code=201,
    response_model=list[s.MessageOut],
    responses=_problems(409, 413),
    openapi_extra={
        "parameters": [
            {
                "name": IDEMPOTENCY_HEADER,
                "in": "header",
                "required": False,
                "schema": {"type": "string", "maxLength": MAX_IDEMPOTENCY_KEY},
                "description": "A retry with the same key returns the stored messages instead of appending again.",
            }
        ]
    },
)
async def append_messages(request: Request, memory: Mem, rid: OwnResource, thread: Thread, body: s.MessagesIn) -> Any:
    """Append a turn in one transaction (all or nothing); returns the stored messages.

    With an ``Idempotency-Key`` header a retry returns the messages the first
    request stored (201 again, nothing appended); other messages under the
    same key are a 422.
    """
    built = [
        m.Message(
            role=x.role,
            content=x.content,
            tool_calls=tuple(m.ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in x.tool_calls)
            if x.tool_calls
            else None,
            tool_call_id=x.tool_call_id,
            name=x.name,
            metadata=x.metadata,
            importance=x.importance,
        )
        for x in body.messages
    ]
    key = request.headers.get(IDEMPOTENCY_HEADER)

    async def append(messages: list[m.Message]) -> list[m.Message]:
        return await memory.append_messages(resource_id=rid, thread_id=thread, messages=messages)

    try:
        stored = await append_once(
            memory,
            resource_id=rid,
            thread_id=thread,
            key=None if key is None else check_key(key),
            sent=built,
            append=append,
        )
    except KeyReused as exc:
        return problem(422, "idempotency-key-reused", "Idempotency key reused", str(exc))
    return [_message(x) for x in (stored.messages if isinstance(stored, Replayed) else stored)]


@v1.delete(
    RP + "/threads/{thread}/messages/last",
    operation_id="pop_message",
    tags=["messages"],
    response_model=s.MessageOut,
)
async def pop_message(
    memory: Mem,
    rid: OwnResource,
    thread: Thread,
    reason: Annotated[str | None, Query(description="Kept in the message log.")] = None,
) -> dict[str, Any]:
    """Remove and return the thread's newest message (404 when it has none): undo a turn."""
    popped = await memory.messages.pop(resource_id=rid, thread_id=thread, actor="api", reason=reason)
    if popped is None:
        raise NotFound(f"thread {thread!r} of {rid!r} has no message to pop", resource_id=rid, thread_id=thread)
    return _message(popped)


@v1.patch(
    RP + "/messages/{message_id}",
    operation_id="edit_message",
    tags=["messages"],
    response_model=s.MessageOut,
)
async def edit_message(memory: Mem, rid: OwnResource, message_id: str, body: s.MessageEdit) -> dict[str, Any]:
    """Replace a message's text; the old text goes to the message log."""
    edited = await memory.messages.edit(
        resource_id=rid, message_id=message_id, content=body.content, actor="api", reason=body.reason
    )
    return _message(edited)


@v1.delete(
    RP + "/messages/{message_id}",
    operation_id="delete_message",
    tags=["messages"],
    response_model=s.MessageOut,
)
async def delete_message(
    memory: Mem,
    rid: OwnResource,
    message_id: str,
    reason: Annotated[str | None, Query(description="Kept in the message log.")] = None,
) -> dict[str, Any]:
    """Delete one message and return it; the log keeps who, when and why (not the text)."""
    deleted = await memory.messages.delete(resource_id=rid, message_id=message_id, actor="api", reason=reason)
    return _message(deleted)


@v1.get(
    RP + "/message-log",
    operation_id="message_log",
    tags=["messages"],
    response_model=list[s.MessageLogEntry],
)
async def message_log(memory: Mem, rid: OwnResource, message_id: str | None = None) -> list[dict[str, Any]]:
    """Edits, pops and deletions of the resource's messages, oldest first."""
    return await memory.messages.log(resource_id=rid, message_id=message_id)


@v1.get(
    RP + "/threads/{thread}/summaries",
    operation_id="list_summaries",
    tags=["messages"],
    response_model=list[s.SummaryOut],
    responses=_problems(501),
)
async def list_summaries(memory: Mem, rid: OwnResource, thread: Thread) -> list[dict[str, Any]]:
    """The thread's summaries, oldest first, each with ``merged``.

    A summary's ``metadata.span`` is the ``[first, last]`` positions in this
    thread of the messages it covers; a summary has no position of its own.
    """
    found = await memory.consolidation.summaries(resource_id=rid, thread_id=thread)
    return [{"message": _message(x), "merged": merged} for x, merged in found]


# -- working memory ----------------------------------------------------------------------


@v1.get(
    RP + "/working-memory",
    operation_id="get_working_memory",
    tags=["working-memory"],
    response_model=s.WorkingMemoryOut,
)
async def get_working_memory(response: Response, memory: Mem, rid: OwnResource) -> dict[str, Any]:
    """The working memory and its version (also as ``ETag``); never set: ``data`` null, version 0."""
    body, etag = _wm(await memory.working_memory.state(resource_id=rid))
    response.headers["ETag"] = etag
    return body


@v1.patch(
    RP + "/working-memory",
    operation_id="patch_working_memory",
    tags=["working-memory"],
    response_model=s.WorkingMemoryOut,
    responses=_problems(409, 412, 413, 415),
    openapi_extra={
        "parameters": [
            {
                "name": "If-Match",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": 'Apply only if the stored version is this ETag (e.g. "3"); 412 otherwise.',
            }
        ],
        "requestBody": {
            "required": True,
            "content": {kind: {"schema": {"type": "object", "additionalProperties": True}} for kind in PATCH_TYPES},
            "description": (
                "A JSON Merge Patch (RFC 7396): objects merge, null deletes, the rest replaces. "
                "Sent as application/merge-patch+json or, read the same way, application/json."
            ),
        },
    },
)
async def patch_working_memory(request: Request, response: Response, memory: Mem, rid: OwnResource) -> Any:
    """Apply a JSON Merge Patch atomically; the new version comes back as ``ETag``."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind not in PATCH_TYPES:
        detail = f"send the patch as {MERGE_PATCH} (or application/json, read as a merge patch)"
        return problem(415, "unsupported-media-type", "Unsupported media type", detail)
    condition = request.headers.get("if-match")
    expected = _if_match(condition)
    if isinstance(expected, _NeverMatches):
        detail = f"If-Match {condition!r} matches no version (strong comparison, RFC 9110): nothing was changed"
        return problem(412, "precondition-failed", "Precondition failed", detail)
    patch = loads_strict(await request.body(), "working-memory patch", max_bytes=MAX_PATCH_BYTES)
    try:
        state = await memory.update_working_memory(
            resource_id=rid, patch=patch, expected_version=expected, source="api"
        )
    except Conflict as exc:
        if condition is None:
            raise
        return problem(
            412,
            "precondition-failed",
            "Precondition failed",
            str(exc),
            expected_version=exc.expected,
            actual_version=exc.actual,
        )
    body, etag = _wm(state)
    response.headers["ETag"] = etag
    return body


@v1.get(
    RP + "/working-memory/log",
    operation_id="working_memory_log",
    tags=["working-memory"],
    response_model=list[s.WorkingMemoryLogEntry],
)
async def working_memory_log(memory: Mem, rid: OwnResource) -> list[dict[str, Any]]:
    """Every applied patch, oldest first."""
    return await memory.working_memory.log(resource_id=rid)


# -- notebook ---------------------------------------------------------------------------


def _notebook(memory: Memory, rid: str, *, write: bool) -> StoredNotebook:
    """The resource's notebook in the database (the id rules applied first, as ``Memory`` applies them)."""
    (check_name if write else check_id)(rid, "resource id")
    return memory.notebook(rid)


Target = Annotated[str, Path(pattern="^(memory|user)$", description="memory (MEMORY.md) or user (USER.md).")]


@v1.get(RP + "/notebook", operation_id="get_notebook", tags=["notebook"], response_model=s.NotebookOut)
async def get_notebook(
    memory: Mem,
    rid: OwnResource,
    thread_id: Annotated[str | None, Query(description="A conversation: the snapshot it froze.")] = None,
) -> dict[str, Any]:
    """The snapshot the model sees (a new conversation's, or ``thread_id``'s), and the live entries."""
    book = _notebook(memory, rid, write=False)
    entries = await book.read()
    if thread_id is None:
        snapshot = book.render(entries)
    else:
        snapshot = await book.frozen(thread_id) or {"memory": None, "user": None}
    return {"snapshot": snapshot, "entries": entries}


@v1.post(
    RP + "/notebook/{target}",
    operation_id="edit_notebook",
    tags=["notebook"],
    response_model=s.NotebookResult,
)
async def edit_notebook(memory: Mem, rid: OwnResource, target: Target, body: s.NotebookIn) -> dict[str, Any]:
    """add / replace / remove an entry (as the model's ``memory`` tool); a refusal is a 422 with its message."""
    outcome = await _notebook(memory, rid, write=True).apply(body.action, target, body.content, body.old_text)
    return {"success": True, **dataclasses.asdict(outcome)}


# -- recall and facts --------------------------------------------------------------------


#: The response header that says how many of the resource's messages the recall could not search by
#: meaning (``Hits.not_searchable``): a header, so the body stays the list clients already read.
NOT_SEARCHABLE_HEADER = "Caderno-Not-Searchable"


@v1.post(
    RP + "/recall",
    operation_id="recall",
    tags=["recall"],
    response_model=list[s.RecallHit],
    responses={
        200: {
            "headers": {
                NOT_SEARCHABLE_HEADER: {
                    "description": "How many of the resource's messages were not yet searchable by meaning "
                    "(still waiting for a vector after the recall embedded what it could); 0 when none.",
                    "schema": {"type": "integer", "minimum": 0},
                }
            }
        }
    },
)
async def recall(response: Response, memory: Mem, rid: OwnResource, body: s.RecallIn) -> list[dict[str, Any]]:
    """Past messages: recent + salient + relevant + lexical, fused; in conversation order.

    The resource's messages still waiting for a vector are embedded first (up to a bound), so what was
    just appended is found by meaning; the ``Caderno-Not-Searchable`` header counts those left.
    """
    hits = await memory.recall(
        resource_id=rid,
        query=body.query,
        thread_id=body.thread_id,
        scope=body.scope,
        recent=body.recent,
        salient=body.salient,
        relevant=body.relevant,
        lexical=body.lexical,
        top=body.top,
        message_range=body.message_range,
    )
    response.headers[NOT_SEARCHABLE_HEADER] = str(hits.not_searchable)
    return [
        {
            "message": _message(h.message),
            "thread_id": h.thread_id,
            "reasons": sorted(h.reasons),
            "score": h.score,
            "scores": h.scores,
        }
        for h in hits
    ]


@v1.get(RP + "/facts", operation_id="list_facts", tags=["facts"], response_model=list[s.FactOut])
async def list_facts(memory: Mem, rid: OwnResource, category: str | None = None) -> list[Any]:
    """The resource's facts, most recently updated first."""
    return [dataclasses.asdict(f) for f in await memory.facts.list(resource_id=rid, category=category)]


@v1.put(RP + "/facts/{category}/{key}", operation_id="put_fact", tags=["facts"], response_model=s.FactOut)
async def put_fact(memory: Mem, rid: OwnResource, category: str, key: str, body: s.FactIn) -> dict[str, Any]:
    """Set a fact (source ``user``); the previous value goes to its history."""
    fact = await memory.facts.remember(resource_id=rid, category=category, key=key, value=body.value, source="user")
    return dataclasses.asdict(fact)


@v1.delete(RP + "/facts/{category}/{key}", operation_id="delete_fact", tags=["facts"], status_code=204)
async def delete_fact(memory: Mem, rid: OwnResource, category: str, key: str) -> Response:
    """Forget a fact (its history stays)."""
    await memory.facts.forget(resource_id=rid, category=category, key=key)
    return Response(status_code=204)


@v1.get(
    RP + "/facts/{category}/{key}/history",
    operation_id="fact_history",
    tags=["facts"],
    response_model=list[s.FactHistoryEntry],
)
async def fact_history(memory: Mem, rid: OwnResource, category: str, key: str) -> list[Any]:
    """Earlier values of one fact, oldest first."""
    return await memory.facts.history(resource_id=rid, category=category, key=key)


# -- tasks ------------------------------------------------------------------------------


@v1.get(RP + "/tasks", operation_id="list_tasks", tags=["tasks"], response_model=list[s.TaskOut])
async def list_tasks(memory: Mem, rid: OwnResource) -> list[Any]:
    return [dataclasses.asdict(t) for t in await memory.tasks.list(resource_id=rid)]


@v1.post(
    RP + "/tasks",
    operation_id="create_task",
    tags=["tasks"],
    status_code=201,
    response_model=s.TaskOut,
    responses=_problems(403, 409),
)
async def create_task(auth: CurrentKey, memory: Mem, rid: OwnResource, body: s.TaskIn) -> Any:
    """Schedule a prompt (409 when the resource already has a task of that name; ``trusted`` needs an admin key).

    A resource key schedules within the model's limits (``state.check_bounded``:
    a shortest interval and a most-tasks cap per resource, a 400 otherwise),
    as its holder may be anyone a tenant handed it to; an admin key is an
    operator's and is not bound.
    """
    if body.trusted:
        _admin_only(auth, "a trusted task (it runs tools that need approval without asking)")
    try:
        task = await memory.tasks.add(resource_id=rid, bounded=not auth.admin, **body.model_dump())
    except UsageError:
        if any(t.name == body.name.strip() for t in await memory.tasks.list(resource_id=rid)):
            return problem(
                409, "conflict", "Already exists", f"resource {rid!r} already has a task named {body.name!r}"
            )
        raise
    return dataclasses.asdict(task)


@v1.post(RP + "/tasks/{name}/pause", operation_id="pause_task", tags=["tasks"], response_model=s.TaskOut)
async def pause_task(memory: Mem, rid: OwnResource, name: str) -> dict[str, Any]:
    return dataclasses.asdict(await memory.tasks.pause(resource_id=rid, name=name))


@v1.post(RP + "/tasks/{name}/resume", operation_id="resume_task", tags=["tasks"], response_model=s.TaskOut)
async def resume_task(memory: Mem, rid: OwnResource, name: str) -> dict[str, Any]:
    return dataclasses.asdict(await memory.tasks.resume(resource_id=rid, name=name))


@v1.delete(RP + "/tasks/{name}", operation_id="delete_task", tags=["tasks"], status_code=204)
async def delete_task(memory: Mem, rid: OwnResource, name: str) -> Response:
    await memory.tasks.delete(resource_id=rid, name=name)
    return Response(status_code=204)


# -- whole resources ---------------------------------------------------------------------


@v1.get(RP + "/export", operation_id="export_resource", tags=["resources"], response_model=dict[str, Any])
async def export_resource(memory: Mem, rid: OwnResource) -> JSONResponse:
    """Everything of the resource, as ``caderno export`` writes it."""
    return JSONResponse(await memory.export_resource(resource_id=rid))


@v1.post(
    RP + "/import",
    operation_id="import_resource",
    tags=["resources"],
    status_code=204,
    responses=_problems(403, 413),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
            "description": "An export whose resource_id is this path's resource; the resource must hold nothing yet.",
        }
    },
)
async def import_resource(request: Request, auth: CurrentKey, memory: Mem, rid: OwnResource) -> Response:
    """Restore an export into an empty resource (ids and order intact)."""
    dump = loads_strict(await request.body(), "export", max_bytes=MAX_IMPORT_BYTES, max_depth=DUMP_DEPTH)
    if not isinstance(dump, dict) or dump.get("resource_id") != rid:
        raise UsageError(f"the export's resource_id must be {rid!r}, the resource in the path")
    if _grants_approval(dump):
        _admin_only(auth, "an export with approved command prefixes or trusted tasks")
    await memory.import_resource(dump)
    return Response(status_code=204)


@v1.delete(RP, operation_id="erase_resource", tags=["resources"], status_code=204)
async def erase_resource(memory: Mem, rid: OwnResource) -> Response:
    """Delete everything of the resource, its notebook included, in one transaction."""
    await memory.erase_resource(resource_id=rid)
    return Response(status_code=204)


def _admin_only(key: ApiKey, what: str) -> None:
    """Approval bypass is an operator's decision: only an admin key (or the CLI, or Python) grants it.

    A resource key's holder could otherwise approve ``rm`` or ``curl`` for
    every worker and application that runs gated tools on this database.
    """
    if not key.admin:
        raise Forbidden(f"{what} needs an admin key; a resource key cannot grant approval bypass")


def _grants_approval(dump: dict[str, Any]) -> bool:
    """Whether an import document holds approved prefixes or a trusted task (checked before anything is written)."""
    tasks = dump.get("scheduled_tasks")
    trusted = isinstance(tasks, list) and any(isinstance(t, dict) and t.get("is_trusted") for t in tasks)
    return bool(dump.get("allowed_prefixes")) or trusted


# -- keys -------------------------------------------------------------------------------


@v1.get("/keys", operation_id="list_keys", tags=["keys"], response_model=list[s.ApiKeyOut], responses=_problems(403))
async def list_keys(auth: AdminKey, memory: Mem) -> list[Any]:
    """Every key, revoked ones included (never a token)."""
    return [dataclasses.asdict(k) for k in await memory.keys.list()]


@v1.post(
    "/keys",
    operation_id="create_key",
    tags=["keys"],
    status_code=201,
    response_model=s.KeyCreated,
    responses=_problems(403),
)
async def create_key(auth: AdminKey, memory: Mem, body: s.KeyIn) -> dict[str, Any]:
    """A new key; its token is in this response only."""
    token, key = await memory.keys.create(resources=body.resources, admin=body.admin, name=body.name)
    return {"token": token, "key": dataclasses.asdict(key)}


@v1.delete("/keys/{key_id}", operation_id="revoke_key", tags=["keys"], status_code=204, responses=_problems(403))
async def revoke_key(auth: AdminKey, memory: Mem, key_id: str) -> Response:
    """Stop a key at once."""
    await memory.keys.revoke(key_id=key_id)
    return Response(status_code=204)


def install_routes(app: FastAPI) -> None:
    """Add the REST API (``/healthz``, ``/readyz``, ``/v1/…``) and its body limits to ``app``."""
    app.add_middleware(BodyLimit)
    app.include_router(health)
    app.include_router(v1)


def default_routers() -> list[Callable[[FastAPI], None]]:
    """What ``caderno serve`` installs: this API, then the proxy, the inspector and ``/mcp`` when present."""
    routers: list[Callable[[FastAPI], None]] = [install_routes]
    try:
        from .proxy import install_proxy

        routers.append(install_proxy)
    except ImportError:
        pass
    try:
        from .inspector import install_inspector

        routers.append(install_inspector)
    except ImportError:
        pass
    if importlib.util.find_spec("mcp") is not None:  # extra ``mcp``: without the SDK, no /mcp
        from .mcp_http import install_mcp  # the SDK itself loads on the first request to /mcp

        routers.append(install_mcp)
    return routers
