"""Sharded evaluation on a Ray cluster: ``offline-eval run --engine ray``.

The dataset's unfinished samples are cut into contiguous shards. Each replica is a Ray actor that
builds its models once, from the run's :class:`~offline_eval.run.model_choice.ModelChoice` (profile name or
manifest path, the model flags, device, batch sizes; its paths made absolute on the driver), and runs
the ordinary staged engine (``runner.run_in_process``) over every shard it is given. Rows and
committed cache batches stream back to the driver as they finish; the driver writes
``results.jsonl`` row by row, then the sorted file, ``summary.json`` and ``run.json`` exactly as a
single-process run does (same fingerprint: a single-process run folder can be resumed
with Ray and the other way round).

Fault tolerance
    * An actor that dies (node lost, OOM, ``ray.kill``) is replaced by a fresh one; the rows of its
      shard that had not reached the driver are retried (at most ``max_attempts`` times per shard).
    * Model work is cached batch by batch. ``cache_mode="shared"``: every actor opens the driver's
      SQLite file (one machine, or one shared filesystem). ``"per-node"``: each actor opens a cache
      on its own node (``node_cache``, default: the driver's cache path as seen on that node) and
      streams every batch it commits to the driver, which merges it into the driver's cache; so after
      the run the driver's cache holds all the work, as after a single-process run.
      ``"auto"`` (default): shared for actors on the driver's node, per-node for the others.
      :func:`merge_caches` merges SQLite cache files after the fact (e.g. node caches copied back).
    * A driver restarted on the same output folder skips the samples already in ``results.jsonl``
      under the same fingerprint (the runner's resume).

Ray is imported only inside the functions here, and this module only by ``--engine ray``.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from offline_eval.people.calibration import Calibration
from offline_eval.data.schema import Sample
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import ProgressFactory
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.base import Metric
from offline_eval.records import ResultRow
from offline_eval.run.folder import RunFolder, RunOutput
from offline_eval.run.model_choice import ModelChoice
from offline_eval.run.runner import DEFAULT_WINDOW, RunSink, run_in_process
from offline_eval.runtime.registry import BackendUnavailable

log = logging.getLogger(__name__)

# Test-only fault injection: "REPLICA:BATCHES" makes the first actor of that replica os._exit(1) once
# it has committed that many backend batches.
CRASH_ENV = "OFFLINE_EVAL_RAY_CRASH_AFTER"
OBJECT_STORE_BYTES = 200 * 1024 * 1024


def replica_device(device: str | None, gpus: float) -> str | None:
    """Inside an actor Ray exposes only its own GPUs (CUDA_VISIBLE_DEVICES): any ``cuda[:N]`` becomes
    the replica's first GPU (vLLM's tensor parallelism spans all of them)."""
    if gpus and (device is None or device.startswith("cuda")):
        return "cuda:0"
    return device


def replica_models(choice: ModelChoice, roles: Iterable[str], gpus: float) -> Models:
    """A replica's models: ``choice`` resolved on the replica's node (each node checks its own files
    unless ``verify`` is off), on the replica's device. With more than one GPU per replica, a judge whose
    backend takes ``tensor_parallel_size`` spans them all (vLLM)."""
    profile, roles = choice.profile_for(roles)
    tensor_parallel_size = int(gpus)
    if tensor_parallel_size > 1 and profile.judge.declaration.declares("tensor_parallel_size"):
        profile.judge.options["tensor_parallel_size"] = tensor_parallel_size
    return replace(choice, device=replica_device(choice.device, gpus)).models_of(profile, roles)


class _StreamingCache(ResultCache):
    """A ResultCache that also reports each committed batch (for per-node caches merged by the driver)
    and, for tests, can kill its process after N batches."""

    def __init__(self, path: str | Path | None, crash_after: int | None = None) -> None:
        super().__init__(path)
        self.sink: queue.Queue | None = None
        self.batches = 0
        self.crash_after = crash_after

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        found = self.lookup(keys)
        if self.sink is not None and found:  # hits on a node cache reach the driver's cache too
            by_kind: dict[str, list[tuple[str, Any]]] = {}
            for key, (kind, value) in found.items():
                by_kind.setdefault(kind, []).append((key, value))
            for kind, pairs in by_kind.items():
                self.sink.put(("cache", kind, pairs))
        return {key: value for key, (_, value) in found.items()}

    def put_many(self, kind: str, items: Iterable[tuple[str, Any]]) -> None:
        items = list(items)
        super().put_many(kind, items)
        self.batches += 1
        if self.sink is not None:
            self.sink.put(("cache", kind, items))
        if self.crash_after is not None and self.batches >= self.crash_after:
            log.warning("fault injection: exiting after %d batches", self.batches)
            os._exit(1)


class ShardWorker:
    """One replica (used as a Ray actor): models built once, any number of shards run through them."""

    def __init__(self, choice: ModelChoice, roles: Iterable[str], metrics: list[Metric], settings: EvalSettings,
                 aggregate: bool, cache_mode: str, cache_path: str | None, node_cache: str | None,
                 driver_node: str | None, gpus: float = 0, crash_after: int | None = None) -> None:
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.models = replica_models(choice, roles, gpus)
        self.metrics, self.settings, self.aggregate = metrics, settings, aggregate
        local = cache_mode == "shared" or (cache_mode == "auto" and self.node == driver_node)
        self.streams_cache = bool(cache_path) and not local
        path = cache_path if local else (node_cache or cache_path)
        self.cache = _StreamingCache(Path(path).expanduser() if path else None, crash_after)

    def info(self) -> dict[str, Any]:
        return {"identities": self.models.identities(), "node": self.node, "host": socket.gethostname(),
                "pid": os.getpid(), "streams_cache": self.streams_cache,
                "cache": str(self.cache.path) if self.cache.path else None}

    def close_cache(self) -> None:
        self.cache.close()

    def run_shard(self, samples: list[Sample], per_row: bool = False):
        """Generator (a Ray streaming method): lists of events ("row", row) / ("cache", kind, pairs) /
        ("stats", engine stats), as they happen."""
        events: queue.Queue = queue.Queue()
        self.cache.sink = events if self.streams_cache else None

        def work() -> None:
            try:
                with tempfile.TemporaryDirectory(prefix="offline-eval-shard-") as scratch:
                    out = run_in_process(samples, self.metrics, self.models, self.settings, scratch,
                                         cache=self.cache, aggregate=self.aggregate, per_row=per_row,
                                         on_sample=lambda row: events.put(("row", row)))
                events.put(("stats", out.stats))
            except BaseException as exc:  # re-raised in the generator: the driver sees a task error
                events.put(("error", exc))
            events.put(None)

        thread = threading.Thread(target=work, name="offline-eval-shard", daemon=True)
        thread.start()
        finished = False
        while not finished:
            chunk = [events.get()]
            while True:  # coalesce whatever else is already waiting
                try:
                    chunk.append(events.get_nowait())
                except queue.Empty:
                    break
            if chunk[-1] is None:
                finished = True
                chunk.pop()
            for event in chunk:
                if event[0] == "error":
                    raise event[1]
            if chunk:
                yield chunk
        thread.join()
        self.cache.sink = None


def _retire(actor: Any) -> None:
    """End a replica that finished its work: its cache journal folded into the file first, so the next
    run on that file need not (best effort: a replica that cannot answer is killed all the same)."""
    import ray

    try:
        ray.get(actor.close_cache.remote(), timeout=120)
    except Exception as exc:  # noqa: BLE001 - the kill below ends it whatever went wrong
        log.warning("replica's cache not closed (%s); the next run on that file folds its journal", exc)
    ray.kill(actor, no_restart=True)


def merge_caches(target: str | Path | ResultCache, sources: Iterable[str | Path]) -> int:
    """Merge SQLite result caches (e.g. per-node caches copied to the driver) into ``target``;
    entries already there are kept. Returns the number of entries added."""
    cache = target if isinstance(target, ResultCache) else ResultCache(Path(target).expanduser())
    if cache.path is None:
        raise ValueError("cannot merge into an in-memory cache")
    try:
        added = 0
        for source in sources:
            source = Path(source).expanduser()
            if source.resolve() != cache.path.resolve():
                added += cache.merge_from(source)
        return added
    finally:
        if cache is not target:
            cache.close()


@dataclass
class _Shard:
    index: int
    samples: list[Sample]
    attempt: int = 0


class _Scheduler:
    """Shards waiting, shards in flight; an idle replica waits while a failing shard may come back."""

    def __init__(self, shards: list[_Shard]) -> None:
        self.pending = deque(shards)
        self.in_flight = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()

    def take(self) -> _Shard | None:
        with self.cond:
            while not self.pending and self.in_flight and self.error is None:
                self.cond.wait()
            if self.error is not None or not self.pending:
                return None
            self.in_flight += 1
            return self.pending.popleft()

    def done(self, retry: _Shard | None = None, error: BaseException | None = None) -> None:
        with self.cond:
            self.in_flight -= 1
            if retry is not None:
                self.pending.appendleft(retry)
            if error is not None and self.error is None:
                self.error = error
            self.cond.notify_all()


AUTH_ENV = "RAY_AUTH_MODE"
# Ray's single-machine mode (what it uses on macOS and Windows): with it off, the node address is
# 127.0.0.1 and gcs_server, raylets, workers and the driver listen on the loopback interface only.
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
TOKEN_AUTH_SINCE = (2, 52)  # the first Ray with token authentication (docs.ray.io: ray-security/token-auth)
TOKEN_AUTH_DEFAULT_SINCE = (2, 59)  # token authentication on by default for local clusters


def _version_tuple(version: str) -> tuple[int, int]:
    parts = []
    for piece in (version.split(".") + ["0"])[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return parts[0], parts[1]


def secure_private_cluster(version: str, address: str | None) -> None:
    """Refuse a Ray too old to authenticate its cluster traffic; keep the private cluster on loopback
    and behind its token.

    A private cluster is started in Ray's single-machine mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``):
    on Linux Ray otherwise replaces the node address 127.0.0.1 with the machine's reachable address and
    every server listens on all interfaces (seen with Ray 2.60). Token authentication stays required as
    a second guard against other users of the same machine. Ray reads both variables when it is
    imported, so this runs before ``import ray`` (:func:`_connect` covers a Ray imported earlier).
    """
    if _version_tuple(version) < TOKEN_AUTH_SINCE:
        raise BackendUnavailable(
            f"Ray {version} has no token authentication (anything reaching its ports could run code); "
            f"--engine ray needs Ray >= {'.'.join(map(str, TOKEN_AUTH_SINCE))}: pip install 'offline-eval[ray]'")
    private = (address or os.environ.get("RAY_ADDRESS") or "local") == "local"
    mode = os.environ.get(AUTH_ENV, "").lower()
    if private and mode == "disabled":
        raise BackendUnavailable(f"{AUTH_ENV}=disabled: offline-eval's private Ray cluster must require "
                                 "Ray's token (other users of this machine can reach its ports); unset it")
    if private:
        _single_machine_mode()
    if private and not mode and _version_tuple(version) < TOKEN_AUTH_DEFAULT_SINCE and "ray" not in sys.modules:
        os.environ[AUTH_ENV] = "token"


def _single_machine_mode() -> None:
    """Ray's single-machine mode, for this process (Ray reads it at import: set on its constants too when
    Ray came in earlier) and for the cluster's processes (they inherit the variable)."""
    os.environ[SINGLE_MACHINE_ENV] = "0"
    if "ray" in sys.modules:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False


