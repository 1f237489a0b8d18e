"""Sharded evaluation on a local Ray cluster (2 CPUs, 2 actors) gives what a single process gives.

Skipped when ray is not installed (the `ray` extra). The cluster is private, on this machine: no
dashboard, a 200 MB object store, no usage stats.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from offline_eval.data.readers import read_dataset
from offline_eval.engine.cache import ResultCache
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import resolve_metrics
from offline_eval.run.runner import run_in_process
from tests.engine.test_engine import _samples, assert_same_scores

REPO = Path(__file__).resolve().parents[2]
METRICS = ["faithfulness", "context_precision", "answer_similarity", "aggregate"]
N_ROWS, BATCH, MAX_TOKENS = 8, 2, 16


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 1024 * 1024,
             _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ray-data") / "data.jsonl"
    path.write_text("".join(json.dumps(s.to_dict() | {"id": s.id}) + "\n" for s in _samples(N_ROWS)))
    return path


def _setup(tiny_profile):
    """What `offline-eval run --profile tiny --metrics ... --batch-size 2 --max-tokens 16` builds."""
    from offline_eval.run.model_choice import ModelChoice

    metrics, aggregate = resolve_metrics(METRICS)
    choice = ModelChoice(profile=str(tiny_profile), batch_size=BATCH)
    return metrics, aggregate, choice, EvalSettings(verifier="hhem", verifier_classifies=True, max_tokens=MAX_TOKENS)


def _models(choice, metrics):
    """The models a single-process run of ``metrics`` builds from ``choice``."""
    from offline_eval.run.config import configure_models

    return configure_models(choice, {r for m in metrics for r in m.roles})


@pytest.fixture(scope="module")
def reference(tiny_profile, dataset, tmp_path_factory):
    metrics, aggregate, choice, settings = _setup(tiny_profile)
    return run_in_process(read_dataset(dataset), metrics, _models(choice, metrics), settings,
                          tmp_path_factory.mktemp("ray-ref") / "ref", aggregate=aggregate)


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def _assert_same_run(folder: Path, reference, run_info: set[str] = frozenset()) -> None:
    rows, ref_rows = _rows(folder), _rows(reference.output_dir)
    assert [r["id"] for r in rows] == [r["id"] for r in ref_rows]
    assert [r["sample"] for r in rows] == [r["sample"] for r in ref_rows]
    assert_same_scores([r["scores"] for r in rows], [r["scores"] for r in ref_rows])
    summary = json.loads((folder / "summary.json").read_text())
    assert_same_scores(summary["metrics"], reference.summary["metrics"], "summary")
    assert set(summary["run"]) - {"ray"} - run_info == set(reference.summary["run"])
    assert summary["run"]["fingerprint"] == reference.summary["run"]["fingerprint"]
    run, ref_run = (json.loads((f / "run.json").read_text()) for f in (folder, reference.output_dir))
    assert (run["fingerprint"], run["models"]) == (ref_run["fingerprint"], ref_run["models"])


def _run(tiny_profile, dataset, out, **kwargs):
    from offline_eval.run.ray_engine import run_with_ray

    metrics, aggregate, choice, settings = _setup(tiny_profile)
    return run_with_ray(read_dataset(dataset), metrics, settings, choice, out, aggregate=aggregate, **kwargs)


def test_two_actors_match_single_process_and_a_restarted_driver_resumes(
        ray_cluster, tiny_profile, dataset, reference, tmp_path):
    cache = ResultCache(tmp_path / "cache.sqlite")
    seen = []
    out = _run(tiny_profile, dataset, tmp_path / "run", cache=cache, replicas=2, on_sample=seen.append)
    info = out.summary["run"]["ray"]
    assert info["replicas"] == 2 and info["shards"] == 2 and info["actors_started"] == 2
    assert info["retries"] == [] and info["cache_mode"] == "auto" and info["cache_entries_merged"] == 0
    assert sorted(r.id for r in seen) == sorted(r["id"] for r in out.results)  # streamed, one each
    _assert_same_run(tmp_path / "run", reference)
    assert out.stats["computed"] == reference.stats["computed"]  # disjoint shards: nothing done twice

    # A driver killed after 3 rows: its rerun on the folder skips them and gets the rest from the cache.
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "run" / "results.jsonl").write_text("".join(lines[:3]) + lines[3][:20])
    again = _run(tiny_profile, dataset, tmp_path / "run", cache=cache, replicas=2)
    assert again.resumed == 3 and again.summary["run"]["resumed_samples"] == 3
    assert sum(again.stats["computed"].values()) == 0
    _assert_same_run(tmp_path / "run", reference)
    cache.close()


def test_a_killed_actor_is_replaced_and_per_node_caches_are_merged(
        ray_cluster, tiny_profile, dataset, reference, tmp_path):
    driver_cache = ResultCache(tmp_path / "driver.sqlite")
    # Replica 0's first actor calls os._exit(1) after its 3rd committed backend batch; 4 shards of 2.
    out = _run(tiny_profile, dataset, tmp_path / "run", cache=driver_cache, replicas=2, shard_size=2,
               cache_mode="per-node", node_cache=str(tmp_path / "node.sqlite"), crash=(0, 3))
    info = out.summary["run"]["ray"]
    assert len(info["retries"]) == 1 and info["retries"][0]["replica"] == 0
    assert info["actors_started"] == 3
    _assert_same_run(tmp_path / "run", reference)
    # The retried shard reused the batches the dead actor had committed to its node's cache.
    assert sum(out.stats["cache_hits"].values()) > 0
    # Every batch committed on a node reached the driver's cache: a rerun there computes nothing.
    assert info["cache_entries_merged"] >= len(driver_cache) > 0
    metrics, aggregate, choice, settings = _setup(tiny_profile)
    rerun = run_in_process(read_dataset(dataset), metrics, _models(choice, metrics), settings, tmp_path / "local",
                           cache=driver_cache, aggregate=aggregate)
    assert sum(rerun.stats["computed"].values()) == 0
    driver_cache.close()


def test_cli_engine_ray(ray_cluster, tiny_profile, dataset, reference, tmp_path):
    from offline_eval.cli import main

    args = ["run", "--dataset", str(dataset), "--profile", str(tiny_profile), "--quiet", "--no-report",
            "--batch-size", str(BATCH), "--max-tokens", str(MAX_TOKENS), "--metrics", ",".join(METRICS),
            "--cache", str(tmp_path / "cache.sqlite"), "--output", str(tmp_path / "run"),
            "--engine", "ray", "--replicas", "2"]
    assert main(args) == 0
    _assert_same_run(tmp_path / "run", reference,
                     {"dataset", "profile", "starter", "device", "batch_size", "per_row", "models_verified", "threads",
                      "model_details"})


def test_merge_caches(tmp_path):
    from offline_eval.run.ray_engine import merge_caches

    a, b = ResultCache(tmp_path / "a.sqlite"), ResultCache(tmp_path / "b.sqlite")
    a.put_many("embed", [("k1", [1.0]), ("k2", [2.0])])
    b.put_many("embed", [("k2", [9.0]), ("k3", [3.0])])
    a.close(), b.close()
    assert merge_caches(tmp_path / "driver.sqlite", [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]) == 3
    assert merge_caches(tmp_path / "driver.sqlite", [tmp_path / "b.sqlite"]) == 0
    with sqlite3.connect(tmp_path / "driver.sqlite") as db:
        assert dict(db.execute("SELECT key, value FROM results")) == {"k1": "[1.0]", "k2": "[2.0]", "k3": "[3.0]"}


def test_a_plain_run_never_imports_ray(tiny_profile, tmp_path):
    code = (
        "import sys\n"
        "from offline_eval.cli import main\n"
        "import offline_eval.run.ray_engine\n"
        f"rc = main(['run', '--dataset', {str(REPO / 'examples' / 'sample.jsonl')!r}, '--profile', "
        f"{str(tiny_profile)!r}, '--quiet', '--no-report', '--no-cache', '--limit', '2', "
        f"'--metrics', 'answer_similarity', '--output', {str(tmp_path / 'out')!r}])\n"
        "assert rc == 0, rc\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path)
    assert (tmp_path / "out" / "summary.json").exists()


def test_the_private_cluster_listens_on_loopback_only(tmp_path):
    """Issue #15, item 6: every socket the private cluster's processes listen on (gcs_server, raylet,
    workers, the driver) is on 127.0.0.1, not on every interface."""
    pytest.importorskip("ray")
    pytest.importorskip("psutil")  # the subprocess below lists sockets with it
    from offline_eval.run.ray_engine import SINGLE_MACHINE_ENV, secure_private_cluster

    saved = os.environ.pop(SINGLE_MACHINE_ENV, None)
    try:
        secure_private_cluster("2.60.0", None)
        assert os.environ[SINGLE_MACHINE_ENV] == "0"  # set before Ray is imported, read by its processes
    finally:
        os.environ.pop(SINGLE_MACHINE_ENV, None)
        if saved is not None:
            os.environ[SINGLE_MACHINE_ENV] = saved
    code = (
        "import json\n"
        "from importlib.metadata import version\n"
        "from offline_eval.run.ray_engine import _connect, secure_private_cluster\n"
        "secure_private_cluster(version('ray'), None)\n"
        "_connect(None, 1, None)\n"
        "import ray\n"
        "import psutil\n"
        "ray.get(ray.remote(lambda: 1).remote())  # a worker too\n"
        "me = psutil.Process()\n"
        "listening = []\n"
        "for proc in [me, *me.children(recursive=True)]:\n"
        "    try:\n"
        "        conns = proc.net_connections(kind='inet')\n"
        "    except psutil.Error:\n"
        "        continue\n"
        "    listening += [[proc.name(), c.laddr.ip, c.laddr.port] for c in conns if c.status == psutil.CONN_LISTEN]\n"
        "ray.shutdown()\n"
        "print('LISTENING', json.dumps(listening))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ADDRESS",
                                                             SINGLE_MACHINE_ENV)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                         env={**env, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("LISTENING ")), None)
    assert line, out.stderr[-2000:]
    listening = json.loads(line.removeprefix("LISTENING "))
    names = {name for name, _, _ in listening}
    assert any("gcs_server" in n for n in names) and any("raylet" in n for n in names), listening
    public = [item for item in listening if item[1] not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")]
    assert not public, f"listening beyond loopback: {public}"


def test_a_ray_without_token_auth_is_refused_and_a_private_cluster_requires_the_token(tmp_path):
    """A Ray without token auth is refused, and a driver with a wrong token cannot join the private
    cluster (issue #15, item 6: the token guards its loopback ports against the machine's other users)."""
    pytest.importorskip("ray")
    from offline_eval.run.ray_engine import secure_private_cluster
    from offline_eval.runtime.registry import BackendUnavailable

    with pytest.raises(BackendUnavailable, match=r"Ray 2.40.0 has no token authentication.*>= 2.52"):
        secure_private_cluster("2.40.0", None)
    with pytest.raises(BackendUnavailable, match="RAY_AUTH_MODE=disabled"):
        os.environ["RAY_AUTH_MODE"] = "disabled"
        try:
            secure_private_cluster("2.60.0", None)
        finally:
            del os.environ["RAY_AUTH_MODE"]
    code = (
        "import os, subprocess, sys\n"
        "from importlib.metadata import version\n"
        "from offline_eval.run.ray_engine import _connect, secure_private_cluster\n"
        "secure_private_cluster(version('ray'), None)\n"
        "_connect(None, 1, None)\n"
        "import ray\n"
        "gcs = ray.get_runtime_context().gcs_address\n"
        "join = f'import ray; ray.init(address={gcs!r}, log_to_driver=False); print(\"JOINED\")'\n"
        "env = {**os.environ, 'RAY_AUTH_MODE': 'token', 'RAY_AUTH_TOKEN': 'not-the-token'}\n"
        "r = subprocess.run([sys.executable, '-c', join], capture_output=True, text=True, timeout=120, env=env)\n"
        "ray.shutdown()\n"
        "assert r.returncode != 0 and 'JOINED' not in r.stdout, r.stdout\n"
        "print('REFUSED')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ADDRESS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                         env={**env, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    assert "REFUSED" in out.stdout, out.stderr[-2000:]
