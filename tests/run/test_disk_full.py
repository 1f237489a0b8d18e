"""A full or failing disk (issue #33, item 1): one line naming the file and the cause, exit 1, no torn
line or half-written temporary file left, nothing saved lost, and the rerun of the same command resumes.
The cache's SQLite reporting a full disk is not damage.

Real failures where this machine allows them: a file size limit (RLIMIT_FSIZE, any user) fails a real
write with EFBIG part way, a tmpfs of a few hundred KiB (root only; skipped otherwise) fills for real
(ENOSPC), and SQLite's ``max_page_count`` makes it raise its real "database or disk is full"
(SQLITE_FULL). A failing fsync of the final rewrite is simulated at that call.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.engine.cache import ResultCache
from offline_eval.run.folder import RunFolder

REPO = Path(__file__).resolve().parents[2]


def _dataset(path: Path, rows: int = 300) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for i in range(rows):
            out.write(json.dumps({"id": f"s{i}", "question": f"question {i}", "answer": "word " * 60 + str(i),
                                  "ground_truth": "word " * 50 + str(i % 7), "contexts": ["c"]}) + "\n")
    return path


def _run_args(data: Path, out: Path) -> list[str]:
    return ["run", "--dataset", str(data), "--metrics", "rouge_l", "--no-cache", "--quiet", "--no-report",
            "--window", "50", "--output", str(out)]


def _scores(folder: Path) -> list[tuple[str, dict]]:
    return [(row["id"], row["scores"]) for row in map(json.loads, (folder / "results.jsonl").read_text().splitlines())]


def _assert_one_resumable_line(err: str, path: Path, cause: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"offline-eval: {path}: {cause}"), lines
    assert "nothing already saved is lost" in lines[0] and "rerun the same command to resume" in lines[0], lines
    assert "damaged" not in lines[0]


def test_a_write_that_fails_part_way_leaves_no_torn_line_and_the_rerun_resumes(tmp_path: Path, capsys) -> None:
    """A real write failing in the middle of a window (the kernel's file size limit: EFBIG, after a
    short write) in a real process: one line, exit 1, results.jsonl holding whole windows only."""
    data = _dataset(tmp_path / "d.jsonl")
    assert main(_run_args(data, tmp_path / "whole")) == 0
    size = (tmp_path / "whole" / "results.jsonl").stat().st_size
    limit = size // 3  # the third or fourth window of six crosses it

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "offline_eval.cli", *_run_args(data, out)], capture_output=True,
                          text=True, cwd=tmp_path, preexec_fn=limited,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 1, done.stderr
    _assert_one_resumable_line(done.stderr, out / "results.jsonl", "File too large")
    assert "ulimit -f" in done.stderr
    text = (out / "results.jsonl").read_text()
    assert text.endswith("\n") and len(text) <= limit
    kept = text.splitlines()
    assert kept and len(kept) % 50 == 0 and all(json.loads(line) for line in kept)  # whole windows
    assert not (out / "results.jsonl.tmp").exists()
    capsys.readouterr()
    assert main(_run_args(data, out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["resumed_samples"] == len(kept)
    assert _scores(out) == _scores(tmp_path / "whole")


def test_a_failed_rewrite_at_the_end_removes_its_temporary_file(tmp_path: Path, monkeypatch) -> None:
    """The final rewrite of results.jsonl in dataset order goes to results.jsonl.tmp; when its fsync
    fails (a full disk, simulated at that call) the copy is removed and results.jsonl is untouched."""
    real_fsync = os.fsync
    tmp = tmp_path / "results.jsonl.tmp"

    def fsync(fd: int) -> None:
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(tmp.resolve()):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    with RunFolder(tmp_path) as folder:
        folder.open("fp", {})
        folder.append([{"id": "b", "scores": {"m": {"value": 0.5}}}, {"id": "a", "scores": {"m": {"value": 1.0}}}])
        before = (tmp_path / "results.jsonl").read_bytes()
        monkeypatch.setattr(os, "fsync", fsync)
        with pytest.raises(OSError) as failed:
            folder.finish({"a": 0, "b": 1}, ["m"], {}, summarize=lambda v, r, rows: {"values": v})
        monkeypatch.undo()
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(tmp_path / "results.jsonl")
    assert not tmp.exists() and (tmp_path / "results.jsonl").read_bytes() == before
    with RunFolder(tmp_path) as folder:  # the rerun
        assert folder.open("fp", {}) == {"a", "b"}
        summary, n = folder.finish({"a": 0, "b": 1}, ["m"], {}, summarize=lambda v, r, rows: {"values": v})
    assert n == 2 and summary["values"] == {"m": [1.0, 0.5]}


@contextmanager
def _small_disk(path: Path, kib: int):
    """A tmpfs of ``kib`` KiB at ``path`` (root only: skipped where mounting is not allowed)."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _grow(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=64m", str(path)], check=True, capture_output=True)


