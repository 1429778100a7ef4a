"""The memory layer: the ``Memory`` facade and the policy above the port.

It reaches storage only through ``caderno.stores`` (batches of typed
operations) and passes policy values down as arguments. Three kinds of
module, one folder each, imported in this order (``tests/test_layers.py``
checks it):

* ``engines/`` — policy without state of its own: retrieval and its vector
  cache, the background embedder, salience, dates in questions, the token
  budget, ``get_context``, the notebook's edit rules and injection screen,
  the macro rules. An engine imports other engines, never a part.
* ``parts/`` — the parts of ``Memory`` (``memory.threads``, ``memory.facts``,
  …): each holds the store's ``run`` and applies the engines' rules.
* ``adapters/`` — the ways in and out: ``connect`` (a URL becomes a
  ``Memory``), the blocking API, the four-method ``AgentMemory`` port, the
  file notebook, the journals and the export check.

``facade.py`` (``Memory``) composes the parts; only adapters import it.
Public names are re-exported from ``caderno``.
"""