def _connect(address: str | None, num_cpus: int, init_kwargs: dict[str, Any] | None) -> bool:
    """ray.init unless already connected. ``None``: $RAY_ADDRESS if set, else a private local cluster
    listening on 127.0.0.1 only (no dashboard, small object store, token authentication: see
    :func:`secure_private_cluster`); ``"local"``: always a private one; ``"auto"`` or ``HOST:PORT``: an
    existing cluster. Returns whether we connected (and so must shut down)."""
    import ray

    if ray.is_initialized():
        return False
    from offline_eval.offline import enforce_offline

    enforce_offline()  # RAY_USAGE_STATS_ENABLED=0 and the HF switches, inherited by local workers
    if address is None:
        address = os.environ.get("RAY_ADDRESS") or "local"
    kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address == "local":
        kwargs.update(num_cpus=num_cpus, include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES,
                      _node_ip_address="127.0.0.1")
        _single_machine_mode()  # again: a caller may have imported Ray without secure_private_cluster
    else:
        kwargs["address"] = address
    kwargs.update(init_kwargs or {})
    ray.init(**kwargs)
    return True


def _merge_stats(total: dict[str, Any], part: dict[str, Any]) -> None:
    for name, value in part.items():
        if isinstance(value, dict):
            bucket = total.setdefault(name, {})
            for kind, count in value.items():
                bucket[kind] = bucket.get(kind, 0) + count
        else:
            total[name] = total.get(name, 0) + value


