"""Which models a profile swaps out on the command line, and what run.json says of each (issue #55)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from offline_eval.runtime.model_info import model_details
from offline_eval.runtime.profiles import ProfileError, load_profile, profile_from_dict


def write_model(folder: Path, config: dict, tensor_dtype: str | None = None) -> Path:
    """A folder with a config.json and, when asked, a safetensors file holding one tensor of that dtype."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if tensor_dtype:
        header = json.dumps({"__metadata__": {}, "w": {"dtype": tensor_dtype, "shape": [1], "data_offsets": [0, 2]}})
        (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0\0")
    return folder


def test_a_judge_folder_from_the_command_line_leaves_the_limits_fitted_to_the_profiles_judge(tmp_path) -> None:
    starter = load_profile("starter", models_dir=tmp_path)
    assert starter.judge.options == {"dtype": "bfloat16", "max_model_len": 2048, "max_new_tokens": 192}
    swapped = starter.with_overrides(judge_path=tmp_path / "qwen")
    assert swapped.judge.options == {"dtype": "bfloat16"}
    assert swapped.judge.not_carried == {"max_model_len": 2048, "max_new_tokens": 192}
    assert swapped.swap_notes() == [
        f"judge {tmp_path / 'qwen'} replaces the starter profile's smollm2-135m-instruct: max_model_len=2048, "
        "max_new_tokens=192 (set for that model) not applied, the new model's own limits apply; kept: dtype=bfloat16"]
    assert swapped.swap_notes(["embedder"]) == []
    # the profile's own folder, named on the command line, is still the profile's model
    same = starter.with_overrides(judge_path=tmp_path / "smollm2-135m-instruct")
    assert same.judge.options == starter.judge.options and same.swap_notes() == []
    # the embedder's token limit goes with its model; HHEM's window is the method's, and stays
    cpu = profile_from_dict({
        "judge": {"backend": "transformers", "path": "j"}, "verifier": {"backend": "hhem", "path": "h",
                                                                        "options": {"max_length": 2048}},
        "embedder": {"backend": "sentence-transformers", "path": "e", "options": {"max_seq_length": 128}}},
        None, tmp_path)
    other = cpu.with_overrides(embedder_path=tmp_path / "e2", hhem_path=tmp_path / "h2")
    assert other.embedder.options == {} and other.embedder.not_carried == {"max_seq_length": 128}
    assert other.verifier.options == {"max_length": 2048} and other.verifier.not_carried == {}
    assert [note.split(" replaces")[0] for note in other.swap_notes()] == [f"verifier {tmp_path / 'h2'}",
                                                                          f"embedder {tmp_path / 'e2'}"]
    assert other.swap_notes()[0].endswith("kept: max_length=2048")


def test_the_name_is_the_manifests_else_its_repo_else_the_config_s_hub_id_else_the_folders(tmp_path) -> None:
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 8192}
    hub = write_model(tmp_path / "a", {**llama, "_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"})
    local = write_model(tmp_path / "b", {**llama, "_name_or_path": "/home/me/checkpoints/step-900"})

    def name(table: dict) -> str:
        spec = profile_from_dict({"judge": {"backend": "transformers", **table}, "verifier": {"backend": "judge"},
                                  "embedder": {"backend": "hashing"}}, None, tmp_path).judge
        return model_details(spec, "id", device=None, profile="p")["name"]

    assert name({"path": str(hub), "name": "SmolLM2", "repo": "org/x"}) == "SmolLM2"
    assert name({"path": str(hub), "repo": "org/x"}) == "org/x"
    assert name({"path": str(hub)}) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert name({"path": str(local)}) == "b"
    with pytest.raises(ProfileError, match="name must be a string"):
        name({"path": str(hub), "name": 3})


@pytest.mark.parametrize(("backend", "options", "device", "stored", "dtype"), [
    ("transformers", {}, None, "BF16", "float32"),  # "auto" on a CPU is float32
    ("transformers", {}, "cuda:0", "BF16", "bfloat16"),  # on a GPU the checkpoint's own
    ("transformers", {"dtype": "bf16"}, None, "F32", "bfloat16"),  # the profile's, by torch's name
    ("vllm", {}, "cuda:0", "F32", "float16"),
    ("vllm", {}, "cuda:0", None, "auto"),  # no config dtype, no safetensors: unknown
])
def test_the_dtype_recorded_is_the_one_the_backend_computes_in(tmp_path, backend, options, device, stored,
                                                               dtype) -> None:
    folder = write_model(tmp_path / "m", {"model_type": "qwen2", "max_position_embeddings": 32768}, stored)
    spec = profile_from_dict({"judge": {"backend": backend, "path": str(folder), "options": options},
                              "verifier": {"backend": "judge"}, "embedder": {"backend": "hashing"}}, None, tmp_path).judge
    details = model_details(spec, "judge:x", device=device, profile="p")
    assert details["dtype"] == dtype and details["folder"] == str(folder)
    assert details["limits"]["max_model_len"] == {"value": 32768, "from": "model config"}


def test_hhem_raises_a_float16_checkpoint_to_float32_and_the_config_dtype_comes_first(tmp_path) -> None:
    spec = profile_from_dict({"judge": {"backend": "transformers", "path": "j"},
                              "verifier": {"backend": "hhem", "path": str(write_model(tmp_path / "h", {}, "F16"))},
                              "embedder": {"backend": "sentence-transformers", "path": str(
                                  write_model(tmp_path / "e", {"torch_dtype": "bfloat16"}, "F32"))}},
                             None, tmp_path)
    assert model_details(spec.verifier, "v", device=None, profile="p")["dtype"] == "float32"
    embedder = model_details(spec.embedder, "e", device=None, profile="p")
    assert embedder["dtype"] == "bfloat16"
    assert embedder["limits"] == {"max_seq_length": {"value": None, "from": "not set"}}


def test_options_a_backend_chosen_on_the_command_line_does_not_take_are_named(tmp_path) -> None:
    starter = load_profile("starter", models_dir=tmp_path)
    on_vllm = starter.with_overrides(judge_backend="vllm")
    assert on_vllm.judge.options == {"dtype": "bfloat16", "max_model_len": 2048}  # the same folder: its limit stays
    assert on_vllm.judge.not_taken == {"max_new_tokens": 192}
    assert on_vllm.swap_notes() == ["the vllm judge does not take the starter profile's max_new_tokens=192: "
                                    "not applied"]
    assert model_details(on_vllm.judge, "j", device="cuda", profile="starter")["not_taken"] == {"max_new_tokens": 192}
    assert starter.swap_notes() == [] and starter.with_overrides(judge_backend="transformers").swap_notes() == []
