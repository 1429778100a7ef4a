"""The memory layer: the ``Memory`` facade and the policy above the port.

Recall and context, consolidation, working memory, the notebook and the
journals, the export format, and the agent's durable state (tasks, macros,
approved prefixes). It reaches storage only through ``caderno.stores``
(batches of typed operations) and passes policy values down as arguments.
Public names are re-exported from ``caderno``.
"""
