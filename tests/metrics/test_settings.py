"""Judging settings declared once: each EvalSettings field makes its flags, its TOML key, its API keyword
and, where it changes values, its place in a calibration's signature."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offline_eval.people.calibration import settings_signature
from offline_eval.cli import build_parser, main
from offline_eval.judging.settings import EvalSettings

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sample.jsonl"

# A setting added to the declaration and nowhere else: the script below looks for it everywhere.
PROBE = '''
    probe_margin: float = setting(0.25, changes_values=True, parse=unit_fraction, metavar="M",
                                  help="a setting declared in this one place")
'''
PROBE_CHECKS = '''
import json, sys
from pathlib import Path

import offline_eval
from offline_eval.people.calibration import settings_signature
from offline_eval.cli import build_parser, main
from offline_eval.judging.settings import EvalSettings

examples, work = sys.argv[1], Path(sys.argv[2])
free = ["--dataset", examples, "--metrics", "rouge_l", "--no-cache", "--quiet", "--no-report"]
commands = build_parser()._subparsers._group_actions[0].choices
for command in ("run", "agreement", "calibrate"):  # the flag
    action = next(a for a in commands[command]._actions if a.dest == "probe_margin")
    assert action.option_strings == ["--probe-margin"] and "declared in this one place" in action.help, command
    assert "(default 0.25)" in action.help and action.default is None, action.help

assert main(["run", *free, "--output", str(work / "flag"), "--probe-margin", "0.5"]) == 0
assert json.loads((work / "flag" / "run.json").read_text())["settings"]["probe_margin"] == 0.5

config = work / "eval.toml"  # the TOML key, read as strictly as the flag
config.write_text("probe_margin = 0.75\\n", encoding="utf-8")
assert main(["run", *free, "--output", str(work / "toml"), "--config", str(config)]) == 0
assert json.loads((work / "toml" / "run.json").read_text())["settings"]["probe_margin"] == 0.75
config.write_text("probe_margin = 2\\n", encoding="utf-8")
assert main(["run", *free, "--output", str(work / "bad"), "--config", str(config)]) == 2

rows = [{"question": "Where?", "answer": "In Paris.", "ground_truth": "Paris."}]  # the API keyword
result = offline_eval.evaluate(rows, ["rouge_l"], probe_margin=0.125, cache=False)
assert result.run["settings"]["probe_margin"] == 0.125

assert settings_signature(EvalSettings(probe_margin=0.125))["probe_margin"] == 0.125  # it changes values
print("found everywhere")
'''


def test_a_setting_declared_in_one_place_has_its_flag_toml_key_api_keyword_and_signature(tmp_path):
    """A copy of the package whose EvalSettings declares one more field, and nothing else changed."""
    package = tmp_path / "copy" / "offline_eval"
    shutil.copytree(REPO / "offline_eval", package, ignore=shutil.ignore_patterns("__pycache__"))
    settings = package / "judging" / "settings.py"
    source = settings.read_text(encoding="utf-8")
    anchor = "\n    @classmethod\n    def option_fields"
    assert source.count(anchor) == 1, "the end of EvalSettings' fields moved; update the anchor"
    settings.write_text(source.replace(anchor, PROBE + anchor), encoding="utf-8")
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(PROBE_CHECKS), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(EXAMPLES), str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(package.parent)})
    assert done.returncode == 0 and "found everywhere" in done.stdout, done.stdout + done.stderr


def _commands() -> dict:
    return build_parser()._subparsers._group_actions[0].choices


def test_every_setting_but_the_verifier_is_a_flag_of_run_agreement_and_calibrate():
    commands = _commands()
    dests = {name: {a.dest: a for a in sub._actions} for name, sub in commands.items()}
    for name, field in EvalSettings.option_fields().items():
        assert name in dests["run"], name
        for command in ("agreement", "calibrate"):  # one metric: nothing only the aggregate reads
            assert (name in dests[command]) != bool(field.metadata.get("aggregate_only")), (command, name)
    assert "verifier" not in EvalSettings.option_fields()  # the profile chooses it
    assert set(EvalSettings.option_names()) == set(EvalSettings.option_fields())
    assert dests["run"]["weights"].option_strings == ["--weights"]


def test_fingerprint_and_signature_hold_what_they_always_held():
    """run.json's settings and a calibration's signature: the same keys and values as before the
    settings were declared with their flags (run folders and calibration files stay valid)."""
    settings = EvalSettings()
    assert settings.fingerprint() == {
        "language": None, "verifier": "judge", "verdicts": "options", "support_threshold": 0.5,
        "verdict_score": "probability", "claims": "auto", "short_answer_sentences": 2, "context_window": 100,
        "windows_per_claim": 2, "window_lead": 1.5, "fragment_words": 4, "baseline_weight": 0.5,
        "credulity_limit": 0.5, "statements_per_call": 8, "max_tokens": 768, "aggregate_weights": {}, "keypoint_max": 14}
    assert list(settings.fingerprint()) == [
        "language", "verifier", "verdicts", "support_threshold", "verdict_score", "claims",
        "short_answer_sentences", "context_window", "windows_per_claim", "window_lead", "fragment_words",
        "baseline_weight", "credulity_limit", "statements_per_call", "max_tokens", "aggregate_weights", "keypoint_max"]
    assert settings_signature(settings) == {
        "verifier": "judge", "verdicts": "options", "verdict_score": "probability", "support_threshold": 0.5,
        "claims": "auto", "short_answer_sentences": 2, "context_window": 100, "windows_per_claim": 2,
        "window_lead": 1.5, "fragment_words": 4, "baseline_weight": 0.5, "credulity_limit": 0.5}


def test_settings_from_options_take_public_and_field_names():
    settings = EvalSettings.from_options(weights={"rouge_l": 2.0}, context_window=None, claims="llm")
    assert settings.aggregate_weights == {"rouge_l": 2.0} and settings.claims == "llm"
    assert settings.context_window == 100  # None keeps the default
    assert EvalSettings.from_options(aggregate_weights={"a": 1.0}).aggregate_weights == {"a": 1.0}
    with pytest.raises(TypeError, match="unknown option.s. answer_weights; known: baseline_weight"):
        EvalSettings.from_options(answer_weights={"a": 1.0})


def test_new_setting_flags_are_checked_like_the_old_ones(capsys):
    for flag, value, message in (("--support-threshold", "1.5", "expected a number from 0 to 1"),
                                 ("--windows-per-claim", "-1", "expected a whole number >= 0"),
                                 ("--window-lead", "-2", "expected a finite number >= 0"),
                                 ("--keypoint-max", "0", "expected a whole number >= 1")):
        with pytest.raises(SystemExit) as stop:
            main(["run", "--dataset", str(EXAMPLES), flag, value])
        assert stop.value.code == 2
        assert f"argument {flag}: {message}" in capsys.readouterr().err


def test_calibrate_from_a_run_refuses_settings_it_would_ignore(tmp_path, capsys):
    """The run's recorded settings are what a calibration from its values is fitted for."""
    assert main(["calibrate", "--run", str(tmp_path), "--metric", "faithfulness", "--verdicts", "generate",
                 "--context-window", "50"]) == 2
    err = capsys.readouterr().err
    assert "leave out --verdicts, --context-window" in err, err
