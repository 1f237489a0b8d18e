"""One progress line for a whole run: samples done, the window and stage in flight, and an estimate.

    samples 0/1000 · window 1/1 · step 3: options (judge) 96/256 · step ends in ~1m40s

A step is one request kind of one engine stage (a stage may send options to the judge and texts to
the embedder: two steps). The estimate uses what this run has measured: seconds per request of each
kind so far (for the step in flight) and seconds per finished window (for the rest of the run, once one has finished).
The engine reports a step batch by batch; the runner reports windows, samples and what results.jsonl
holds (:meth:`RunProgress.saved`, which the CLI names when a run is interrupted).

On a terminal the line is redrawn in place and cleared when the run ends, so whatever is printed next
starts at the beginning of a line. Off a terminal (a log file, a pipe, CI) there is nothing to redraw:
carriage returns would pile every update onto one endless line with the next message glued to its end.
There the line is written whole, newline included, when the run starts, at most every
:data:`LINE_EVERY_S` seconds after, and once more when it ends.
"""

from __future__ import annotations

import sys
import time
from typing import Any

# Off a terminal, the progress line is written at most this often (seconds): a log line every half
# minute tells where a long run is without burying what else is logged.
LINE_EVERY_S = 30.0


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


class StageBars:
    """An engine progress factory that draws a tqdm bar on stderr per backend stage: for the commands
    whose work is not one run's samples (agreement over a labelled set, Ray's driver)."""

    def __call__(self, description: str, total: int) -> Any:
        from tqdm import tqdm

        return tqdm(total=total, desc=description, unit="req", leave=False, file=sys.stderr,
                    dynamic_ncols=True)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class RunProgress:
    """A ProgressFactory for the engine plus ``window(i, n)``, ``sample()`` and ``saved(n, total)``
    hooks for the runner. ``show=False`` draws nothing and only keeps count (``--quiet``: an interrupted
    run still says how many samples are saved). ``line`` is the text shown now, ``done`` the samples
    finished, those an earlier try finished included."""

    def __init__(self, total_samples: int, stream: Any = None, *, show: bool = True,
                 every: float = LINE_EVERY_S) -> None:
        self.stream = stream or sys.stderr
        self.total, self.done = total_samples, 0
        self.kept: tuple[int, int] | None = None  # (samples in results.jsonl, samples of the run)
        self.show, self.every = show, every
        self.line = ""
        self.terminal = _is_terminal(self.stream)
        self.bar: Any = None  # on a terminal, from the first line on: nothing is drawn before there is one
        self._written_at: float | None = None  # off a terminal: when the line was last written
        self._written = ""
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
        self.done += 1
        self._refresh()

    def saved(self, count: int, total: int) -> None:
        """results.jsonl holds ``count`` of the run's ``total`` samples (told when the folder is opened,
        where ``count`` is what an earlier try finished, and after each window)."""
        if self.kept is None:
            self.done += count  # resumed: those are done too
        self.kept = (count, total)

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
        if not self.show:
            return
        stage = self.stage
        text = (f"samples {self.done}/{self.total} · window {self.window_index + 1}/{self.windows} · "
                f"step {self.stages}")
        if stage is not None:
            text += f": {stage.description} {stage.done}/{stage.total}"
        estimate = self.estimate()
        self.line = text + (f" · {estimate}" if estimate else "")
        if self.terminal:
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(total=self.total, desc=self.line, unit="sample", file=self.stream,
                                dynamic_ncols=True, leave=False, bar_format="{desc}")
            self.bar.set_description_str(self.line, refresh=True)
        elif self._written_at is None or time.perf_counter() - self._written_at >= self.every:
            self._write_line()

    def _write_line(self) -> None:
        self.stream.write(self.line + "\n")
        self.stream.flush()
        self._written_at, self._written = time.perf_counter(), self.line

    def close(self) -> None:
        """End the display, however the run ends: on a terminal the line is cleared, off one the last
        state is written if it was not yet. Either way what is printed next starts a line of its own.
        Closing twice is closing once."""
        if not self.show:
            return
        self.show = False
        if self.terminal:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
        elif self.line and self.line != self._written:
            self._write_line()
