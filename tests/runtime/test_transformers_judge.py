"""TransformersJudge on a tiny random Llama with a byte-level BPE tokenizer trained here, offline."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from offline_eval.engine.requests import Generate, Sampling, ScoreOptions, messages
from offline_eval.runtime import chat
from offline_eval.runtime.base import JudgeBackend
from offline_eval.runtime.registry import load_backend
from offline_eval.runtime.transformers_judge import TransformersJudge

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<s>", "</s>", "<pad>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
CORPUS = [
    "Yes No yes no Maybe",
    "Is the claim supported by the context? Yes. No. Maybe.",
    "The capital of France is Paris. The sky is blue. Water boils at 100 degrees.",
    "Answer with Yes or No only. The statement is true. The statement is false.",
    '{"verdict": 1, "reason": "supported"} {"claims": ["a", "b"]}',
] * 20


def _build_tokenizer() -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIALS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build_model(vocab_size: int, tok: object) -> object:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.2,  # peaked random logits: clear argmaxes, varied text
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    return model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    tok = _build_tokenizer()
    model = _build_model(len(tok), tok)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def judge(model_dir: Path) -> TransformersJudge:
    return TransformersJudge(str(model_dir), batch_size=8)


PROMPTS = [
    messages(("user", "Is the sky blue?")),
    messages(("system", "Answer with Yes or No only."), ("user", "The capital of France is Paris. True?")),
    messages(("user", "Water boils at 100 degrees. The statement is")),
    messages(("user", "Maybe")),
    messages(("system", "Be brief."), ("user", "The claim is supported by the context, is it? " * 3)),
    messages(("user", "yes no yes no yes")),
    messages(("user", "The statement is false. Answer with Yes or No only.")),
    messages(("user", '{"verdict": 1, "reason": "supported"}')),
]


def _greedy_reference(judge: TransformersJudge, prompt: chat.ChatMessages, max_new: int) -> str:
    """Plain unbatched greedy decoding by full recomputation, no cache, no padding."""
    ids = chat.encode_chat(judge.tokenizer, prompt)
    out: list[int] = []
    with torch.no_grad():
        for _ in range(max_new):
            logits = judge.model(input_ids=torch.tensor([ids + out])).logits[0, -1]
            nxt = int(logits.argmax())
            if nxt in judge.eos_ids:
                break
            out.append(nxt)
    return judge.tokenizer.decode(out, skip_special_tokens=True)


def test_satisfies_protocol_and_identity(judge: TransformersJudge, model_dir: Path) -> None:
    assert isinstance(judge, JudgeBackend)
    from offline_eval.runtime.identity import content_fingerprint

    assert judge.identity.startswith("judge:transformers:")
    assert f":{content_fingerprint(model_dir)}:" in judge.identity  # content, not place
    assert judge.identity.endswith('{"dtype": "float32"}')
    again = TransformersJudge(str(model_dir), batch_size=1)
    assert again.identity == judge.identity


def test_registry_loads_transformers_backend(model_dir: Path) -> None:
    backend = load_backend("judge", "transformers", path=str(model_dir), batch_size=2)
    assert isinstance(backend, TransformersJudge)
    assert backend.batch_size == 2


def test_chat_template_is_used(judge: TransformersJudge) -> None:
    text = chat.render_chat(judge.tokenizer, PROMPTS[1])
    assert text == (
        "<s><|system|>Answer with Yes or No only.<|end|>"
        "<|user|>The capital of France is Paris. True?<|end|><|assistant|>"
    )
    ids = chat.encode_chat(judge.tokenizer, PROMPTS[1])
    assert ids[0] == judge.tokenizer.bos_token_id and ids.count(judge.tokenizer.bos_token_id) == 1


def test_greedy_matches_unbatched_reference_and_is_batch_invariant(model_dir: Path) -> None:
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=12)) for p in PROMPTS]
    batched = TransformersJudge(str(model_dir), batch_size=8).generate(reqs)
    single = TransformersJudge(str(model_dir), batch_size=1).generate(reqs)
    assert batched == single
    assert all(len(r) == 1 for r in batched)
    judge = TransformersJudge(str(model_dir), batch_size=8)
    for req, got in zip(reqs, batched):
        assert got[0] == _greedy_reference(judge, req.prompt, 12)
    # the random model must produce text for the comparison to mean something
    assert sum(1 for r in batched if r[0].strip()) >= 4
    assert len({r[0] for r in batched}) >= 3


def test_greedy_eager_attention_also_batch_invariant(model_dir: Path) -> None:
    judge = TransformersJudge(str(model_dir), batch_size=8)
    judge.model.config._attn_implementation = "eager"
    judge.packing = False  # decided at load: packed rows need the row-exact attention
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=6)) for p in PROMPTS]
    batched = judge.generate(reqs)
    judge.batch_size = 1
    assert judge.generate(reqs) == batched


def test_greedy_n_copies_and_max_tokens_per_request(judge: TransformersJudge) -> None:
    long = Generate(prompt=PROMPTS[0], sampling=Sampling(max_tokens=10))
    short = Generate(prompt=PROMPTS[0], sampling=Sampling(max_tokens=2))
    three = Generate(prompt=PROMPTS[0], sampling=Sampling(max_tokens=10, n=3))
    zero = Generate(prompt=PROMPTS[0], sampling=Sampling(max_tokens=0))
    out = judge.generate([long, short, three, zero])
    assert out[2] == (out[0][0],) * 3
    assert out[3] == ("",)
    assert out[0][0] == _greedy_reference(judge, PROMPTS[0], 10)
    assert out[1][0] == _greedy_reference(judge, PROMPTS[0], 2)
    assert out[0][0] != out[1][0]


def test_sampling_reproducible_and_independent_of_batch(model_dir: Path) -> None:
    target = Generate(prompt=PROMPTS[2], sampling=Sampling(temperature=1.0, n=4, max_tokens=8, seed=7))
    others = [Generate(prompt=p, sampling=Sampling(max_tokens=5)) for p in PROMPTS[:5]]
    hot = Generate(prompt=PROMPTS[3], sampling=Sampling(temperature=0.7, top_p=0.9, n=2, max_tokens=5))
    alone = TransformersJudge(str(model_dir), batch_size=4).generate([target])[0]
    judge = TransformersJudge(str(model_dir), batch_size=8)
    mixed = judge.generate([*others[:3], target, hot, *others[3:]])
    assert mixed[3] == alone
    assert len(alone) == 4
    assert len(set(alone)) >= 2  # temperature 1 on a random model: samples differ
    assert judge.generate([target])[0] == alone  # reproducible
    reseeded = Generate(prompt=PROMPTS[2], sampling=Sampling(temperature=1.0, n=4, max_tokens=8, seed=8))
    assert judge.generate([reseeded])[0] != alone
    # greedy rows in a batch with sampled rows are unaffected
    assert mixed[0] == judge.generate([others[0]])[0]


def test_top_p_tiny_is_greedy(judge: TransformersJudge) -> None:
    greedy = judge.generate([Generate(prompt=PROMPTS[4], sampling=Sampling(max_tokens=8))])[0][0]
    nucleus = judge.generate(
        [Generate(prompt=PROMPTS[4], sampling=Sampling(temperature=1.0, top_p=1e-6, n=2, max_tokens=8))]
    )[0]
    assert nucleus == (greedy, greedy)


def test_schema_is_accepted_and_ignored(judge: TransformersJudge) -> None:
    plain = Generate(prompt=PROMPTS[7], sampling=Sampling(max_tokens=6))
    schema = Generate(prompt=PROMPTS[7], schema='{"type": "object"}', sampling=Sampling(max_tokens=6))
    assert judge.generate([plain]) == judge.generate([schema])


def test_prompt_too_long_raises_naming_request(model_dir: Path) -> None:
    judge = TransformersJudge(str(model_dir), max_model_len=20)
    ok = Generate(prompt=messages(("user", "Yes")), sampling=Sampling(max_tokens=50))
    long = Generate(prompt=messages(("user", "The capital of France is Paris. " * 10)))
    with pytest.raises(ValueError, match=r"request 1: prompt of \d+ tokens .*max_model_len=20"):
        judge.generate([ok, long])
    with pytest.raises(ValueError, match="request 0"):
        judge.score_options([ScoreOptions(prompt=long.prompt)])
    # the completion is cut so prompt + completion fit
    (text,) = judge.generate([ok])[0]
    prompt_len = len(chat.encode_chat(judge.tokenizer, ok.prompt))
    assert text == _greedy_reference(judge, ok.prompt, 20 - prompt_len)


def _direct_option_probs(judge: TransformersJudge, prompt: chat.ChatMessages, options: tuple[str, ...]) -> dict[str, float]:
    ids = chat.encode_chat(judge.tokenizer, prompt)
    with torch.no_grad():
        logits = judge.model(input_ids=torch.tensor([ids])).logits[0, -1]  # full logits, all positions
    probs = torch.softmax(logits.double(), dim=-1)
    raw = {}
    for option in options:
        toks = {judge.tokenizer.encode(v, add_special_tokens=False)[0] for v in (option, " " + option)}
        toks = {t for t in toks if judge.tokenizer.decode([t]).strip()}
        raw[option] = sum(float(probs[t]) for t in toks)
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()}


def test_score_options_normalised_batch_invariant_and_exact(model_dir: Path) -> None:
    options = ("Yes", "No")
    reqs = [ScoreOptions(prompt=p, options=options) for p in PROMPTS]
    reqs.append(ScoreOptions(prompt=PROMPTS[0], options=("Yes", "No", "Maybe")))
    batched = TransformersJudge(str(model_dir), batch_size=8).score_options(reqs)
    single = TransformersJudge(str(model_dir), batch_size=1).score_options(reqs)
    judge = TransformersJudge(str(model_dir))
    for req, a, b in zip(reqs, batched, single):
        assert list(a) == list(req.options)
        assert math.isclose(sum(a.values()), 1.0, abs_tol=1e-9)
        for option in req.options:
            assert a[option] == pytest.approx(b[option], abs=1e-5)
        direct = _direct_option_probs(judge, req.prompt, req.options)
        for option in req.options:
            assert a[option] == pytest.approx(direct[option], abs=1e-5)
    assert len({round(r["Yes"], 6) for r in batched[:-1]}) > 1  # prompts matter


def test_bfloat16_option_probabilities_come_from_float32_logits(model_dir: Path) -> None:
    """A bfloat16 logit is rounded to a few bits; the option probabilities are computed from the
    output layer's input in float32 instead, so close verdicts do not collapse onto the same value."""
    # One prompt per pass, computed whole: the same bfloat16 arithmetic as the direct forward below
    # (batching and shared prefixes move bfloat16 hidden states by more than the rounding at issue).
    judge = TransformersJudge(str(model_dir), batch_size=1, dtype="bfloat16", share_prefixes=False)
    options = ("Yes", "No")
    got = judge.score_options([ScoreOptions(prompt=p, options=options) for p in PROMPTS])
    option_ids = chat.option_token_ids(judge.tokenizer, options)
    differs = 0
    for prompt, probs in zip(PROMPTS, got):
        ids = chat.encode_chat(judge.tokenizer, prompt)
        with torch.no_grad():
            out = judge.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        hidden = out.hidden_states[-1][0, -1]  # after the final norm: what lm_head reads
        assert torch.equal(judge.model.lm_head(hidden), out.logits[0, -1])
        exact = (hidden.float() @ judge.model.lm_head.weight.float().T).detach()
        expected = chat.normalise_logprobs({o: chat.logsumexp(float(exact[t]) for t in toks)
                                            for o, toks in option_ids.items()})
        rounded = chat.normalise_logprobs({o: chat.logsumexp(float(out.logits[0, -1, t]) for t in toks)
                                           for o, toks in option_ids.items()})
        assert probs["Yes"] == pytest.approx(expected["Yes"], abs=1e-4)
        differs += abs(rounded["Yes"] - expected["Yes"]) > 1e-4
    assert differs  # the rounding is visible on these prompts: the float32 path is what is tested


