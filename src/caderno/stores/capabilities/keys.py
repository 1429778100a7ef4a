"""HTTP API keys (``KEYS``): each key's record and the hash of its token, never the token."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ...core.clock import from_iso
from ...core.messages import canonical_json
from ...core.records import ApiKey
from .._op import Op, operations_in, plan_of
from .._rows import loads
from .._sql import Dialect, Plan, Q

__all__ = ["CreateKey", "FindKey", "ListKeys", "RevokeKey"]


_KEY_FIELDS = "id, name, resources, admin, created_at, revoked_at"


def _key_from_row(row: Any) -> ApiKey:
    def when(value: Any) -> Any:
        return from_iso(value) if isinstance(value, str) else value

    return ApiKey(
        id=row[0],
        name=row[1],
        resources=tuple(loads(row[2])),
        admin=bool(row[3]),
        created_at=when(row[4]),
        revoked_at=when(row[5]),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateKey(Op[None]):
    """Store a new key's record and the hash of its token."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    key: ApiKey
    token_hash: str


@plan_of(CreateKey)
def create_key(d: Dialect, op: CreateKey) -> Plan[None]:
    k = op.key
    assert k.created_at is not None  # set by memory.keys.create
    yield Q(
        "INSERT INTO api_keys (id, name, token_hash, resources, admin, created_at) VALUES (?,?,?,?,?,?)",
        (k.id, k.name, op.token_hash, canonical_json(list(k.resources)), k.admin, d.ts(k.created_at)),
        "none",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class FindKey(Op["ApiKey | None"]):
    """The live (not revoked) key whose token hashes to ``token_hash``, or ``None``."""

    one_statement: ClassVar[bool] = True
    token_hash: str


@plan_of(FindKey)
def find_key(d: Dialect, op: FindKey) -> Plan[ApiKey | None]:
    row = yield Q(
        f"SELECT {_KEY_FIELDS} FROM api_keys WHERE token_hash = ? AND revoked_at IS NULL", (op.token_hash,), "one"
    )
    return _key_from_row(row) if row else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ListKeys(Op[list[ApiKey]]):
    """Every key, revoked ones included, oldest first."""

    one_statement: ClassVar[bool] = True


@plan_of(ListKeys)
def list_keys(d: Dialect, op: ListKeys) -> Plan[list[ApiKey]]:
    rows = yield Q(f"SELECT {_KEY_FIELDS} FROM api_keys ORDER BY created_at, id")
    return [_key_from_row(r) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class RevokeKey(Op[bool]):
    """Revoke a key by id; False when there is no live key with that id."""

    writes: ClassVar[bool] = True
    one_statement: ClassVar[bool] = True
    key_id: str
    now: datetime


@plan_of(RevokeKey)
def revoke_key(d: Dialect, op: RevokeKey) -> Plan[bool]:
    done = yield Q(
        "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (d.ts(op.now), op.key_id), "rowcount"
    )
    return bool(done)


#: This capability's operations: every one defined above.
OPERATIONS = operations_in(globals())
