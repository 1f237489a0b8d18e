"""The `run` command's own behaviour: TOML config, bad-input message, the --fail-under gate."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from offline_eval.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def test_settings_come_from_a_toml_config_and_flags_win(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{EXAMPLES}"\nmetrics = "rouge_l,answer_similarity"\n'
                      f'output = "{tmp_path / "from-config"}"\nno_cache = true\nquiet = true\n'
                      'embedder_backend_unused = 1\n', encoding="utf-8")
    # An unknown key is refused with its name (test_an_unknown_config_key_is_bad_input: one line, exit 2).
    assert main(["run", "--config", str(config)]) == 2
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
    (["--metrics", "rouge_l,bad\x1b[2J\nname"], "unknown metric(s) bad\\x1b[2J\\nname; known:"),  # echoed escaped
    (["--fail-under", "bad\x1b[2J=0.5", "--metrics", "rouge_l"], "--fail-under names bad\\x1b[2J, not"),
])
def test_bad_flags_fail_with_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, extra, message):
    import torch

    from offline_eval.engine.models import Models

    if "--device" in extra and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")

    def no_loading(self, role):
        raise AssertionError(f"the {role} model was loaded")

    monkeypatch.setattr(Models, "get", no_loading)
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

    repo = Path(__file__).resolve().parents[2]
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


def test_a_config_file_value_gets_the_flags_own_check(tmp_path, capsys):
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{EXAMPLES}"\nbaseline_weight = 2.0\n', encoding="utf-8")
    assert main(["run", "--config", str(config)]) == 2
    assert "baseline_weight: expected a number from 0 to 1, got 2" in capsys.readouterr().err
    config.write_text(f'dataset = "{EXAMPLES}"\nbatch_size = 0\n', encoding="utf-8")
    assert main(["run", "--config", str(config)]) == 2
    assert "batch_size: expected a whole number >= 1, got 0" in capsys.readouterr().err


# -- issue #33: a --config file is read as strictly as the flags; --device, --metrics, the cache ------
MODEL_FREE = ["--dataset", str(EXAMPLES), "--metrics", "rouge_l", "--no-cache", "--quiet", "--no-report"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("line, message", [
    ('threads = "abc"', "threads: expected auto or a number, got 'abc'"),
    ("threads = 0", "threads: expected auto or a number >= 1, got 0"),
    ("batch_size = true", "batch_size: --batch-size takes no true/false, got true"),
    ("window = 2.5", "window: expected a whole number, got '2.5'"),
    ('language = "fr"', "language: expected one of en, zh, got 'fr'"),
    ('verdicts = "maybe"', "verdicts: expected one of options, generate, got 'maybe'"),
    ('quiet = "false"', "quiet: expected true or false, got 'false'"),
    ('device = "mps"', "device: expected cpu, cuda or cuda:N, got 'mps'"),
    ('weights = "rouge_l"', "weights: expected name=weight, got 'rouge_l'"),
    ('answer-relevancy-n = 0', "answer-relevancy-n: expected a whole number >= 1, got 0"),
    ("judge = [[1]]", "judge: expected text or a number, got [[1]]"),
    ("metrics = 5", 'metrics: expected metric names, a list of strings (["faithfulness", "rouge_l"]) or one '
                    'string ("faithfulness,rouge_l"), got the number 5'),
    ("metrics = [1, 2]", "metrics: expected metric names, a list of strings"),
    ("weights = {rouge_l = nan}", "weights: rouge_l=nan: a weight must be a finite number >= 0, got nan"),
    ("weights = {rouge_l = inf}", "weights: rouge_l=inf: a weight must be a finite number >= 0, got inf"),
    ("weights = {rouge_l = 0}", "weights: rouge_l=0: at least one weight must be above 0"),
    ("weights = {faithfulness = 1.0}", "weights: --weights faithfulness=1: faithfulness is not among this run's "
                                       "metrics (rouge_l)"),
    ("answer_correctness_weights = [0, 0]", "answer_correctness_weights: 0,0: at least one weight must be above 0"),
    ('answer_correctness_weights = "nan,1"', "answer_correctness_weights: expected finite numbers"),
])
def test_every_config_key_gets_its_flags_parsing_and_checks(tmp_path, capsys, line, message):
    """A key goes through its flag's type and choices, whatever the TOML type of its value; a bad value
    is one line naming the file and the key, exit 2, before anything runs."""
    config = tmp_path / "eval.toml"
    config.write_text(line + "\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", *MODEL_FREE, "--output", str(out), "--config", str(config)]) == 2
    err = _one_line(capsys)
    assert f"{config}: {message}" in err, err
    assert not out.exists()


def test_a_config_file_sets_threads_and_a_flag_given_still_wins(tmp_path):
    """`threads = 1` was hidden by --threads' default ("auto"): a flag left out now holds None."""
    config = tmp_path / "eval.toml"
    config.write_text("threads = 1\ncontext_window = 50\n", encoding="utf-8")
    assert main(["run", *MODEL_FREE, "--output", str(tmp_path / "file"), "--config", str(config)]) == 0
    run = json.loads((tmp_path / "file" / "run.json").read_text())
    assert run["threads"]["mode"] == "fixed" and run["threads"]["threads"] == 1
    assert run["settings"]["context_window"] == 50
    # flags given win, also when they hold what a default would (auto) or a false-like value (0)
    assert main(["run", *MODEL_FREE, "--output", str(tmp_path / "flags"), "--config", str(config),
                 "--threads", "auto", "--context-window", "0"]) == 0
    run = json.loads((tmp_path / "flags" / "run.json").read_text())
    assert run["threads"]["mode"] == "auto" and run["settings"]["context_window"] == 0