def test_option_logits_fall_back_when_the_model_rescales_its_logits(judge: TransformersJudge) -> None:
    torch.manual_seed(0)
    hidden = torch.randn(3, judge.model.config.hidden_size)
    tokens = [5, 9]
    exact = hidden @ judge.model.lm_head.weight[tokens].T
    logits = torch.zeros(3, judge.model.config.vocab_size)
    logits[:, tokens] = exact
    assert torch.allclose(judge._option_logits(hidden, logits, tokens), exact, atol=1e-5)
    logits[:, tokens] = torch.tanh(exact / 0.5) * 0.5  # a soft cap applied after the output layer
    assert torch.equal(judge._option_logits(hidden, logits, tokens), logits[:, tokens])


def test_option_tokens_cover_space_variant(judge: TransformersJudge) -> None:
    ids = chat.option_token_ids(judge.tokenizer, ("Yes", "No"))
    plain = judge.tokenizer.encode("Yes", add_special_tokens=False)[0]
    spaced = judge.tokenizer.encode(" Yes", add_special_tokens=False)[0]
    assert plain != spaced  # byte-level BPE: "Yes" and "ĠYes" are different tokens
    assert set(ids["Yes"]) == {plain, spaced}


def test_options_sharing_first_token_raise(judge: TransformersJudge) -> None:
    with pytest.raises(ValueError, match="start with the same token"):
        judge.score_options([ScoreOptions(prompt=PROMPTS[0], options=("Yes", "Yes please"))])
    with pytest.raises(ValueError, match="duplicate"):
        judge.score_options([ScoreOptions(prompt=PROMPTS[0], options=("No", "No"))])


