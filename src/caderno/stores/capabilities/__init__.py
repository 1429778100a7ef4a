"""The storage operations, one module per capability: each operation beside the plan that runs it.

A capability module holds its operations (frozen ``Op`` values), the plan
SQLite and PostgreSQL both run for each one (``@plan_of``), and what a
backend needs to know of it as class attributes (``writes``, ``durable``,
``one_statement``, ``queues_work``, ``erases``). Its ``OPERATIONS`` is every
operation it defines, found by ``operations_in``; ``caderno.stores.ops``
composes the capability sets (``CORE``, ``FACTS``, …, ``ALL``) from them and
re-exports every name, so callers import operations from there.

==================  =========================================================
``history``         ``CORE``: messages and thread records
``resources``       ``CORE``: working memory and whole resources
``facts``           ``FACTS``
``recall``          ``RECALL``: embedding queue, vectors, full text, salience
``vector_search``   ``VECTOR_SEARCH`` (optional: PostgreSQL with pgvector)
``consolidation``   ``CONSOLIDATION``
``agent_state``     ``AGENT_STATE``: tasks, macros, command prefixes
``keys``            ``KEYS``
``items``           ``ITEMS``: the LangGraph store
``item_vectors``    ``ITEM_VECTORS``
``notebook``        ``NOTEBOOK``
``turns``           ``TURNS``
==================  =========================================================

Adding an operation: define it in its capability's module with its plan
under ``@plan_of`` (or, where the dialects' SQL differs, one plan per
dialect under ``SQLITE.plan_of`` in ``_sqlite_plans`` and
``POSTGRES.plan_of`` in ``_postgres_plans``), name it in the module's
``__all__``, and add the schema it needs as a new migration. Nothing else
lists operations: ``tests/stores/test_capabilities.py`` checks that every
one has a plan on every backend that claims it.
"""
