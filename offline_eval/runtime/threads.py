"""CPU threads that suit the machine: `--threads auto` (the default).

On a quiet machine torch's own choice (one thread per core, threads that spin while they wait) is the
fastest. On a busy one it is the slowest: waiting threads spin away the time slices the working ones
need, and a run takes several times its fair share (beside three busy loops on two cores: measured in
docs/measurements.md, "A run beside busy loops"). So ``auto`` looks, at start, at how many other tasks are runnable: with none
it leaves torch alone; with some it takes the cores left over (at least one) and makes waiting threads
sleep (``OMP_WAIT_POLICY=PASSIVE``, which must be set before torch loads). A number is used as given.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass


@dataclass
class ThreadChoice:
    mode: str  # "auto" or "fixed"
    threads: int | None  # torch threads set; None: torch's default
    cores: int
    busy: int | None  # other runnable tasks seen at start (auto only)
    wait_policy: str | None  # OMP_WAIT_POLICY in effect, if set

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        threads = self.threads or f"torch default ({self.cores})"
        if self.mode == "auto":
            return f"{threads} (auto: {self.busy} other runnable task(s) on {self.cores} cores)"
        return str(threads)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _own_running_threads() -> int:
    """Runnable threads of this process (numpy's BLAS threads spin for a moment after it loads)."""
    running = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii") as handle:
                running += handle.read().rpartition(")")[2].split()[0] == "R"
        except OSError:  # a thread that just ended
            continue
    return max(1, running)


def other_runnable(samples: int = 5, interval: float = 0.02) -> int:
    """Tasks of other processes that are runnable now: the median of a few reads of /proc/loadavg's
    running count (instant, unlike the load averages) less this process's own running threads;
    elsewhere the 1-minute load average."""
    try:
        counts = []
        for i in range(samples):
            with open("/proc/loadavg", encoding="ascii") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]) - _own_running_threads())
            if i + 1 < samples:
                time.sleep(interval)
        return max(0, int(statistics.median(counts)))
    except (OSError, ValueError, IndexError):
        try:
            return max(0, round(os.getloadavg()[0]))
        except OSError:  # pragma: no cover
            return 0


def parse_threads(text: str) -> str | int:
    """argparse type of --threads: "auto" or a positive integer."""
    if str(text).strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--threads: expected auto or a number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"--threads: expected auto or a number >= 1, got {value}")
    return value


def choose_threads(requested: str | int | None, *, cores: int | None = None, busy: int | None = None) -> ThreadChoice:
    """What ``requested`` (None = auto) means on this machine now. ``cores``/``busy`` are for tests."""
    cores = cores or usable_cores()
    if requested not in (None, "auto"):
        return ThreadChoice("fixed", int(requested), cores, None, os.environ.get("OMP_WAIT_POLICY"))
    busy = other_runnable() if busy is None else busy
    if busy <= 0:
        return ThreadChoice("auto", None, cores, busy, os.environ.get("OMP_WAIT_POLICY"))
    return ThreadChoice("auto", max(1, cores - busy), cores, busy, os.environ.get("OMP_WAIT_POLICY") or "PASSIVE")


def apply_threads_choice(choice: ThreadChoice) -> ThreadChoice:
    """Set the wait policy (only before torch loads, and never over the user's own) and torch's threads."""
    if choice.wait_policy and "OMP_WAIT_POLICY" not in os.environ:
        if "torch" in sys.modules:  # too late for this process: say so instead of pretending
            choice.wait_policy = None
        else:
            os.environ["OMP_WAIT_POLICY"] = choice.wait_policy
    if choice.threads:
        import torch

        torch.set_num_threads(choice.threads)
    return choice
