"""The error tree drawn in ``caderno.core.errors`` is the real one.

Every exception class defined anywhere in caderno derives from one of the
two roots (``CadernoError``: what a caller may see; ``InternalSignal``: what
caderno raises and catches inside itself) and is drawn in the docstring
under the caderno class it derives from, so an exception added outside the
tree, or drawn in the wrong place, fails here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import caderno
from caderno.core import errors

ROOTS = (errors.CadernoError, errors.InternalSignal)

#: One drawn line: the branch drawing, then the class name (its other bases may follow in brackets).
_LINE = re.compile(r"^ {4}(?P<branch>[│├└─ ]*)(?P<name>\w+)")


def drawn() -> dict[str, str | None]:
    """Each class the docstring draws and the class drawn above it (None for a root)."""
    parents: dict[str, str | None] = {}
    doc = errors.__doc__ or ""
    for block in re.findall(r"::\n\n((?: {4}.*\n?)+)", doc):
        path: list[str] = []
        for line in block.splitlines():
            found = _LINE.match(line)
            if found is None:
                continue
            depth = len(found["branch"]) // 4
            path[depth:] = [found["name"]]
            parents[found["name"]] = path[depth - 1] if depth else None
    return parents


def defined() -> list[type[BaseException]]:
    """Every exception class defined in a caderno module."""
    root = Path(caderno.__file__).parent
    found: dict[str, type[BaseException]] = {}
    # Every file, not pkgutil.walk_packages: caderno.stores is a namespace package, which it skips.
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py":
            continue  # running it is the command line
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        loaded = importlib.import_module(name)
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return list(found.values())


def caderno_parent(kind: type[BaseException]) -> type[BaseException] | None:
    """The nearest class ``kind`` derives from that caderno defines (None for a root)."""
    for base in kind.__mro__[1:]:
        if base.__module__.startswith("caderno."):
            return base
    return None


def test_the_docstring_draws_two_roots() -> None:
    tree = drawn()
    assert [name for name, parent in tree.items() if parent is None] == ["CadernoError", "InternalSignal"]
    assert tree["KeyReused"] == "UsageError" and tree["OutcomeUnknown"] == "StorageError"
    assert tree["_ErrorEvent"] == "_Malformed"


@pytest.mark.parametrize("kind", defined(), ids=lambda k: k.__qualname__)
def test_every_exception_is_in_the_tree(kind: type[BaseException]) -> None:
    assert issubclass(kind, ROOTS), f"{kind.__module__}.{kind.__qualname__} derives from neither root"
    tree = drawn()
    assert kind.__name__ in tree, f"{kind.__name__} is not drawn in caderno.core.errors' docstring"
    parent = caderno_parent(kind)
    assert tree[kind.__name__] == (parent.__name__ if parent else None), f"{kind.__name__} drawn under the wrong class"


def test_every_drawn_class_exists() -> None:
    names = {kind.__name__ for kind in defined()}
    assert set(drawn()) - names == set()


def test_the_errors_module_exports_its_classes() -> None:
    own = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }
    assert own == set(errors.__all__)
