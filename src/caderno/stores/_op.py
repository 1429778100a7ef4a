"""What every storage operation is, and how a backend finds the plan that runs one.

An operation is a frozen value (a subclass of ``Op``) defined in one
capability module of ``caderno.stores.capabilities``, beside the plan both
SQL dialects run for it (``@plan_of``). What a backend needs to know about an
operation is a class attribute of it (``writes``, ``durable``,
``one_statement``, ``queues_work``, ``erases``), never a list kept in the
backend. A dialect whose SQL differs registers its own plan in its plans
module (``DialectPlans.plan_of``), and ``DialectPlans.handler`` finds an
operation's plan: the dialect's own, else the shared one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ._sql import Handler, Plan

__all__ = ["UNSET", "DialectPlans", "Op", "operations_in", "plan_of"]

T = TypeVar("T")
#: A plan function: given the dialect and an operation, the generator of the operation's statements.
F = TypeVar("F", bound=Callable[..., Plan[Any]])


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave as it is" for optional fields where ``None`` is a real value.
UNSET: Any = _Unset()


@dataclass(frozen=True, kw_only=True, slots=True)
class Op(Generic[T]):
    """One storage operation whose result is a ``T``."""

    writes: ClassVar[bool] = False
    """Whether the operation changes the database (a batch with none is a read snapshot)."""
    durable: ClassVar[bool] = True
    """Whether its write must survive a power cut. A batch of only non-durable writes (the turn
    leases: one lost only frees its thread early) may commit without waiting for the disk."""
    one_statement: ClassVar[bool] = False
    """Whether its PostgreSQL plan sends at most one statement, so that alone in a batch it runs
    without BEGIN/COMMIT (``caderno.stores.postgres.one_statement``).
    ``tests/stores/test_one_statement.py`` counts what every plan really sends."""
    queues_work: ClassVar[bool] = False
    """Whether its plan may queue embedding work (messages or items): a PostgreSQL store then
    wakes the embedding workers of other processes. ``tests/stores/test_work_notices.py`` checks
    it against the statements every plan sends."""
    erases: ClassVar[bool] = False
    """Whether it deletes stored text that must then leave the database files (SQLite scrubs
    after the commit: ``SQLiteStore._scrub``)."""
    plan: ClassVar[Handler | None] = None
    """The plan both SQL dialects run (set by ``@plan_of`` beside the class); None where each
    dialect has its own (``DialectPlans``)."""


def plan_of(kind: type[Op[Any]]) -> Callable[[F], F]:
    """Make the decorated function the plan SQLite and PostgreSQL run for ``kind`` (``Op.plan``)."""

    def register(fn: F) -> F:
        if "plan" in vars(kind):
            raise TypeError(f"{kind.__name__} has a shared plan already")
        kind.plan = staticmethod(fn)
        return fn

    return register


def operations_in(namespace: Mapping[str, Any]) -> frozenset[type[Op[Any]]]:
    """The operation types a module defines, from its ``globals()``: a capability module's ``OPERATIONS``.

    Called at the end of the module, it finds every ``Op`` subclass defined
    there (not those imported from elsewhere), so a new operation needs no
    entry in any list.
    """
    module = namespace["__name__"]
    return frozenset(
        value
        for value in namespace.values()
        if isinstance(value, type) and issubclass(value, Op) and value is not Op and value.__module__ == module
    )


class DialectPlans:
    """One dialect's own plans, by operation type; each added by ``@plans.plan_of(Op)`` beside its function.

    ``under``: the dialect this one varies (PostgreSQL with pgvector varies
    PostgreSQL): its plans count where this one has none.
    """

    def __init__(self, name: str, *, under: DialectPlans | None = None) -> None:
        self.name = name
        self._under = under
        self._own: dict[type[Op[Any]], Handler] = {}

    def plan_of(self, kind: type[Op[Any]]) -> Callable[[F], F]:
        """Make the decorated function this dialect's plan for ``kind``, in place of the shared one."""

        def register(fn: F) -> F:
            if kind in self._own:
                raise TypeError(f"{self.name} has a plan for {kind.__name__} already")
            self._own[kind] = fn
            return fn

        return register

    def handler(self, kind: type[Op[Any]]) -> Handler | None:
        """The plan this dialect runs for ``kind``: its own, else ``under``'s, else the shared one; None when none."""
        own = self._own.get(kind)
        if own is not None:
            return own
        return self._under.handler(kind) if self._under is not None else kind.plan

    @property
    def own(self) -> frozenset[type[Op[Any]]]:
        """The operation types this dialect (with ``under``) plans its own way."""
        return frozenset(self._own) | (self._under.own if self._under is not None else frozenset())
