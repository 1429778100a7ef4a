"""The parts of ``Memory``: each ``memory.X`` is a class here over the store's ``run``, applying the engines' rules.

A part imports engines and other parts; never the facade or an adapter.
"""
