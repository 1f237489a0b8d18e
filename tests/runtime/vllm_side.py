"""The vLLM backend against the real ``vllm==0.32.0`` package: what vLLM's own classes make of what it sends.

Run by ``tests/runtime/test_vllm_contract.py`` with the interpreter of the side venv that ``scripts/vllm_venv.sh`` builds
(vLLM is never a dependency of the default install, and PyPI's vLLM needs a GPU to run a model): JSON
``{"model": FOLDER, "out": FILE}`` on stdin; it writes what it saw to FILE as JSON and the test asserts on it.
vLLM is imported once and everything is checked in this one process (the import alone takes ~8 s).

Only the GPU half of vLLM is replaced. ``vllm.LLM`` is the real class (wrapped to record the keyword arguments our
backend passes): its ``__init__`` builds the real ``EngineArgs`` and hands them to ``LLMEngine.from_engine_args``,
which is where the stand-in :class:`StandInEngine` takes over. The stand-in builds vLLM's real engine config, its
real renderer (the model folder's tokenizer) and its real ``InputProcessor``, and accepts a request only after
``InputProcessor.process_inputs`` has (token ids inside the vocabulary, prompt shorter than ``max_model_len``,
``SamplingParams.verify``: log-probs within ``max_logprobs``, the JSON schema compiled by the structured-output
backend). So ``LLM.generate`` runs vLLM's own code from the prompts and params our backend gives it down to the
engine's admission checks; only the model's forward pass is replaced by :func:`respond`, which answers with
``RequestOutput`` / ``CompletionOutput`` / ``Logprob`` objects built by hand (the top-k log-probs through vLLM's
own ``append_logprobs_for_next_position``, as its ``LogprobsProcessor`` builds them).

The platform: with a CPU torch and vLLM's CUDA wheel vLLM detects no platform and its ``device_type`` is empty,
which only ``DeviceConfig`` reads while the config is built; it is set to ``"cpu"`` so the engine config can be
built. Checks that only a real GPU makes (memory, compute capability) are the GPU test's business
(``tests/runtime/test_vllm_judge.py::test_vllm_engine_end_to_end``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

# this checkout's offline_eval, whichever checkout the cached venv was built from
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# The score_options scripts: prompt token ids -> {token id: logit} on top of BASE_SLOPE * -token_id (distinct
# logits, so the top-k is unambiguous). Filled in by the checks before they call the backend.
LOGIT_SCRIPTS: dict[tuple[int, ...], dict[int, float]] = {}
BASE_SLOPE = 0.01
ENGINES: list[StandInEngine] = []
LLM_CALLS: list[dict[str, Any]] = []
REAL_LLM: list[type] = []  # vllm.LLM itself, once install_stand_in has wrapped it


class StandInEngine:
    """``vllm.v1.engine.llm_engine.LLMEngine`` minus the GPU: vLLM's config, renderer and admission checks, with
    hand-built outputs (see the module docstring). Implements what ``vllm.LLM`` calls on its engine."""

    def __init__(self, engine_args: Any) -> None:
        from vllm.renderers import renderer_from_config
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.input_processor import InputProcessor

        import vllm.envs

        self.engine_args = engine_args
        self.cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")  # what the engine would start with
        self.batch_invariant = bool(vllm.envs.VLLM_BATCH_INVARIANT)  # what vLLM reads while it builds the engine
        self.vllm_config = engine_args.create_engine_config(UsageContext.LLM_CLASS)
        self.model_config = self.vllm_config.model_config
        self.renderer = renderer_from_config(self.vllm_config)
        self.input_processor = InputProcessor(self.vllm_config, self.renderer)
        self.accepted: list[Any] = []  # every EngineCoreRequest that passed vLLM's checks, in order
        self._pending: list[Any] = []

    @classmethod
    def from_engine_args(cls, engine_args: Any, usage_context: Any = None, **_: Any) -> StandInEngine:
        engine = cls(engine_args)
        ENGINES.append(engine)
        return engine

    def get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    def get_tokenizer(self) -> Any:
        return self.renderer.tokenizer

    def add_request(self, request_id: str, prompt: Any, params: Any, lora_request: Any = None, priority: int = 0,
                    **_: Any) -> str:
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a string, got {type(request_id)}")
        request = self.input_processor.process_inputs(request_id, prompt, params,
                                                      supported_tasks=self.get_supported_tasks(),
                                                      lora_request=lora_request, priority=priority)
        self.accepted.append(request)
        self._pending.append(request)
        return request_id

    def has_unfinished_requests(self) -> bool:
        return bool(self._pending)

    def get_num_unfinished_requests(self) -> int:
        return len(self._pending)

    def step(self) -> list[Any]:
        """Every pending request finished at once, in reverse order: ``LLM.generate`` must restore the order."""
        outputs = [respond(self, r) for r in reversed(self._pending)]
        self._pending = []
        return outputs


def scripted_logprobs(engine: StandInEngine, prompt_ids: list[int]) -> list[float]:
    """The next-token log-probs the stand-in's "model" gives after ``prompt_ids`` (log-softmax of the script)."""
    vocab = engine.model_config.get_vocab_size()
    logits = [-BASE_SLOPE * t for t in range(vocab)]
    for token, value in LOGIT_SCRIPTS.get(tuple(prompt_ids), {}).items():
        logits[token] = value
    top = max(logits)
    norm = top + math.log(sum(math.exp(v - top) for v in logits))
    return [v - norm for v in logits]


