"""Example domains that ship with caderno (used by the demo and the tests)."""