def test_plain_rendering_without_chat_template(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    from transformers import AutoTokenizer

    plain_dir = tmp_path / "plain"
    shutil.copytree(model_dir, plain_dir)
    tok = AutoTokenizer.from_pretrained(plain_dir, local_files_only=True)
    tok.chat_template = None
    tok.save_pretrained(plain_dir)
    for name in ("chat_template.jinja", "chat_template.json"):
        (plain_dir / name).unlink(missing_ok=True)
    judge = TransformersJudge(str(plain_dir))
    assert not chat.has_chat_template(judge.tokenizer)
    assert chat.render_chat(judge.tokenizer, PROMPTS[1]) == (
        "system: Answer with Yes or No only.\n\nuser: The capital of France is Paris. True?\n\nassistant:"
    )
    out = judge.score_options([ScoreOptions(prompt=PROMPTS[1])])
    assert math.isclose(sum(out[0].values()), 1.0, abs_tol=1e-9)
    assert judge.identity != TransformersJudge(str(model_dir)).identity  # tokenizer files differ


def test_missing_path_is_clear() -> None:
    with pytest.raises(FileNotFoundError, match="judge model not found"):
        TransformersJudge("/nonexistent/model")


def test_absolute_positions_model_batch_invariant(tmp_path: Path) -> None:
    """GPT-2 has learned absolute positions: left padding is only harmless when position ids come
    from the attention mask (RoPE models hide a wrong offset, this one does not)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _build_tokenizer()
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tok),
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=128,
        initializer_range=0.2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    judge = TransformersJudge(str(tmp_path), batch_size=8)
    assert judge.max_model_len == 128
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=8)) for p in PROMPTS]
    got = judge.generate(reqs)
    assert got == [(_greedy_reference(judge, r.prompt, 8),) for r in reqs]
    prompts = PROMPTS + _verdict_prompts()  # the latter share prefixes: tails get offset positions
    scores = judge.score_options([ScoreOptions(prompt=p) for p in prompts])
    for prompt, score in zip(prompts, scores):
        direct = _direct_option_probs(judge, prompt, ("Yes", "No"))
        assert score["Yes"] == pytest.approx(direct["Yes"], abs=1e-5)
    shared = [Generate(prompt=p, sampling=Sampling(max_tokens=6)) for p in _verdict_prompts()[:4]]
    assert judge.generate(shared) == [(_greedy_reference(judge, r.prompt, 6),) for r in shared]


def test_template_without_system_role_gets_system_folded_in(model_dir: Path) -> None:
    tok = _build_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    text = chat.render_chat(tok, messages(("system", "Be brief."), ("user", "Is it?")))
    assert text == "<|user|>Be brief.\n\nIs it?<|end|><|assistant|>"


def test_seed_derivation_and_normalisation() -> None:
    assert chat.derive_seed(0, "abc", 1) == chat.derive_seed(0, "abc", 1)
    assert len({chat.derive_seed(s, t, i) for s in (0, 1) for t in ("a", "b") for i in (0, 1)}) == 8
    assert chat.normalise_logprobs({"a": -math.inf, "b": -math.inf}) == {"a": 0.5, "b": 0.5}
    probs = chat.normalise_logprobs({"a": -1000.0, "b": -1000.0 - math.log(3)})
    assert probs["a"] == pytest.approx(0.75) and probs["b"] == pytest.approx(0.25)


def _write_gguf(model: torch.nn.Module, tok: object, hf_dir: Path, out: Path) -> None:
    """A float32 GGUF of a tiny Qwen2 with its byte-level BPE tokenizer and chat template."""
    import json

    import gguf

    cfg = model.config
    writer = gguf.GGUFWriter(str(out), "qwen2")
    writer.add_name("tiny")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(10000.0)
    spec = json.loads((hf_dir / "tokenizer.json").read_text())
    ids = {**spec["model"]["vocab"], **{a["content"]: a["id"] for a in spec["added_tokens"]}}
    tokens = sorted(ids, key=ids.__getitem__)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in spec["model"]["merges"]])
    writer.add_bos_token_id(tok.bos_token_id)
    writer.add_eos_token_id(tok.eos_token_id)
    writer.add_pad_token_id(tok.pad_token_id)
    writer.add_chat_template(CHAT_TEMPLATE)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, cfg.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight", ".bias")), tensor.float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_gguf_file_loads_same_weights(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")  # transformers needs it to read GGUF
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = _build_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        initializer_range=0.2, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).eval()
    model.save_pretrained(tmp_path / "hf")
    tok.save_pretrained(tmp_path / "hf")
    _write_gguf(model, tok, tmp_path / "hf", tmp_path / "tiny.gguf")
    judge = TransformersJudge(str(tmp_path / "tiny.gguf"))
    from offline_eval.runtime.identity import content_fingerprint

    assert f":{content_fingerprint(tmp_path / 'tiny.gguf')}:" in judge.identity
    assert chat.has_chat_template(judge.tokenizer)
    ids = chat.encode_chat(judge.tokenizer, PROMPTS[0])
    with torch.no_grad():
        ours = judge.model(input_ids=torch.tensor([ids])).logits
        theirs = model(input_ids=torch.tensor([ids])).logits
    assert torch.allclose(ours, theirs, atol=1e-5)
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=6)) for p in PROMPTS[:4]]
    assert judge.generate(reqs) == [(_greedy_reference(judge, r.prompt, 6),) for r in reqs]


def test_gguf_without_accelerate_is_clear(tmp_path: Path) -> None:
    import importlib.util

    from offline_eval.runtime.registry import BackendUnavailable

    if importlib.util.find_spec("accelerate") is not None and importlib.util.find_spec("gguf") is not None:
        pytest.skip("gguf and accelerate are both installed here")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF")
    with pytest.raises(BackendUnavailable, match="pip install"):
        TransformersJudge(str(fake))


def test_thinking_disabled_in_templates_that_support_it() -> None:
    tok = _build_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>"
        "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}"
    )
    assert chat.render_chat(tok, messages(("user", "Is it?"))).endswith("<|assistant|><think></think>")


def test_schema_requests_stop_when_the_json_value_closes(model_dir: Path) -> None:
    from offline_eval.json_scan import json_value_closed

    assert json_value_closed('{"claims": ["a}", "b"]} trailing prose')
    assert not json_value_closed('{"claims": ["a", ')
    free_judge = TransformersJudge(str(model_dir), batch_size=4)
    capped_judge = TransformersJudge(str(model_dir), batch_size=4, max_new_tokens=5)
    prompt = next(p for p in PROMPTS if len(free_judge.generate(
        [Generate(prompt=p, sampling=Sampling(max_tokens=40))])[0][0]) > 30)
    free = free_judge.generate([Generate(prompt=prompt, sampling=Sampling(max_tokens=40))])[0][0]
    capped = capped_judge.generate([Generate(prompt=prompt, sampling=Sampling(max_tokens=40), schema="{}")])[0][0]
    # The cap (and the JSON stop) only ever cut the same greedy continuation short.
    assert free.startswith(capped) and len(capped) < len(free)


# -- shared prompt prefixes ------------------------------------------------------------------------
CONTEXTS = ["The capital of France is Paris. The sky is blue. " * 3,
            "Water boils at 100 degrees. Answer with Yes or No only. " * 3]
CLAIMS = ["The sky is blue.", "Paris is the capital.", "Water boils.", "No", "The statement is true.",
          "Maybe yes, maybe no, maybe the claim is supported by the context."]


def _verdict_prompts() -> list[chat.ChatMessages]:
    """Verdict-style prompts: a long context shared by several claims, as faithfulness asks them."""
    return [messages(("system", "Answer with Yes or No only."),
                     ("user", f"Context: {context}\nStatement: {claim}\nYes or No?"))
            for context in CONTEXTS for claim in CLAIMS]


def test_prefix_groups_maximise_the_shared_tokens() -> None:
    from offline_eval.runtime.transformers_judge import prefix_groups

    system = list(range(20))
    a = [system + [100] * 50 + [i] for i in range(5)]  # share 70 tokens
    b = [system + [200] * 60 + [i, i] for i in range(7)]  # share 80 tokens
    lone = [[5, 6, 7]]
    seqs = a + b + lone
    assert prefix_groups(seqs, 16) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11], [12]]
    # A group limit never lets a straggler of one context pull the next context's group down to the
    # 20-token system prompt.
    groups = prefix_groups(seqs, 4)
    assert all(len(g) <= 4 for g in groups)
    assert sorted(i for g in groups for i in g) == list(range(13))
    assert all(set(g) <= set(range(5)) or set(g) <= set(range(5, 12)) for g in groups if len(g) > 1)
    assert [12] in groups
    # Nothing worth sharing: groups of one. Identical sequences keep one token of their own.
    assert prefix_groups([[1, 2], [3, 4]], 8) == [[0], [1]]
    assert prefix_groups([system, system], 8) == [[0, 1]]


def test_shared_prefix_options_equal_full_computation(model_dir: Path) -> None:
    prompts = _verdict_prompts()
    reqs = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    shared_judge = TransformersJudge(str(model_dir), batch_size=8)
    ids = [chat.encode_chat(shared_judge.tokenizer, p) for p in prompts]
    from offline_eval.runtime.transformers_judge import MIN_SHARED_PREFIX, prefix_groups

    groups = prefix_groups(ids, 8)
    assert any(len(g) > 1 for g in groups), "the prompts must actually share prefixes"
    assert min(len(i) for i in ids) > 3 * MIN_SHARED_PREFIX
    shared = shared_judge.score_options(reqs)
    full = TransformersJudge(str(model_dir), batch_size=8, share_prefixes=False).score_options(reqs)
    for req, a, b in zip(reqs, shared, full):
        direct = _direct_option_probs(shared_judge, req.prompt, req.options)
        for option in req.options:
            assert a[option] == pytest.approx(b[option], abs=1e-5)
            assert a[option] == pytest.approx(direct[option], abs=1e-5)
    assert len({round(r["Yes"], 6) for r in shared}) > 3  # claims matter


def test_the_judge_accounts_for_its_prompt_processing(model_dir: Path) -> None:
    """``work`` counts the prompt tokens asked for, those run through the model (a shared prefix once)
    and the positions run; without sharing, every prompt token is computed."""
    prompts = _verdict_prompts()
    reqs = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    shared_judge = TransformersJudge(str(model_dir), batch_size=len(reqs))
    plain_judge = TransformersJudge(str(model_dir), batch_size=len(reqs), share_prefixes=False)
    shared_judge.score_options(reqs)
    plain_judge.score_options(reqs)
    asked = sum(len(chat.encode_chat(shared_judge.tokenizer, p)) for p in prompts)
    for judge in (shared_judge, plain_judge):
        work = judge.work
        assert work.prompt_tokens["score_options"] == asked
        assert work.padded_tokens["score_options"] >= work.computed_tokens["score_options"]
        assert work.forward_calls["score_options"] >= 1 and work.seconds["score_options"] > 0
        assert work.prompt_tokens["generate"] == 0 and work.decoded_tokens == 0
    assert plain_judge.work.computed_tokens["score_options"] == asked
    assert plain_judge.work.shared_share("score_options") == 0.0
    assert shared_judge.work.computed_tokens["score_options"] < asked
    assert 0.2 < shared_judge.work.shared_share("score_options") < 1.0

    shared_judge.generate([Generate(prompt=prompts[0], sampling=Sampling(max_tokens=5))])
    assert shared_judge.work.prompt_tokens["generate"] == len(chat.encode_chat(shared_judge.tokenizer, prompts[0]))
    assert 1 <= shared_judge.work.decoded_tokens <= 5


def _two_passages_one_batch(model_dir: Path, float32_matmuls: bool = False
                            ) -> tuple[list[ScoreOptions], TransformersJudge, list[list[int]]]:
    """Verdicts on two passages behind a system turn long enough to be shared, a bfloat16 judge taking
    them in one batch, and the prompts' token ids."""
    prompts = [messages(("system", "You are a meticulous evaluator. Answer with a single word: Yes or No."),
                        ("user", f"Context:\n{context}\n\nStatement: {claim}\nYes or No?"))
               for context in CONTEXTS for claim in CLAIMS]
    reqs = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    judge = TransformersJudge(str(model_dir), batch_size=len(reqs), dtype="bfloat16", float32_matmuls=float32_matmuls)
    return reqs, judge, [chat.encode_chat(judge.tokenizer, p) for p in prompts]


def test_the_head_every_group_shares_is_computed_once(model_dir: Path) -> None:
    """Two passages' verdicts share the chat template's system turn and the words before the passage:
    that head runs once for the batch, each passage's prefix continues it, and every verdict has the
    probabilities it has alone."""
    from offline_eval.runtime.transformers_judge import MIN_SHARED_PREFIX, prefix_groups, shared_prefix_len

    reqs, judge, ids = _two_passages_one_batch(model_dir)
    groups = prefix_groups(ids, len(ids))
    top = shared_prefix_len(ids)
    assert len(groups) == 2 and top >= MIN_SHARED_PREFIX
    got = judge.score_options(reqs)
    prefixes = [shared_prefix_len([ids[i] for i in g]) for g in groups]
    tails = sum(len(ids[i]) - shared for g, shared in zip(groups, prefixes) for i in g)
    assert judge.work.computed_tokens["score_options"] == top + sum(p - top for p in prefixes) + tails
    assert judge.work.forward_calls["score_options"] == 3  # the head, the passages packed, the tails packed
    for req, batched in zip(reqs, got):
        alone = judge.score_options([req])[0]
        assert batched == pytest.approx(alone, abs=1e-6)
    assert len({round(r["Yes"], 6) for r in got}) > 3


@pytest.mark.parametrize("float32_matmuls", [False, True], ids=["bfloat16-products", "float32-products"])
def test_packed_rows_give_the_bits_of_padded_rows(model_dir: Path, float32_matmuls: bool) -> None:
    """The judge packs the rows of a forward call into one sequence with no padding: the passages
    continuing the system turn, then the tails continuing their passages (rows of both passages in one
    call). No position is padding, and every verdict has the probabilities it has in padded rows (the
    same bits on this CPU; 1e-6 holds on any) and alone, with either kind of matrix products."""
    reqs, judge, ids = _two_passages_one_batch(model_dir, float32_matmuls)
    assert judge.packing and judge.float32_matmuls == float32_matmuls
    got = judge.score_options(reqs)
    work = judge.work
    assert work.padded_tokens["score_options"] == work.computed_tokens["score_options"]
    _, padded, _ = _two_passages_one_batch(model_dir, float32_matmuls)
    padded.packing = False
    want = padded.score_options(reqs)
    assert padded.work.padded_tokens["score_options"] > padded.work.computed_tokens["score_options"]
    assert padded.work.computed_tokens["score_options"] == work.computed_tokens["score_options"]
    for a, b in zip(got, want):
        assert a == pytest.approx(b, abs=1e-6)
    for req, batched in zip(reqs, got):
        assert batched == pytest.approx(judge.score_options([req])[0], abs=1e-6)


@pytest.mark.parametrize("float32_matmuls", [False, True], ids=["bfloat16-products", "float32-products"])
def test_packed_prompts_decode_the_tokens_of_padded_prompts(model_dir: Path, float32_matmuls: bool) -> None:
    """Decoding's prompts run packed too, each row's cache then stacked left-padded: no position of the
    prefill is padding, and every row decodes the tokens it decodes from padded prompts, and alone."""
    prompts = _verdict_prompts()
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=12)) for p in prompts]

    def bfloat16_judge() -> TransformersJudge:
        return TransformersJudge(str(model_dir), batch_size=len(reqs), dtype="bfloat16",
                                 float32_matmuls=float32_matmuls)

    judge = bfloat16_judge()
    assert judge.packing
    got = judge.generate(reqs)
    assert judge.work.padded_tokens["generate"] == judge.work.computed_tokens["generate"]
    padded = bfloat16_judge()
    padded.packing = False
    assert padded.generate(reqs) == got
    assert padded.work.padded_tokens["generate"] > padded.work.computed_tokens["generate"]
    assert got[:3] == [bfloat16_judge().generate([r])[0] for r in reqs[:3]]
    assert len({g[0] for g in got}) >= 2 and all(g[0] for g in got)