def respond(engine: StandInEngine, request: Any) -> Any:
    """A finished ``RequestOutput`` for one accepted request, built by hand from vLLM's own classes.

    Log-prob requests (option scoring) get one greedy token and its top-k, laid out by vLLM's
    ``append_logprobs_for_next_position`` in the container vLLM would use (``create_sample_logprobs``: a list of
    dicts unless ``flat_logprobs``). Other requests get ``n`` texts that name the request, the sample index and
    what the engine was asked (JSON under a schema), listed in reverse index order.
    """
    from vllm.logprobs import append_logprobs_for_next_position, create_sample_logprobs
    from vllm.outputs import CompletionOutput, RequestOutput

    sp = request.sampling_params
    ids = list(request.prompt_token_ids)
    tok = engine.renderer.tokenizer
    if sp.logprobs:
        lps = scripted_logprobs(engine, ids)
        order = sorted(range(len(lps)), key=lambda t: -lps[t])[: sp.logprobs]
        sampled = order[0]
        container = create_sample_logprobs(sp.flat_logprobs)
        chosen = [sampled, *order]  # vLLM lists the sampled token first, then the top-k (a repeat is harmless)
        append_logprobs_for_next_position(container, chosen, [lps[t] for t in chosen],
                                          [tok.decode([t]) for t in chosen], rank=1, num_logprobs=sp.logprobs)
        outputs = [CompletionOutput(index=0, text=tok.decode([sampled]), token_ids=[sampled],
                                    cumulative_logprob=lps[sampled], logprobs=container, finish_reason="length")]
    else:
        outputs = []
        for i in reversed(range(sp.n)):
            about = {"request": request.request_id, "sample": i, "prompt_len": len(ids), "max_tokens": sp.max_tokens}
            if sp.structured_outputs is not None:
                text = json.dumps(about)
            else:
                text = " ".join(f"{k}={v}" for k, v in about.items())
            outputs.append(CompletionOutput(index=i, text=text, token_ids=tok.encode(text, add_special_tokens=False),
                                            cumulative_logprob=None, logprobs=None, finish_reason="stop"))
    return RequestOutput(request_id=request.request_id, prompt=None, prompt_token_ids=ids, prompt_logprobs=None,
                         outputs=outputs, finished=True)


def install_stand_in() -> None:
    """``vllm.LLM`` records its keyword arguments; the ``LLMEngine`` it builds is :class:`StandInEngine`."""
    import vllm
    import vllm.entrypoints.llm as llm_module
    from vllm.platforms import current_platform

    if not current_platform.device_type:
        current_platform.device_type = "cpu"  # see the module docstring
    real_llm = vllm.LLM
    REAL_LLM.append(real_llm)

    class RecordingLLM(real_llm):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            LLM_CALLS.append({"args": list(args), "kwargs": dict(kwargs)})
            super().__init__(*args, **kwargs)

    vllm.LLM = RecordingLLM
    llm_module.LLMEngine = StandInEngine


def params_seen(sp: Any) -> dict[str, Any]:
    """The fields of a ``SamplingParams`` that our backend sets, as vLLM holds them."""
    so = sp.structured_outputs
    return {
        "n": sp.n, "temperature": sp.temperature, "top_p": sp.top_p, "top_k": sp.top_k, "seed": sp.seed,
        "max_tokens": sp.max_tokens, "logprobs": sp.logprobs, "sampling_type": sp.sampling_type.name,
        "output_kind": sp.output_kind.name, "flat_logprobs": sp.flat_logprobs,
        "structured_json": None if so is None else so.json,
        "structured_backend": None if so is None else so._backend,
        "class": f"{type(sp).__module__}.{type(sp).__qualname__}",
    }


