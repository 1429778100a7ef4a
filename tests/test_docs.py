"""The README and the docs site say what is true: their code runs, their links resolve, their route table is the API's.

Every ```python block of README.md and docs/getting-started.md runs as a
plain script in a subprocess (its own temporary directory as the working
directory and ``CADERNO_HOME``, so a ``sqlite:///x.db`` URL lands there), and
every ```bash block runs after them in the same directory with this venv's
``caderno`` first on PATH, so the CLI lines read what the script wrote. A block
that needs what a test cannot give (a server left running, a key, a path of
the reader's) is marked ``<!-- not run: why -->`` on the line above it.

The HTTP reference's table of routes is written from the OpenAPI document;
run this file as a script to write it again after a route changes.
``mkdocs build --strict`` itself runs in ``make test``, not here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The pages whose code must run as printed: the front door and the first page behind it.
RUN_PAGES = (README, DOCS / "getting-started.md")
HTTP_PAGE = DOCS / "reference" / "http.md"
#: README.md's bound: model READMEs in this field are 80-400 lines; the rest belongs in docs/.
README_MAX_LINES = 400
#: One block's bound: the first run loads the embedding model (about a second here); a
#: CLI block starts the interpreter once per line.
BLOCK_TIMEOUT = 120

OPENING = re.compile(r"^```(?P<lang>[\w-]*)$")
NOT_RUN = re.compile(r"<!--\s*not run:.*-->")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")
ROUTES_BEGIN, ROUTES_END = "<!-- routes: begin -->", "<!-- routes: end -->"


def blocks(page: Path) -> list[tuple[str, str, bool]]:
    """``(language, code, runs)`` for each fenced block of ``page``, in order."""
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = OPENING.match(lines[i])
        if not opening:
            i += 1
            continue
        end = lines.index("```", i + 1)
        runs = not (i and NOT_RUN.search(lines[i - 1]))
        found.append((opening["lang"], "\n".join(lines[i + 1 : end]) + "\n", runs))
        i = end + 1
    return found


def _run(lang: str, code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if lang == "python":
        script = cwd / "block.py"
        script.write_text(code)
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: p.name)
def test_every_code_block_runs_as_printed(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CADERNO_DB", "CADERNO_CONFIG", "PYTHONPATH")}
    env["CADERNO_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    runnable = [(lang, code) for lang, code, runs in blocks(page) if runs and lang in ("python", "bash")]
    # Python first: the shell blocks read the database the script wrote.
    runnable.sort(key=lambda block: block[0] != "python")
    ran = {"python": 0, "bash": 0}
    for lang, code in runnable:
        done = _run(lang, code, tmp_path, env)
        assert done.returncode == 0, f"{page.name}, this {lang} block failed:\n{code}\n{done.stdout}\n{done.stderr}"
        ran[lang] += 1
    skipped = sum(1 for lang, _, runs in blocks(page) if not runs)
    print(f"{page.name}: ran {ran['python']} python and {ran['bash']} bash block(s), {skipped} marked not run")
    assert ran["python"] >= 1, f"{page.name} has no runnable python block"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    top = "\n".join(text.splitlines()[:30])
    assert "make demo" in top and "make test" in top, "the two set-up commands belong near the top"


@pytest.mark.parametrize("page", [README, ROOT / "CHANGELOG.md"], ids=lambda p: p.name)
def test_links_of_the_pages_outside_the_site_resolve(page: Path) -> None:
    """mkdocs --strict checks the links inside docs/; these two are not part of the site."""
    missing = [
        m["target"]
        for m in LINK.finditer(page.read_text())
        if "://" not in m["target"] and not (page.parent / m["target"]).exists()
    ]
    assert missing == []


def routes_table() -> str:
    """The HTTP reference's table, from the OpenAPI document of the app ``caderno serve`` runs."""
    import caderno
    from caderno.server import create_app
    from caderno.server.routes import default_routers

    app = create_app(caderno.Memory(caderno.InMemoryStore(), embedder=None), background=False, routers=default_routers())
    rows = ["| method | path | what it does |", "|---|---|---|"]
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            summary = (operation.get("summary") or operation.get("operationId", "")).replace("|", "\\|")
            rows.append(f"| `{method.upper()}` | `{path}` | {summary} |")
    return "\n".join(rows)


def _with_table(page: str, table: str) -> str:
    head, _, rest = page.partition(ROUTES_BEGIN)
    _, _, tail = rest.partition(ROUTES_END)
    return f"{head}{ROUTES_BEGIN}\n{table}\n{ROUTES_END}{tail}"


def test_the_http_reference_lists_the_routes_of_the_openapi_document() -> None:
    pytest.importorskip("fastapi")
    page = HTTP_PAGE.read_text()
    assert page == _with_table(page, routes_table()), "run: .venv/bin/python tests/test_docs.py"


if __name__ == "__main__":
    HTTP_PAGE.write_text(_with_table(HTTP_PAGE.read_text(), routes_table()))
    print(f"wrote {HTTP_PAGE.relative_to(ROOT)}")
