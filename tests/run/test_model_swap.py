"""A model given on the command line runs with its own limits, and every run names its models (issue #55)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.report._run import e
from tests import tiny_models

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"
TIGHT = '[judge.options]\ndtype = "float32"\nmax_model_len = 64\nmax_new_tokens = 4\n'


@pytest.fixture(scope="module")
def tight_profile(tiny_profile: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny profile with limits fitted to its judge far below the tiny judge's (a 4,096-token context),
    and another judge whose config allows 8,192 positions."""
    root = tmp_path_factory.mktemp("swap")
    text = tiny_profile.read_text(encoding="utf-8")
    assert '[judge.options]\ndtype = "float32"\n' in text
    manifest = root / "tight.toml"
    manifest.write_text(text.replace('[judge.options]\ndtype = "float32"\n', TIGHT)
                        .replace('backend = "transformers"\n', 'backend = "transformers"\nname = "Tiny-Judge"\n'),
                        encoding="utf-8")
    return manifest, tiny_models.build_judge(root / "longer-judge", seed=7, max_position_embeddings=8192)


def test_a_judge_given_with_judge_runs_with_its_own_limits_and_says_so(tight_profile, tmp_path, capsys):
    manifest, longer = tight_profile
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(manifest), "--judge", str(longer),
                 "--limit", "2", "--metrics", "faithfulness", "--verifier", "judge", "--max-tokens", "8",
                 "--no-cache", "--quiet", "--threads", "1", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if "replaces the tiny profile's" in line)
    assert "max_model_len=64, max_new_tokens=4 (set for that model) not applied" in note
    assert "kept: dtype=float32" in note

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    reasons = [str(row["scores"]["faithfulness"].get("reason")) for row in rows]
    assert not any("max_model_len" in reason for reason in reasons), reasons  # no prompt refused as too long

    info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    judge = info["model_details"]["judge"]
    assert judge["identity"] == info["models"]["judge"]
    assert judge["name"] == "longer-judge" and judge["folder"] == str(longer) and judge["dtype"] == "float32"
    assert judge["architecture"] == "llama (LlamaForCausalLM)"
    assert judge["limits"] == {"max_model_len": {"value": 8192, "from": "model config"},
                               "max_new_tokens": {"value": None, "from": "not set"}}
    assert judge["not_carried"] == {"options": {"max_model_len": 64, "max_new_tokens": 4},
                                    "set_for": tight_profile_judge(manifest)}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["run"]["model_details"] == info["model_details"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "<b>longer-judge</b> float32 · max_model_len 8192 (model config)" in report
    assert "not applied: max_model_len=64, max_new_tokens=4" in report and e(info["models"]["judge"]) in report


def tight_profile_judge(manifest: Path) -> str:
    """The judge folder the manifest names (the tiny profile's, built elsewhere)."""
    import tomllib

    return tomllib.loads(manifest.read_text(encoding="utf-8"))["judge"]["path"]


def test_the_profiles_own_judge_keeps_the_profiles_limits_and_its_name(tight_profile, tmp_path, capsys):
    manifest, _ = tight_profile
    from offline_eval.run.config import configure_models
    from offline_eval.run.model_choice import ModelChoice

    models = configure_models(ModelChoice(profile=str(manifest)), {"judge"})
    judge = models.details["judge"]
    assert judge["name"] == "Tiny-Judge" and judge["dtype"] == "float32" and "not_carried" not in judge
    assert judge["limits"]["max_model_len"] == {"value": 64, "from": "profile tiny"}
    assert "replaces" not in capsys.readouterr().err
    loaded = models.get("judge")
    assert (loaded.max_model_len, loaded.max_new_tokens) == (64, 4)
