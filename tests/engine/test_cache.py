"""The cache cannot lie (issue #15, item 4): checksummed records, damaged ones recomputed and counted,
a damaged file stopped with one line, `offline-eval cache check|prune`."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.engine.cache import CacheDamaged, ResultCache
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import resolve_metrics
from offline_eval.run.runner import run_in_process
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models
from tests.engine.test_engine import SCRIPT, _samples

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, cache: ResultCache, name: str):
    metrics, _ = resolve_metrics(["faithfulness", "answer_similarity"])
    judge = ScriptedJudge(script=SCRIPT)
    out = run_in_process(_samples(4), metrics, models(judge, embedder=HashingEmbedder()), EvalSettings(claims="llm"),
                         tmp_path / name, cache=cache)
    return judge, out


def _edit(path: Path, sql: str, *params) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(sql, params).rowcount


def test_an_edited_value_is_recomputed_and_counted_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    _, first = _run(tmp_path, cache, "a")
    cache.close()  # this process's journal is folded into the results table
    # change one cached verdict the way a stray edit would: a valid JSON value, a different number
    with sqlite3.connect(path) as db:
        key, value = db.execute("SELECT key, value FROM results WHERE kind = 'options' LIMIT 1").fetchone()
        db.execute("UPDATE results SET value = ? WHERE key = ?", (value.replace("0.6", "0.9", 1), key))
    judge, second = _run(tmp_path, ResultCache(path), "b")
    assert second.summary["run"]["cache_repaired"] == 1
    assert sum(second.stats["computed"].values()) == 1  # that record alone was computed again
    assert [r["scores"] for r in second.results] == [r["scores"] for r in first.results]
    _, third = _run(tmp_path, ResultCache(path), "c")
    assert third.summary["run"]["cache_repaired"] == 0 and not third.stats["computed"]


def test_a_garbled_record_is_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with ResultCache(path) as cache:
        _run(tmp_path, cache, "a")
    with sqlite3.connect(path) as db:
        key = db.execute("SELECT key FROM results LIMIT 1").fetchone()[0]
        db.execute("UPDATE results SET value = CAST(X'FF00FE' AS TEXT) WHERE key = ?", (key,))  # not UTF-8
    cache = ResultCache(path)
    _, out = _run(tmp_path, cache, "b")
    assert out.summary["run"]["cache_repaired"] == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_file_is_one_clear_line(tmp_path: Path, capsys, damage: str) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    cache.put_many("embed", [(f"k{i}", [float(i)] * 64) for i in range(2000)])
    cache.close()
    data = path.read_bytes()
    path.write_bytes(b"this is not a database" * 100 if damage == "garbage" else data[: len(data) // 3])
    with pytest.raises(CacheDamaged, match=r"cache .* is damaged .*offline-eval cache check.*--no-cache"):
        probe = ResultCache(path)
        probe.get_many([f"k{i}" for i in range(2000)])
        len(probe)
    capsys.readouterr()
    assert main(["cache", "check", str(path)]) == 1  # damage reported as its help says, never a traceback
    assert "Traceback" not in capsys.readouterr().err
    if damage == "garbage":  # a run on it stops at once with one line
        data_file = tmp_path / "d.jsonl"
        data_file.write_text(json.dumps({"id": "a", "question": "q", "answer": "a b", "ground_truth": "a c"}) + "\n")
        rc = main(["run", "--dataset", str(data_file), "--profile", "starter", "--metrics", "rouge_l", "--quiet",
                   "--no-report", "--cache", str(path), "--output", str(tmp_path / "run")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "is damaged" in err[0]


def test_cache_check_and_prune_commands(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    cache.put_many("embed", [("k1", [1.0]), ("k2", [2.0])])
    cache.put_many("options", [("k3", {"Yes": 0.5, "No": 0.5})])
    cache.close()
    assert main(["cache", "check", str(path)]) == 0
    assert "3 records (embed 2, options 1); 0 damaged; SQLite integrity: ok" in capsys.readouterr().out
    _edit(path, "UPDATE results SET value = '[7.0]' WHERE key = 'k2'")
    assert main(["cache", "check", str(path)]) == 1
    assert "1 damaged" in capsys.readouterr().out
    assert main(["cache", "prune", str(path)]) == 0
    assert "removed 1 damaged" in capsys.readouterr().out
    assert main(["cache", "check", str(path)]) == 0
    assert main(["cache", "prune", str(path), "--kind", "options"]) == 0
    assert len(ResultCache(path)) == 1
    assert main(["cache", "check", str(tmp_path / "missing.sqlite")]) == 2


def test_a_cache_from_before_checksums_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
        db.execute("INSERT INTO results VALUES ('k', 'embed', '[1.0]')")
    cache = ResultCache(path)
    assert cache.get_many(["k"]) == {"k": [1.0]} and cache.repaired == 0
    assert cache.check().ok


# -- the journal (issue #15: a commit costs the same whatever the file holds) -------------------------
def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def test_answers_go_to_a_journal_found_again_in_memory_and_folded_in_at_close(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(10000)]  # as cache_key makes them
    value = {k: [float(i)] for i, k in enumerate(keys)}
    for start in range(0, len(keys), 64):  # batch by batch, as the engine commits them
        cache.put_many("embed", [(k, value[k]) for k in keys[start:start + 64]])
    journal = [t for t in _tables(path) if t.startswith("journal_")]
    assert len(journal) == 1 and (tmp_path / f"cache.sqlite.{journal[0]}.lock").exists()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0  # nothing indexed yet
    probe = keys[::97] + [hashlib.sha256(b"unknown").hexdigest(), "not-a-hex-key"]
    assert cache.get_many(probe) == {k: value[k] for k in keys[::97]}
    assert len(cache) == len(keys)
    cache.put_many("embed", [(keys[5], [-1.0])])  # written again: the later answer wins
    assert cache.get_many([keys[5]]) == {keys[5]: [-1.0]}
    cache.close()
    assert _tables(path) == ["results"] and not list(tmp_path.glob("*.lock"))
    again = ResultCache(path)
    assert again.get_many(probe) == {k: value[k] for k in keys[::97]}
    assert again.get_many([keys[5]]) == {keys[5]: [-1.0]} and len(again) == len(keys)
    again.close()


def test_keys_sharing_an_index_prefix_never_answer_for_each_other(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache.sqlite")
    first, second = "ab" * 8 + "0" * 48, "ab" * 8 + "f" * 48  # the same first 16 hex digits
    cache.put_many("embed", [(first, [1.0])])
    cache.put_many("embed", [(second, [2.0])])
    assert cache.get_many([second]) == {second: [2.0]}
    assert cache.get_many([first]) == {}  # a miss (recomputed), never the other key's answer
    cache.close()


def test_a_killed_process_s_journal_is_folded_by_the_next_one_and_a_live_one_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    script = (f"from offline_eval.engine.cache import ResultCache\n"
              f"import os\nc = ResultCache({str(path)!r})\n"
              f"c.put_many('embed', [('k1', [1.0]), ('k2', [2.0])])\nos._exit(9)\n")  # no close: a kill
    assert subprocess.run([sys.executable, "-c", script], cwd=REPO).returncode == 9
    assert any(t.startswith("journal_") for t in _tables(path))
    live = ResultCache(path)  # folds the dead process's journal, then writes its own
    assert live.get_many(["k1", "k2"]) == {"k1": [1.0], "k2": [2.0]}
    live.put_many("embed", [("k3", [3.0])])
    other = ResultCache(path)  # a second process while the first still writes
    assert other.get_many(["k3"]) == {} and any(t.startswith("journal_") for t in _tables(path))
    live.close()
    assert other.get_many(["k3"]) == {"k3": [3.0]} and _tables(path) == ["results"]
    other.close()


def test_a_damaged_journal_record_is_recomputed_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    cache.put_many("embed", [("k1", [1.0]), ("k2", [2.0])])
    [journal] = [t for t in _tables(path) if t.startswith("journal_")]
    _edit(path, f"UPDATE {journal} SET value = '[7.0]' WHERE key = 'k2'")
    assert cache.get_many(["k1", "k2"]) == {"k1": [1.0]} and cache.repaired == 1
    cache.close()


def test_a_fold_that_fails_at_close_leaves_the_journal_to_the_next_run(tmp_path: Path, caplog) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    cache.put_many("embed", [("k1", [1.0])])

    def full_disk(journal: str) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    cache._fold = full_disk  # as a full disk makes the one sorted pass fail
    cache.close()  # no exception: the run that wrote the answers has finished
    assert "folded in by the next run" in caplog.text
    with ResultCache(path) as again:  # the journal's lock was released: it is an orphan, folded here
        assert again.get_many(["k1"]) == {"k1": [1.0]}
    assert _tables(path) == ["results"]


# -- issue #33: `cache check` on a file SQLite cannot read; no cache file from a refused run ----------
def test_cache_check_on_an_unreadable_file_exits_1_as_its_help_says(tmp_path: Path, capsys) -> None:
    from offline_eval.cli import build_parser

    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    for command in ("check", "prune"):
        assert main(["cache", command, str(path)]) == 1, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and "move it aside" in err[0], err
        assert "cache check" not in err[0]  # not the advice to run the command that just ran
    assert path.read_bytes() == b"this is not a database" * 100  # left as it was
    assert main(["cache", "check", str(tmp_path / "missing.sqlite")]) == 2
    cache = build_parser()._subparsers._group_actions[0].choices["cache"]
    check = cache._subparsers._group_actions[0].choices["check"]
    assert "1 on damage (damaged records, or a file SQLite cannot read" in " ".join(check.format_help().split())


def _cache_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("refusal", ["metric", "device", "models", "gate", "another run", "in use"])
def test_a_run_refused_during_setup_makes_no_cache_file(tmp_path: Path, capsys, refusal: str) -> None:
    """The cache file is made at its first use, once the run has been accepted (its folder locked and
    free of another run's results too): a refused run leaves no file, journal or lock behind."""
    import torch

    from offline_eval.run.folder import RunFolder

    if refusal == "device" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q", "answer": "a b", "ground_truth": "a c"}) + "\n")
    output = tmp_path / "run"
    common = ["run", "--dataset", str(data), "--quiet", "--no-report", "--output", str(output)]
    if refusal == "another run":  # the folder holds the results of a run of other metrics
        assert main(common + ["--metrics", "rouge_l", "--no-cache"]) == 0
    caches = tmp_path / "caches"
    args = common + ["--cache", str(caches / "cache.sqlite"), "--metrics", "rouge_l"]
    args += {"metric": ["--metrics", "no_such_metric"], "device": ["--metrics", "faithfulness", "--device", "cuda:0"],
             "models": ["--metrics", "faithfulness", "--profile", "cpu", "--models-dir", str(tmp_path / "none")],
             "gate": ["--fail-under", "faithfulness=0.5"], "another run": ["--metrics", "eir"], "in use": []}[refusal]
    capsys.readouterr()
    if refusal == "in use":  # another process runs in this folder
        with RunFolder(output):
            rc = main(args)
    else:
        rc = main(args)
    assert rc == 2, capsys.readouterr().err
    assert _cache_files(caches) == []
    # an accepted run whose judge answers makes it
    script = tmp_path / "judge.json"
    script.write_text(json.dumps({"default_probs": {"1": 1.0}}), encoding="utf-8")
    assert main(common + ["--cache", str(caches / "cache.sqlite"), "--metrics", "rubrics_score", "--overwrite",
                          "--profile", "starter", "--judge-backend", "scripted", "--judge", str(script)]) == 0
    assert _cache_files(caches) == ["cache.sqlite"]  # its journal folded, its lock gone
    assert len(ResultCache(caches / "cache.sqlite")) > 0


def test_a_deferred_cache_is_made_at_its_first_use(tmp_path: Path) -> None:
    import argparse

    from offline_eval.cli.shared import DeferredCache, open_cache

    path = tmp_path / "sub" / "cache.sqlite"
    cache = open_cache(argparse.Namespace(cache=path, no_cache=False))
    assert isinstance(cache, DeferredCache) and cache.path == path
    assert cache.repaired == 0 and len(cache) == 0 and not path.parent.exists()
    cache.close()  # closing one never used makes nothing
    assert not path.parent.exists()
    with open_cache(argparse.Namespace(cache=path, no_cache=False)) as cache:
        assert cache.get_many(["k"]) == {} and path.exists()
        cache.put_many("embed", [("k", [1.0])])
        assert len(cache) == 1
    again = open_cache(argparse.Namespace(cache=path, no_cache=False))  # a file that is there: opened at once
    assert isinstance(again, ResultCache) and again.get_many(["k"]) == {"k": [1.0]}
    again.close()
