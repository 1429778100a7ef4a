"""The SQLite store's key cache: every request looks its key up, and a revocation still counts at once.

A real SQLite file; the revoking process is another ``Memory`` on the same
file (as ``caderno keys revoke`` is, beside a running ``caderno serve``) and
the real CLI in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import caderno
from caderno.memory.state import hash_token
from caderno.stores.sqlite import SQLiteStore
from conftest import python_env


async def test_a_live_key_is_served_from_the_cache_after_its_first_lookup(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "k.db"), embedder=None)
    try:
        token, key = await memory.keys.create(resources=["casa"])
        store = memory.store
        assert isinstance(store, SQLiteStore)
        assert store.keys.get(hash_token(token)) is None
        assert (await memory.keys.verify(token)) == key
        assert store.keys.get(hash_token(token)) == key  # the next request needs no read
        assert (await memory.keys.verify(token)) == key
        assert await memory.keys.verify("cad_unknown") is None
    finally:
        await memory.close()


async def test_a_revocation_in_this_process_counts_at_once(tmp_path: Path) -> None:
    memory = await caderno.connect(str(tmp_path / "k.db"), embedder=None)
    try:
        token, key = await memory.keys.create(resources=["casa"])
        assert await memory.keys.verify(token) == key
        await memory.keys.revoke(key_id=key.id)
        assert await memory.keys.verify(token) is None
    finally:
        await memory.close()


async def test_a_revocation_by_another_process_counts_at_once(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    server = await caderno.connect(str(db), embedder=None)
    try:
        token, key = await server.keys.create(resources=["casa"])
        other_token, other = await server.keys.create(resources=["casa"])
        for t in (token, other_token):
            assert await server.keys.verify(t) is not None  # both cached
        elsewhere = await caderno.connect(str(db), embedder=None)
        try:
            await elsewhere.keys.revoke(key_id=key.id)
        finally:
            await elsewhere.close()
        for _ in range(2):  # the read that sees the change, then the cache it leaves
            assert await server.keys.verify(token) is None
        assert await server.keys.verify(other_token) == other

        revoked = subprocess.run(
            [sys.executable, "-m", "caderno.cli", "--db", str(db), "keys", "revoke", other.id],
            env=python_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert revoked.returncode == 0, revoked.stderr
        for _ in range(2):
            assert await server.keys.verify(other_token) is None
    finally:
        await server.close()