@pytest.mark.parametrize("phase", ["append", "finish"])
def test_a_full_disk_for_real_is_one_line_and_the_rerun_resumes(tmp_path: Path, capsys, phase: str) -> None:
    """A real full disk: while the windows are appended (half the results fit), or while results.jsonl
    is rewritten in dataset order at the end (the results fit, their copy does not)."""
    data = _dataset(tmp_path / "d.jsonl")
    assert main(_run_args(data, tmp_path / "whole")) == 0
    size = (tmp_path / "whole" / "results.jsonl").stat().st_size
    kib = (size // 2 if phase == "append" else size + size // 2) // 1024
    with _small_disk(tmp_path / "disk", kib) as disk:
        out = disk / "run"
        capsys.readouterr()
        assert main(_run_args(data, out)) == 1
        _assert_one_resumable_line(capsys.readouterr().err, out / "results.jsonl", "No space left on device")
        text = (out / "results.jsonl").read_text()
        assert text.endswith("\n") and len(text.splitlines()) == (len(text.splitlines()) // 50) * 50
        assert not (out / "results.jsonl.tmp").exists() and not (out / "summary.json").exists()
        if phase == "finish":
            assert len(text.splitlines()) == 300  # every window was kept; only the rewrite failed
        _grow(disk)
        assert main(_run_args(data, out)) == 0
        assert _scores(out) == _scores(tmp_path / "whole")


# -- the cache: SQLite's "database or disk is full" is a full disk, not damage --------------------------
def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def _fill(cache: ResultCache) -> None:
    """No page more for the file: SQLite raises its real SQLITE_FULL at the next page it needs."""
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_cache_is_not_called_damaged_and_keeps_what_it_committed(tmp_path: Path, caplog) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    kept = {f"k{i}": [float(i)] * 4 for i in range(300)}  # a journal of several pages
    cache.put_many("embed", list(kept.items()))
    _fill(cache)
    with pytest.raises(OSError) as full:
        cache.put_many("embed", [(f"n{i}", [float(i)] * 100) for i in range(500)])
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(path)
    assert "database or disk is full" in str(full.value) and "damaged" not in str(full.value)
    assert "move" not in str(full.value)
    assert cache.get_many(list(kept)) == kept  # the connection is usable, the earlier batch kept
    cache.close()  # the fold needs pages too: the journal is left to the next run, and that is no damage
    assert "folded in by the next run" in caplog.text and "database or disk is full" in caplog.text
    assert "damaged" not in caplog.text and "no transaction" not in caplog.text
    assert any(t.startswith("journal_") for t in _tables(path))
    with ResultCache(path) as again:  # room again (the limit was the connection's): folded here
        assert again.get_many(list(kept)) == kept and again.repaired == 0
    assert _tables(path) == ["results"]


def test_a_run_whose_cache_fills_the_disk_says_so_in_one_line_and_the_rerun_resumes(tmp_path: Path, capsys,
                                                                                  monkeypatch) -> None:
    import offline_eval.cli.run as run_command

    data = _dataset(tmp_path / "d.jsonl", rows=120)
    script = tmp_path / "judge.json"
    script.write_text(json.dumps({"default_probs": {"1": 1.0}}), encoding="utf-8")
    path = tmp_path / "cache.sqlite"
    args = ["run", "--dataset", str(data), "--metrics", "rubrics_score", "--profile", "starter", "--judge-backend",
            "scripted", "--judge", str(script), "--cache", str(path), "--quiet", "--no-report", "--window", "40",
            "--output", str(tmp_path / "run")]

    def full_cache(_args):  # the run's cache on a disk with room for a few batches
        cache = ResultCache(path)
        cache.put_many("options", [("first", {"1": 1.0})])
        pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
        cache._db.execute(f"PRAGMA max_page_count = {pages + 2}")
        return cache

    monkeypatch.setattr(run_command, "open_cache", full_cache)
    assert main(args) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "damaged" not in err and "aside" not in err, err
    assert lines[0].startswith(f"offline-eval: cache {path}: database or disk is full; nothing already saved is "
                               "lost: free some space, then rerun the same command to resume"), lines
    monkeypatch.undo()
    assert main(args) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["n_samples"] == 120 and summary["run"]["engine"]["cache_hits"]["options"] > 0


class _InterruptedAt:
    """The cache's connection, with a Ctrl-C arriving just before one statement (``sql``), as Python
    raises KeyboardInterrupt between two statements."""

    def __init__(self, db: sqlite3.Connection, sql: str) -> None:
        self._db, self._sql = db, sql

    def execute(self, sql: str, *params):
        if sql == self._sql:
            self._sql = None
            raise KeyboardInterrupt
        return self._db.execute(sql, *params)

    def __getattr__(self, name: str):
        return getattr(self._db, name)


def test_a_ctrl_c_inside_a_batch_s_transaction_loses_only_that_batch(tmp_path: Path, caplog) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResultCache(path)
    cache.put_many("embed", [("k1", [1.0])])
    cache._db = _InterruptedAt(cache._db, "COMMIT")
    with pytest.raises(KeyboardInterrupt):
        cache.put_many("embed", [("k2", [2.0])])
    cache.close()  # as the run unwinds: the transaction was ended, so the journal folds
    assert "damaged" not in caplog.text and "transaction" not in caplog.text, caplog.text
    assert _tables(path) == ["results"]
    with ResultCache(path) as again:
        assert again.get_many(["k1", "k2"]) == {"k1": [1.0]}
