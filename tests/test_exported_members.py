import subprocess
import sys

import caderno
from conftest import python_env


def test_all_is_sorted_and_complete() -> None:
    assert caderno.__all__ == sorted(caderno.__all__)
    assert len(set(caderno.__all__)) == len(caderno.__all__)
    namespace: dict[str, object] = {}
    exec("from caderno import *", namespace)  # every listed name really imports
    for name in caderno.__all__:
        assert namespace[name] is getattr(caderno, name), name
    public = {n for n in dir(caderno) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(caderno.__all__)


def test_import_does_not_pull_optional_dependencies() -> None:
    code = (
        "import sys, caderno; "
        "bad = [m for m in ('psycopg', 'psycopg_pool', 'openai', 'fastapi', 'mcp', 'numpy', 'onnxruntime') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
