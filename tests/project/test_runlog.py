"""The run folder has one owner (issue #57): :mod:`offline_eval.runlog` names its files and reads them.

- No other module of the package spells a run folder's file name: each goes through the run-log's
  names (``RESULTS``, ``SUMMARY``, ...), so the format is defined once.
- Every reader of results.jsonl (the report, ``compare``, the estimates, the review, the runner's
  output) decides a bad line the same way: a last line cut short by a kill is skipped, any other bad
  line and a sample id met twice are an error naming the file and the line.
- Importing the run-log brings in no layer above it (metrics, runtime, report, run).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from offline_eval.data.schema import DataError
from offline_eval.people.estimate import read_run
from offline_eval.report._run import load_run
from offline_eval.review.session import Review, ReviewError
from offline_eval.run.folder import RunOutput
from offline_eval.records import RunSummary
from offline_eval.runlog import RESULTS, RUN_INFO, SUMMARY, RunLogError, read_results

PACKAGE = Path(__file__).resolve().parents[2] / "offline_eval"
OWNER = PACKAGE / "runlog.py"
NAMES = ("results.jsonl", "summary.json", "run.json", "report.html", "labels.jsonl", "review.json", ".lock")
# Spellings of a name that are not a run folder's file: (module, name, why).
FOLDER_NAME = re.compile(r"\b(RESULTS|SUMMARY|RUN_INFO|REPORT|REPORT_FILE|LABELS|LABELS_FILE|REVIEW|REVIEW_FILE)\b")
OPENING = {"open", "read_text", "write_text", "read_bytes", "write_bytes"}
NOT_A_RUN_FOLDER = {("offline_eval/report/html.py", "summary.json"): "a retriever benchmark's folder",
                    ("offline_eval/engine/cache.py", ".lock"): "the result cache's journal lock"}


def spelled_names(path: Path, tree: ast.AST) -> list[str]:
    """Where ``tree`` (the module at ``path``) holds a run folder's file name as a string of its own."""
    where = path.relative_to(PACKAGE.parent).as_posix()
    return [f"{where}:{node.lineno} spells {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in NAMES
            and (where, node.value) not in NOT_A_RUN_FOLDER]


def test_no_module_but_the_run_log_names_a_run_folder_file() -> None:
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path != OWNER
             for line in spelled_names(path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))]
    assert not found, ("run folder files named outside offline_eval/runlog.py (use its RESULTS, SUMMARY, "
                       "RUN_INFO, REPORT, LABELS, REVIEW, LOCK):\n" + "\n".join(found))


def opened_by_name(path: Path, tree: ast.AST) -> list[str]:
    """Where a function of ``tree`` opens (``open``, ``read_text``, ``write_text``, ...) a path built from a
    run folder's name (the run-log's constant), directly or through a variable it assigned. The run's
    ``.lock`` is left out: taking it is :class:`offline_eval.run.folder.RunFolder`'s."""
    where = path.relative_to(PACKAGE.parent).as_posix()
    found = []
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        built = {ast.unparse(target) for node in ast.walk(function) if isinstance(node, ast.Assign)
                 and FOLDER_NAME.search(ast.unparse(node.value)) for target in node.targets}
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "open" and node.args:
                target = ast.unparse(node.args[0])
            elif isinstance(node.func, ast.Attribute) and node.func.attr in OPENING:
                target = ast.unparse(node.func.value)
            else:
                continue
            if FOLDER_NAME.search(target) or target in built:
                found.append(f"{where}:{node.lineno} opens {target}")
    return sorted(set(found))


def test_no_module_but_the_run_log_opens_a_run_folder_file() -> None:
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path != OWNER
             for line in opened_by_name(path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))]
    assert not found, "run folder files opened outside offline_eval/runlog.py (use its readers and writers):\n" + \
        "\n".join(found)


def test_the_scan_sees_a_name_spelled_in_a_path_and_in_a_message() -> None:
    """The check above is no vacuous pass: it finds a name joined to a path and one inside an f-string."""
    tree = ast.parse("path = folder / 'summary.json'\nprint(f\"results: {out / 'results.jsonl'}\")\n"
                     "help = 'a summary.json mentioned in a sentence is no file opened'\n")
    found = spelled_names(PACKAGE / "report" / "example.py", tree)
    assert [line.split(" spells ")[1] for line in found] == ["'summary.json'", "'results.jsonl'"]