def test_the_last_layer_runs_at_the_rows_ends_only_and_keeps_their_bits(model_dir: Path) -> None:
    """In a packed call the last decoder layer's MLP runs at each row's last position only (its keys and
    values at all of them: the prefixes' caches serve the tails); every verdict and every completion
    has the bits of the whole layer computed."""
    reqs, judge, _ = _two_passages_one_batch(model_dir)
    assert judge.packing and judge.last_layer_at_ends
    rows_in = {"first": 0, "last": 0}
    layers = judge.model.get_decoder().layers
    layers[0].mlp.register_forward_pre_hook(lambda m, a: rows_in.__setitem__("first", rows_in["first"] + a[0].shape[1]))
    layers[-1].mlp.register_forward_pre_hook(lambda m, a: rows_in.__setitem__("last", rows_in["last"] + a[0].shape[1]))
    got = judge.score_options(reqs)
    calls = judge.work.forward_calls["score_options"]
    assert rows_in["first"] == judge.work.computed_tokens["score_options"]
    assert calls <= rows_in["last"] <= calls + len(reqs) and rows_in["last"] < rows_in["first"] / 4
    _, whole, _ = _two_passages_one_batch(model_dir)
    whole.last_layer_at_ends = False
    assert whole.score_options(reqs) == got
    prompts = [Generate(prompt=r.prompt, sampling=Sampling(max_tokens=8)) for r in reqs[:4]]
    assert judge.generate(prompts) == whole.generate(prompts)


