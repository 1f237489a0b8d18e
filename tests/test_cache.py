"""The cache cannot lie (issue #15, item 4): checksummed records, damaged ones recomputed and counted,
a damaged file stopped with one line, `offline-eval cache check|prune`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.engine.cache import CacheDamaged, ResultCache
from offline_eval.engine.runner import evaluate
from offline_eval.metrics import resolve_metrics
from offline_eval.metrics.settings import EvalSettings
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models
from tests.test_engine import SCRIPT, _samples


def _run(tmp_path: Path, cache: ResultCache, name: str):
    metrics, _ = resolve_metrics(["faithfulness", "answer_similarity"])
    judge = ScriptedJudge(script=SCRIPT)
    out = evaluate(_samples(4), metrics, models(judge, embedder=HashingEmbedder()), EvalSettings(claims="llm"),
                   tmp_path / name, cache=cache)
    return judge, out


def _edit(path: Path, sql: str, *params) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(sql, params).rowcount


def test_an_edited_value_is_recomputed_and_counted_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    _, first = _run(tmp_path, cache, "a")
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
    _run(tmp_path, ResultCache(path), "a")
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
    assert main(["cache", "check", str(path)]) in (1, 2)  # damage reported, never a traceback
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