def _crash_plan(crash: tuple[int, int] | None) -> tuple[int, int] | None:
    if crash is not None:
        return crash
    text = os.environ.get(CRASH_ENV)
    if not text:
        return None
    replica, _, batches = text.partition(":")
    return int(replica), int(batches)


def run_with_ray(samples: list[Sample], metrics: list[Metric], settings: EvalSettings, choice: ModelChoice,
                 output_dir: str | Path, *, roles: Iterable[str] | None = None, cache: ResultCache | None = None,
                 aggregate: bool = False, per_row: bool = False, progress: ProgressFactory | None = None,
                 run_info: dict[str, Any] | None = None,
                 on_sample: Callable[[ResultRow], None] | None = None,
                 replicas: int = 2, gpus_per_replica: float = 0, cpus_per_replica: float = 1,
                 address: str | None = None, shard_size: int | None = None, cache_mode: str = "auto",
                 node_cache: str | None = None, max_attempts: int = 3,
                 ray_init_kwargs: dict[str, Any] | None = None,
                 crash: tuple[int, int] | None = None,
                 calibrations: list[Calibration] | None = None, overwrite: bool = False) -> RunOutput:
    """``runner.run_in_process`` on a Ray cluster: same output files, same rows, same resume.

    Every replica builds the models of ``choice`` for ``roles`` (default: those the metrics use; its
    relative paths are made absolute here, for replicas that run elsewhere). ``cache`` is the driver's
    cache (its path is shared with same-node actors, and per-node work is merged into it).
    ``shard_size`` default: one shard per replica (the largest stages, as a single process batches
    them). ``crash=(replica, batches)``: test-only fault injection (or
    $OFFLINE_EVAL_RAY_CRASH_AFTER="REPLICA:BATCHES").
    """
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        secure_private_cluster(installed("ray"), address)
    except PackageNotFoundError:
        raise BackendUnavailable("--engine ray needs Ray: pip install 'offline-eval[ray]'") from None

    if cache_mode not in ("auto", "shared", "per-node"):
        raise ValueError(f"cache_mode must be auto, shared or per-node, not {cache_mode!r}")
    plan = _RayPlan(choice=choice.portable(),
                    roles=tuple(sorted(roles if roles is not None else {r for m in metrics for r in m.roles})),
                    replicas=max(1, int(replicas)), gpus=float(gpus_per_replica or 0),
                    cpus_per_replica=cpus_per_replica, shard_size=shard_size, cache_mode=cache_mode,
                    node_cache=node_cache, max_attempts=max_attempts, crash=_crash_plan(crash))
    folder = RunFolder(output_dir)
    folder.lock()  # before anything starts: a second run into this folder stops here
    try:
        started_at = time.perf_counter()
        owns_ray = _connect(address, max(1, math.ceil(plan.replicas * cpus_per_replica)), ray_init_kwargs)
        try:
            sink, facts = _drive(plan, folder, samples, metrics, settings, cache=cache, aggregate=aggregate,
                                 per_row=per_row, progress=progress, run_info=run_info, on_sample=on_sample,
                                 overwrite=overwrite)
        finally:
            if owns_ray:
                import ray

                ray.shutdown()
        stats = facts.pop("stats") or _no_engine_stats()
        facts["wall_s"] = round(time.perf_counter() - started_at, 3)
        return sink.finish(stats, calibrations,
                           window=DEFAULT_WINDOW,  # each actor scores its shard in windows of this many rows
                           cache_repaired=getattr(cache, "repaired", 0), ray=facts)
    finally:
        folder.release()