def engine_report(engine: StandInEngine, call: dict[str, Any], judge: Any) -> dict[str, Any]:
    """(a) What our backend passed to ``vllm.LLM`` and what vLLM's ``EngineArgs`` / engine config made of it."""
    import dataclasses
    import inspect

    named = set(inspect.signature(REAL_LLM[0].__init__).parameters) - {"self", "kwargs"}
    fields = {f.name for f in dataclasses.fields(engine.engine_args)}
    kwargs = call["kwargs"]
    mc = engine.model_config
    return {
        "args": call["args"],
        "kwargs": kwargs,
        "named_in_llm_init": sorted(k for k in kwargs if k in named),
        "engine_args_fields": sorted(k for k in kwargs if k in fields),
        "engine_args": {k: getattr(engine.engine_args, k, "<missing>") for k in kwargs},
        "engine_args_class": f"{type(engine.engine_args).__module__}.{type(engine.engine_args).__qualname__}",
        "model_config": {"model": mc.model, "tokenizer": mc.tokenizer, "max_model_len": mc.max_model_len,
                         "max_logprobs": mc.max_logprobs, "dtype": str(mc.dtype), "seed": mc.seed,
                         "runner_type": mc.runner_type, "trust_remote_code": mc.trust_remote_code,
                         "vocab_size": mc.get_vocab_size()},
        "parallel": {"tensor_parallel_size": engine.vllm_config.parallel_config.tensor_parallel_size},
        "cache": {"gpu_memory_utilization": engine.vllm_config.cache_config.gpu_memory_utilization},
        "cuda_visible_devices_at_start": engine.cuda_visible_devices,
        "cuda_visible_devices_after": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "vllm_batch_invariant": engine.batch_invariant,
        "judge": {"max_model_len": judge.max_model_len, "batch_invariant": judge.batch_invariant,
                  "identity": judge.identity, "top_logprobs": judge.top_logprobs},
    }


def project_prompts() -> dict[str, Any]:
    """Every prompt of the prompt modules, by name: each module-level ``Prompt`` and each in a module-level dict."""
    import offline_eval.prompts.ragas
    import offline_eval.prompts.rageval
    from offline_eval.prompts.base import Prompt

    found: dict[str, Any] = {}
    for module in (offline_eval.prompts.ragas, offline_eval.prompts.rageval):
        for value in vars(module).values():
            for prompt in value.values() if isinstance(value, dict) else (value,):
                if isinstance(prompt, Prompt):
                    found[prompt.name] = prompt
    return found


def project_schemas() -> dict[str, str]:
    """Every JSON schema the metrics send, as they send it (canonical JSON): each prompt's own and, for each list
    of verdicts or keypoints, an exact-count variant (``minItems == maxItems``) like those judging/verdicts.py and
    keypoints.py derive for a part of ``len(part)`` statements."""
    schemas: dict[str, str] = {}
    for name, prompt in sorted(project_prompts().items()):
        if prompt.schema is None:
            continue
        schemas[name] = json.dumps(prompt.schema, sort_keys=True)
        for key in ("verdicts", "keypoints"):
            items = prompt.schema.get("properties", {}).get(key)
            if isinstance(items, dict) and items.get("type") == "array":
                exact = json.loads(schemas[name])
                exact["properties"][key]["minItems"] = exact["properties"][key]["maxItems"] = 3
                schemas[f"{name}[{key}=3]"] = json.dumps(exact, sort_keys=True)
    return schemas


