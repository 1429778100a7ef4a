"""Working memory: JSON Merge Patch (RFC 7396), schema validation, and ``memory.working_memory``.

The rules live here, once; stores only run them inside their own
transaction so the read-merge-write is atomic in the database. Reading
and patching the object stay flat on ``Memory`` (``get_working_memory``,
``update_working_memory``, as the ``AgentMemory`` port names them); the part
``WorkingMemoryPart`` holds the rest: the versioned state, the patch log,
a dry run of a patch, and the schema for prompts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from ...core.clock import utcnow
from ...core.errors import InvalidPatch, UsageError
from ...core.jsonvalue import MAX_PATCH_BYTES, check_json
from ...core.messages import WorkingMemory
from ...core.validate import check_id
from ...stores import ops
from ...stores.base import Runner

__all__ = ["Validator", "WorkingMemoryPart", "check_patch", "make_validator", "merge_patch", "schema_of"]

Validator = Callable[[dict[str, Any]], dict[str, Any]]


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7396 merge patch and return the result (inputs untouched).

    Objects merge recursively, ``None`` deletes a key, and anything else
    (arrays and scalars included) replaces the target value whole.
    """
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def make_validator(schema: Any) -> Validator | None:
    """Build a validator from a pydantic model class or a JSON Schema dict.

    The validator returns the JSON-able data to store; it raises
    ``InvalidPatch`` with the validation message on failure.
    """
    if schema is None:
        return None
    if isinstance(schema, type) and hasattr(schema, "model_validate"):

        def validate_model(data: dict[str, Any]) -> dict[str, Any]:
            from pydantic import ValidationError

            try:
                schema.model_validate(data)
            except ValidationError as exc:
                raise InvalidPatch(f"working memory fails {schema.__name__}: {exc}") from None
            # The merged JSON is stored as written, not the model's dump, so
            # keys the model does not declare are neither lost nor invented.
            return data

        return validate_model
    if isinstance(schema, Mapping):
        import jsonschema

        checker = jsonschema.Draft202012Validator(dict(schema))

        def validate_json_schema(data: dict[str, Any]) -> dict[str, Any]:
            errors = sorted(checker.iter_errors(data), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                where = "/".join(str(p) for p in first.path) or "(root)"
                raise InvalidPatch(f"working memory fails its JSON Schema at {where}: {first.message}")
            return data

        return validate_json_schema
    raise TypeError("working_memory_schema must be a pydantic model class or a JSON Schema dict")


def schema_of(schema: Any) -> dict[str, Any] | None:
    """The JSON Schema of a pydantic model or dict schema, for prompts."""
    if schema is None:
        return None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    return dict(schema)


def check_patch(patch: Any, resource_id: str) -> dict[str, Any]:
    """Accept a patch only if it is a JSON object (a dict with str keys)."""
    if not isinstance(patch, Mapping):
        raise InvalidPatch(
            f"a working-memory patch must be a JSON object, not {type(patch).__name__}", resource_id=resource_id
        )
    try:
        check_json(patch, "patch", max_bytes=MAX_PATCH_BYTES)
    except UsageError as exc:
        raise InvalidPatch(str(exc), resource_id=resource_id) from None
    # A copy: the caller may keep mutating its dict after the call.
    return copy.deepcopy(dict(patch))


class WorkingMemoryPart:
    """Working memory of every resource (``memory.working_memory``).

    ``Part`` because ``WorkingMemory`` is already the name of the record it
    reads (data, version, updated_at).

    Args:
        run: the memory's runner (one operation, one transaction).
        schema: the optional pydantic model class or JSON Schema dict every
            merged working memory must validate against.
    """

    def __init__(self, run: Runner, schema: Any) -> None:
        self._run = run
        self._schema = schema
        self._validate = make_validator(schema)

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema working memory must follow, if one was given."""
        return schema_of(self._schema)

    async def state(self, *, resource_id: str) -> WorkingMemory | None:
        """Working memory with its version (for ``expected_version``)."""
        check_id(resource_id, "resource_id")
        return await self._run(ops.ReadWorkingMemory(resource_id=resource_id))

    async def log(self, *, resource_id: str) -> list[dict[str, Any]]:
        """Every applied patch (version, patch, source, created_at), oldest first."""
        check_id(resource_id, "resource_id")
        return await self._run(ops.ReadWorkingMemoryLog(resource_id=resource_id))

    def preview(self, current: dict[str, Any] | None, patch: Any, *, resource_id: str = "") -> dict[str, Any]:
        """The result of applying ``patch`` to ``current``, validated, without writing.

        Raises:
            InvalidPatch: as ``Memory.update_working_memory`` would.
        """
        patch = check_patch(patch, resource_id)
        merged = merge_patch(current or {}, patch)
        return self._validate(merged) if self._validate else merged

    def patch_op(
        self, resource_id: str, patch: Any, expected_version: int | None, source: str
    ) -> ops.PatchWorkingMemory:
        """The operation that applies ``patch``: the merge and validation run inside the store's transaction.

        Raises:
            InvalidPatch: the patch is not a JSON object (checked now, before any write).
        """
        patch = check_patch(patch, resource_id)

        def update(current: dict[str, Any] | None) -> dict[str, Any]:
            return self.preview(current, patch, resource_id=resource_id)

        return ops.PatchWorkingMemory(
            resource_id=resource_id,
            update=update,
            patch=patch,
            expected_version=expected_version,
            source=source,
            now=utcnow(),
        )
