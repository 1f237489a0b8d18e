"""VLLMJudge: the pure helpers and the missing-extra message always; the engine only with vLLM + a GPU."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from offline_eval.engine.requests import Generate, Sampling, ScoreOptions, messages
from offline_eval.runtime import chat, vllm_judge
from offline_eval.runtime.registry import BackendUnavailable
from offline_eval.runtime.registry import load_backend

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here")
def test_registry_without_vllm_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match=r"offline-eval\[vllm\]"):
        load_backend("judge", "vllm", path=str(tmp_path))
    assert "vllm" not in sys.modules  # nothing half-imported


def test_module_imports_without_vllm() -> None:
    assert callable(vllm_judge.sampling_kwargs)
    assert vllm_judge.INSTALL_HINT == "pip install 'offline-eval[vllm]'"


def test_sampling_kwargs_greedy_and_sampled() -> None:
    assert vllm_judge.sampling_kwargs(Sampling(n=3, max_tokens=64, seed=9)) == {
        "n": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 64,
    }
    assert vllm_judge.sampling_kwargs(Sampling(temperature=0.3, n=3, top_p=0.9, max_tokens=64, seed=9), 20) == {
        "n": 3,
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 20,
        "seed": 9,
    }
    assert vllm_judge.options_kwargs() == {"n": 1, "temperature": 0.0, "max_tokens": 1, "logprobs": 20}


def test_structured_outputs_kwargs_new_and_old_api() -> None:
    class StructuredOutputsParams:
        def __init__(self, json: object) -> None:
            self.json = json

    class GuidedDecodingParams(StructuredOutputsParams):
        pass

    schema = json.dumps({"type": "object", "required": ["verdict"]})
    new = vllm_judge.structured_outputs_kwargs(schema, SimpleNamespace(StructuredOutputsParams=StructuredOutputsParams))
    assert list(new) == ["structured_outputs"] and new["structured_outputs"].json == json.loads(schema)
    old = vllm_judge.structured_outputs_kwargs(schema, SimpleNamespace(GuidedDecodingParams=GuidedDecodingParams))
    assert list(old) == ["guided_decoding"] and old["guided_decoding"].json == json.loads(schema)
    assert vllm_judge.structured_outputs_kwargs(None, SimpleNamespace()) == {}
    with pytest.raises(BackendUnavailable):
        vllm_judge.structured_outputs_kwargs(schema, SimpleNamespace())


def test_option_probs_from_vllm_logprobs() -> None:
    option_ids = {"Yes": (11, 12), "No": (21,), "Maybe": (31,)}
    top = {
        11: SimpleNamespace(logprob=math.log(0.5), rank=1, decoded_token="Yes"),
        12: SimpleNamespace(logprob=math.log(0.1), rank=3, decoded_token=" Yes"),
        21: SimpleNamespace(logprob=math.log(0.2), rank=2, decoded_token="No"),
        99: SimpleNamespace(logprob=math.log(0.05), rank=4, decoded_token="The"),
    }
    probs = vllm_judge.option_probs(option_ids, SimpleNamespace(logprobs=[top]))
    # "Maybe" is missing from the top-k: it gets the smallest listed log-prob (0.05)
    assert probs["Yes"] == pytest.approx(0.6 / 0.85)
    assert probs["No"] == pytest.approx(0.2 / 0.85)
    assert probs["Maybe"] == pytest.approx(0.05 / 0.85)
    assert math.isclose(sum(probs.values()), 1.0)
    # plain floats work too, and no logprobs at all gives a uniform answer
    floats = vllm_judge.option_probs({"Yes": (1,), "No": (2,)}, SimpleNamespace(logprobs=[{1: -0.1, 2: -2.4}]))
    assert floats["Yes"] == pytest.approx(1 / (1 + math.exp(-2.3)))
    assert vllm_judge.option_probs({"A": (1,), "B": (2,)}, SimpleNamespace(logprobs=None)) == {"A": 0.5, "B": 0.5}


def test_visible_device() -> None:
    assert vllm_judge.visible_device("cuda", None) is None
    assert vllm_judge.visible_device("cuda:0", None) == "0"
    assert vllm_judge.visible_device("cuda:1", "") == "1"
    assert vllm_judge.visible_device("cuda:1", "4,5,6") == "5"
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        vllm_judge.visible_device("cuda:3", "0,1")
    with pytest.raises(ValueError, match="NVIDIA GPU"):
        vllm_judge.visible_device("cpu", None)


def test_option_token_rule_shared_with_transformers() -> None:
    """The option-token rule is chat.option_token_ids; check it on a minimal word-level tokenizer."""
    vocab = {"Yes": 0, "No": 1, "▁": 2, "Ye": 3}

    class Tok:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [vocab["▁"]] + [vocab[w] for w in text.split()] if text.startswith(" ") else [vocab[w] for w in text.split()]

        def decode(self, ids: list[int]) -> str:
            inverse = {v: k for k, v in vocab.items()}
            return "".join(inverse[i] for i in ids).replace("▁", " ")

    assert chat.option_token_ids(Tok(), ("Yes", "No")) == {"Yes": (0,), "No": (1,)}  # bare space skipped


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here: the real engine test covers it")
@pytest.mark.parametrize("batch_invariant", [True, False])
def test_batch_invariant_kernels_are_asked_for_before_vllm_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_invariant: bool) -> None:
    """vLLM reads VLLM_BATCH_INVARIANT when it is imported: the backend sets it first (a stand-in
    ``vllm`` package records what the engine saw), unless the manifest turns it off."""
    from tests.runtime.test_transformers_judge import _build_tokenizer

    _build_tokenizer().save_pretrained(tmp_path)
    seen: dict[str, object] = {}

    class FakeLLM:
        def __init__(self, **kwargs: object) -> None:
            seen["env"] = __import__("os").environ.get("VLLM_BATCH_INVARIANT")
            self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=128))

    fake = SimpleNamespace(LLM=FakeLLM, sampling_params=SimpleNamespace())
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", fake.sampling_params)
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "")  # remembered, so the test leaves the environment as it was
    monkeypatch.delenv("VLLM_BATCH_INVARIANT")
    judge = vllm_judge.VLLMJudge(str(tmp_path), batch_invariant=batch_invariant)
    assert seen["env"] == ("1" if batch_invariant else None)
    assert judge.batch_invariant is batch_invariant
    assert judge.identity.endswith(f'"batch_invariant": {json.dumps(batch_invariant)}, "dtype": "auto"}}')
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "0")  # the user's own setting wins
    assert not vllm_judge.VLLMJudge(str(tmp_path), batch_invariant=True).batch_invariant


# ------------------------------------------------------------------------------------------------
# real engine: needs vLLM and an NVIDIA GPU


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs an NVIDIA GPU")
    from tests.runtime.test_transformers_judge import _build_model, _build_tokenizer

    path = tmp_path_factory.mktemp("tiny-llama-vllm")
    tok = _build_tokenizer()
    _build_model(len(tok), tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_vllm_engine_end_to_end(tiny_model: Path) -> None:
    from offline_eval.runtime.transformers_judge import TransformersJudge

    judge = vllm_judge.VLLMJudge(str(tiny_model), dtype="float32", gpu_memory_utilization=0.3, max_model_len=256)
    assert judge.identity.startswith("judge:vllm:")
    prompts = [messages(("user", "Is the sky blue?")), messages(("user", "Water boils at 100 degrees."))]
    schema = json.dumps({"type": "object", "properties": {"verdict": {"type": "integer"}}, "required": ["verdict"]})
    out = judge.generate(
        [
            Generate(prompt=prompts[0], sampling=Sampling(max_tokens=8, n=2)),
            Generate(prompt=prompts[1], sampling=Sampling(temperature=1.0, n=3, max_tokens=8, seed=3)),
            Generate(prompt=prompts[0], schema=schema, sampling=Sampling(max_tokens=32)),
        ]
    )
    assert len(out[0]) == 2 and out[0][0] == out[0][1]
    assert len(out[1]) == 3
    assert out[2][0].lstrip().startswith("{")  # decoded under the schema (a random model may not finish)
    reference = TransformersJudge(str(tiny_model), device="cuda")
    scored = judge.score_options([ScoreOptions(prompt=p) for p in prompts])
    expected = reference.score_options([ScoreOptions(prompt=p) for p in prompts])
    for got, want in zip(scored, expected):
        assert math.isclose(sum(got.values()), 1.0, abs_tol=1e-6)
        assert got["Yes"] == pytest.approx(want["Yes"], abs=2e-3)
