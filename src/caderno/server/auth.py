"""Keys scoped to resources: who may reach what.

Every request carries ``Authorization: Bearer cad_…``. The key is looked up
by the hash of its token on every request (revocation works at once). A
route that names a resource takes it as ``OwnResource`` (``require`` where
the id is not a path parameter): a key for resource A gets, for B's data,
the same 404 as for data that does not exist — a resource id is never
confirmed to a key that may not see it.

The key is checked before the request's body is read: ``edge.Edge`` calls
``current_key`` from the headers alone and leaves the key in the ASGI scope
(``SCOPE_KEY``), where this dependency and the MCP tools find it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Request

from ..core.errors import Forbidden, NotFound, Unauthorized  # Unauthorized, Forbidden: defined with every error
from ..core.records import ApiKey

__all__ = [
    "SCOPE_KEY",
    "AdminKey",
    "CurrentKey",
    "OwnResource",
    "Unauthorized",
    "allowed",
    "current_key",
    "own_resource",
    "require",
    "require_admin",
]

#: Where the edge leaves the request's verified key in the ASGI scope.
SCOPE_KEY = "caderno.api_key"


async def current_key(request: Request) -> ApiKey:
    """The request's live key (a FastAPI dependency).

    Raises:
        Unauthorized: missing, malformed, unknown or revoked.
    """
    verified: ApiKey | None = request.scope.get(SCOPE_KEY)
    if verified is not None:  # the edge checked it for this very request
        return verified
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send Authorization: Bearer <key>")
    memory: Any = request.app.state.memory
    key = await memory.keys.verify(token.strip())
    if key is None:
        raise Unauthorized("unknown or revoked key")
    return key


CurrentKey = Annotated[ApiKey, Depends(current_key)]


def allowed(key: ApiKey, resource_id: str) -> bool:
    """Whether ``key`` may read and change ``resource_id``."""
    return key.admin or resource_id in key.resources


def require(key: ApiKey, resource_id: str) -> str:
    """``resource_id`` if the key may reach it; else the same ``NotFound`` as a missing resource."""
    if not allowed(key, resource_id):
        raise NotFound(f"resource {resource_id!r} not found", resource_id=resource_id)
    return resource_id


async def require_admin(key: CurrentKey) -> ApiKey:
    """A FastAPI dependency: the key must be an admin key (403 otherwise)."""
    if not key.admin:
        raise Forbidden("this needs an admin key")
    return key


AdminKey = Annotated[ApiKey, Depends(require_admin)]


async def own_resource(
    key: CurrentKey,
    resource: Annotated[str, Path(description="The resource (user, household, tenant…) whose data this is.")],
) -> str:
    """The path's ``{resource}``, once the request's key may reach it (a FastAPI dependency).

    It runs before the route's other parameters and body fields are
    validated, so a key for another resource gets its 404 whatever they hold
    (only a body that is not JSON at all is refused first: FastAPI parses it
    before any dependency runs).

    The id's form is left to the ``Memory`` call that uses it (``check_id``
    for reads and deletes, ``check_name`` for writes), so a database written
    before the name rule still reads and its odd ids can be removed; one
    check here would either refuse those reads or let writes through.
    """
    return require(key, resource)


#: A route's resource id: declare ``rid: OwnResource`` instead of a ``resource`` path parameter.
OwnResource = Annotated[str, Depends(own_resource)]
