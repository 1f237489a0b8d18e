"""The `run` command's own behaviour: TOML config, bad-input message, the --fail-under gate."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from offline_eval.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sample.jsonl"


def test_settings_come_from_a_toml_config_and_flags_win(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{EXAMPLES}"\nmetrics = "rouge_l,answer_similarity"\n'
                      f'output = "{tmp_path / "from-config"}"\nno_cache = true\nquiet = true\n'
                      'embedder_backend_unused = 1\n', encoding="utf-8")
    # An unknown key is refused with its name.
    try:
        main(["run", "--config", str(config)])
    except SystemExit as exc:
        assert "embedder_backend_unused" in str(exc)
    else:
        raise AssertionError("an unknown config key was accepted")
    config.write_text(config.read_text().replace("embedder_backend_unused = 1\n", ""), encoding="utf-8")
    assert main(["run", "--config", str(config), "--metrics", "rouge_l", "--no-report"]) == 0
    summary = json.loads((tmp_path / "from-config" / "summary.json").read_text())
    assert list(summary["metrics"]) == ["rouge_l"]  # the flag beat the file's metrics
    assert summary["run"]["n_samples"] == 12


def test_bad_input_is_one_line_naming_row_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a", "contexts": ["c"]}\n'
                   '{"question": "q2", "answer": "a2", "contexts": 7}\n', encoding="utf-8")
    assert main(["run", "--dataset", str(bad), "--metrics", "rouge_l", "--no-cache", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "row 2" in err[0] and "contexts" in err[0] and "bad.jsonl" in err[0]


def test_fail_under_sets_the_exit_code(tmp_path, capsys):
    common = ["run", "--dataset", str(EXAMPLES), "--metrics", "rouge_l", "--no-cache", "--quiet", "--no-report"]
    assert main(common + ["--output", str(tmp_path / "a"), "--fail-under", "rouge_l=0.01"]) == 0
    assert main(common + ["--output", str(tmp_path / "b"), "--fail-under", "rouge_l=0.99"]) == 3
    assert "rouge_l" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--device", "cuda:0"], "--device cuda:0: no CUDA device here"),
    (["--fail-under", "rouge_l"], "bad threshold 'rouge_l'"),
    (["--fail-under", "faithfulness=0.5", "--metrics", "rouge_l"], "--fail-under names faithfulness"),
])
def test_bad_flags_fail_with_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, extra, message):
    import torch

    from offline_eval.engine.models import ModelSet

    if "--device" in extra and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")

    def no_loading(self, role):
        raise AssertionError(f"the {role} model was loaded")

    monkeypatch.setattr(ModelSet, "get", no_loading)
    out = tmp_path / "run"
    rc = main(["run", "--dataset", str(EXAMPLES), "--profile", "starter", "--quiet", "--no-report",
               "--output", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_help_states_each_default_once():
    from offline_eval.cli import build_parser

    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        text = sub.format_help()
        assert "(default: None)" not in text, name
        assert "(default: False)" not in text, name
        for action in sub._actions:
            if action.option_strings and action.help not in (None, argparse.SUPPRESS):
                assert action.help.count("default") <= 1, (name, action.option_strings)


def test_quiet_run_prints_only_offline_evals_own_lines(tiny_profile, tmp_path):
    """No progress bar or warning from transformers or the hub with --quiet (issue #19)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "offline_eval.cli", "run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile),
         "--limit", "2", "--metrics", "faithfulness,answer_similarity", "--max-tokens", "8", "--quiet",
         "--no-cache", "--no-report", "--output", str(tmp_path / "run"), "--threads", "1"],
        capture_output=True, text=True, cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert "\r" not in text and "%|" not in text and "Loading" not in text, text
    assert "warn" not in text.lower(), text
    assert "results: " in done.stderr and "faithfulness" in done.stdout


def test_skip_bad_rows_scores_the_rest_and_lists_each_skipped_row(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "question": "q", "answer": "a b", "ground_truth": "a c"}\n'
                    '{"id": "b", "question": "q", "answer": "a" "x"}\n'
                    '{"id": "a", "question": "q2", "answer": "z", "ground_truth": "z"}\n'
                    '{"id": "c", "question": "q", "answer": "a b", "ground_truth": "a b"}\n')
    args = ["run", "--dataset", str(data), "--profile", "starter", "--metrics", "rouge_l", "--quiet", "--no-cache"]
    assert main(args + ["--output", str(tmp_path / "strict")]) == 2  # strict by default
    assert "row 2: invalid JSON on line 2" in capsys.readouterr().err
    assert main(args + ["--output", str(tmp_path / "run"), "--skip-bad-rows"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["n_samples"] == 2
    assert [(s["row"], s["reason"].split(": ", 1)[1][:20]) for s in summary["run"]["skipped_rows"]] == \
        [(2, "invalid JSON on line"), (3, "duplicate id 'a' (fi")]
    assert "skipped rows" in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("flag", ["--batch-size", "--window", "--limit", "--max-tokens", "--judge-batch-size"])
def test_sizes_below_one_are_refused_naming_the_flag(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--dataset", str(EXAMPLES), flag, "0"])
    assert stop.value.code == 2
    assert f"argument {flag}: expected a whole number >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["1.5", "-0.1", "half"])
def test_a_baseline_weight_outside_zero_to_one_is_refused(value, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--dataset", str(EXAMPLES), "--baseline-weight", value])
    assert stop.value.code == 2
    assert "argument --baseline-weight: expected a number from 0 to 1" in capsys.readouterr().err


def test_a_config_file_value_gets_the_flags_own_check(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{EXAMPLES}"\nbaseline_weight = 2.0\n', encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main(["run", "--config", str(config)])
    assert "baseline_weight: expected a number from 0 to 1, got 2" in str(stop.value)
    config.write_text(f'dataset = "{EXAMPLES}"\nbatch_size = 0\n', encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main(["run", "--config", str(config)])
    assert "batch_size: expected a whole number >= 1, got 0" in str(stop.value)


def test_metric_option_flags_read_their_values_by_the_option_s_type():
    """Metric.Options fields become run flags whose values are checked by the field's type."""
    import argparse
    import dataclasses

    from offline_eval.cli import _option_type

    @dataclasses.dataclass(frozen=True)
    class Options:
        strict: bool = False
        n: int = dataclasses.field(default=3, metadata={"minimum": 1})
        weights: tuple[float, float] = (0.75, 0.25)
        label: str = "x"

    fields = {f.name: f for f in dataclasses.fields(Options)}
    types = {name: _option_type(kind, fields[name]) for name, kind in
             {"strict": bool, "n": int, "weights": tuple[float, float], "label": str}.items()}
    assert types["strict"]("yes") is True and types["strict"]("False") is False
    assert types["n"]("2") == 2 and types["weights"]("1,0") == (1.0, 0.0) and types["label"]("a b") == "a b"
    for name, bad in (("strict", "maybe"), ("n", "0"), ("weights", "1,2,3")):
        with pytest.raises(argparse.ArgumentTypeError):
            types[name](bad)
