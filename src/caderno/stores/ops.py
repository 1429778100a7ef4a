"""The operations of the storage port: the complete list of what a backend does.

A backend receives a batch of these frozen values and runs it in **one
transaction** (a read-only snapshot when every operation reads); see
``caderno.stores.base.Store``. Nothing reaches a backend another way.

Each operation is generic in the type of its result, so
``await memory.run(ReadThread(...))`` is typed ``list[Message]``. Operations
are grouped by capability; a backend states which it supports in
``Store.supports`` and the conformance suite runs each operation on each
backend that claims it:

* ``CORE`` — history, thread records, working memory, whole resources. What
  ``Memory``'s history and working-memory methods need.
* ``FACTS`` — the fact store.
* ``RECALL`` — the embedding queue, vectors, full text and salience.
* ``CONSOLIDATION`` — summaries and the fact-extraction queue.
* ``AGENT_STATE`` — scheduled tasks, learned tool macros, approved command prefixes.
* ``KEYS`` — HTTP API keys (hashes only).
* ``ITEMS`` — JSON documents under namespace paths (the LangGraph store).
* ``ITEM_VECTORS`` — the items' embedding queue and vectors (semantic search
  of the LangGraph store), kept like message vectors.
* ``NOTEBOOK`` — the notebook (``MEMORY.md`` / ``USER.md`` entries) and each
  conversation's frozen snapshot of it.
* ``TURNS`` — one turn at a time per thread, across processes (a lease).
* ``VECTOR_SEARCH`` — optional, not in ``ALL``: vector search inside the
  database (PostgreSQL with pgvector).

Each operation is defined in its capability's module of
``caderno.stores.capabilities``, beside its plan; this module composes the
sets from those modules' ``OPERATIONS`` and re-exports every name, so
``from caderno.stores.ops import ReadThread`` and ``ops.ReadThread`` are the
way to name one.

All policy (ids, validation, merge rules, thresholds, which messages are
embedded) lives above the port: operations carry finished values.
"""

from __future__ import annotations

from typing import Any

from ._op import UNSET, Op
from .capabilities import (
    agent_state,
    consolidation,
    facts,
    history,
    item_vectors,
    items,
    keys,
    notebook,
    recall,
    resources,
    turns,
    vector_search,
)
from .capabilities.agent_state import *  # noqa: F403
from .capabilities.consolidation import *  # noqa: F403
from .capabilities.facts import *  # noqa: F403
from .capabilities.history import *  # noqa: F403
from .capabilities.item_vectors import *  # noqa: F403
from .capabilities.items import *  # noqa: F403
from .capabilities.keys import *  # noqa: F403
from .capabilities.notebook import *  # noqa: F403
from .capabilities.recall import *  # noqa: F403
from .capabilities.resources import *  # noqa: F403
from .capabilities.turns import *  # noqa: F403
from .capabilities.vector_search import *  # noqa: F403

_Ops = frozenset[type[Op[Any]]]

CORE: _Ops = history.OPERATIONS | resources.OPERATIONS
FACTS: _Ops = facts.OPERATIONS
RECALL: _Ops = recall.OPERATIONS
CONSOLIDATION: _Ops = consolidation.OPERATIONS
AGENT_STATE: _Ops = agent_state.OPERATIONS
KEYS: _Ops = keys.OPERATIONS
ITEMS: _Ops = items.OPERATIONS
ITEM_VECTORS: _Ops = item_vectors.OPERATIONS
NOTEBOOK: _Ops = notebook.OPERATIONS
TURNS: _Ops = turns.OPERATIONS
#: Optional: vector search inside the database (PostgreSQL with pgvector); not part of ``ALL``.
VECTOR_SEARCH: _Ops = vector_search.OPERATIONS
#: Every operation a full backend handles.
ALL: _Ops = CORE | FACTS | RECALL | CONSOLIDATION | AGENT_STATE | KEYS | ITEMS | ITEM_VECTORS | NOTEBOOK | TURNS

__all__ = [
    "AGENT_STATE",
    "ALL",
    "CONSOLIDATION",
    "CORE",
    "FACTS",
    "ITEMS",
    "ITEM_VECTORS",
    "KEYS",
    "NOTEBOOK",
    "RECALL",
    "TURNS",
    "UNSET",
    "VECTOR_SEARCH",
    "Op",
]
__all__ += agent_state.__all__
__all__ += consolidation.__all__
__all__ += facts.__all__
__all__ += history.__all__
__all__ += item_vectors.__all__
__all__ += items.__all__
__all__ += keys.__all__
__all__ += notebook.__all__
__all__ += recall.__all__
__all__ += resources.__all__
__all__ += turns.__all__
__all__ += vector_search.__all__