def test_every_run_setting_defaults_to_none_so_a_config_file_can_set_it():
    """merge_config tells a flag left out by its None (False for a switch): a default would hide
    the file's value, as "auto" hid `threads`."""
    from offline_eval.cli import build_parser

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    for action in run._actions:
        if action.option_strings and action.dest != "help":
            assert action.default is (False if action.nargs == 0 else None), (action.dest, action.default)


def test_config_lists_tables_and_a_single_repeatable_value(tmp_path, capsys):
    """A list is the flag's comma-separated text, a table its name=value items; a repeatable flag
    (--plugin, --calibration) takes one value or a list."""
    plugin = tmp_path / "words.py"
    plugin.write_text("from offline_eval.metrics import register_metric\n"
                      "from offline_eval.metrics.base import Metric, Score\n\n\n"
                      "@register_metric\nclass Words(Metric):\n    name = 'config_words'\n"
                      "    requires = ('answer',)\n\n    def score(self, sample, ctx):\n"
                      "        return Score(float(len(sample.answer.split())))\n", encoding="utf-8")
    config = tmp_path / "eval.toml"
    config.write_text(f'plugin = "{plugin}"\nmetrics = ["rouge_l", "config_words", "aggregate"]\n'
                      "weights = {rouge_l = 2.0}\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(EXAMPLES), "--no-cache", "--quiet", "--no-report", "--output", str(out),
                 "--config", str(config)]) == 0, capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert list(json.loads((out / "summary.json").read_text())["metrics"]) == ["rouge_l", "config_words", "aggregate"]
    assert run["settings"]["aggregate_weights"] == {"rouge_l": 2.0}


def test_an_unknown_config_key_is_bad_input(tmp_path, capsys):
    config = tmp_path / "eval.toml"
    config.write_text("metrics = \"rouge_l\"\nno_such_setting = 1\n", encoding="utf-8")
    assert main(["run", "--dataset", str(EXAMPLES), "--config", str(config)]) == 2
    err = _one_line(capsys)
    assert str(config) in err and "unknown setting 'no_such_setting'" in err
    config.write_text("metrics = \n", encoding="utf-8")  # not TOML
    assert main(["run", "--dataset", str(EXAMPLES), "--config", str(config)]) == 2
    assert f"cannot read config {config}" in _one_line(capsys)


@pytest.mark.parametrize("device", ["mps", "tpu", "xla", "cuda:x", "cuda0", "auto", "CPU"])
def test_a_device_no_backend_runs_on_is_refused_naming_the_flag(tmp_path, capsys, device):
    """Refused up front even when no model loads (it was accepted and recorded); through the API too."""
    from offline_eval.run.config import RunConfig, build_run
    from offline_eval.run.model_choice import ModelChoice

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        main(["run", *MODEL_FREE, "--output", str(out), "--device", device])
    assert stop.value.code == 2 and not out.exists()
    assert f"argument --device: expected cpu, cuda or cuda:N, got '{device}'" in capsys.readouterr().err
    for metrics in (["rouge_l"], ["faithfulness"]):  # a model-free run and one whose models would load
        with pytest.raises(ValueError, match=r"^--device: expected cpu, cuda or cuda:N"):
            build_run(RunConfig(metrics=metrics, models=ModelChoice(profile="starter", device=device)))


