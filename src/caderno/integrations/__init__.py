"""Bridges between caderno and other agent frameworks and memory systems."""