def check_sampling(engine: StandInEngine, schemas: dict[str, str]) -> dict[str, Any]:
    """(b) Every kind of ``SamplingParams`` our helpers describe, built by vLLM's class and verified against the
    engine's model config the way the engine admits a request; and the vLLM rules that shaped the helpers."""
    import vllm
    from vllm import sampling_params as sp_module
    from vllm.inputs import TokensPrompt

    from offline_eval.engine.requests import Sampling
    from offline_eval.runtime import vllm_judge

    tok = engine.renderer.tokenizer
    so_config = engine.vllm_config.structured_outputs_config

    def build(kwargs: dict[str, Any]) -> dict[str, Any]:
        sp = vllm.SamplingParams(**kwargs)
        sp.verify(engine.model_config, None, so_config, tok)
        return params_seen(sp)

    kinds = {
        "greedy": vllm_judge.sampling_kwargs(Sampling(n=3, max_tokens=64, seed=9)),
        "sampled": vllm_judge.sampling_kwargs(Sampling(temperature=0.7, n=3, top_p=0.9, max_tokens=64, seed=9)),
        "options": vllm_judge.options_kwargs(20),
    }
    result: dict[str, Any] = {"kinds": {k: {"kwargs": v, "seen": build(v)} for k, v in kinds.items()}}
    result["schemas"] = {}
    for name, schema in schemas.items():
        extra = vllm_judge.structured_outputs_kwargs(schema, sp_module)
        kwargs = {**vllm_judge.sampling_kwargs(Sampling(max_tokens=64)), **extra}
        result["schemas"][name] = {"schema": schema, "keys": sorted(extra),
                                   "param_class": type(extra["structured_outputs"]).__name__, "seen": build(kwargs)}
    rules: dict[str, Any] = {"has_structured_outputs_params": hasattr(sp_module, "StructuredOutputsParams"),
                             "has_guided_decoding_params": hasattr(sp_module, "GuidedDecodingParams")}
    for rule, attempt in {
        "greedy_n3": lambda: vllm.SamplingParams(n=3, temperature=0.0, max_tokens=4),
        "logprobs_over_max": lambda: build(vllm_judge.options_kwargs(engine.model_config.max_logprobs + 1)),
        "temperature_above_2": lambda: vllm.SamplingParams(temperature=2.5, max_tokens=4),
        "max_tokens_0": lambda: vllm.SamplingParams(max_tokens=0),
    }.items():
        rules[rule] = _error(attempt)
    rules["tokens_prompt_required_keys"] = sorted(TokensPrompt.__required_keys__)
    result["rules"] = rules
    return result


def check_parsing() -> dict[str, Any]:
    """(c) Hand-built vLLM output objects through our option parsing: the same top-k as a list of
    ``{id: Logprob}``, as ``FlatLogprobs``, as vLLM's own builder lays it out, and with no log-probs at all."""
    from vllm.logprobs import FlatLogprobs, Logprob, append_logprobs_for_next_position
    from vllm.outputs import CompletionOutput, RequestOutput

    from offline_eval.runtime import vllm_judge

    probs = {11: 0.5, 21: 0.2, 12: 0.1, 99: 0.05}  # in rank order
    words = {11: "Yes", 21: "No", 12: " Yes", 99: "The"}
    first = {t: Logprob(logprob=math.log(p), rank=r, decoded_token=words[t])
             for r, (t, p) in enumerate(probs.items(), start=1)}
    second = {7: Logprob(logprob=-0.01, rank=1, decoded_token="x"), 21: Logprob(logprob=-5.0, rank=2)}
    option_ids = {"Yes": (11, 12), "No": (21,), "Maybe": (31,)}
    flat = FlatLogprobs()
    flat.append(first)
    flat.append(second)
    built = FlatLogprobs()  # sampled token (11) first, then the top-4, as vLLM's LogprobsProcessor appends them
    append_logprobs_for_next_position(built, [11, *probs], [math.log(probs[11]), *map(math.log, probs.values())],
                                      ["Yes", *words.values()], rank=1, num_logprobs=4)
    built_list: list[dict[int, Logprob]] = []
    append_logprobs_for_next_position(built_list, [11, *probs], [math.log(probs[11]), *map(math.log, probs.values())],
                                      ["Yes", *words.values()], rank=1, num_logprobs=4)

    def through(logprobs: Any) -> dict[str, Any]:
        completion = CompletionOutput(index=0, text="Yes", token_ids=[11], cumulative_logprob=math.log(0.5),
                                      logprobs=logprobs, finish_reason="length")
        output = RequestOutput(request_id="0", prompt=None, prompt_token_ids=[1, 2, 3], prompt_logprobs=None,
                               outputs=[completion], finished=True)
        return {"first_position": {str(k): v for k, v in
                                   vllm_judge.first_position_logprobs(output.outputs[0]).items()},
                "probs": vllm_judge.option_probs(option_ids, output.outputs[0]),
                "container": type(logprobs).__name__}

    return {
        "option_ids": {k: list(v) for k, v in option_ids.items()},
        "top": {str(t): p for t, p in probs.items()},
        "list": through([first, second]),
        "flat": through(flat),
        "vllm_built_flat": through(built),
        "vllm_built_list": through(built_list),
        "flat_len": len(flat), "flat_first_type": type(flat[0]).__name__,
        "none": through(None), "empty_list": through([]), "empty_flat": through(FlatLogprobs()),
        "empty_position": through([{}]),
    }