@dataclass(frozen=True)
class _RayPlan:
    """How a run is spread over Ray: the models every replica builds and how many replicas, with what."""

    choice: ModelChoice  # portable: paths absolute
    roles: tuple[str, ...]
    replicas: int
    gpus: float
    cpus_per_replica: float
    shard_size: int | None
    cache_mode: str
    node_cache: str | None
    max_attempts: int
    crash: tuple[int, int] | None


def _no_engine_stats() -> dict[str, Any]:
    """The engine statistics of a run whose samples were all done already."""
    return {**{k: {} for k in ("backend_calls", "requests", "unique_requests", "cache_hits", "computed")},
            "stages": 0}


class _Replicas:
    """The replica actors of one run: started (and replaced when one dies) with the same models and cache
    plan, each fed shards from the scheduler by a thread of the driver, their events put on one queue."""

    def __init__(self, plan: _RayPlan, metrics: list[Metric], settings: EvalSettings, aggregate: bool,
                 cache: ResultCache | None) -> None:
        import ray

        self.plan = plan
        self.actor_class = ray.remote(ShardWorker).options(num_cpus=plan.cpus_per_replica, num_gpus=plan.gpus,
                                                           max_restarts=0, max_task_retries=0)
        cache_path = str(cache.path) if cache is not None and cache.path else None
        self.arguments = (plan.choice, plan.roles, metrics, settings, aggregate, plan.cache_mode, cache_path,
                          plan.node_cache, ray.get_runtime_context().get_node_id(), plan.gpus)
        self.generations: Counter = Counter()
        self.nodes: set[str] = set()
        self.events: queue.Queue = queue.Queue()
        self.identities: dict[str, str] = {}  # the first replica's: every later one must see the same
        self.actors: dict[int, Any] = {}  # replica -> its actor (None between one that died and the next)

    def start(self, replica: int) -> tuple[Any, dict[str, Any]]:
        """A new actor for ``replica`` and what it reports (model identities, node, cache)."""
        import ray

        first = self.generations[replica] == 0
        self.generations[replica] += 1
        crash = self.plan.crash
        crash_after = crash[1] if crash and first and crash[0] == replica else None
        actor = self.actor_class.remote(*self.arguments, crash_after)
        info = ray.get(actor.info.remote())
        self.nodes.add(info["host"])
        return actor, info

    def serve(self, replica: int, actor: Any, scheduler: _Scheduler, per_row: bool) -> None:
        """A driver thread's work: run shards on ``replica`` (``actor``, or a new one when None) until none
        is left, then retire its actor."""
        self.actors[replica] = actor
        try:
            while (shard := scheduler.take()) is not None:
                try:
                    if not self._run_shard(replica, shard, per_row, scheduler):
                        return
                except BaseException as exc:  # a bug or bad model: stop, as a single process would
                    scheduler.done(error=exc)
                    return
        finally:
            if self.actors[replica] is not None:
                _retire(self.actors[replica])
            self.events.put(None)

    def _run_shard(self, replica: int, shard: _Shard, per_row: bool, scheduler: _Scheduler) -> bool:
        """One shard on ``replica``, its events put on the queue as they come. An actor that dies is
        dropped (the next shard starts another) and the shard's undelivered samples go back to the
        scheduler; False when they have failed ``max_attempts`` times (the run stops)."""
        import ray
        from ray.exceptions import ObjectLostError, RayActorError

        delivered: set[str] = set()
        try:
            if self.actors[replica] is None:
                self.actors[replica], info = self.start(replica)
                if info["identities"] != self.identities:
                    raise RuntimeError(
                        f"replica on {info['host']} sees other model files than the first replica "
                        f"({info['identities']} != {self.identities}): every node needs the same "
                        f"model folders at the same paths")
            stream = self.actors[replica].run_shard.options(num_returns="streaming").remote(shard.samples, per_row)
            for ref in stream:
                chunk = ray.get(ref)
                delivered.update(event[1].id for event in chunk if event[0] == "row")
                self.events.put(chunk)
            scheduler.done()
            return True
        except (RayActorError, ObjectLostError) as exc:
            rest = [s for s in shard.samples if s.id not in delivered]
            if self.actors[replica] is not None:
                ray.kill(self.actors[replica], no_restart=True)
            self.actors[replica] = None
            self.events.put([("retry", replica, shard.index, len(rest), type(exc).__name__)])
            if rest and shard.attempt + 1 >= self.plan.max_attempts:
                scheduler.done(error=RuntimeError(
                    f"shard {shard.index} failed {self.plan.max_attempts} times; last: {exc}"))
                return False
            scheduler.done(retry=_Shard(shard.index, rest, shard.attempt + 1) if rest else None)
            return True