def test_a_last_layer_of_another_shape_is_computed_whole() -> None:
    """Only a pre-norm layer made of attention, MLP and their two norms is cut to the rows' ends: a layer
    with another part (a norm after the MLP, say) is left whole."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from offline_eval.runtime.batch_invariance import last_layer_at_ends

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    model = LlamaForCausalLM(config).eval()
    model.model.layers[-1].post_feedforward_layernorm = torch.nn.LayerNorm(32)
    whole = model.model.layers[-1].forward
    assert not last_layer_at_ends(model)
    assert model.model.layers[-1].forward == whole
    assert last_layer_at_ends(LlamaForCausalLM(config).eval())


def test_a_model_whose_attention_ignores_packed_rows_is_not_packed(model_dir: Path) -> None:
    """Packing is used only where the model's attention reads the packed rows: on transformers' own SDPA
    attention (which would let every packed row see the others) the load-time check turns it off."""
    _, judge, _ = _two_passages_one_batch(model_dir)
    assert judge._packing_works()
    judge.model.set_attn_implementation("sdpa")
    assert not judge._packing_works()
    assert judge.work.forward_calls == Counter()  # the checks leave no trace in the work counted


def test_passages_and_the_tails_after_them_share_forward_calls(model_dir: Path) -> None:
    """Unpacked (decoding's prompts, or a model that cannot be packed): two passages' prefixes continue
    the system turn in one forward call, and the tails after them are cut by length, not by passage:
    one call holds rows that continue different prefixes (each row its own, left-padded to the longest).
    Every verdict has the probabilities it has alone."""
    from offline_eval.runtime.transformers_judge import (MIN_SHARED_PREFIX, TAIL_POSITIONS, length_buckets,
                                                         prefix_groups, shared_prefix_len)

    reqs, judge, ids = _two_passages_one_batch(model_dir)
    judge.packing = False
    groups = prefix_groups(ids, len(ids))
    assert len(groups) == 2 and shared_prefix_len(ids) >= MIN_SHARED_PREFIX
    shared = {i: shared_prefix_len([ids[j] for j in g]) for g in groups for i in g}
    tails = [len(ids[i]) - shared[i] for i in range(len(ids))]
    buckets = length_buckets(list(range(len(ids))), tails, limit=TAIL_POSITIONS)
    assert any({i in groups[0] for i in b} == {True, False} for b in buckets), "a call must mix passages"
    got = judge.score_options(reqs)
    top = shared_prefix_len(ids)
    passages = length_buckets(list(range(len(groups))), [shared[g[0]] - top for g in groups], limit=TAIL_POSITIONS)
    assert passages == [[0, 1]] or passages == [[1, 0]]
    assert judge.work.forward_calls["score_options"] == 1 + 1 + len(buckets)  # head, passages, tails
    for req, batched in zip(reqs, got):
        assert batched == pytest.approx(judge.score_options([req])[0], abs=1e-6)  # bits here; 1e-6 on any CPU


def test_prefixes_computed_in_one_batch_serve_the_next(model_dir: Path) -> None:
    """Batches of 4 cut two passages' verdicts apart: a passage whose verdicts fall into two batches,
    and the system turn, are computed once (fewer tokens than without the store), and every verdict
    has the probabilities it has alone."""
    prompts = _verdict_prompts()
    reqs = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    stored = TransformersJudge(str(model_dir), batch_size=4, dtype="bfloat16")
    unstored = TransformersJudge(str(model_dir), batch_size=4, dtype="bfloat16", prefix_store_mb=0)
    got = stored.score_options(reqs)
    assert len(stored.prefixes) >= 2 and 0 < stored.prefixes.bytes <= stored.prefixes.limit_bytes
    for a, b in zip(unstored.score_options(reqs), got):
        assert a == pytest.approx(b, abs=1e-6)
    assert len(unstored.prefixes) == 0
    passage = len(chat.encode_chat(stored.tokenizer, prompts[0])) - len(CLAIMS[0]) - 10  # a passage at least
    saved = unstored.work.computed_tokens["score_options"] - stored.work.computed_tokens["score_options"]
    assert saved >= passage
    for req, batched in zip(reqs, got):
        assert batched == pytest.approx(stored.score_options([req])[0], abs=1e-6)


def test_prefix_store_matches_the_longest_beginning_and_keeps_the_recently_used() -> None:
    from offline_eval.runtime.transformers_judge import PrefixStore

    def layers(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:  # 2 layers, positions numbered
        pos = torch.arange(n, dtype=torch.float32).reshape(1, 1, n, 1)
        return [(pos.clone(), -pos.clone()) for _ in range(2)]

    size = 2 * 2 * 4 * 10  # bytes of a 10-position entry
    store = PrefixStore(limit_bytes=2 * size)
    assert store.longest([1, 2, 3], 3) == (0, None)
    store.put((1, 2, 3, 4, 5, 6, 7, 8, 9, 10), layers(10))
    n, got = store.longest([1, 2, 3, 4, 99, 6], 6)
    assert n == 4 and got is not None and got[0][0].shape[2] == 4 and got[1][1].flatten().tolist() == [0, -1, -2, -3]
    assert store.longest([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 8)[0] == 8  # no further than asked
    store.put(tuple(range(20, 30)), layers(10))
    store.longest([1, 2], 2)  # the first entry is the most recently used now
    store.put(tuple(range(40, 50)), layers(10))  # over the limit: the least recently used goes
    assert len(store) == 2 and store.bytes == 2 * size
    assert store.longest([20, 21], 2) == (0, None) and store.longest([1, 2], 2)[0] == 2
    store.put(tuple(range(60, 90)), layers(30))  # larger than the whole store: not kept
    assert len(store) == 2


def test_shared_prefix_generation_equals_reference(model_dir: Path) -> None:
    prompts = _verdict_prompts()[: len(CLAIMS)]  # one context: the whole batch shares it
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=10)) for p in prompts]
    judge = TransformersJudge(str(model_dir), batch_size=8)
    got = judge.generate(reqs)
    assert got == TransformersJudge(str(model_dir), batch_size=8, share_prefixes=False).generate(reqs)
    assert got == [(_greedy_reference(judge, r.prompt, 10),) for r in reqs]
    assert len({g[0] for g in got}) >= 2


def test_batch_order_puts_shared_prefixes_together(judge: TransformersJudge) -> None:
    prompts = _verdict_prompts()
    shuffled = prompts[::2] + prompts[1::2]  # alternating contexts
    reqs = [ScoreOptions(prompt=p) for p in shuffled]
    order = judge.batch_order(reqs)
    assert sorted(order) == list(range(len(reqs)))
    contexts = [next(c for c in CONTEXTS if c in reqs[i].prompt[-1][1]) for i in order]
    assert contexts == sorted(contexts, key=contexts.index)  # each context's prompts contiguous
    assert len(set(contexts[: len(CLAIMS)])) == 1


def test_packs_are_consecutive_runs_within_the_limit() -> None:
    from offline_eval.runtime.transformers_judge import packs

    assert packs([3, 4, 2, 9, 1, 1], limit=9) == [[0, 1, 2], [3], [4, 5]]
    assert packs([12, 2], limit=9) == [[0], [1]]  # a row longer than the limit runs alone
    assert packs([], limit=9) == []


def test_length_buckets_bound_padding() -> None:
    from offline_eval.runtime.transformers_judge import length_buckets

    lengths = [10, 100, 11, 12, 95, 50]
    buckets = length_buckets(list("abcdef"), lengths)
    assert sorted(x for b in buckets for x in b) == list("abcdef")
    size = dict(zip("abcdef", lengths))
    for bucket in buckets:
        padded = len(bucket) * max(size[x] for x in bucket)
        assert padded <= 1.25 * sum(size[x] for x in bucket)
    assert ["a", "c", "d"] in buckets and ["e", "b"] in buckets
    capped = length_buckets(list("abcdef"), lengths, limit=30)  # at most 30 positions a bucket
    assert ["a", "c"] in capped and ["d"] in capped and all(len(b) == 1 for b in capped if "d" not in b and "a" not in b)


def test_mixed_batch_is_stitched_from_groups_and_buckets(model_dir: Path) -> None:
    """Prompts of every kind in one batch: two shared-context groups, unrelated prompts of many
    lengths; each row's greedy output equals its own unbatched decoding."""
    from offline_eval.runtime.transformers_judge import prefix_groups

    prompts = _verdict_prompts()[::2] + PROMPTS  # 6 verdicts (2 contexts) + 8 unrelated
    judge = TransformersJudge(str(model_dir), batch_size=16)
    assert judge._ragged
    ids = [chat.encode_chat(judge.tokenizer, p) for p in prompts]
    assert sum(len(g) > 1 for g in prefix_groups(ids, 16)) >= 2
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=8)) for p in prompts]
    got = judge.generate(reqs)
    assert got == [(_greedy_reference(judge, r.prompt, 8),) for r in reqs]
    assert got == TransformersJudge(str(model_dir), batch_size=1).generate(reqs)


