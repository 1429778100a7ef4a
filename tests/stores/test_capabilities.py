"""The operations, derived from their capability modules, and the plans each backend finds for them.

No list of operations is kept by hand: each capability module of
``caderno.stores.capabilities`` defines its operations (its ``OPERATIONS``),
a shared plan sits beside each one (``Op.plan``) and a dialect registers
the plans it runs its own way (``DialectPlans``). These checks derive what
hand-kept registries used to hold and hold it to account: an operation
added without a plan, in two modules, or missing from ``caderno.stores.ops``
fails here. Whether a ``one_statement`` plan really sends one statement,
and a ``queues_work`` one really queues, is read off the SQL each plan sends
on a real PostgreSQL (``test_one_statement.py``, ``test_work_notices.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from caderno.core.errors import UsageError
from caderno.stores import _op, capabilities, ops
from caderno.stores._op import DialectPlans
from caderno.stores._postgres_plans import PGVECTOR, POSTGRES
from caderno.stores._sqlite_plans import SQLITE
from caderno.stores.memory import InMemoryStore
from caderno.stores.postgres import PostgresStore
from caderno.stores.sqlite import SQLiteStore

Kinds = frozenset[type[ops.Op[Any]]]


def _modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{capabilities.__name__}.{m.name}")
        for m in pkgutil.iter_modules(capabilities.__path__)
    ]


def _defined_in(module: ModuleType) -> Kinds:
    """Every ``Op`` subclass the module itself defines, whatever its ``OPERATIONS`` says."""
    return frozenset(
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, ops.Op)
        and value is not ops.Op
        and value.__module__ == module.__name__
    )


#: The capability sets ``caderno.stores.ops`` composes, by name.
CAPABILITIES = (
    "CORE",
    "FACTS",
    "RECALL",
    "CONSOLIDATION",
    "AGENT_STATE",
    "KEYS",
    "ITEMS",
    "ITEM_VECTORS",
    "NOTEBOOK",
    "TURNS",
    "VECTOR_SEARCH",
)
EVERY: Kinds = ops.ALL | ops.VECTOR_SEARCH


def missing_plans(plans: DialectPlans, claimed: Kinds) -> list[str]:
    """The operations of ``claimed`` for which ``plans`` finds no plan."""
    return sorted(kind.__name__ for kind in claimed if plans.handler(kind) is None)


def test_each_operation_is_defined_in_exactly_one_capability_module() -> None:
    seen: dict[type[Any], str] = {}
    for module in _modules():
        assert _defined_in(module) == module.OPERATIONS, module.__name__
        for kind in module.OPERATIONS:
            assert kind not in seen, f"{kind.__name__} in {seen[kind]} and {module.__name__}"
            seen[kind] = module.__name__
    assert set(seen) == EVERY, "a capability module whose operations caderno.stores.ops does not compose"
    sets = [getattr(ops, name) for name in CAPABILITIES]
    assert sum(len(s) for s in sets) == len(EVERY), "an operation in two capability sets"
    composed = frozenset[type[ops.Op[Any]]]().union(*sets)
    assert composed - ops.VECTOR_SEARCH == ops.ALL


def test_every_operation_is_named_by_ops() -> None:
    assert len(set(ops.__all__)) == len(ops.__all__)
    for module in _modules():
        for kind in module.OPERATIONS:
            name = kind.__name__
            assert name in module.__all__, f"{name} is missing from {module.__name__}.__all__"
            assert getattr(ops, name) is kind, name
            assert name in ops.__all__, name


@pytest.mark.parametrize(
    ("backend", "plans", "claimed"),
    [
        ("sqlite", SQLiteStore.plans, SQLiteStore.supports),
        ("memory://", InMemoryStore.plans, InMemoryStore.supports),
        ("postgres", POSTGRES, PostgresStore.supports),
        # What ``PostgresStore.open`` claims once it finds the vector extension, and the plans it then runs.
        ("postgres with pgvector", PGVECTOR, ops.ALL | ops.VECTOR_SEARCH),
    ],
)
def test_every_operation_a_backend_claims_has_a_plan_there(backend: str, plans: DialectPlans, claimed: Kinds) -> None:
    assert claimed >= ops.ALL
    assert missing_plans(plans, claimed) == [], backend


def test_the_stores_look_their_plans_up_where_this_test_does(tmp_path: Path) -> None:
    assert SQLiteStore(tmp_path / "a.db").plans is SQLITE
    assert InMemoryStore().plans is SQLITE
    store = PostgresStore("postgresql://u@h/db")
    assert store.plans is POSTGRES
    store.pgvector_schema = "public"  # what open sets when it finds the extension
    assert store.plans is PGVECTOR


def test_an_operation_no_backend_plans_is_caught() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class Unplanned(ops.Op[None]):
        writes: ClassVar[bool] = True
        resource_id: str

    for plans in (SQLITE, POSTGRES, PGVECTOR):
        assert missing_plans(plans, ops.ALL | {Unplanned}) == ["Unplanned"]


def test_optional_operations_have_no_plan_where_they_are_not_claimed(tmp_path: Path) -> None:
    assert missing_plans(SQLITE, ops.VECTOR_SEARCH) == missing_plans(POSTGRES, ops.VECTOR_SEARCH) == ["SearchVectors"]
    search = ops.SearchVectors(resource_id="r", model="m", query=(1.0,), k=1, min_similarity=0.0)
    with pytest.raises(UsageError, match="does not support SearchVectors"):
        SQLiteStore(tmp_path / "a.db")._handler(search)


def _plans_of(plans: DialectPlans) -> list[tuple[type[Any], Any]]:
    return [(kind, plans.handler(kind)) for kind in plans.own]


@pytest.mark.parametrize("where", ["shared", "sqlite", "postgres", "pgvector"])
def test_each_plan_takes_the_operation_it_is_registered_for(where: str) -> None:
    """A plan's operation parameter names its operation type: a plan registered under another type fails here."""
    registered = {
        "shared": [(kind, kind.plan) for kind in EVERY if kind.plan is not None],
        "sqlite": _plans_of(SQLITE),
        "postgres": _plans_of(POSTGRES),
        "pgvector": _plans_of(PGVECTOR),
    }[where]
    assert registered
    for kind, plan in registered:
        annotation = str(list(inspect.signature(plan).parameters.values())[1].annotation)
        assert re.search(rf"\b{kind.__name__}\b", annotation), (
            f"{plan.__name__} takes {annotation}, not {kind.__name__}"
        )


def test_a_second_plan_for_one_operation_is_refused() -> None:
    with pytest.raises(TypeError, match="has a shared plan already"):
        _op.plan_of(ops.SetImportance)(lambda d, op: iter(()))
    with pytest.raises(TypeError, match="has a plan for ClaimEmbeddings already"):
        SQLITE.plan_of(ops.ClaimEmbeddings)(lambda d, op: iter(()))


def test_what_an_operation_says_of_its_writes_is_consistent() -> None:
    for kind in EVERY:
        if kind.queues_work or kind.erases or not kind.durable:
            assert kind.writes, f"{kind.__name__}: queues work, erases or is not durable, yet does not write"