def test_a_cuda_device_is_checked_only_where_a_model_runs_on_it(tmp_path, capsys):
    """Chosen for issue #33: a run no model takes part in accepts --device cuda:0 on a machine without
    CUDA (one command line serves both machines); a run whose models would load refuses it (above)."""
    import torch

    from offline_eval.run.config import check_device

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    check_device("cuda:0", used=False)
    with pytest.raises(ValueError, match="--device cuda:1: no CUDA device here"):
        check_device("cuda:1")
    assert main(["run", *MODEL_FREE, "--output", str(tmp_path / "run"), "--device", "cuda:0"]) == 0


@pytest.mark.parametrize("value", ["", " ", ",", " , ,"])
def test_an_empty_metric_list_is_refused_not_read_as_the_default_five(tmp_path, capsys, value):
    from offline_eval.run.config import RunConfig, build_run

    with pytest.raises(SystemExit) as stop:
        main(["run", "--dataset", str(EXAMPLES), "--no-cache", "--output", str(tmp_path / "run"), "--metrics", value])
    assert stop.value.code == 2
    assert "argument --metrics: expected metric names separated by commas" in capsys.readouterr().err
    for metrics in ([], ["aggregate"]):  # the API: only None means the default five
        with pytest.raises(ValueError, match="--metrics names no metric"):
            build_run(RunConfig(metrics=metrics))


def test_metric_option_flags_read_their_values_by_the_option_s_type():
    """Metric.Options fields become run flags whose values are checked by the field's type."""
    import argparse
    import dataclasses

    from offline_eval.options import value_reader

    @dataclasses.dataclass(frozen=True)
    class Options:
        strict: bool = False
        n: int = dataclasses.field(default=3, metadata={"minimum": 1})
        weights: tuple[float, float] = (0.75, 0.25)
        label: str = "x"

    fields = {f.name: f for f in dataclasses.fields(Options)}
    types = {name: value_reader(kind, fields[name])[0] for name, kind in
             {"strict": bool, "n": int, "weights": tuple[float, float], "label": str}.items()}
    assert types["strict"]("yes") is True and types["strict"]("False") is False
    assert types["n"]("2") == 2 and types["weights"]("1,0") == (1.0, 0.0) and types["label"]("a b") == "a b"
    for name, bad in (("strict", "maybe"), ("n", "0"), ("weights", "1,2,3")):
        with pytest.raises(argparse.ArgumentTypeError):
            types[name](bad)


# -- weights, of the aggregate and of answer_correctness: checked before any model loads ---------------
def _refused_before_loading(argv, capsys, monkeypatch) -> str:
    """The last line of a run refused with exit 2 before any model loaded and before its folder was made:
    argparse's error (after its usage) for a flag's own reading, else the run's one line."""
    from offline_eval.engine.models import Models

    def no_loading(self, role):
        raise AssertionError(f"the {role} model was loaded")

    monkeypatch.setattr(Models, "get", no_loading)
    try:
        rc = main(argv)
    except SystemExit as stop:
        rc = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 or err[-1].startswith("offline-eval run: error: argument "), err
    return err[-1]


@pytest.mark.parametrize("weights, message", [
    ("rouge_l=inf", "argument --weights: rouge_l=inf: a weight must be a finite number >= 0, got inf"),
    ("rouge_l=nan", "argument --weights: rouge_l=nan: a weight must be a finite number >= 0, got nan"),
    ("rouge_l=-1", "argument --weights: rouge_l=-1: a weight must be a finite number >= 0, got -1"),
    ("rouge_l=0", "argument --weights: rouge_l=0: at least one weight must be above 0"),
    ("rouge_l=0,answer_similarity=0", "at least one weight must be above 0"),
    ("rouge_l=x", "argument --weights: expected name=weight with a number, got 'rouge_l=x'"),
    ("faithfulness=1", "--weights faithfulness=1: faithfulness is not among this run's metrics (rouge_l, "
                       "answer_similarity); weigh one of them or add it to --metrics"),
])
def test_aggregate_weights_are_checked_before_any_model_loads(tmp_path, capsys, monkeypatch, weights, message):
    """An infinite weight stopped the run once every row was scored, keeping nothing; a NaN one was
    written into run.json and summary.json (no longer JSON); a zero, a negative one or one for a metric
    not in the run left the aggregate unscored on every row, blaming the metrics."""
    out = tmp_path / "run"
    err = _refused_before_loading(["run", "--dataset", str(EXAMPLES), "--profile", "starter", "--metrics",
                                   "rouge_l,answer_similarity,aggregate", "--weights", weights, "--no-cache",
                                   "--quiet", "--no-report", "--output", str(out)], capsys, monkeypatch)
    assert message in err, err
    assert not out.exists()


