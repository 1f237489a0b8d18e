"""HHEMVerifier on a tiny random T5 saved the way HHEM-2.1-Open is published (keys prefixed ``t5.``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from offline_eval.engine.requests import Classify
from offline_eval.runtime.hhem import HHEM_PROMPT, HHEMVerifier

WORDS = [f"w{i}" for i in range(120)]
TEMPLATE_WORDS = "Determine if the hypothesis is true given premise ? Premise : Hypothesis . , !"


def _build_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>"])
    tok.train_from_iterator([TEMPLATE_WORDS, " ".join(WORDS)], trainer)
    # T5 appends </s> to every input.
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


def _build_model(vocab_size: int):
    from transformers import T5Config, T5ForTokenClassification

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=vocab_size,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        num_labels=2,
        pad_token_id=0,
        eos_token_id=1,
    )
    model = T5ForTokenClassification(config).eval()
    with torch.no_grad():  # spread the random scores away from 0.5
        model.classifier.weight.normal_(0.0, 0.2)
        model.classifier.bias.zero_()
    return config, model


def _hhem_state(model: torch.nn.Module, prefix: str = "t5.", tied_copy: bool = False) -> dict:
    state = {}
    for key, value in model.state_dict().items():
        if key == "transformer.encoder.embed_tokens.weight" and not tied_copy:
            continue  # tied to transformer.shared.weight; safetensors stores it once
        state[prefix + key] = value.detach().clone().contiguous()
    return state


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(folder, reference model, tokenizer) for a tiny HHEM-layout checkpoint."""
    folder = tmp_path_factory.mktemp("hhem")
    tokenizer = _build_tokenizer()
    config, model = _build_model(len(tokenizer))
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    save_file(_hhem_state(model), str(folder / "model.safetensors"))
    return folder, model, tokenizer


def _reference(model, tokenizer, text: str) -> float:
    """HHEM's predict() on one unpadded input, straight from the in-memory model."""
    enc = tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[:, 0, :]
    return float(torch.softmax(logits, dim=-1)[0, 1])


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def test_exact_template_reaches_tokenizer(tiny):
    folder, _, tokenizer = tiny
    verifier = HHEMVerifier(str(folder))
    (text,) = verifier.windows("w1 w2 w3.", "w2 w3.")
    assert text == (
        "<pad> Determine if the hypothesis is true given the premise?\n\n"
        "Premise: w1 w2 w3.\n\nHypothesis: w2 w3."
    )
    assert text == HHEM_PROMPT.format(premise="w1 w2 w3.", hypothesis="w2 w3.")
    ids = verifier.tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.pad_token_id  # the literal "<pad>" is the first token
    assert ids[-1] == tokenizer.eos_token_id
    from offline_eval.runtime.identity import content_fingerprint

    assert verifier.identity.startswith(f"verifier:hhem:{content_fingerprint(folder)}:")  # the content, not the place


def test_scores_match_reference_and_batch_size(tiny):
    folder, model, tokenizer = tiny
    rng = random.Random(1)
    requests = []
    for i in range(11):
        premise = " ".join(_sentence(rng, rng.randint(3, 12)) for _ in range(1 if i % 3 else 15))
        requests.append(Classify(premise=premise, hypothesis=_sentence(rng, rng.randint(2, 8))))
    verifier = HHEMVerifier(str(folder), batch_size=1)
    assert all(len(verifier.windows(r.premise, r.hypothesis)) == 1 for r in requests)
    one = verifier.classify(requests)
    verifier.batch_size = 7
    seven = verifier.classify(requests)

    assert all(0.0 <= s <= 1.0 for s in one)
    assert max(one) - min(one) > 0.01  # the scores really depend on the input
    assert one == pytest.approx(seven, abs=1e-6)
    expected = [_reference(model, tokenizer, HHEM_PROMPT.format(premise=r.premise, hypothesis=r.hypothesis))
                for r in requests]
    assert one == pytest.approx(expected, abs=1e-5)


def test_scores_on_the_boundary_are_recomputed_alone(tiny, monkeypatch):
    """A verdict near 0.5 is taken from the input scored alone, so the batch cannot turn it."""
    from offline_eval.runtime import batch_invariance

    folder, _, _ = tiny
    rng = random.Random(2)
    requests = [Classify(premise=_sentence(rng, rng.randint(3, 12)), hypothesis=_sentence(rng, rng.randint(2, 8)))
                for _ in range(9)]
    alone = HHEMVerifier(str(folder), batch_size=1).classify(requests)
    verifier = HHEMVerifier(str(folder), batch_size=4)
    sizes = []
    score_batch = verifier._score_batch
    monkeypatch.setattr(verifier, "_score_batch", lambda w, idx, s: sizes.append(len(idx)) or score_batch(w, idx, s))
    monkeypatch.setattr(batch_invariance, "UNSURE_MARGIN", 2.0)  # every score counts as on the boundary
    assert verifier.classify(requests) == alone
    assert sizes == [4, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1]


