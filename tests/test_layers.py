"""The package's folders are its layers: no import points up, and no two modules import each other.

Every ``import`` statement under ``src/caderno`` counts, wherever it sits
(module level, inside a function, under ``if TYPE_CHECKING``): an import
moved into a function hides a cycle, it does not remove it. The order of the
layers is ``LAYERS``; a module may import its own layer and any layer below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import caderno

SRC = Path(caderno.__file__).parent

#: Bottom to top; folders on one line share a rank (they may not import each other).
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"core"}),
    frozenset({"embeddings"}),
    frozenset({"stores"}),
    frozenset({"memory"}),
    frozenset({"tools"}),
    frozenset({"agent"}),
    frozenset({"integrations", "examples"}),
    frozenset({"server"}),
    frozenset({"cli"}),
)
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The caderno modules one file imports (a name imported from a package counts as its module when it is one)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" for alias in node.names]
            targets = [t if t in known else source for t in targets]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != module and target.startswith("caderno"):
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _imports(module, path, known) for module, path in known.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RANK) else None


def test_every_module_lives_in_a_layer_folder() -> None:
    loose = sorted(m for m in _modules() if m != "caderno" and _layer(m) not in RANK)
    assert loose == [], f"modules outside the layer folders {sorted(RANK)}: {loose}"


def test_no_import_points_up() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if module != "caderno"  # the package root re-exports the public names of every layer
        for target in targets
        if target == "caderno" or RANK[_layer(target) or ""] > RANK[_layer(module) or ""]
    )
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


#: Inside ``memory/``, bottom to top: the kind of module is its folder (``facade`` is ``Memory`` itself).
MEMORY_KINDS: tuple[str, ...] = ("engines", "parts", "facade", "adapters")


def _memory_kind(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "memory" and parts[2] in MEMORY_KINDS else None


def test_every_memory_module_has_a_kind() -> None:
    loose = sorted(m for m in _modules() if m.startswith("caderno.memory.") and _memory_kind(m) is None)
    assert loose == [], f"memory modules outside {MEMORY_KINDS}: {loose}"


def test_memory_kinds_import_downward() -> None:
    # An engine never imports a part, a part never the facade, nothing an adapter but another adapter.
    order = {kind: rank for rank, kind in enumerate(MEMORY_KINDS)}
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if _memory_kind(module)
        for target in targets
        if _memory_kind(target) and order[_memory_kind(target) or ""] > order[_memory_kind(module) or ""]
    )
    assert upward == []


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_check_sees_what_it_must(tmp_path: Path) -> None:
    # The checker itself: imports inside functions and under TYPE_CHECKING are
    # edges too, and a cycle of three modules is one component.
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..agent.chat import AgentChat\n"
        "def f():\n"
        "    from ..core import errors\n"
        "    import caderno.server.app\n"
    )
    found = _imports("caderno.memory.probe", source, _modules())
    assert found == {"caderno.agent.chat", "caderno.core.errors", "caderno.server.app"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
