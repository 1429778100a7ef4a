"""The bottom layer: data types, errors, time, text, JSON values and the one validation layer.

Everything here depends on the standard library only; every other layer
may import it. Public names are re-exported from ``caderno``.
"""