def test_the_scan_sees_a_file_opened_by_the_run_logs_name() -> None:
    tree = ast.parse("def read(folder):\n    path = folder / RESULTS\n    with open(path) as handle:\n"
                     "        return (folder / SUMMARY).read_text(), handle.read()\n"
                     "def lock(folder):\n    return open(folder / LOCK, 'a+')\n")
    found = opened_by_name(PACKAGE / "report" / "example.py", tree)
    assert found == ["offline_eval/report/example.py:3 opens path", "offline_eval/report/example.py:4 opens folder / SUMMARY"]


def test_the_run_log_imports_no_layer_above_it() -> None:
    code = ("import json, sys, offline_eval.runlog\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('offline_eval.'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    above = [m for m in json.loads(proc.stdout)
             if m.split(".")[1] in ("metrics", "judging", "runtime", "report", "run", "engine", "api")]
    assert not above, above


def test_the_report_imports_nothing_of_the_runner() -> None:
    """The report reads a run folder and gates it through the run-log and offline_eval.thresholds, both
    below it, not through ``offline_eval.run`` (the runner's package, which the report sits beside)."""
    found = []
    for path in sorted((PACKAGE / "report").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                      if n == "offline_eval.run" or n.startswith("offline_eval.run.")]
    assert not found, found


# ----------------------------------------------------------------------------- one tolerance, every reader

def _row(key: str, value: float = 1.0) -> str:
    return json.dumps({"id": key, "sample": {"id": key, "question": "q"},
                       "scores": {"faithfulness": {"value": value}}}) + "\n"


def _folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / RESULTS).write_text(text, encoding="utf-8")
    (folder / RUN_INFO).write_text(json.dumps({"fingerprint": "f" * 20, "metrics": ["faithfulness"]}), encoding="utf-8")
    (folder / SUMMARY).write_text(json.dumps({"run": {"fingerprint": "f" * 20, "metrics": ["faithfulness"]},
                                              "metrics": {}}), encoding="utf-8")
    return folder


def _ids_each_reader_sees(folder: Path) -> dict[str, list[str]]:
    return {"runlog": [r.id for r in read_results(folder)],
            "report": [r.id for r in load_run(folder).results],
            "estimate": read_run(folder).ids,
            "review": sorted(e.id for e in Review(folder, ["faithfulness"]).entries),
            "run output": [r.id for r in RunOutput(folder, RunSummary.from_dict({})).result_rows()]}


def test_a_last_line_cut_short_by_a_kill_is_skipped_by_every_reader(tmp_path: Path) -> None:
    folder = _folder(tmp_path, _row("a") + _row("b") + '{"id": "c", "scores": {"faith')
    seen = _ids_each_reader_sees(folder)
    assert seen == {reader: ["a", "b"] for reader in seen}


def test_a_blank_line_is_skipped_by_every_reader(tmp_path: Path) -> None:
    folder = _folder(tmp_path, _row("a") + "\n   \n" + _row("b"))
    seen = _ids_each_reader_sees(folder)
    assert seen == {reader: ["a", "b"] for reader in seen}


READERS = {"runlog": (lambda f: list(read_results(f)), RunLogError),
           "report": (load_run, ValueError),
           "estimate": (read_run, DataError),
           "review": (lambda f: Review(f, ["faithfulness"]), ReviewError)}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("text, message", [
    (_row("a") + "not json\n" + _row("b"), "line 2: not a result row"),
    (_row("a") + "[1, 2]\n", "line 2: not a result row"),
    (_row("a") + _row("b") + _row("a", 0.0), "line 3: sample id 'a' appears twice (first on line 1)"),
], ids=["not-json", "not-an-object", "id-twice"])
def test_any_other_bad_line_is_an_error_naming_the_file_and_line(tmp_path: Path, reader: str, text: str,
                                                                 message: str) -> None:
    folder = _folder(tmp_path, text)
    read, error = READERS[reader]
    with pytest.raises(error) as raised:
        read(folder)
    assert str(folder / RESULTS) in str(raised.value) and message in str(raised.value)
    assert "\n" not in str(raised.value)
