"""caderno without POSIX-only modules: what Windows lacks (``fcntl``) is never needed.

Each check runs in a subprocess that makes ``fcntl`` unimportable before
anything else is imported (``sys.modules["fcntl"] = None``: every later
``import fcntl`` raises ``ImportError``, as on Windows). File locks then go
through ``filelock`` (``caderno.core.files.locked``) and must still keep
writers apart and refuse a planted link.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import python_env

#: What the subprocess runs first: the modules Windows has no such thing as, made unimportable.
NO_POSIX = 'import sys\nfor name in ("fcntl", "termios", "pwd", "grp", "resource"):\n    sys.modules[name] = None\n'

#: Seconds a subprocess may take: importing caderno and opening a SQLite file take about one.
SUBPROCESS_SECONDS = 120


def _run(tmp_path: Path, body: str) -> dict:
    script = tmp_path / "no_posix.py"
    script.write_text(NO_POSIX + textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict = json.loads(done.stdout.splitlines()[-1])
    return result


def test_import_and_a_sqlite_file_store_need_no_fcntl(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import asyncio, json
        from pathlib import Path

        import caderno
        from caderno import Message

        root = Path(sys.argv[1])
        with caderno.connect_sync(root / "app.db") as memory:
            memory.append_messages(resource_id="ana", thread_id="t1", messages=[Message.user("olá"), Message.assistant("oi")])
            memory.update_working_memory(resource_id="ana", patch={"city": "Porto"})
            synced = [m.content for m in memory.get_messages(resource_id="ana", thread_id="t1")]

        async def main():
            async with caderno.connect(f"sqlite:///{root / 'app.db'}") as memory:
                return [m.content for m in await memory.get_messages(resource_id="ana", thread_id="t1")]

        journal = caderno.Journal(root / "journals")
        journal.append("semantic", {"fact": "Ana lives in Porto"})
        print(json.dumps({
            "fcntl": sys.modules.get("fcntl") is not None,
            "sync": synced,
            "async": asyncio.run(main()),
            "journal": len(journal.list("semantic")),
        }))
        """,
    )
    assert result == {"fcntl": False, "sync": ["olá", "oi"], "async": ["olá", "oi"], "journal": 1}


def test_a_file_notebook_locks_without_fcntl(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import json, os, threading
        from pathlib import Path

        import caderno
        from caderno.core.errors import NotebookError

        root = Path(sys.argv[1])
        book = caderno.Notebook(root / "notebook")
        book.add("user", "Ana prefers tea")

        def writer(who):  # two writers at once: the lock keeps every entry
            for i in range(15):
                book.add("memory", f"{who} note {i}")

        workers = [threading.Thread(target=writer, args=(who,)) for who in ("left", "right")]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

        os.symlink(root / "elsewhere", root / "notebook" / "MEMORY.md.lock")  # planted
        try:
            book.add("memory", "through the link")
            refused = None
        except NotebookError as exc:
            refused = str(exc)
        print(json.dumps({
            "user": book.entries("user"),
            "memory": len(book.entries("memory")),
            "refused": refused,
            "target_made": (root / "elsewhere").exists(),
        }))
        """,
    )
    assert result["user"] == ["Ana prefers tea"]
    assert result["memory"] == 30
    assert result["refused"].startswith("Could not lock MEMORY.md: MEMORY.md.lock is a symbolic link")
    assert result["target_made"] is False
