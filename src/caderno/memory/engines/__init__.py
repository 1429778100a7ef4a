"""Policy without state of its own, used by the parts: recall, indexing, salience, dates, the token budget, the notebook's rules.

An engine imports ``core``, ``embeddings``, ``stores`` and other engines; never a part, the facade or an adapter.
"""
