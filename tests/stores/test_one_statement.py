"""The operations PostgreSQL runs as one statement, checked against the plans themselves.

An operation alone in a batch runs without BEGIN/COMMIT when its plan sends
one statement (``caderno.stores.postgres.one_statement``): one statement is
atomic on its own. Which operations do is their ``Op.one_statement``
attribute, set by hand beside each one, so this test runs every operation's
plan on a real PostgreSQL — in a transaction it rolls back, over a scene
where each operation has work to do (``_op_cases``) — and counts the
statements each one sends (an ``executemany`` counts one per row):

* an operation the store runs alone never sends more than one (it would
  commit half of itself);
* every other operation sends more than one in at least one case here, so
  nothing that could skip the two round trips is left in a transaction.

Every operation type needs a case (the first check), so a new operation
comes with a decision.
"""

from __future__ import annotations

from typing import Any

import _op_cases
import pytest
from _op_cases import Scene, cases, runnable, sent

from caderno.stores import ops, postgres

pytestmark = pytest.mark.postgres

#: The fixture, under its name here (pytest finds fixtures by module attribute).
scene = _op_cases.scene


async def _statements(store: postgres.PostgresStore, op: ops.Op[Any]) -> int:
    """How many statements ``op``'s plan sends (an ``executemany`` one per row)."""
    return sum(len(q.params) if q.fetch == "many" else 1 for q in await sent(store, op))


async def test_the_operations_run_alone_are_exactly_those_of_one_statement(scene: Scene) -> None:
    kinds = runnable(scene)
    sent_ = [(op, await _statements(scene.store, op)) for op in cases(scene) if type(op) in kinds]
    assert {type(op) for op, _ in sent_} == kinds, "every operation needs a case in tests/stores/_op_cases.py"
    several = [type(op).__name__ for op, n in sent_ if postgres.one_statement(op) and n > 1]
    assert several == [], f"run alone, yet more than one statement: {several}"
    most: dict[type[Any], int] = {}
    for op, n in sent_:
        most[type(op)] = max(n, most.get(type(op), 0))
    left_out = sorted(kind.__name__ for kind, n in most.items() if not kind.one_statement and n <= 1)
    assert left_out == [], f"one statement in every case: set one_statement = True on {left_out}"
