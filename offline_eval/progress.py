"""One progress line for a whole run: samples done, the window and stage in flight, and an estimate.

    samples 0/1000 · window 1/1 · step 3: options (judge) 96/256 · step ends in ~1m40s

A step is one request kind of one engine stage (a stage may send options to the judge and texts to
the embedder: two steps). The estimate uses what this run has measured: seconds per request of each
kind so far (for the step in flight) and seconds per finished window (for the rest of the run, once one has finished).
The engine reports a step batch by batch; the runner reports windows and samples.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class _Stage:
    """What the engine's progress factory returns: one kind's requests of one stage."""

    def __init__(self, run: "RunProgress", description: str, total: int) -> None:
        self.run, self.description, self.total, self.done = run, description, total, 0
        self.started = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        self.run._refresh()

    def close(self) -> None:
        spent = self.run.cost.setdefault(self.description, [0.0, 0])
        spent[0] += time.perf_counter() - self.started
        spent[1] += self.done
        if self.run.stage is self:
            self.run.stage = None
        self.run._refresh()


class RunProgress:
    """A ProgressFactory for the engine plus ``window(i, n)`` and ``sample()`` hooks for the runner."""

    def __init__(self, total_samples: int, stream: Any = None) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total_samples, desc="samples", unit="sample", file=stream or sys.stderr,
                        dynamic_ncols=True, leave=False, bar_format="{desc}")
        self.cost: dict[str, list] = {}  # kind description -> [seconds, requests] of finished stages
        self.stages = 0
        self.stage: _Stage | None = None
        self.window_index, self.windows = 0, 1
        self.window_started = time.perf_counter()
        self.window_seconds: list[float] = []

    def __call__(self, description: str, total: int) -> _Stage:
        self.stages += 1
        self.stage = _Stage(self, description, total)
        self._refresh()
        return self.stage

    def window(self, index: int, count: int) -> None:
        if index > 0:
            self.window_seconds.append(time.perf_counter() - self.window_started)
        self.window_index, self.windows, self.window_started = index, count, time.perf_counter()
        self._refresh()

    def sample(self, _row: Any = None) -> None:
        self.bar.update(1)
        self._refresh()

    def estimate(self) -> str:
        parts = []
        stage = self.stage
        if stage is not None and stage.done:
            seconds, requests = self.cost.get(stage.description, [0.0, 0])
            elapsed = time.perf_counter() - stage.started
            rate = (seconds + elapsed) / (requests + stage.done)
            parts.append(f"step ends in ~{_duration(rate * (stage.total - stage.done))}")
        if self.window_seconds:
            left = self.windows - self.window_index - 1
            per = sum(self.window_seconds) / len(self.window_seconds)
            in_flight = max(0.0, per - (time.perf_counter() - self.window_started))
            parts.append(f"run ends in ~{_duration(in_flight + per * left)}")
        return " · ".join(parts)

    def _refresh(self) -> None:
        stage = self.stage
        text = (f"samples {self.bar.n}/{self.bar.total} · window {self.window_index + 1}/{self.windows} · "
                f"step {self.stages}")
        if stage is not None:
            text += f": {stage.description} {stage.done}/{stage.total}"
        estimate = self.estimate()
        self.bar.set_description_str(text + (f" · {estimate}" if estimate else ""), refresh=True)

    def close(self) -> None:
        self.bar.close()