def test_long_premise_is_windowed_and_scored_by_max(tiny):
    folder, model, tokenizer = tiny
    rng = random.Random(2)
    sentences = [_sentence(rng, rng.randint(4, 9)) for _ in range(30)]
    premise = " ".join(sentences)
    hypothesis = _sentence(rng, 5)
    verifier = HHEMVerifier(str(folder), max_length=64, window_overlap=8, batch_size=3)

    windows = verifier.windows(premise, hypothesis)
    assert len(windows) >= 4
    prefix = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: "
    for text in windows:
        assert text.startswith(prefix)
        assert text.endswith(f"\n\nHypothesis: {hypothesis}")
        assert len(verifier.tokenizer(text)["input_ids"]) <= 64
    bodies = [w[len(prefix) : w.index("\n\nHypothesis: ")] for w in windows]
    for sentence in sentences:  # nothing of the premise is dropped
        assert any(sentence in body for body in bodies)
    for a, b in zip(bodies, bodies[1:]):  # consecutive windows overlap
        assert a.split()[-1] in b.split()[:12]

    direct = [_reference(model, tokenizer, text) for text in windows]
    (score,) = verifier.classify([Classify(premise=premise, hypothesis=hypothesis)])
    assert score == pytest.approx(max(direct), abs=1e-5)
    assert score == pytest.approx(max(verifier.score_texts(windows)), abs=1e-6)
    # Batching a windowed request together with short ones changes nothing.
    short = Classify(premise="w1 w2.", hypothesis="w2.")
    verifier.batch_size = 1
    a = verifier.classify([short, Classify(premise=premise, hypothesis=hypothesis), short])
    verifier.batch_size = 7
    b = verifier.classify([short, Classify(premise=premise, hypothesis=hypothesis), short])
    assert a == pytest.approx(b, abs=1e-6)
    assert a[1] == pytest.approx(score, abs=1e-6)


def test_missing_key_is_a_clear_error(tiny, tmp_path):
    folder, model, tokenizer = tiny
    state = _hhem_state(model)
    del state["t5.classifier.bias"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    tokenizer.save_pretrained(broken)
    save_file(state, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing keys: classifier\.bias"):
        HHEMVerifier(str(broken))


def test_unprefixed_bin_and_hhem_config_with_foundation_folder(tiny, tmp_path):
    folder, model, tokenizer = tiny
    # An HHEM-style folder: HHEMv2 config + weights only; flan-t5 config and tokenizer elsewhere.
    hhem = tmp_path / "hhem"
    hhem.mkdir()
    (hhem / "config.json").write_text(
        json.dumps(
            {
                "model_type": "HHEMv2Config",
                "foundation": "google/flan-t5-base",
                "prompt": HHEM_PROMPT.replace("{premise}", "{text1}").replace("{hypothesis}", "{text2}"),
            }
        )
    )
    torch.save(_hhem_state(model, prefix="", tied_copy=True), hhem / "pytorch_model.bin")

    with pytest.raises(FileNotFoundError, match="flan-t5-base"):
        HHEMVerifier(str(hhem))
    verifier = HHEMVerifier(str(hhem), tokenizer_path=str(folder))
    text = HHEM_PROMPT.format(premise="w5 w6 w7.", hypothesis="w6.")
    assert verifier.windows("w5 w6 w7.", "w6.") == [text]
    (score,) = verifier.classify([Classify(premise="w5 w6 w7.", hypothesis="w6.")])
    assert score == pytest.approx(_reference(model, tokenizer, text), abs=1e-5)
    assert verifier.identity != HHEMVerifier(str(folder)).identity


def test_missing_weights_name_the_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 8, "num_heads": 2}))
    with pytest.raises(FileNotFoundError, match=r"no weights \(model\.safetensors or pytorch_model\.bin\)"):
        HHEMVerifier(str(tmp_path))
    empty = Path(tmp_path) / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=f"{empty.name} has no config.json"):
        HHEMVerifier(str(empty))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        HHEMVerifier(str(Path(tmp_path) / "nope"))