def _drive(plan: _RayPlan, folder: RunFolder, samples: list[Sample], metrics: list[Metric],
           settings: EvalSettings, *, cache: ResultCache | None, aggregate: bool, per_row: bool,
           progress: ProgressFactory | None, run_info: dict[str, Any] | None,
           on_sample: Callable[[ResultRow], None] | None, overwrite: bool) -> tuple[RunSink, dict[str, Any]]:
    """Open the run (its fingerprint from the first replica's model identities: the driver may have no
    model files), shard what is left of it over the replicas and write their rows as they come. Returns
    the run's sink and what the run section of summary.json records about Ray (``stats``: the engine's)."""
    replicas = _Replicas(plan, metrics, settings, aggregate, cache)
    first_actor, first_info = replicas.start(0)
    replicas.identities = first_info["identities"]
    identities = {role: replicas.identities[role] for role in sorted({r for m in metrics for r in m.roles})
                  if role in replicas.identities}
    sink = RunSink(folder, samples, metrics, settings, identities, aggregate, run_info, overwrite=overwrite)
    todo = sink.todo
    size = max(1, plan.shard_size or math.ceil(len(todo) / plan.replicas)) if todo else 1
    shards = [_Shard(i, todo[start:start + size]) for i, start in enumerate(range(0, len(todo), size))]
    scheduler = _Scheduler(shards)
    slots = min(plan.replicas, len(shards))
    threads = [threading.Thread(target=replicas.serve, args=(i, first_actor if i == 0 else None, scheduler, per_row),
                                name=f"offline-eval-replica-{i}", daemon=True) for i in range(slots)]
    if not threads:
        _retire(first_actor)
    for thread in threads:
        thread.start()
    bar = progress("samples (ray)", len(todo)) if progress and todo else None
    collected = _collect(replicas.events, len(threads), sink, cache, on_sample, bar)
    if bar:
        bar.close()
    for thread in threads:
        thread.join()
    if scheduler.error is not None:
        raise scheduler.error
    return sink, {"stats": collected["stats"], "replicas": slots, "gpus_per_replica": plan.gpus,
                  "cpus_per_replica": plan.cpus_per_replica, "shards": len(shards), "shard_size": size,
                  "nodes": sorted(replicas.nodes), "actors_started": sum(replicas.generations.values()),
                  "retries": collected["retries"], "cache_mode": plan.cache_mode,
                  "cache_entries_merged": collected["merged"]}


