"""Offline for real: a whole `offline-eval run` with socket creation blocked, and the offline switches."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from offline_eval.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


class NetworkBlocked(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[tuple] = []

    class GuardedSocket(socket.socket):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if family in (socket.AF_INET, socket.AF_INET6, -1):
                attempts.append((family, type))
                raise NetworkBlocked(f"offline-eval opened a network socket (family={family})")
            super().__init__(family, type, proto, fileno)

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise NetworkBlocked(f"offline-eval tried to connect to {args[:1]}")

    monkeypatch.setattr(socket, "socket", GuardedSocket)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts


def test_whole_run_with_sockets_blocked(tiny_profile, tmp_path, no_network):
    code = main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--verifier", "hhem",
                 "--metrics", "faithfulness,answer_relevancy,context_precision,answer_similarity,rouge_l",
                 "--max-tokens", "16", "--output", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"),
                 "--quiet"])
    assert code == 0
    assert no_network == []
    rows = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 12
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["answer_similarity"]["n_scored"] == 11
    assert (tmp_path / "run" / "report.html").exists()


def test_the_guard_itself_catches_a_connection(no_network):
    with pytest.raises(NetworkBlocked):
        socket.create_connection(("127.0.0.1", 9))
    assert no_network


def test_offline_switches_are_set_on_import():
    import offline_eval  # noqa: F401

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert os.environ["VLLM_NO_USAGE_STATS"] == "1"


def test_no_trust_remote_code_anywhere():
    root = Path(__file__).resolve().parents[2] / "offline_eval"
    offenders = [str(p) for p in root.rglob("*.py") if "trust_remote_code=True" in p.read_text(encoding="utf-8")]
    assert offenders == []
