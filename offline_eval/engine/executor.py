"""The batching spine: drive every (sample, metric) task in lockstep, one stage at a time.

Each task is a metric's generator for one sample. At every step the engine advances all live tasks
to their next ``yield``, gathers the requests they ask for across the whole dataset, removes
duplicates (the same claim extraction asked for by faithfulness, answer_correctness and
noise_sensitivity is run once), answers what the cache already knows, and sends the rest to the
model of each request's role: one backend call per batch, batches cut from the stage sorted by
length (or in the order the backend asks for: a judge that shares prompt prefixes wants requests
with a common prefix side by side). Results are committed to the cache batch by batch and routed back to the tasks.
"""

from __future__ import annotations

import logging
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from offline_eval import reasons
from offline_eval.engine.cache import ResultCache, cache_key
from offline_eval.engine.models import Models
from offline_eval.engine.requests import Request, to_jsonable
from offline_eval.reasons import Unscorable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestFailed:
    """A request its backend rejected; the task that asked for it fails with this message."""

    message: str


@dataclass(frozen=True)
class TaskFailed:
    """What a task that could not finish returns by default: it raised :class:`Unscorable` (its reason,
    explanation and metadata), a request of it was rejected (``request_failed``), it raised anything
    else (``error:<exception type>``, with a short ``traceback``: a bug, not a verdict) or it returned
    nothing (``error:no_result``). ``metrics.base.as_score`` makes it an unscored Score."""

    reason: str
    message: str
    traceback: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Task:
    key: Any  # caller's handle, e.g. (sample index, metric name)
    generator: Any = None
    pending: list[Request] | None = None
    single: bool = False  # the task yielded one request rather than a list
    result: Any = None  # what the generator returned (a metric's Score, an answer, a row), or a TaskFailed


@dataclass
class EngineStats:
    backend_calls: Counter = field(default_factory=Counter)  # kind -> calls
    requests: Counter = field(default_factory=Counter)  # kind -> requests asked by tasks
    unique_requests: Counter = field(default_factory=Counter)  # after dedup within a stage
    cache_hits: Counter = field(default_factory=Counter)
    computed: Counter = field(default_factory=Counter)  # sent to a backend
    stages: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {name: dict(getattr(self, name)) for name in
                ("backend_calls", "requests", "unique_requests", "cache_hits", "computed")} | {
                    "stages": self.stages}


# (description, total) -> object with update(n), close(): one per request kind dispatched in a stage. A
# factory with a ``step()`` method is also told as each stage of a run() begins, whether or not the
# stage has anything to compute (the cache may answer all of it).
ProgressFactory = Callable[[str, int], Any]


