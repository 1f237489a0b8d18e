"""One progress line for a whole run: samples done, the window and step in flight, and estimates.

    samples 4/12 · window 2/3: 9/20 scores · step 3 of 5: options (judge) 16/70 · step ends in ~3s ·
    run ends in ~20s      (one line)

A step is one engine stage (its request kinds run one after the other: ``options (judge)``, then
``embed (embedder)``); steps are counted per window. How many steps a window takes is not known before
one has finished (a metric decides its next request from the answers to the last), but each metric
declares the most it can take (:attr:`~offline_eval.metrics.base.Metric.most_steps`), so the first
window says ``step 3 of at most 6`` and the later ones ``step 3 of 5``, from what the windows before
took (``of at most 6`` again for a step beyond that; ``of ?`` where a plugin metric declares nothing).
Within a window every stage is batched
across its rows, so its samples all finish at its last step; what moves before that is its scores (one
per sample and metric, counted as each is final). The estimates use what this run has measured: seconds
per request of the step's kind so far (the step), and the seconds per row of the last finished window
(the run; the first window also paid for loading the models). Before a window has finished, the run's
end is a lower bound, said so (``at the earliest``): the step in flight plus the rows of the later
windows at what this window's steps have cost a row so far (loading the models is not a step); where
nothing measured bounds it (before the first request, or between the steps of a run's only window) it
is ``~?``.
The engine reports a step batch by batch; the runner reports windows, scores, samples and what
results.jsonl holds (:meth:`RunProgress.saved`, which the CLI names when a run is interrupted).

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
        self.run.work += time.perf_counter() - self.started
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
    """A ProgressFactory for the engine plus ``window(i, n, rows)``, ``score()``, ``sample()`` and
    ``saved(n, total)`` hooks for the runner. ``show=False`` draws nothing and only keeps count
    (``--quiet``: an interrupted run still says how many samples are saved). ``line`` is the text shown
    now, ``done`` the samples finished, those an earlier try finished included."""

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
        self.stages = 0  # steps of the window in flight
        self.steps: int | None = None  # steps a window takes: known once one has finished
        self.most_steps: int | None = None  # the most the window in flight can take (None: not known)
        self.stage: _Stage | None = None
        self.window_index, self.windows = 0, 1
        self.rows = 0  # rows of the window in flight (0: not told)
        self.scores, self.scores_total = 0, 0  # (sample, metric) scores of the window in flight
        self.window_started = time.perf_counter()
        self.window_done = 0  # samples done when the window in flight started
        self.pace: float | None = None  # seconds per row of the last finished window
        self.work = 0.0  # seconds the window in flight has spent in its finished steps
        self.in_window = False

    def __call__(self, description: str, total: int) -> _Stage:
        """The engine dispatches ``total`` requests of one kind in the step in flight."""
        self.stage = _Stage(self, description, total)
        self._refresh()
        return self.stage

    def step(self) -> None:
        """The engine starts the next step (stage) of the window in flight: nothing dispatched yet."""
        self.stages, self.stage = self.stages + 1, None
        self._refresh()

    def window(self, index: int, count: int, rows: int = 0, scores: int = 0,
               most_steps: int | None = None) -> None:
        """Window ``index`` of ``count`` starts: ``rows`` samples, ``scores`` (sample, metric) scores, at
        most ``most_steps`` steps (None: not known)."""
        self._window_finished()
        self.window_index, self.windows, self.window_started = index, count, time.perf_counter()
        self.rows, self.scores, self.scores_total, self.stages, self.work = rows, 0, scores, 0, 0.0
        self.most_steps = most_steps
        self.window_done = self.done
        self._refresh()

    def _window_finished(self) -> None:
        if not self.in_window:
            self.in_window = True
            return
        rows = self.rows or self.done - self.window_done
        if rows:  # the last window, not all: the first one's includes loading the models
            self.pace = (time.perf_counter() - self.window_started) / rows
        self.steps = max(self.steps or 0, self.stages)

    def score(self, _task: Any = None) -> None:
        self.scores += 1
        self._refresh()

    def sample(self, _row: Any = None) -> None:
        self.done += 1
        self._refresh()

    def saved(self, count: int, total: int) -> None:
        """results.jsonl holds ``count`` of the run's ``total`` samples (told when the folder is opened,
        where ``count`` is what an earlier try finished, and after each window)."""
        if self.kept is None:
            self.done += count  # resumed: those are done too
            self.window_done = self.done
        self.kept = (count, total)

    def step_left(self) -> float | None:
        """Seconds until the step in flight ends, from the seconds per request of its kind so far."""
        stage = self.stage
        if stage is None or not stage.done:
            return None
        seconds, requests = self.cost.get(stage.description, [0.0, 0])
        rate = (seconds + time.perf_counter() - stage.started) / (requests + stage.done)
        return rate * (stage.total - stage.done)

    def run_left(self) -> tuple[float, bool] | None:
        """Seconds until the run ends and whether that is a lower bound (no window finished yet: the step
        in flight, and the later windows' rows at what this window's steps have cost a row so far, which
        leaves out loading the models and can only grow as its steps go on); None where nothing measured
        bounds it."""
        elapsed = time.perf_counter() - self.window_started
        rows = self.rows or max(1, (self.total - self.window_done) // max(1, self.windows - self.window_index))
        later = max(0, self.total - self.window_done - rows)  # rows of the windows after this one
        step = self.step_left()
        if self.pace is not None:
            return max(step or 0.0, self.pace * rows - elapsed) + self.pace * later, False
        if step is None and not (self.stages and later):  # nothing measured that bounds what is left
            return None
        stage = self.stage
        work = self.work + (time.perf_counter() - stage.started if stage is not None else 0.0)
        return (step or 0.0) + work / rows * later, True

    def estimate(self) -> str:
        if self.total and self.done >= self.total:  # what is left is writing the summary: nothing to time
            return "every sample scored"
        step, run = self.step_left(), self.run_left()
        parts = [f"step ends in ~{_duration(step)}"] if step is not None else []
        if run is None:
            parts.append("run ends in ~?")
        else:
            parts.append(f"run ends in ~{_duration(run[0])}{' at the earliest' if run[1] else ''}")
        return " · ".join(parts)

    def _text(self) -> str:
        text = f"samples {self.done}/{self.total} · window {self.window_index + 1}/{self.windows}"
        if self.scores_total and self.scores < self.scores_total:
            text += f": {self.scores}/{self.scores_total} scores"
        if self.stages:
            text += f" · step {self.stages} of {self._steps_total()}"
            stage = self.stage
            if stage is not None:
                text += f": {stage.description} {stage.done}/{stage.total}"
        return f"{text} · {self.estimate()}"

    def _steps_total(self) -> str:
        """The ``n`` of ``step k of n``: what the windows before took, while the window in flight has
        not gone beyond it; else the most it can take, said as such."""
        bound = self.most_steps
        if self.steps:
            taken = self.steps if bound is None else min(self.steps, bound)
            if self.stages <= taken:
                return str(taken)
        return f"at most {bound}" if bound is not None and self.stages <= bound else "?"

    def _refresh(self) -> None:
        if not self.show:
            return
        self.line = self._text()
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
