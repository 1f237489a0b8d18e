"""The Python API (issue #16): the documented example (docs/python.md) runs as written, and the same data
through the CLI gives the same scores."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import offline_eval
from offline_eval.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sample.jsonl"


def _documented_example() -> str:
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("## The API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_documented_example_runs_verbatim_and_matches_the_cli(tiny_profile, tmp_path, monkeypatch):
    assert "pandas" not in _documented_example()  # the install does not bring it
    monkeypatch.setenv("OFFLINE_EVAL_PROFILE", str(tiny_profile))
    monkeypatch.setenv("OFFLINE_EVAL_CACHE", str(tmp_path / "cache.sqlite"))
    namespace: dict = {}
    exec(compile(_documented_example(), "docs/python.md", "exec"), namespace)
    (row,) = namespace["result"].rows
    assert row["id"] == "q1" and {"question", "answer"} <= set(row["sample"])
    assert set(row["scores"]) == {"faithfulness", "answer_similarity"}
    assert 0.0 <= row["scores"]["faithfulness"]["value"] <= 1.0 and "reason" not in row["scores"]["faithfulness"]
    assert namespace["result"].summary["metrics"]["faithfulness"]["n_scored"] == 1

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in namespace["data"]))
    assert main(["run", "--dataset", str(data), "--metrics", "faithfulness,answer_similarity", "--quiet",
                 "--no-report", "--no-cache", "--output", str(tmp_path / "cli")]) == 0
    cli = [json.loads(line) for line in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    api = namespace["result"].rows
    assert [r["scores"] for r in api] == [r["scores"] for r in cli]


def test_evaluate_takes_rows_saves_a_run_folder_and_compares(tiny_profile, tmp_path):
    models = offline_eval.load_models(str(tiny_profile), roles=["embedder"])
    rows = [{"id": "a", "answer": "Paris is in France.", "ground_truth": "Paris is in France."},
            {"id": "b", "answer": "Rome is in Spain.", "ground_truth": "Madrid is in Spain."}]
    first = offline_eval.evaluate(rows, ["answer_similarity", "rouge_l"], models=models, cache=False)
    assert [r["id"] for r in first.rows] == ["a", "b"] and first.folder is None
    assert first.summary["metrics"]["rouge_l"]["n_scored"] == 2
    saved = first.save(tmp_path / "saved")
    assert (saved / "results.jsonl").exists() and json.loads((saved / "summary.json").read_text())["metrics"]
    assert first.report(tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    second = offline_eval.evaluate(rows, ["answer_similarity", "rouge_l"], models=models, cache=False,
                                   output=tmp_path / "run")
    assert second.folder == tmp_path / "run" and (tmp_path / "run" / "run.json").exists()
    comparison = offline_eval.compare(first, second)
    assert comparison.n_common == 2 and all(m.delta == 0 for m in comparison.metrics)
    with pytest.raises(TypeError, match="unknown option.*no_such_setting"):
        offline_eval.evaluate(rows, ["rouge_l"], models=models, no_such_setting=1)
    with pytest.raises(offline_eval.api.DataError, match="row 1: expected a mapping"):
        offline_eval.evaluate(["not a row"], ["rouge_l"], models=models)


PLUGIN = '''
from dataclasses import dataclass, field

from offline_eval.metrics import register_metric
from offline_eval.metrics.base import Metric, Score


@register_metric
class AnswerWords(Metric):
    name = "answer_words"
    requires = ("answer",)
    higher_is_better = False
    description = "words in the answer"

    @dataclass(frozen=True)
    class Options:
        longer_than: int = field(default=0, metadata={"help": "count only words longer than this"})

    def score(self, sample, ctx):
        return Score(float(sum(len(w) > self.options.longer_than for w in sample.answer.split())))
'''


def test_a_metric_from_a_module_outside_the_package_runs_through_the_cli_and_the_api(tmp_path, capsys):
    """Issue #16: a metric is one module; registering it by a decorator is all it takes, for
    `run --plugin FILE --metrics NAME` and for offline_eval.evaluate, with no other file touched."""
    plugin = tmp_path / "my_metrics.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    out = tmp_path / "cli"
    assert main(["run", "--dataset", str(EXAMPLES), "--plugin", str(plugin), "--metrics", "answer_words,rouge_l",
                 "--no-cache", "--quiet", "--no-report", "--output", str(out), "--fail-under", "answer_words=1000"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    entry = summary["metrics"]["answer_words"]
    assert entry["n_scored"] == 12 and entry["higher_is_better"] is False and entry["mean"] > 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows[0]["scores"]["answer_words"]["value"] == len(rows[0]["sample"]["answer"].split())
    # the Python API: by the registered name, and as an instance
    result = offline_eval.evaluate([{"id": "a", "question": "q", "answer": "three words here", "contexts": ["c"]}],
                                   metrics=["answer_words"], cache=False)
    assert result.summary["metrics"]["answer_words"]["mean"] == 3.0
    from offline_eval.metrics import metric_classes

    instance = metric_classes()["answer_words"]()
    again = offline_eval.evaluate([{"id": "a", "question": "q", "answer": "two words", "contexts": ["c"]}],
                                  metrics=[instance], cache=False)
    assert again.to_pandas()["answer_words"].tolist() == [2.0]
    # its options: a flag (shown by --help and `metrics`), a keyword of evaluate(), a key of a --config file
    capsys.readouterr()
    assert main(["metrics", "--plugin", str(plugin)]) == 0
    listing = capsys.readouterr().out
    assert "lower is better" in listing.split("answer_words", 1)[1].splitlines()[0]
    assert "--answer-words-longer-than (longer_than, default 0): count only words longer than this" in listing
    fresh = subprocess.run([sys.executable, "-m", "offline_eval.cli", "run", "--plugin", str(plugin), "--help"],
                           capture_output=True, text=True, cwd=REPO)  # a process that has not imported it yet
    assert fresh.returncode == 0 and "--answer-words-longer-than" in fresh.stdout
    assert "answer_words (lower is better): count only words longer than this" in " ".join(fresh.stdout.split())
    longer = offline_eval.evaluate([{"id": "a", "question": "q", "answer": "a few longer words", "contexts": ["c"]}],
                                   metrics=["answer_words"], cache=False, answer_words_longer_than=3)
    assert longer.summary["metrics"]["answer_words"]["mean"] == 2.0
    flagged = tmp_path / "flagged"
    assert main(["run", "--dataset", str(EXAMPLES), "--plugin", str(plugin), "--metrics", "answer_words",
                 "--answer-words-longer-than", "3", "--no-cache", "--quiet", "--no-report",
                 "--output", str(flagged)]) == 0
    config = tmp_path / "eval.toml"
    config.write_text(f"plugin = [{json.dumps(str(plugin))}]\nmetrics = \"answer_words\"\n"
                      "answer_words_longer_than = 3\nno_cache = true\nquiet = true\nno_report = true\n")
    assert main(["run", "--dataset", str(EXAMPLES), "--config", str(config), "--output", str(tmp_path / "toml")]) == 0
    by_flag, by_file = (json.loads((folder / "summary.json").read_text())["metrics"]["answer_words"]["mean"]
                        for folder in (flagged, tmp_path / "toml"))
    assert json.loads((flagged / "run.json").read_text())["metric_options"] == {"answer_words": {"longer_than": 3}}
    assert by_flag == by_file < entry["mean"]
    capsys.readouterr()
    # a plugin that cannot be imported, or that takes a built-in name: one line each
    assert main(["run", "--dataset", str(EXAMPLES), "--plugin", str(tmp_path / "missing.py"), "--no-cache",
                 "--quiet", "--no-report", "--output", str(tmp_path / "x")]) != 0
    assert "cannot load plugin" in capsys.readouterr().err
    clash = tmp_path / "clash.py"
    clash.write_text(PLUGIN.replace('"answer_words"', '"faithfulness"'), encoding="utf-8")
    from offline_eval.metrics import load_plugins

    for _ in range(2):  # a plugin that failed is tried again, and fails again
        with pytest.raises(ValueError, match="cannot load plugin .*'faithfulness' is taken"):
            load_plugins([str(clash)])
    counted = tmp_path / "counted.py"  # loaded twice from one file, it runs once, as an import would
    counted.write_text("import pathlib\nrun = pathlib.Path(__file__).with_suffix('.runs')\n"
                       "run.write_text((run.read_text() if run.exists() else '') + 'x')\n", encoding="utf-8")
    load_plugins([str(counted), str(counted)])
    load_plugins([str(counted)])
    assert counted.with_suffix(".runs").read_text() == "x"


# --- rows as pandas and numpy hold them (issue #33) -------------------------------------------------

ROWS = [
    {"id": "a", "question": "Where is Paris?", "answer": "Paris is in France.",
     "contexts": ["Paris is the capital of France.", "France is in Europe."],
     "ground_truth": "Paris is in France.", "keypoints": ["France"], "score": 0.5},
    {"id": "b", "question": "Where is Rome?", "answer": None, "contexts": [],
     "ground_truth": None, "keypoints": None, "score": None},
    {"id": "c", "question": "Where is Madrid?", "answer": "Madrid is in Spain.",
     "contexts": ["Madrid is in Spain."], "ground_truth": "Spain.", "keypoints": ["Spain", "capital"],
     "score": 1.0},
]


def _scored(data, **kwargs):
    result = offline_eval.evaluate(data, ["rouge_l"], cache=False, **kwargs)
    return [(r["id"], r["sample"], r["scores"]) for r in result.rows]


def test_a_dataframe_read_with_read_parquet_scores_like_the_same_jsonl(tmp_path):
    pd = pytest.importorskip("pandas")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "rows.parquet")
    frame = pd.read_parquet(tmp_path / "rows.parquet")
    assert type(frame["contexts"][0]).__module__ == "numpy"  # what made the truth value ambiguous
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    from_frame = _scored(frame)
    assert from_frame == _scored(jsonl)
    assert from_frame[0][1]["contexts"] == ROWS[0]["contexts"]
    assert from_frame[0][2]["rouge_l"]["value"] == pytest.approx(1.0)


def test_numpy_arrays_and_scalars_in_rows_are_read_as_lists_and_python_values(tmp_path):
    np = pytest.importorskip("numpy")
    arrays = [{key: (np.array(value, dtype=object) if isinstance(value, list)
                     else np.str_(value) if isinstance(value, str)
                     else np.float64("nan") if value is None else np.float64(value))
               for key, value in row.items()} for row in ROWS]
    arrays[2]["id"] = np.int64(7)  # a numeric id column
    expected = _scored(ROWS)
    expected[2] = ("7", {**expected[2][1], "id": "7"}, expected[2][2])
    assert _scored(arrays) == expected
    assert json.dumps(expected)  # extra values are plain Python, ready for results.jsonl


@pytest.mark.parametrize("value, field, needle", [
    ("np.array([1.5, 2.5])", "contexts", "item 1 of the list is a number, expected a string"),
    ("np.array(['x', 'y'])", "question", "expected a string, got a list"),
    ("np.bool_(True)", "answer", "expected a string, got a boolean"),
    ("np.array([[1]])", "id", "expected a string or a number, got a list"),
    ("np.datetime64('2020-01-01')", "ground_truth", "expected a string, got date"),
])
def test_a_numpy_value_of_the_wrong_type_names_its_row_and_field(value, field, needle):
    np = pytest.importorskip("numpy")
    rows = [dict(ROWS[0]), {**ROWS[2], field: eval(value, {"np": np})}]
    with pytest.raises(offline_eval.api.DataError) as caught:
        offline_eval.evaluate(rows, ["rouge_l"], cache=False)
    message = str(caught.value)
    assert message == f"data, row 2, field '{field}': {needle}", message


def test_a_starter_run_warns_as_the_command_line_does():
    """`offline-eval run` prints the starter note before a starter run; evaluate() said nothing."""
    import warnings

    from offline_eval.run.config import STARTER_NOTE
    from offline_eval.runtime.profiles import load_profile
    from tests.helpers import models

    row = [{"id": "a", "question": "q", "answer": "Paris", "ground_truth": "Paris", "contexts": ["c"]}]
    starter = models()
    starter.profile = load_profile("starter")
    with pytest.warns(UserWarning) as caught:
        offline_eval.evaluate(row, metrics=["answer_similarity"], models=starter, cache=False)
    notes = [w for w in caught if str(w.message) == STARTER_NOTE]
    assert len(notes) == 1 and notes[0].filename == __file__  # it points at the caller's line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        offline_eval.evaluate(row, metrics=["rouge_l"], models=starter, cache=False)
    assert STARTER_NOTE not in [str(w.message) for w in caught]  # model-free metrics: no starter run


# the plugin above under a name of its own: registered once per process, it loads beside it
GATED_PLUGIN = PLUGIN.replace('"answer_words"', '"gated_words"').replace("class AnswerWords", "class GatedWords")

# summary.json's run section, where two runs of the same data may differ: when the run started and
# finished, how long it took and its earlier tries (timings), and how it was started: "api" marks a run of
# offline_eval.evaluate, "threads" is the command line's --threads choice (the API sets no threads).
# results.jsonl's rows and everything else in summary.json must be the same.
RUN_SPECIFIC = {"started", "finished", "seconds", "tries", "api", "threads"}


def _run_files(folder: Path) -> tuple[list, dict]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert {"started", "finished", "seconds"} <= set(summary["run"])  # what is left out is there to leave out
    summary["run"] = {k: v for k, v in summary["run"].items() if k not in RUN_SPECIFIC}
    return rows, summary


def test_the_api_and_the_cli_run_the_same_run_with_plugins_and_gates(tiny_profile, tmp_path, monkeypatch, capsys):
    """Issue #57: `offline_eval.evaluate` and `offline-eval run` assemble and execute a run through one
    function, so the example data gives the same results.jsonl and summary.json through either, plugins
    and gates included."""
    monkeypatch.setenv("OFFLINE_EVAL_PROFILE", str(tiny_profile))
    plugin = tmp_path / "gated_metrics.py"
    plugin.write_text(GATED_PLUGIN, encoding="utf-8")
    metrics = ["faithfulness", "answer_relevancy", "gated_words"]
    gates = {"gated_words": 1, "faithfulness": 0.0}  # lower is better, and every answer has words: it fails
    api = offline_eval.evaluate(str(EXAMPLES), metrics, plugins=[str(plugin)], fail_under=gates, cache=False,
                                output=tmp_path / "api")
    capsys.readouterr()
    code = main(["run", "--dataset", str(EXAMPLES), "--metrics", ",".join(metrics), "--plugin", str(plugin),
                 "--fail-under", "gated_words=1,faithfulness=0", "--no-cache", "--quiet", "--no-report",
                 "--output", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    api_rows, api_summary = _run_files(tmp_path / "api")
    cli_rows, cli_summary = _run_files(tmp_path / "cli")
    assert len(api_rows) == 12 and api_rows == cli_rows
    assert api_summary == cli_summary
    assert [r["scores"] for r in api.rows] == [r["scores"] for r in cli_rows]  # the result object holds them too
    # the same gates fail, said the same way: the command line exits 3
    assert code == 3 and len(api.gate_failures) == 1 and "gated_words" in api.gate_failures[0]
    assert [f"offline-eval: gate failed: {line}" for line in api.gate_failures] == \
        [line for line in err.splitlines() if line.startswith("offline-eval: gate failed: ")]
    assert [f"offline-eval: gate: {line}" for line in api.gate_lines] == \
        [line for line in err.splitlines() if line.startswith("offline-eval: gate: ")]
    passing = offline_eval.evaluate(str(EXAMPLES), ["gated_words"], plugins=[str(plugin)], cache=False,
                                    fail_under="gated_words=10000", max_unscored=0.0)
    assert passing.gate_failures == [] and len(passing.gate_lines) == 1


def test_the_api_takes_the_ray_engine_s_settings_as_the_command_line_does():
    """``engine="ray"`` and its settings reach the run as ``--engine ray`` and its flags do; the local
    engine refuses them rather than ignore them."""
    from offline_eval.api import _ray
    from offline_eval.cli import build_parser
    from offline_eval.cli.shared import run_config_from_args

    args = build_parser().parse_args(["run", "--dataset", "d.jsonl", "--engine", "ray", "--ray-address", "auto",
                                      "--replicas", "3", "--gpus-per-replica", "0.5", "--ray-node-cache", "/c"])
    assert _ray("ray", "auto", 3, 0.5, "/c") == run_config_from_args(args).ray
    defaults = build_parser().parse_args(["run", "--dataset", "d.jsonl", "--engine", "ray"])
    assert _ray("ray", None, None, None, None) == run_config_from_args(defaults).ray
    assert _ray("local", None, None, None, None) is None
    with pytest.raises(ValueError, match="replicas only with engine='ray'"):
        offline_eval.evaluate([{"id": "a", "answer": "x"}], ["rouge_l"], replicas=2, cache=False)
    with pytest.raises(ValueError, match="engine='spark'"):
        offline_eval.evaluate([{"id": "a", "answer": "x"}], ["rouge_l"], engine="spark", cache=False)


def test_a_bad_row_is_named_before_a_bad_gate_through_the_api_as_through_the_cli(tmp_path, capsys):
    """The API reads its data before it builds the run, as `offline-eval run` does: data with a bad row
    and a gate on a metric the run lacks name the row through either."""
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": "a", "answer": "x"}\n[1]\n', encoding="utf-8")
    assert main(["run", "--dataset", str(data), "--metrics", "rouge_l", "--fail-under", "faithfulness=0.5",
                 "--no-cache", "--quiet", "--no-report", "--output", str(tmp_path / "cli")]) == 2
    assert "row 2: expected a JSON object per row" in capsys.readouterr().err
    from offline_eval.data.schema import DataError

    with pytest.raises(DataError, match="row 2: expected a JSON object per row"):
        offline_eval.evaluate(str(data), ["rouge_l"], fail_under={"faithfulness": 0.5}, cache=False)


def _one_reference_in_ten() -> list[dict]:
    rows = [{"id": f"r{i}", "question": f"q{i}", "answer": f"a {i} b", "contexts": ["c"]} for i in range(10)]
    rows[0]["ground_truth"] = "a 0 b"
    return rows


@pytest.mark.parametrize("gates, flags, message", [
    ({"fail_under": {"rouge_l": 0.1}, "max_unscored": 3}, ["--fail-under", "rouge_l=0.1", "--max-unscored", "3"],
     "not a share of rows from 0 to 1"),
    ({"fail_under": {"rouge_l": 0.1}, "max_unscored": float("nan")},
     ["--fail-under", "rouge_l=0.1", "--max-unscored", "nan"], "not a share of rows from 0 to 1"),
    ({"fail_under": {"rouge_l": float("nan")}}, ["--fail-under", "rouge_l=nan"], "the value must be finite"),
    ({"fail_under": "rouge_l=inf"}, ["--fail-under", "rouge_l=inf"], "the value must be finite"),
])
def test_the_api_refuses_the_gates_the_command_line_refuses(tmp_path, capsys, gates, flags, message):
    """A share of unscored rows above 1 (or nan) would let every gate pass on 1 scored row of 10, and a
    nan threshold passes every mean: the API refuses them in one line naming its argument, as the
    command line refuses its flags."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _one_reference_in_ten()), encoding="utf-8")
    try:  # argparse exits on a bad --max-unscored; a bad --fail-under is refused as the run is configured
        code = main(["run", "--dataset", str(data), "--metrics", "rouge_l", *flags, "--no-cache", "--quiet",
                     "--no-report", "--output", str(tmp_path / "cli")])
    except SystemExit as exc:
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err
    with pytest.raises(ValueError) as caught:
        offline_eval.evaluate(_one_reference_in_ten(), ["rouge_l"], cache=False, **gates)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("max_unscored: " if "max_unscored" in gates else "fail_under: ")
    refused = offline_eval.evaluate(_one_reference_in_ten(), ["rouge_l"], cache=False,
                                    fail_under={"rouge_l": 0.1}, max_unscored=0.5)
    assert len(refused.gate_failures) == 1 and "9 of 10 rows unscored" in refused.gate_failures[0]


def test_the_api_reads_a_string_of_metrics_as_the_command_line_reads_metrics():
    """``evaluate(data, "rouge_l")`` is one metric, not the letters r, o, u, ...; commas separate names,
    as in ``--metrics``."""
    rows = _one_reference_in_ten()
    assert offline_eval.evaluate(rows, "rouge_l", cache=False).metrics == ["rouge_l"]
    assert offline_eval.evaluate(rows, "rouge_l, eir", cache=False).metrics == \
        offline_eval.evaluate(rows, ["rouge_l", "eir"], cache=False).metrics
    with pytest.raises(ValueError, match="names no metric"):
        offline_eval.evaluate(rows, " , ", cache=False)