def check_generate(judge: Any, engine: StandInEngine, schemas: dict[str, str]) -> dict[str, Any]:
    """(d) ``VLLMJudge.generate`` end to end through the real ``vllm.LLM.generate``."""
    from offline_eval.engine.requests import Generate, Sampling, messages
    from offline_eval.runtime import chat

    plain = [
        ("greedy_n3", Generate(prompt=messages(("user", "Is the sky blue?")), sampling=Sampling(max_tokens=16, n=3))),
        ("sampled_n3", Generate(prompt=messages(("system", "Be brief."), ("user", "Water boils at 100 degrees.")),
                                sampling=Sampling(temperature=0.8, n=3, top_p=0.95, max_tokens=16, seed=7))),
        ("no_tokens", Generate(prompt=messages(("user", "Say nothing.")), sampling=Sampling(max_tokens=0, n=2))),
        ("cut_to_fit", Generate(prompt=messages(("user", "The capital of France is Paris.")),
                                sampling=Sampling(max_tokens=512))),
    ]
    with_schema = [(f"schema:{name}", Generate(prompt=messages(("user", f"Reply in JSON: {name}")), schema=schema,
                                               sampling=Sampling(max_tokens=64)))
                   for name, schema in schemas.items()]

    def fill(size: int) -> Any:
        """A user prompt of exactly ``size`` tokens ("a" * k grows by one token at a time here)."""
        return next(messages(("user", "a" * k)) for k in range(1, 4 * size)
                    if len(chat.encode_chat(judge.tokenizer, messages(("user", "a" * k)))) == size)

    edge = []
    if judge.max_model_len <= 512:  # the last prompt that fits: one token of room, and vLLM must accept it
        edge = [("fills_context", Generate(prompt=fill(judge.max_model_len - 1), sampling=Sampling(max_tokens=16)))]
    cases = plain + with_schema + edge
    before = len(engine.accepted)
    outputs = judge.generate([req for _, req in cases])
    accepted = engine.accepted[before:]
    result: dict[str, Any] = {
        "names": [name for name, _ in cases],
        "requests": [{"n": req.sampling.n, "temperature": req.sampling.temperature, "top_p": req.sampling.top_p,
                      "seed": req.sampling.seed, "max_tokens": req.sampling.max_tokens, "schema": req.schema,
                      "prompt_ids": chat.encode_chat(judge.tokenizer, req.prompt)} for _, req in cases],
        "outputs": [list(o) for o in outputs],
        "accepted": [{"request_id": r.request_id, "prompt_ids": list(r.prompt_token_ids),
                      "params": params_seen(r.sampling_params)} for r in accepted],
        "max_model_len": judge.max_model_len,
    }
    if edge:  # the first prompt that does not fit: refused by the backend before vLLM sees it, and by vLLM too
        import vllm

        full = fill(judge.max_model_len)
        before = len(engine.accepted)
        result["too_long"] = _error(lambda: judge.generate([Generate(prompt=full, sampling=Sampling(max_tokens=4))]))
        result["too_long_reached_engine"] = len(engine.accepted) - before
        ids = chat.encode_chat(judge.tokenizer, full)
        result["too_long_vllm"] = _error(lambda: judge.llm.generate([{"prompt_token_ids": ids}],
                                                                    [vllm.SamplingParams(max_tokens=1)],
                                                                    use_tqdm=False))
    return result


def _error(attempt: Any) -> str | None:
    """``"ExceptionType: message"`` of what ``attempt()`` raised, None if it returned."""
    try:
        attempt()
    except Exception as exc:  # vLLM's VLLMValidationError is a ValueError
        return f"{type(exc).__name__}: {exc}"
    return None


