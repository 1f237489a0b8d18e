"""A compact terminal summary of a run: metric, mean, 95% CI, scored and unscored counts.

Coloured (through ``rich``) when writing to a terminal, plain aligned text otherwise, so logs and
CI output stay free of escape codes.
"""

from __future__ import annotations

import sys
from typing import IO, Any, Mapping

from offline_eval.report._run import calibration_notes, fmt_ci, fmt_num, lower_is_better

__all__ = ["print_summary", "format_summary"]

_HEAD = ["metric", "mean", "95% CI", "scored", "unscored"]
_RIGHT = {1, 3}


def _metrics(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    metrics = summary.get("metrics") if isinstance(summary.get("metrics"), Mapping) else summary
    return {str(k): v for k, v in metrics.items() if isinstance(v, Mapping)}


def _unscored(entry: Mapping[str, Any]) -> str:
    n = entry.get("n_unscored", 0)
    reasons = entry.get("unscored_reasons")
    if isinstance(reasons, Mapping) and reasons:
        top = sorted(reasons.items(), key=lambda kv: (-(kv[1] if isinstance(kv[1], int) else 0), str(kv[0])))
        text = ", ".join(f"{k} {v}" for k, v in top[:3])
        if len(top) > 3:
            text += ", …"
        return f"{n} ({text})"
    return str(n)


def _rows(summary: Mapping[str, Any]) -> list[tuple[str, Any, list[str]]]:
    return [(name, e.get("mean"), [name, fmt_num(e.get("mean")), fmt_ci(e.get("ci95")),
                                   str(e.get("n_scored", 0)), _unscored(e)])
            for name, e in _metrics(summary).items()]


def _starter(summary: Mapping[str, Any]) -> bool:
    run = summary.get("run")
    return isinstance(run, Mapping) and bool(run.get("starter"))


STARTER_NOTE = "starter profile: these scores only show the pipeline runs; do not use them to judge a system"


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary table as plain text."""
    rows = [_HEAD] + [r for _, _, r in _rows(summary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(c.rjust(widths[i]) if i in _RIGHT else c.ljust(widths[i])
                               for i, c in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += [f"calibration: {note}" for note in calibration_notes(_metrics(summary))]
    if _starter(summary):
        lines.append(f"NOTE: {STARTER_NOTE}")
    return "\n".join(lines) + "\n"


def print_summary(summary: Mapping[str, Any], file: IO[str] | None = None) -> None:
    """Print the per-metric table of ``summary`` (a summary.json dict or its "metrics" mapping)."""
    file = file if file is not None else sys.stdout
    isatty = getattr(file, "isatty", None)
    if not (callable(isatty) and isatty()):
        file.write(format_summary(summary))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=file, highlight=False, force_terminal=True)
    table = Table(show_edge=False, header_style="bold")
    for i, h in enumerate(_HEAD):
        table.add_column(h, justify="right" if i in _RIGHT else "left")
    for name, mean, row in _rows(summary):
        style = ""
        if isinstance(mean, (int, float)) and not isinstance(mean, bool):
            good = 1.0 - mean if lower_is_better(name, _metrics(summary).get(name)) else mean
            style = "green" if good >= 0.75 else "yellow" if good >= 0.5 else "red"
        unscored = Text(row[4], style="dim" if row[4] == "0" else "yellow")
        table.add_row(Text(row[0], style="bold"), Text(row[1], style=style), row[2], row[3], unscored)
    console.print(table)
    for note in calibration_notes(_metrics(summary)):
        console.print(Text(f"calibration: {note}", style="dim"))
    if _starter(summary):
        console.print(Text(f"NOTE: {STARTER_NOTE}", style="bold yellow"))