def test_sliding_window_models_take_one_padded_pass(tmp_path: Path) -> None:
    from transformers import LlamaConfig, MistralConfig, MistralForCausalLM

    from offline_eval.runtime.transformers_judge import _cache_is_plain

    assert _cache_is_plain(LlamaConfig(num_hidden_layers=2))
    assert not _cache_is_plain(MistralConfig(num_hidden_layers=2, sliding_window=64))
    tok = _build_tokenizer()
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                           sliding_window=64, initializer_range=0.2, bos_token_id=tok.bos_token_id,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    MistralForCausalLM(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    judge = TransformersJudge(str(tmp_path), batch_size=8)
    assert not judge._ragged
    reqs = [Generate(prompt=p, sampling=Sampling(max_tokens=6)) for p in PROMPTS[:4]]
    assert judge.generate(reqs) == [(_greedy_reference(judge, r.prompt, 6),) for r in reqs]


def _attention_inputs(dtype: torch.dtype, q_len: int, k_len: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(seed)
    query = torch.randn(1, 6, q_len, 16).to(dtype)  # 6 query heads over 2 key/value heads
    return query, torch.randn(1, 2, k_len, 16).to(dtype), torch.randn(1, 2, k_len, 16).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_exact_attention_equals_sdpa(dtype: torch.dtype) -> None:
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from offline_eval.runtime.batch_invariance import row_exact_attention

    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    query, key, value = _attention_inputs(dtype, 5, 12)
    query, key, value = query.expand(3, -1, -1, -1), key.expand(3, -1, -1, -1), value.expand(3, -1, -1, -1)
    mask = torch.ones(3, 1, 5, 12, dtype=torch.bool).tril(diagonal=12 - 5)
    mask[1, ..., :4] = False  # left padding
    mask[2, ..., 3:6] = False  # padding between a shared prefix and a tail
    tolerance = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 0.03, "rtol": 0.03}
    # No mask: transformers leaves it out only when every query sees every key before it (a square
    # causal block, or one query).
    for q, k, v, m in [(query, key, value, mask), (query, key[:, :, :5], value[:, :, :5], None),
                       (query[:, :, -1:], key, value, None)]:
        got, _ = row_exact_attention(module, q, k, v, m, scaling=0.25)
        want, _ = sdpa_attention_forward(module, q, k, v, m, scaling=0.25)
        assert got.shape == want.shape == (3, q.shape[2], 6, 16)
        torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.parametrize("float32", [False, True], ids=["bfloat16 products", "float32 products"])
def test_row_exact_attention_gives_a_row_the_same_bits_in_any_layout(float32: bool) -> None:
    """The batch around a sequence, its left padding, padding inside it and the masked keys after a
    query (a prefix computed apart from its tail) change no bit of its output (bfloat16, where one
    changed bit grows layer by layer), with the products in bfloat16 or in float32 blocks."""
    from types import SimpleNamespace

    from offline_eval.runtime.batch_invariance import FLOAT32_PRODUCTS, row_exact_attention

    module = SimpleNamespace(num_key_value_groups=3, **{FLOAT32_PRODUCTS: float32})
    for q_len, k_len in [(1, 37), (7, 40), (16, 300)]:
        query, key, value = _attention_inputs(torch.bfloat16, q_len, k_len)
        alone, _ = row_exact_attention(module, query, key, value, None, scaling=0.25)
        pad = 9
        noise = torch.randn(1, 2, pad, 16).to(torch.bfloat16)
        causal = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)
        layouts = {
            "left padding": (torch.cat([noise, key], 2), torch.cat([noise, value], 2),
                             torch.cat([torch.zeros(q_len, pad, dtype=torch.bool), causal], 1)),
            "padding inside": (torch.cat([key[:, :, :5], noise, key[:, :, 5:]], 2),
                               torch.cat([value[:, :, :5], noise, value[:, :, 5:]], 2),
                               torch.cat([causal[:, :5], torch.zeros(q_len, pad, dtype=torch.bool),
                                          causal[:, 5:]], 1)),
            "masked keys after": (torch.cat([key, noise], 2), torch.cat([value, noise], 2),
                                  torch.cat([causal, torch.zeros(q_len, pad, dtype=torch.bool)], 1)),
        }
        for name, (k, v, m) in layouts.items():
            other_q, other_k, other_v = _attention_inputs(torch.bfloat16, q_len, k.shape[2])
            batch_q = torch.cat([other_q * 2, query])
            batch_k, batch_v = torch.cat([other_k, k]), torch.cat([other_v, v])
            batch_m = torch.stack([torch.ones_like(m), m])[:, None]
            got, _ = row_exact_attention(module, batch_q, batch_k, batch_v, batch_m, scaling=0.25)
            assert torch.equal(got[1], alone[0]), (q_len, k_len, name)


