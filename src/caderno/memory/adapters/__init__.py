"""The ways in and out of a ``Memory``: opening one from a URL, the blocking API, the ``AgentMemory`` port, files and exports.

An adapter may import anything in ``caderno.memory``.
"""