@pytest.mark.parametrize("weights, message", [
    ("nan,1", "expected finite numbers separated by commas, got 'nan,1'"),
    ("inf,1", "expected finite numbers separated by commas, got 'inf,1'"),
    ("0,0", "0,0: at least one weight must be above 0"),
    ("-1,5", "-1,5: a weight must be a finite number >= 0, got -1"),
])
def test_answer_correctness_weights_are_checked_before_any_model_loads(tmp_path, capsys, monkeypatch,
                                                                       weights, message):
    """Each was accepted, then every row went unscored with a ValueError or a ZeroDivisionError and its
    traceback (or, for -1,5, scored outside 0 to 1)."""
    out = tmp_path / "run"
    err = _refused_before_loading(["run", "--dataset", str(EXAMPLES), "--profile", "starter", "--metrics",
                                   "answer_correctness", f"--answer-correctness-weights={weights}", "--no-cache",
                                   "--quiet", "--no-report", "--output", str(out)], capsys, monkeypatch)
    assert f"argument --answer-correctness-weights: {message}" in err, err
    assert not out.exists()


def test_the_api_s_weights_are_checked_as_the_flags_are():
    from offline_eval.run.config import RunConfig, build_run

    nan = float("nan")
    for options, match in (({"answer_correctness_weights": (nan, 1.0)}, "^--answer-correctness-weights"),
                           ({"answer_correctness_weights": (0.0, 0.0)}, "at least one weight must be above 0"),
                           ({"weights": {"rouge_l": nan}}, r"^--weights rouge_l=nan: a weight must be a finite"),
                           ({"weights": {"rouge_l": -1.0}}, r"^--weights rouge_l=-1"),
                           ({"weights": {"rouge_l": 0.0}}, r"^--weights rouge_l=0: at least one weight"),
                           ({"weights": {"faithfulness": 1.0}}, "faithfulness is not among this run's metrics")):
        with pytest.raises(ValueError, match=match):
            build_run(RunConfig(metrics=["rouge_l", "answer_correctness", "aggregate"], options=options))


def test_fail_under_s_help_says_a_lower_is_better_metric_fails_above_its_threshold():
    """The gate is mean >= threshold for a higher-is-better metric and mean <= threshold for a
    lower-is-better one (report.gating); the help said "below its minimum" for both."""
    from offline_eval.cli import build_parser

    run = build_parser()._subparsers._group_actions[0].choices["run"]
    [action] = [a for a in run._actions if "--fail-under" in a.option_strings]
    assert "below its minimum" not in action.help
    assert "lower-is-better" in action.help and "hallucination_rate=0.2 needs a mean <= 0.2" in action.help
    assert "faithfulness=0.8 needs a mean >= 0.8" in action.help


def test_skip_bad_rows_with_every_row_bad_is_one_line_listing_the_skipped_rows(tmp_path, capsys):
    data = tmp_path / "allbad.jsonl"
    data.write_text('{"id": "a", "answer": true}\nnot json\n', encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--metrics", "rouge_l", "--skip-bad-rows", "--no-cache", "--quiet",
                 "--output", str(out)]) == 2
    err = _one_line(capsys)
    assert f"{data}: all 2 rows were skipped as bad (--skip-bad-rows)" in err, err
    assert "row 1, field 'answer'" in err and "row 2: invalid JSON" in err and "empty" not in err
    assert not out.exists()


def test_a_value_the_run_refuses_names_the_config_key_by_its_flag_not_by_its_wording(tmp_path):
    """The flag travels with the error (FlagError), so a message worded any way still names the key, and
    a message that merely starts with a flag-like word is not mistaken for one."""
    from offline_eval.cli.run import _from_config
    from offline_eval.options import FlagError

    args = argparse.Namespace(config=tmp_path / "eval.toml", config_keys={"fail_under": "fail-under"})
    named = _from_config(FlagError("--fail-under", "a metric named there is not in this run"), args)
    assert str(named) == f"{tmp_path / 'eval.toml'}: fail-under: a metric named there is not in this run"
    plain = ValueError("--fail-under is how the line starts, but no flag was refused")
    assert _from_config(plain, args) is plain
    typed = FlagError("--device", "--device cuda:3: this machine has 0 CUDA device(s)")
    assert _from_config(typed, args) is typed  # the file did not give --device: the flag was typed