def test_a_decoding_step_gives_every_row_the_bits_it_has_alone() -> None:
    """A decoding step attends for all rows in one set of products, each row's keys gathered to the front
    of whole blocks of keys: rows of 1 to 1,300 keys (one, two and three blocks) left-padded to the
    longest, with the shapes of the bench judge's heads (14 over 2, 64 wide), each give the bits the row
    gives alone, where it attends on its own."""
    from types import SimpleNamespace

    from offline_eval.runtime import batch_invariance
    from offline_eval.runtime.batch_invariance import row_exact_attention

    module = SimpleNamespace(num_key_value_groups=7)
    torch.manual_seed(5)
    lengths = [1, 40, 511, 512, 513, 700, 1024, 1300]
    width = max(lengths)
    query = torch.randn(len(lengths), 14, 1, 64).to(torch.bfloat16)
    key = torch.zeros(len(lengths), 2, width, 64, dtype=torch.bfloat16)
    value = torch.zeros_like(key)
    mask = torch.zeros(len(lengths), 1, 1, width, dtype=torch.bool)
    for r, n in enumerate(lengths):
        key[r, :, width - n:] = torch.randn(2, n, 64).to(torch.bfloat16) * 3
        value[r, :, width - n:] = torch.randn(2, n, 64).to(torch.bfloat16)
        mask[r, ..., width - n:] = True
    used = []
    batched = batch_invariance._attend_one_query_each
    batch_invariance._attend_one_query_each = lambda *a: used.append(1) or batched(*a)
    try:
        got, _ = row_exact_attention(module, query, key, value, mask, scaling=0.125)
    finally:
        batch_invariance._attend_one_query_each = batched
    assert used, "the rows must have been computed together"
    for r, n in enumerate(lengths):
        alone, _ = row_exact_attention(module, query[r:r + 1], key[r:r + 1, :, width - n:],
                                       value[r:r + 1, :, width - n:], None, scaling=0.125)
        assert torch.equal(got[r], alone[0]), n


def test_a_prompt_gives_the_same_bits_beside_one_sharing_part_of_its_prefix(tmp_path: Path) -> None:
    """A verdict's prompt in one pass has its first queries beside every later key, masked; computed
    beside a prompt sharing its first 138 tokens, that shared prefix runs alone, with no key after them.
    The product of attention weights and values then summed over 330 keys (the last ones weighted 0)
    and over 138 in other orders: P(Yes) 0.17039 alone, 0.17114 beside the credulity probe (and the
    empty statement's probe), for this
    verdict of the golden test's bfloat16 tiny judge (issue #33). Summed in fixed blocks of keys
    (batch_invariance.KEY_BLOCK), they agree to the bit."""
    from offline_eval.judging.verdicts import ABSURD_STATEMENT
    from offline_eval.prompts.ragas import ATTRIBUTION_OPTION, SUPPORT_OPTION
    from tests import tiny_models

    judge = TransformersJudge(str(tiny_models.build_judge(tmp_path / "judge")), batch_size=4, dtype="bfloat16")
    premise = "4.6. Meal allowances are capped at 45 EUR per day for domestic travel and 70 EUR per day abroad."
    verdict = ScoreOptions(prompt=ATTRIBUTION_OPTION.render(
        "en", premise=premise, question="What is the deadline for submitting a travel expense claim?",
        hypothesis="Within 30 days of the last day of the trip; a late claim is paid only with a director's "
                   "written approval."))
    probes = [ScoreOptions(prompt=SUPPORT_OPTION.render("en", premise=premise, hypothesis=text))
              for text in (ABSURD_STATEMENT["en"], " ", "Receipts are attached.")]
    alone = judge.score_options([verdict])[0]
    for probe in probes:
        assert judge.score_options([verdict, probe])[0] == alone


def test_linear_layers_take_a_single_row_as_two() -> None:
    """oneDNN sends a one-row bfloat16 product to a kernel that sums in another order; once patched,
    a row's output is the same alone as inside any batch."""
    from offline_eval.runtime.batch_invariance import _two_row_forward

    torch.manual_seed(0)
    linear = torch.nn.Linear(4864, 896, bias=False).to(torch.bfloat16)
    linear.forward = _two_row_forward(linear)
    for _ in range(20):
        x = torch.randn(5, 1, 4864).to(torch.bfloat16)
        x = torch.nn.functional.silu(x) * x  # what the MLP's down projection receives
        assert torch.equal(linear(x[:1]), linear(x)[:1])
        assert linear(x[0, 0]).shape == (896,)


def test_float32_block_linear_gives_a_row_the_same_bits_in_any_batch() -> None:
    """A bfloat16 linear layer computed in float32 (a CPU without bfloat16 kernels): a row's output is
    the same alone, in any number of rows and at any place among them, and within a bfloat16 rounding
    of the bfloat16 kernel's."""
    from offline_eval.runtime.batch_invariance import _float32_block_forward

    torch.manual_seed(0)
    for features, out in ((4864, 896), (896, 4864), (64, 24)):
        native = torch.nn.Linear(features, out, bias=out == 24).to(torch.bfloat16)
        linear = torch.nn.Linear(features, out, bias=out == 24).to(torch.bfloat16)
        linear.load_state_dict(native.state_dict())
        linear.forward = _float32_block_forward(linear, tied=False)
        assert linear.weight.dtype == torch.float32
        x = torch.randn(70, features).to(torch.bfloat16)
        whole = linear(x)
        assert whole.dtype == torch.bfloat16 and whole.shape == (70, out)
        for start, rows in ((0, 1), (3, 1), (5, 2), (16, 17), (0, 33), (40, 30)):
            assert torch.equal(linear(x[start:start + rows]), whole[start:start + rows]), (features, start, rows)
        assert torch.equal(linear(x[7]), whole[7])  # a vector, as a single decoding step gives it
        assert torch.allclose(whole.float(), native(x).float(), rtol=1e-2, atol=1e-2)