def check_score_options(judge: Any, engine: StandInEngine) -> dict[str, Any]:
    """(d) ``VLLMJudge.score_options`` end to end: scripted next-token distributions, one per prompt, chosen so
    every option is in the top-k, one option is not, and none is."""
    from offline_eval.engine.requests import ScoreOptions, messages
    from offline_eval.runtime import chat

    digits = ("1", "2", "3", "4", "5")
    cases = [
        ("all_listed", ScoreOptions(prompt=messages(("user", "Is the sky blue?")))),
        ("one_missing", ScoreOptions(prompt=messages(("user", "Rate it from 1 to 5.")), options=digits)),
        ("none_listed", ScoreOptions(prompt=messages(("user", "Water boils at 100 degrees.")))),
    ]
    option_ids = {name: chat.option_token_ids(judge.tokenizer, req.options) for name, req in cases}
    prompt_ids = {name: chat.encode_chat(judge.tokenizer, req.prompt) for name, req in cases}
    yes, no = option_ids["all_listed"]["Yes"], option_ids["all_listed"]["No"]
    scripts = {
        "all_listed": {yes[0]: 6.0, no[0]: 5.0, **({yes[1]: 4.0} if len(yes) > 1 else {})},
        "one_missing": {**{ids[0]: 6.0 - i for i, ids in enumerate(option_ids["one_missing"].values())},
                        **{t: -50.0 for t in option_ids["one_missing"]["5"]}},
        "none_listed": {t: -50.0 for ids in option_ids["none_listed"].values() for t in ids},
    }
    for name, script in scripts.items():
        LOGIT_SCRIPTS[tuple(prompt_ids[name])] = script
    before = len(engine.accepted)
    scores = judge.score_options([req for _, req in cases])
    accepted = engine.accepted[before:]
    return {
        "names": [name for name, _ in cases],
        "option_ids": {name: {k: list(v) for k, v in ids.items()} for name, ids in option_ids.items()},
        "prompt_ids": [prompt_ids[name] for name, _ in cases],
        "logprobs": [scripted_logprobs(engine, prompt_ids[name]) for name, _ in cases],
        "scores": scores,
        "accepted": [{"request_id": r.request_id, "prompt_ids": list(r.prompt_token_ids),
                      "params": params_seen(r.sampling_params)} for r in accepted],
        "top_logprobs": judge.top_logprobs,
    }


def guarded(check: Any, *args: Any) -> Any:
    """``check(*args)``, or ``{"error": traceback}`` when it raises: one broken contract fails its own test, with
    vLLM's message, instead of every test at once."""
    try:
        return check(*args)
    except Exception:
        return {"error": traceback.format_exc()}


def main(model: str) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    install_stand_in()
    from offline_eval.runtime.vllm_judge import VLLMJudge

    os.environ.pop("VLLM_BATCH_INVARIANT", None)
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    report: dict[str, Any] = {"versions": {"vllm": md.version("vllm"), "torch": torch.__version__,
                                           "torch_cuda": torch.version.cuda, "transformers": md.version("transformers"),
                                           "xgrammar": md.version("xgrammar")}}

    def judge_with_engine(options: dict[str, Any]) -> tuple[Any, StandInEngine, dict[str, Any]]:
        judge = VLLMJudge(model, **options)
        return judge, ENGINES[-1], engine_report(ENGINES[-1], LLM_CALLS[-1], judge)

    # judge A: a pinned GPU, a set max_model_len, batch-invariant kernels (the defaults)
    a = guarded(judge_with_engine, dict(device="cuda:0", max_model_len=128, dtype="float32", seed=5,
                                        gpu_memory_utilization=0.5))
    # judge B: vLLM picks the GPU and max_model_len, more log-probs, default kernels. VLLM_BATCH_INVARIANT is
    # removed first: judge A left it set in this process, and a variable already set wins (see the backend).
    os.environ.pop("VLLM_BATCH_INVARIANT", None)
    b = guarded(judge_with_engine, dict(device="cuda", top_logprobs=30, batch_invariant=False))
    schemas = guarded(project_schemas)
    report["engine_a"] = a if isinstance(a, dict) else a[2]
    report["engine_b"] = b if isinstance(b, dict) else b[2]
    if isinstance(schemas, dict) and "error" in schemas:
        report["schemas"], schemas = schemas, {}
    report["parsing"] = guarded(check_parsing)
    sections = {
        "sampling": (a, lambda judge, engine: check_sampling(engine, schemas)),
        "generate": (a, lambda judge, engine: check_generate(judge, engine, schemas)),
        "options": (a, check_score_options),
        "generate_b": (b, lambda judge, engine: check_generate(judge, engine, {})),
        "options_b": (b, check_score_options),
    }
    for section, (built, check) in sections.items():
        if isinstance(built, dict):  # the judge itself could not be built
            report[section] = {"error": "the judge was not built:\n" + built["error"]}
        else:
            report[section] = guarded(check, built[0], built[1])
    return report


if __name__ == "__main__":
    request = json.load(sys.stdin)
    Path(request["out"]).write_text(json.dumps(main(request["model"]), default=str))
