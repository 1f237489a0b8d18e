"""The vLLM backend against the real ``vllm==0.32.0`` package, on a CPU (issue #17).

``tests/runtime/test_vllm_judge.py`` checks the backend against a fake ``vllm`` module, which can only agree with what its
author believed vLLM does. These tests run ``tests/runtime/vllm_side.py`` in a side venv that holds the real vLLM (built,
cached outside the checkout, by ``scripts/vllm_venv.sh``; ``scripts/test.sh`` builds it when missing) and assert
on what vLLM's own classes made of what the backend sent:

(a) ``vllm.LLM`` accepts every engine argument the backend passes and its ``EngineArgs`` / engine config hold them;
(b) every ``SamplingParams`` the backend builds (greedy, sampled, JSON schema, options) is built by vLLM's class
    and passes vLLM's admission checks, every schema the metrics send compiling under xgrammar;
(c) hand-built ``RequestOutput`` / ``CompletionOutput`` / ``Logprob`` / ``FlatLogprobs`` objects parse to the
    option probabilities the documented rule gives;
(d) ``VLLMJudge.generate`` and ``score_options`` run end to end through the real ``vllm.LLM.generate`` with only
    the engine's model replaced (see the side script's docstring).

Skipped, with the command to run, only when the side venv is not built. One subprocess (vLLM imports in ~8 s).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
VLLM_VERSION = "0.32.0"
VENV = Path(os.environ.get("OFFLINE_EVAL_VLLM_VENV") or Path.home() / ".cache" / "offline-eval"
            / f"vllm-{VLLM_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}")
READY = (VENV / ".ready").is_file() and (VENV / "bin" / "python").is_file()

pytestmark = pytest.mark.skipif(
    not READY, reason=f"no vllm=={VLLM_VERSION} side venv at {VENV}: `bash scripts/vllm_venv.sh` builds it")


@pytest.fixture(scope="module")
def judge_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import build_judge

    return build_judge(tmp_path_factory.mktemp("vllm-contract") / "judge")


@pytest.fixture(scope="module")
def seen(judge_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the side script saw, run once for every test here."""
    work = tmp_path_factory.mktemp("vllm-side")
    out = work / "seen.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VLLM_BATCH_INVARIANT", "CUDA_VISIBLE_DEVICES")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", VLLM_NO_USAGE_STATS="1",
               DO_NOT_TRACK="1", VLLM_CACHE_ROOT=str(work / "vllm-cache"), VLLM_LOGGING_LEVEL="WARNING")
    proc = subprocess.run([str(VENV / "bin" / "python"), str(REPO / "tests" / "runtime" / "vllm_side.py")],
                          input=json.dumps({"model": str(judge_folder), "out": str(out)}),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _section(seen: dict[str, Any], name: str) -> Any:
    """One part of what the side script saw; a check that raised there fails here with its traceback."""
    part = seen[name]
    if isinstance(part, dict) and "error" in part:
        pytest.fail(f"{name} failed in the vLLM side venv:\n{part['error']}", pytrace=False)
    return part


def _option_probs(option_ids: dict[str, list[int]], listed: dict[int, float]) -> dict[str, float]:
    """The documented rule, written out independently: an option's log-prob is the log-sum-exp of its listed
    tokens, or the smallest listed log-prob when none is listed; then normalised."""
    floor = min(listed.values()) if listed else 0.0
    raw = {}
    for option, ids in option_ids.items():
        found = [listed[t] for t in ids if t in listed]
        raw[option] = math.log(sum(math.exp(v) for v in found)) if found else floor
    total = sum(math.exp(v) for v in raw.values())
    return {option: math.exp(v) / total for option, v in raw.items()}


def _fields(text: str) -> dict[str, Any]:
    """The stand-in's completion text (JSON under a schema, else ``key=value`` pairs) read back."""
    if text.startswith("{"):
        return json.loads(text)
    return {k: v for k, v in (pair.split("=") for pair in text.split())}


def test_the_side_venv_is_the_pinned_vllm_on_a_cpu_torch(seen: dict[str, Any]) -> None:
    assert seen["versions"]["vllm"] == VLLM_VERSION
    assert seen["versions"]["torch"].startswith("2.13.0")
    assert seen["versions"]["torch_cuda"] is None  # the CPU build: no CUDA torch was pulled in


def test_a_engine_arguments_are_accepted_by_vllm(seen: dict[str, Any], judge_folder: Path) -> None:
    for name in ("engine_a", "engine_b"):
        engine = _section(seen, name)
        assert engine["args"] == []  # everything by keyword
        assert engine["engine_args_class"] == "vllm.engine.arg_utils.EngineArgs"
        # every argument is an EngineArgs field, reached EngineArgs through vllm.LLM unchanged
        assert sorted(engine["kwargs"]) == engine["engine_args_fields"]
        assert engine["engine_args"] == engine["kwargs"]
        # most are LLM.__init__'s own parameters; the others pass through its **kwargs into EngineArgs
        assert {"model", "tokenizer", "dtype", "seed", "tensor_parallel_size", "gpu_memory_utilization",
                "trust_remote_code"} <= set(engine["named_in_llm_init"])
        config = engine["model_config"]
        assert config["model"] == config["tokenizer"] == str(judge_folder)
        assert config["runner_type"] == "generate" and config["trust_remote_code"] is False
        assert config["max_logprobs"] == engine["kwargs"]["max_logprobs"] == max(20, engine["judge"]["top_logprobs"])
        assert engine["parallel"]["tensor_parallel_size"] == 1
        assert engine["cuda_visible_devices_after"] is None  # the pin is undone once the engine is up

    a, b = _section(seen, "engine_a"), _section(seen, "engine_b")
    assert a["kwargs"] == {"model": str(judge_folder), "tokenizer": str(judge_folder), "dtype": "float32", "seed": 5,
                           "tensor_parallel_size": 1, "gpu_memory_utilization": 0.5, "trust_remote_code": False,
                           "max_logprobs": 20, "max_model_len": 128}
    assert a["model_config"]["max_model_len"] == a["judge"]["max_model_len"] == 128
    assert a["model_config"]["dtype"] == "torch.float32" and a["model_config"]["seed"] == 5
    assert a["cache"]["gpu_memory_utilization"] == 0.5
    assert a["cuda_visible_devices_at_start"] == "0"  # device="cuda:0" pins the engine while it starts
    assert a["vllm_batch_invariant"] is True and a["judge"]["batch_invariant"] is True  # vLLM read our variable
    assert a["judge"]["identity"].endswith('{"batch_invariant": true, "dtype": "float32"}')

    assert "max_model_len" not in b["kwargs"]  # left to vLLM, and read back from the real LLM object
    assert b["model_config"]["max_model_len"] == b["judge"]["max_model_len"] == 4096  # the model's positions
    assert b["kwargs"]["max_logprobs"] == 30 and b["model_config"]["max_logprobs"] == 30
    assert b["model_config"]["dtype"] == "torch.bfloat16"  # dtype="auto" on a float32 checkpoint
    assert b["cuda_visible_devices_at_start"] is None  # device="cuda": vLLM chooses
    assert b["vllm_batch_invariant"] is False and b["judge"]["batch_invariant"] is False
    assert b["judge"]["identity"].endswith('{"batch_invariant": false, "dtype": "auto"}')


def test_b_every_sampling_params_is_built_and_verified_by_vllm(seen: dict[str, Any]) -> None:
    from tests.runtime.vllm_side import project_prompts

    assert "schemas" not in seen, seen.get("schemas")  # collecting the metrics' schemas failed
    sampling = _section(seen, "sampling")
    for kind, built in sampling["kinds"].items():
        assert built["seen"]["class"] == "vllm.sampling_params.SamplingParams", kind
        assert {k: built["seen"][k] for k in built["kwargs"]} == built["kwargs"], kind  # vLLM kept every value
    greedy, sampled, options = (sampling["kinds"][k]["seen"] for k in ("greedy", "sampled", "options"))
    assert greedy["sampling_type"] == "GREEDY" and greedy["n"] == 1 and greedy["seed"] is None
    assert sampled["sampling_type"] == "RANDOM_SEED" and (sampled["n"], sampled["seed"]) == (3, 9)
    assert options["sampling_type"] == "GREEDY" and (options["max_tokens"], options["logprobs"]) == (1, 20)

    with_schema = {name for name, prompt in project_prompts().items() if prompt.schema is not None}
    schemas = sampling["schemas"]
    assert {name.split("[")[0] for name in schemas} == with_schema  # every schema a metric can send
    assert any("[verdicts=3]" in name for name in schemas) and any("[keypoints=3]" in name for name in schemas)
    for name, built in schemas.items():
        assert built["keys"] == ["structured_outputs"] and built["param_class"] == "StructuredOutputsParams", name
        assert built["seen"]["structured_json"] == json.loads(built["schema"]), name
        assert built["seen"]["structured_backend"] == "xgrammar", name  # compiled by vLLM's default backend

    rules = sampling["rules"]
    assert rules["has_structured_outputs_params"] and not rules["has_guided_decoding_params"]
    # the vLLM rules the helpers are shaped by: greedy asks for n=1 and repeats it, log-probs stay within
    # max_logprobs (which the backend sets), a zero-token request never reaches vLLM
    assert "n must be 1 when using greedy sampling" in rules["greedy_n3"]
    assert "greater than max allowed: 20" in rules["logprobs_over_max"]
    assert "max_tokens must be at least 1" in rules["max_tokens_0"]
    assert "temperature must be in [0, 2]" in rules["temperature_above_2"]  # passed through as given
    assert rules["tokens_prompt_required_keys"] == ["prompt_token_ids"]  # the one key of our prompts


def test_c_real_output_objects_parse_to_the_documented_option_probabilities(seen: dict[str, Any]) -> None:
    parsing = _section(seen, "parsing")
    # Yes = tokens 11 and 12 (0.5 + 0.1), No = 21 (0.2), Maybe unlisted: the smallest listed (0.05)
    expected = {"Yes": 0.6 / 0.85, "No": 0.2 / 0.85, "Maybe": 0.05 / 0.85}
    first = {str(t): math.log(p) for t, p in parsing["top"].items()}
    for case, container in (("list", "list"), ("flat", "FlatLogprobs"), ("vllm_built_flat", "FlatLogprobs"),
                            ("vllm_built_list", "list")):
        got = parsing[case]
        assert got["container"] == container
        assert got["first_position"] == pytest.approx(first), case  # the first position only, ranks ignored
        assert got["probs"] == pytest.approx(expected), case
    assert parsing["flat_len"] == 2 and parsing["flat_first_type"] == "dict"
    for case in ("none", "empty_list", "empty_flat", "empty_position"):
        assert parsing[case]["first_position"] == {}, case
        assert parsing[case]["probs"] == pytest.approx({"Yes": 1 / 3, "No": 1 / 3, "Maybe": 1 / 3}), case


@pytest.mark.parametrize("run", ["generate", "generate_b"])
def test_d_generate_end_to_end_through_vllm_llm(seen: dict[str, Any], run: str) -> None:
    result = _section(seen, run)
    names, requests, outputs = result["names"], result["requests"], result["outputs"]
    limit = result["max_model_len"]
    sent = [i for i, req in enumerate(requests) if req["max_tokens"] >= 1]
    assert names[2] == "no_tokens" and 2 not in sent and outputs[2] == ["", ""]  # answered without vLLM
    assert len(result["accepted"]) == len(sent)  # one vLLM request per remaining request, all accepted
    for i, accepted in zip(sent, result["accepted"]):
        req, params, name = requests[i], accepted["params"], names[i]
        assert accepted["prompt_ids"] == req["prompt_ids"], name  # our chat encoding reached vLLM unchanged
        assert params["class"] == "vllm.sampling_params.SamplingParams", name
        assert params["output_kind"] == "FINAL_ONLY", name  # set by the real LLM.generate
        assert params["max_tokens"] == min(req["max_tokens"], limit - len(req["prompt_ids"])), name
        if req["temperature"] <= 0:
            assert (params["n"], params["temperature"], params["seed"]) == (1, 0.0, None), name
            assert params["sampling_type"] == "GREEDY", name
        else:
            assert (params["n"], params["temperature"], params["top_p"], params["seed"]) == (
                req["n"], req["temperature"], req["top_p"], req["seed"]), name
            assert params["sampling_type"] == "RANDOM_SEED", name
        if req["schema"] is None:
            assert params["structured_json"] is None, name
        else:
            assert params["structured_json"] == json.loads(req["schema"]), name
            assert params["structured_backend"] == "xgrammar", name
        # each request got its own completions (vLLM returned them out of order), in sample order, a greedy
        # completion repeated n times
        texts = [_fields(t) for t in outputs[i]]
        assert len(texts) == req["n"], name
        samples = [0] * req["n"] if req["temperature"] <= 0 else list(range(req["n"]))
        assert [int(t["sample"]) for t in texts] == samples, name
        assert {str(t["request"]) for t in texts} == {accepted["request_id"]}, name
        assert {int(t["prompt_len"]) for t in texts} == {len(req["prompt_ids"])}, name
    by_name = dict(zip(names, requests))
    assert {"greedy_n3", "sampled_n3", "cut_to_fit"} <= set(by_name)
    cut = result["accepted"][sent.index(names.index("cut_to_fit"))]["params"]["max_tokens"]
    if run == "generate":
        assert limit == 128 and cut == 128 - len(by_name["cut_to_fit"]["prompt_ids"]) < 512  # cut to fit
        assert sum(name.startswith("schema:") for name in names) >= 19
        # the last prompt that fits (one token of room) is accepted by vLLM; one token more is refused by the
        # backend before vLLM, exactly where vLLM itself refuses
        fills = result["accepted"][sent.index(names.index("fills_context"))]
        assert len(fills["prompt_ids"]) == 127 and fills["params"]["max_tokens"] == 1
        assert "prompt of 128 tokens does not fit max_model_len=128" in result["too_long"]
        assert result["too_long_reached_engine"] == 0
        assert "VLLMValidationError" in result["too_long_vllm"] and "length 128" in result["too_long_vllm"]
    else:
        assert limit == 4096 and cut == 512


@pytest.mark.parametrize("run", ["options", "options_b"])
def test_d_score_options_end_to_end_through_vllm_llm(seen: dict[str, Any], run: str) -> None:
    result = _section(seen, run)
    k = result["top_logprobs"]
    assert k == (20 if run == "options" else 30)
    assert len(result["accepted"]) == len(result["names"]) == 3  # one engine call, one request per prompt
    for name, prompt_ids, logprobs, accepted, scores in zip(result["names"], result["prompt_ids"],
                                                            result["logprobs"], result["accepted"], result["scores"]):
        params = accepted["params"]
        assert accepted["prompt_ids"] == prompt_ids, name
        assert (params["n"], params["temperature"], params["max_tokens"], params["logprobs"]) == (1, 0.0, 1, k), name
        assert params["sampling_type"] == "GREEDY" and params["output_kind"] == "FINAL_ONLY", name
        top = sorted(range(len(logprobs)), key=lambda t: -logprobs[t])[:k]
        listed = {t: logprobs[t] for t in top}
        option_ids = result["option_ids"][name]
        assert scores == pytest.approx(_option_probs(option_ids, listed), abs=1e-9), name
        assert math.isclose(sum(scores.values()), 1.0), name
        in_top = {option: any(t in listed for t in ids) for option, ids in option_ids.items()}
        if name == "all_listed":
            assert all(in_top.values()) and scores["Yes"] > scores["No"] > 0.1
        elif name == "one_missing":
            assert in_top == {"1": True, "2": True, "3": True, "4": True, "5": False}
            one = sum(math.exp(listed[t]) for t in option_ids["1"] if t in listed)
            assert scores["5"] / scores["1"] == pytest.approx(math.exp(min(listed.values())) / one)  # the floor
            assert scores["1"] > scores["2"] > scores["3"] > scores["4"] > scores["5"] > 0
        else:
            assert not any(in_top.values()) and scores == pytest.approx({"Yes": 0.5, "No": 0.5})