def _collect(events: queue.Queue, running: int, sink: RunSink, cache: ResultCache | None,
             on_sample: Callable[[ResultRow], None] | None, bar: Any) -> dict[str, Any]:
    """The driver's side of the replicas' events until every replica thread has ended: each sample's
    first row to results.jsonl (then ``on_sample`` and the bar), cache batches into the driver's cache,
    engine statistics summed, retries logged. Returns ``stats``, ``retries`` and ``merged``."""
    finished: set[str] = set(sink.done)
    stats: dict[str, Any] = {}
    retries: list[dict[str, Any]] = []
    merged = 0
    while running:
        chunk = events.get()
        if chunk is None:
            running -= 1
            continue
        rows = []
        for event in chunk:
            if event[0] == "row":
                row = event[1]
                if row.id in finished:
                    continue
                rows.append(row)
                finished.add(row.id)
            elif event[0] == "cache":
                if cache is not None:
                    cache.put_many(event[1], event[2])
                    merged += len(event[2])
            elif event[0] == "stats":
                _merge_stats(stats, event[1])
            elif event[0] == "retry":
                _, replica, index, left, why = event
                log.warning("replica %d died (%s) during shard %d: %d samples retried", replica, why, index, left)
                retries.append({"replica": replica, "shard": index, "samples_left": left, "error": why})
        if rows:
            sink.append(rows)
            for row in rows:
                if on_sample:
                    on_sample(row)
                if bar:
                    bar.update(1)
    return {"stats": stats, "retries": retries, "merged": merged}