class Engine:
    def __init__(self, models: Models, cache: ResultCache | None = None, *,
                 progress: ProgressFactory | None = None) -> None:
        self.models = models
        self.cache = cache if cache is not None else ResultCache(None)
        self.progress = progress
        self.stats = EngineStats()
        self._memo: dict[str, Any] = {}  # this process's answers, by cache key

    def forget(self) -> None:
        """Drop this process's answers (the cache keeps them): called between windows of a run."""
        self._memo.clear()

    # -- task driving -----------------------------------------------------------------------
    def run(self, tasks: Iterable[Task], on_done: Callable[[Task], None] | None = None) -> list[Task]:
        """Drive all tasks to completion; ``on_done`` is called as each task finishes."""
        tasks = list(tasks)
        live: list[Task] = []
        for task in tasks:
            self._advance(task, None, first=True)
            (live if task.result is None else []).append(task)
            if task.result is not None and on_done:
                on_done(task)
        step = getattr(self.progress, "step", None)
        while live:
            self.stats.stages += 1
            if step is not None:
                step()
            results = self._execute([r for t in live for r in t.pending or ()])
            still: list[Task] = []
            for task in live:
                answers = [results[self._key(r)] for r in task.pending or ()]
                failed = next((a for a in answers if isinstance(a, RequestFailed)), None)
                if failed is not None:
                    task.generator.close()
                    task.result, task.pending = TaskFailed(reasons.REQUEST_FAILED, failed.message), None
                else:
                    self._advance(task, answers[0] if task.single else answers)
                if task.result is None:
                    still.append(task)
                elif on_done:
                    on_done(task)
            live = still
        return tasks

    def _advance(self, task: Task, value: Any, first: bool = False) -> None:
        try:
            if first:
                yielded = next(task.generator)
            else:
                yielded = task.generator.send(value)
        except StopIteration as stop:
            task.result, task.pending = stop.value, None
            if task.result is None:
                task.result = TaskFailed(reasons.NO_RESULT, "the task returned nothing")
            return
        except Unscorable as failure:  # the task's own verdict: it cannot be scored, and why
            task.result = TaskFailed(failure.reason, failure.explanation, metadata=failure.metadata)
            task.pending = None
            return
        except Exception as exc:  # a bug or bad row must not take the whole run down
            log.warning("task %s failed: %s", task.key, exc)
            task.result = TaskFailed(reasons.raised(exc), str(exc), traceback.format_exc(limit=4))
            task.pending = None
            return
        if isinstance(yielded, Request):
            task.pending, task.single = [yielded], True
        else:
            task.pending, task.single = list(yielded), False
            if not task.pending:  # an empty stage: answer at once
                self._advance(task, [])

    # -- request execution ------------------------------------------------------------------
    def _key(self, request: Request) -> str:
        return cache_key(self.models.identity(request.role), request)

    def _execute(self, requests: list[Request]) -> dict[str, Any]:
        """Answer every request of a stage; returns cache key -> result."""
        unique: dict[str, Request] = {}
        for request in requests:
            self.stats.requests[request.kind] += 1
            unique.setdefault(self._key(request), request)
        answers = {k: self._memo[k] for k in unique if k in self._memo}
        missing = [k for k in unique if k not in answers]
        cached = self.cache.get_many(missing)
        answers.update(cached)
        by_kind: dict[str, list[tuple[str, Request]]] = defaultdict(list)
        for key, request in unique.items():
            self.stats.unique_requests[request.kind] += 1
            if key in cached:
                self.stats.cache_hits[request.kind] += 1
            elif key not in answers:
                by_kind[request.kind].append((key, request))
        for kind, items in by_kind.items():
            answers.update(self._dispatch(kind, items))
        self._memo.update(answers)
        return answers

    def _dispatch(self, kind: str, items: list[tuple[str, Request]]) -> dict[str, Any]:
        role = items[0][1].role
        backend = self.models.get(role)
        method = getattr(backend, items[0][1].backend_method)
        batch_size = max(1, int(getattr(backend, "batch_size", 16)))
        order = getattr(backend, "batch_order", None)
        if order is not None:  # the backend knows which requests compute best together
            items = [items[i] for i in order([request for _, request in items])]
        else:
            items = sorted(items, key=lambda item: item[1].size, reverse=True)  # longest first: OOM early
        bar = self.progress(f"{kind} ({role})", len(items)) if self.progress else None
        out: dict[str, Any] = {}
        try:
            for start in range(0, len(items), batch_size):
                batch = items[start:start + batch_size]
                try:
                    results = method([request for _, request in batch])
                except ValueError as exc:  # a request the backend rejects (e.g. a prompt too long)
                    if len(batch) == 1:
                        out[batch[0][0]] = RequestFailed(f"{role} backend rejected the request: {exc}")
                        continue
                    log.warning("%s batch failed (%s); retrying its requests one by one", kind, exc)
                    out.update(self._one_by_one(method, kind, role, batch))
                    if bar:
                        bar.update(len(batch))
                    continue
                if len(results) != len(batch):
                    raise RuntimeError(f"{role} backend returned {len(results)} results for "
                                       f"{len(batch)} {kind} requests")
                self.stats.backend_calls[kind] += 1
                self.stats.computed[kind] += len(batch)
                pairs = [(key, to_jsonable(result)) for (key, _), result in zip(batch, results)]
                self.cache.put_many(kind, pairs)
                out.update(pairs)
                if bar:
                    bar.update(len(batch))
        finally:
            if bar:
                bar.close()
        return out

    def _one_by_one(self, method: Any, kind: str, role: str, batch: list[tuple[str, Request]]) -> dict[str, Any]:
        """Retry a failed batch request by request; the rejected ones become RequestFailed (not cached)."""
        out: dict[str, Any] = {}
        for key, request in batch:
            try:
                [result] = method([request])
            except ValueError as exc:
                out[key] = RequestFailed(f"{role} backend rejected the request: {exc}")
                continue
            self.stats.backend_calls[kind] += 1
            self.stats.computed[kind] += 1
            result = to_jsonable(result)
            self.cache.put_many(kind, [(key, result)])
            out[key] = result
        return out
