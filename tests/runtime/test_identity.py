"""A model's identity is its content (issue #15, item 1): a changed weight file is never answered from
the cache of the old weights, and a file that differs from its manifest stops the run before loading."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.runtime.identity import (
    CALIBRATION_FILE, HashMemo, ModelChanged, content_fingerprint, file_hashes, sha256_file,
)
from tests import tiny_models


def _flip_byte(path: Path, offset: int = -100) -> None:
    """One byte changed in place: same path, same size (and mtime set back, as a careless copy might)."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "model.safetensors").write_bytes(os.urandom(3 * 1024 * 1024))
    return folder


def test_fingerprint_follows_content_not_location_or_side_files(tmp_path: Path) -> None:
    memo = HashMemo(tmp_path / "memo.sqlite")
    folder = _folder(tmp_path)
    first = content_fingerprint(folder, memo=memo)
    (folder / ".cache").mkdir()
    (folder / ".cache" / "lock").write_text("x")
    (folder / CALIBRATION_FILE).write_text("{}")
    (folder / "README.md").write_text("notes")
    assert content_fingerprint(folder, memo=memo) == first  # hidden entries, calibration, README ignored
    moved = shutil.copytree(folder, tmp_path / "elsewhere")
    assert content_fingerprint(moved, memo=memo) == first  # same content, other place: same model
    _flip_byte(folder / "model.safetensors", offset=1024 * 1024 + 7)  # in the middle, not sampled ends
    second = content_fingerprint(folder, memo=memo)
    assert second != first
    (folder / "config.json").write_text('{"a": 2}')
    assert content_fingerprint(folder, memo=memo) not in (first, second)


def test_memo_answers_from_stat_and_rehashes_a_rewritten_file(tmp_path: Path) -> None:
    memo = HashMemo(tmp_path / "memo.sqlite")
    weights = _folder(tmp_path) / "model.safetensors"
    assert memo.remembered(weights) is None
    digest = memo.sha256(weights)
    assert digest == sha256_file(weights)
    assert HashMemo(tmp_path / "memo.sqlite").remembered(weights) == digest  # persisted across processes
    _flip_byte(weights)
    assert memo.remembered(weights) is None  # ctime moved although size and mtime did not
    assert memo.sha256(weights) == sha256_file(weights) != digest


def test_manifest_mismatch_raises_unless_verification_is_off(tmp_path: Path) -> None:
    memo = HashMemo(tmp_path / "memo.sqlite")
    folder = _folder(tmp_path)
    manifest = {"model.safetensors": sha256_file(folder / "model.safetensors")}
    assert file_hashes(folder, manifest, memo=memo)["model.safetensors"] == manifest["model.safetensors"]
    _flip_byte(folder / "model.safetensors")
    with pytest.raises(ModelChanged, match=r"judge .*model\.safetensors has sha256 .*--no-verify"):
        file_hashes(folder, manifest, memo=memo, label="judge")
    unchecked = file_hashes(folder, manifest, memo=memo, verify=False)
    assert unchecked["model.safetensors"] == sha256_file(folder / "model.safetensors")  # memo knows better
    with pytest.raises(ModelChanged, match="listed in its manifest but absent"):
        file_hashes(folder, {**manifest, "tokenizer.json": "0" * 64}, memo=memo)


def test_without_verification_a_file_overwritten_in_place_changes_the_identity(tmp_path: Path) -> None:
    """--no-verify trusted the manifest's hash for a file it had never read, so a checkpoint overwritten in
    place kept its identity and its old cached answers (issue #33)."""
    memo = HashMemo(tmp_path / "memo.sqlite")
    folder = _folder(tmp_path)
    manifest = {"model.safetensors": sha256_file(folder / "model.safetensors")}
    before = file_hashes(folder, manifest, memo=memo, verify=False)["model.safetensors"]
    assert before.startswith("unverified:") and before != manifest["model.safetensors"]  # not read, not trusted
    assert file_hashes(folder, manifest, memo=memo, verify=False)["model.safetensors"] == before  # stable
    _flip_byte(folder / "model.safetensors")
    assert file_hashes(folder, manifest, memo=memo, verify=False)["model.safetensors"] != before
    verified = file_hashes(folder, {}, memo=memo)["model.safetensors"]  # hashed once, then known unread
    assert file_hashes(folder, manifest, memo=memo, verify=False)["model.safetensors"] == verified


def _judge_profile(tmp_path: Path, *, manifest: bool) -> tuple[Path, Path]:
    judge = tiny_models.build_judge(tmp_path / "judge")
    files = {"model.safetensors": sha256_file(judge / "model.safetensors")} if manifest else {}
    profile = tmp_path / "p.toml"
    lines = ["[profile]", 'name = "t"', "[judge]", 'backend = "transformers"', f'path = "{judge}"']
    if files:
        lines += ["[judge.files]", f'"model.safetensors" = "{files["model.safetensors"]}"']
    lines += ["[verifier]", 'backend = "judge"', "[embedder]", 'backend = "hashing"']
    profile.write_text("\n".join(lines) + "\n")
    return judge, profile


def _run(profile: Path, data: Path, out: Path, cache: Path, *extra: str) -> int:
    return main(["run", "--dataset", str(data), "--profile", str(profile), "--metrics", "faithfulness",
                 "--output", str(out), "--cache", str(cache), "--quiet", "--no-report", "--threads", "1",
                 "--max-tokens", "8", *extra])


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q?", "answer": "Paris is in France.",
                                "contexts": ["Paris is the capital of France."]}) + "\n")
    return data


def test_run_never_answers_a_changed_model_from_the_old_cache(tmp_path: Path) -> None:
    judge, profile = _judge_profile(tmp_path, manifest=False)
    data, cache = _data(tmp_path), tmp_path / "cache.sqlite"
    assert _run(profile, data, tmp_path / "r1", cache) == 0
    first = json.loads((tmp_path / "r1" / "run.json").read_text())["models"]["judge"]
    _flip_byte(judge / "model.safetensors")
    assert _run(profile, data, tmp_path / "r2", cache) == 0
    summary = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert json.loads((tmp_path / "r2" / "run.json").read_text())["models"]["judge"] != first
    assert summary["run"]["engine"]["computed"], "a changed model must compute, not reuse the old answers"
    assert not summary["run"]["engine"]["cache_hits"]


def test_run_stops_before_loading_on_a_manifest_mismatch(tmp_path: Path, capsys) -> None:
    judge, profile = _judge_profile(tmp_path, manifest=True)
    data, cache = _data(tmp_path), tmp_path / "cache.sqlite"
    assert _run(profile, data, tmp_path / "r1", cache) == 0
    _flip_byte(judge / "model.safetensors")
    capsys.readouterr()
    assert _run(profile, data, tmp_path / "r2", cache) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.safetensors has sha256" in err[0] and "--no-verify" in err[0]
    assert not (tmp_path / "r2" / "results.jsonl").exists()
    assert _run(profile, data, tmp_path / "r3", cache, "--no-verify") == 0
    run = json.loads((tmp_path / "r3" / "run.json").read_text())
    assert run["models_verified"] is False
