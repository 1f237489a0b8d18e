"""--threads auto: torch's own choice on a quiet machine, the cores left over and sleeping waits on a
busy one (issue #19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offline_eval.runtime.threads import choose_threads, other_runnable, parse_threads

REPO = Path(__file__).resolve().parents[2]


def test_auto_leaves_a_quiet_machine_to_torch_and_shares_a_busy_one(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    quiet = choose_threads("auto", cores=2, busy=0)
    assert quiet.threads is None and quiet.wait_policy is None
    one = choose_threads("auto", cores=2, busy=1)
    assert one.threads == 1 and one.wait_policy == "PASSIVE"
    crowded = choose_threads(None, cores=2, busy=3)
    assert crowded.threads == 1 and crowded.wait_policy == "PASSIVE" and crowded.mode == "auto"
    many = choose_threads("auto", cores=16, busy=3)
    assert many.threads == 13
    fixed = choose_threads(4, cores=2, busy=9)
    assert fixed.mode == "fixed" and fixed.threads == 4 and fixed.busy is None
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's own setting is kept
    assert choose_threads("auto", cores=2, busy=3).wait_policy == "ACTIVE"


def test_parse_and_observe():
    assert parse_threads("auto") == "auto" and parse_threads("3") == 3
    for bad in ("0", "x", "-1"):
        with pytest.raises(ValueError, match="--threads"):
            parse_threads(bad)
    assert other_runnable(samples=2, interval=0.0) >= 0


def test_a_busy_machine_gets_passive_waits_before_torch_loads(tmp_path):
    """Beside two busy loops, `run` takes one thread with sleeping waits, set before torch is imported,
    and says so in run.json."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        data = tmp_path / "d.jsonl"
        data.write_text(json.dumps({"id": "a", "question": "q", "answer": "a b", "ground_truth": "a c"}) + "\n")
        code = ("import os, sys\n"
                "from offline_eval.cli import main\n"
                f"rc = main(['run', '--dataset', {str(data)!r}, '--profile', 'starter', '--metrics', 'rouge_l', "
                f"'--quiet', '--no-report', '--no-cache', '--output', {str(tmp_path / 'run')!r}])\n"
                "print('POLICY', os.environ.get('OMP_WAIT_POLICY'))\n"
                "sys.exit(rc)\n")
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, "PYTHONPATH": str(REPO)}, timeout=120)
    finally:
        for loop in loops:
            loop.kill()
    assert done.returncode == 0, done.stderr
    threads = json.loads((tmp_path / "run" / "run.json").read_text())["threads"]
    assert threads["mode"] == "auto" and threads["busy"] >= 1
    assert threads["wait_policy"] == "PASSIVE" and "POLICY PASSIVE" in done.stdout
    assert threads["threads"] == max(1, threads["cores"] - threads["busy"])
