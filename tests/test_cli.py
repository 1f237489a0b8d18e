"""The `run` command's own behaviour: TOML config, bad-input message, the --fail-under gate."""

from __future__ import annotations

import json
from pathlib import Path

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