def test_float32_products_are_chosen_where_bfloat16_has_no_kernels(model_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a bfloat16 judge computes in float32 blocks only on a CPU without bfloat16 kernels,
    and its identity says so (its verdicts round otherwise, and are cached apart)."""
    from offline_eval.runtime import batch_invariance

    monkeypatch.setattr(batch_invariance, "bfloat16_has_kernels", lambda: False)
    emulated = TransformersJudge(str(model_dir), dtype="bfloat16")
    assert emulated.float32_matmuls and '"matmuls": "float32"' in emulated.identity
    assert not TransformersJudge(str(model_dir), dtype="float32").float32_matmuls
    monkeypatch.setattr(batch_invariance, "bfloat16_has_kernels", lambda: True)
    monkeypatch.setattr(batch_invariance, "bfloat16_rows_independent", lambda weights: False)
    blocked = TransformersJudge(str(model_dir), dtype="bfloat16")  # kernels that mix a row with its batch
    assert blocked.float32_matmuls and '"matmuls": "float32"' in blocked.identity
    monkeypatch.setattr(batch_invariance, "bfloat16_rows_independent", lambda weights: True)
    native = TransformersJudge(str(model_dir), dtype="bfloat16")
    assert not native.float32_matmuls and "matmuls" not in native.identity


def test_the_row_check_finds_what_this_cpus_bfloat16_products_do(model_dir: Path) -> None:
    """bfloat16_rows_independent against a direct look at this CPU's products for the judge's shapes: a
    row's bits at every row count from 2 to 40 (the check itself tries four); on a CPU where it says
    independent, no row count changes them (an AMX CPU blocks rows by their count: it says not)."""
    import torch

    from offline_eval.runtime import batch_invariance

    judge = TransformersJudge(str(model_dir), dtype="bfloat16", float32_matmuls=False)
    weights = list({tuple(m.weight.shape): m.weight for m in judge.model.modules()
                    if isinstance(m, torch.nn.Linear)}.values())
    x = torch.randn(40, max(w.shape[1] for w in weights), generator=torch.Generator().manual_seed(1))
    changed = any(not torch.equal(torch.nn.functional.linear(x[:rows, :w.shape[1]].bfloat16(), w)[:2],
                                  torch.nn.functional.linear(x[:2, :w.shape[1]].bfloat16(), w))
                  for w in weights for rows in range(3, 41))
    if batch_invariance.bfloat16_rows_independent(weights):
        assert not changed
    else:  # then a judge loaded with the defaults computes in float32 blocks
        assert batch_invariance.float32_matmuls_pay(judge.model)


def test_bfloat16_judge_in_float32_products_gives_the_same_bits_at_any_batch_size(model_dir: Path) -> None:
    """The judge's verdicts and greedy completions with its products in float32 blocks: equal to the
    last bit alone and in batches, and close to the bfloat16 kernels' verdicts."""
    prompts = _verdict_prompts() + PROMPTS
    options = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    gens = [Generate(prompt=p, sampling=Sampling(max_tokens=8)) for p in prompts]
    judge = TransformersJudge(str(model_dir), batch_size=1, dtype="bfloat16", float32_matmuls=True)
    alone_options, alone_text = judge.score_options(options), judge.generate(gens)
    for size in (3, 16):
        judge.batch_size = size
        assert judge.score_options(options) == alone_options
        assert judge.generate(gens) == alone_text
    native = TransformersJudge(str(model_dir), batch_size=16, dtype="bfloat16", float32_matmuls=False)
    for ours, theirs in zip(alone_options, native.score_options(options)):
        assert ours["Yes"] == pytest.approx(theirs["Yes"], abs=0.05)


def test_left_aligned_moves_padding_to_the_left() -> None:
    from offline_eval.runtime.transformers_judge import _cache_from_tensors, _cache_tensors, _left_aligned

    keys = torch.arange(2 * 1 * 6 * 1, dtype=torch.float32).view(2, 1, 6, 1)
    mask = torch.tensor([[1, 1, 0, 0, 1, 1], [0, 1, 1, 1, 1, 1]])
    cache, aligned = _left_aligned(_cache_from_tensors([(keys, keys + 100)]), mask)
    assert aligned.tolist() == [[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]]
    (k, v), = _cache_tensors(cache)
    assert k[0, 0, 2:, 0].tolist() == [0.0, 1.0, 4.0, 5.0]  # real positions kept in order
    assert torch.equal(k[1], keys[1]) and torch.equal(v, k + 100)


def test_left_padded_stacks_caches_of_several_widths_and_picks_rows() -> None:
    from offline_eval.runtime.transformers_judge import _left_padded

    long = torch.arange(1 * 2 * 3 * 1, dtype=torch.float32).view(1, 2, 3, 1) + 1  # one row, 3 positions
    short = torch.full((2, 2, 1, 1), 7.0)  # two rows, 1 position
    none = long[:1, :, :0]  # a row with no positions: all padding
    pick = torch.tensor([2, 0, 2, 3])
    (keys, values), = _left_padded([[(long, -long)], [(short, -short)], [(none, none)]], 3, pick)
    assert keys.shape == values.shape == (4, 2, 3, 1)
    assert keys[:, 0, :, 0].tolist() == [[0, 0, 7], [1, 2, 3], [0, 0, 7], [0, 0, 0]]  # padding on the left
    assert torch.equal(values, -keys)


def test_bfloat16_judge_gives_the_same_bits_at_any_batch_size(model_dir: Path) -> None:
    """Verdicts sharing contexts, scored one by one, in batches of 3 and all at once (shared prefixes,
    length buckets, stitched caches), and greedy completions: equal to the last bit in bfloat16."""
    prompts = _verdict_prompts() + PROMPTS
    options = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in prompts]
    gens = [Generate(prompt=p, sampling=Sampling(max_tokens=8)) for p in prompts]
    judge = TransformersJudge(str(model_dir), batch_size=1, dtype="bfloat16")
    alone_options, alone_text = judge.score_options(options), judge.generate(gens)
    for size in (3, 16):
        judge.batch_size = size
        assert judge.score_options(options) == alone_options
        assert judge.generate(gens) == alone_text
    assert len({round(r["Yes"], 6) for r in alone_options}) > 3
    assert len(set(alone_text)) > 3


def test_verdicts_on_the_boundary_are_recomputed_alone(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from offline_eval.runtime import batch_invariance
    from offline_eval.runtime.batch_invariance import on_boundary

    assert on_boundary({"Yes": 0.50004, "No": 0.49996}) and on_boundary(0.50004)
    assert not on_boundary({"Yes": 0.6, "No": 0.4}) and not on_boundary(0.6)
    assert not on_boundary({"Yes": 1.0})
    reqs = [ScoreOptions(prompt=p, options=("Yes", "No")) for p in _verdict_prompts()]
    judge = TransformersJudge(str(model_dir), batch_size=4)
    sizes: list[int] = []
    prefill = judge._prefill
    monkeypatch.setattr(judge, "_prefill", lambda seqs, keep_cache, kind: sizes.append(len(seqs)) or prefill(seqs, keep_cache, kind))
    monkeypatch.setattr(batch_invariance, "UNSURE_MARGIN", 2.0)  # every verdict counts as unsure
    got = judge.score_options(reqs)
    assert sizes.count(1) == len(reqs) and sizes.count(4) == math.ceil(len(reqs) / 4)
    judge.batch_size = 1
    assert got == judge.score_options(reqs)


def test_judge_uses_batch_invariant_kernels(judge: TransformersJudge) -> None:
    from offline_eval.runtime.batch_invariance import NAME

    assert judge.model.config.num_key_value_heads < judge.model.config.num_attention_heads
    assert judge.model.config._attn_implementation == NAME
