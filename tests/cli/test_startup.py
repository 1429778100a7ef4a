"""What a ``caderno`` start loads: only what its command uses.

Tests (and people) start the command many times; ``import caderno`` and the
CLI's modules load the rest of caderno, and the heavy packages, when a command
needs them. Each case runs the real entry point in a fresh interpreter and
reads ``sys.modules`` after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import python_env

#: Third-party packages no listing command needs: the embedding models' (numpy, tokenizers,
#: onnxruntime), the server's, the model clients', and rich under --json.
HEAVY = ("numpy", "onnxruntime", "tokenizers", "pydantic", "fastapi", "starlette", "httpx", "openai", "mcp", "rich")

_RUN = """
import json, sys
from caderno.cli.main import main
try:
    main(sys.argv[1:], prog_name="caderno")
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_by(*args: str) -> set[str]:
    """The modules a ``caderno ARGS`` process had loaded when its command returned."""
    out = subprocess.run(
        [sys.executable, "-c", _RUN, *args], env=python_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_import_caderno_loads_only_the_errors() -> None:
    code = "import json, sys, caderno; print(json.dumps(sorted(m for m in sys.modules if m.startswith('caderno'))))"
    out = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, check=True)
    assert set(json.loads(out.stdout)) <= {"caderno", "caderno.core", "caderno.core.errors", "caderno.core.version"}


def test_help_loads_no_store_and_no_model() -> None:
    modules = loaded_by("--help")
    assert not tops(modules) & set(HEAVY)
    assert not {
        m for m in modules if m.startswith(("caderno.stores.sqlite", "caderno.memory.facade", "caderno.embeddings"))
    }
    assert not {m for m in modules if m.startswith(("caderno.agent.chat", "caderno.server", "caderno.integrations"))}


def test_a_listing_command_loads_no_embedding_model_and_no_agent(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    loaded_by("--db", db, "threads", "create", "casa", "t1")
    modules = loaded_by("--db", db, "threads", "list", "casa", "--json")
    assert "caderno.memory.facade" in modules  # the command did open the database
    assert not tops(modules) & set(HEAVY)
    assert not {m for m in modules if m.startswith(("caderno.agent.chat", "caderno.agent.models", "caderno.server"))}
