"""A compact terminal summary of a run: metric, mean, 95% CI, scored and unscored counts.

Coloured (through ``rich``) when writing to a terminal, plain aligned text otherwise, so logs and
CI output stay free of escape codes.
"""

from __future__ import annotations

import sys
from typing import IO, Any, Mapping

from offline_eval.data.schema import printable
from offline_eval.records import MetricSummary, RunSummary
from offline_eval.report._run import (
    as_run_summary, calibration_notes, estimate_note, fmt_ci, fmt_interval, fmt_num, kappa_shown, scale_of,
)

__all__ = ["print_summary", "format_summary", "format_estimates", "format_conversations"]

_HEAD = ["metric", "mean", "95% CI", "scored", "unscored"]
_RIGHT = {1, 3}


def _unscored(entry: MetricSummary) -> str:
    n, reasons = entry.n_unscored, entry.unscored_reasons
    if reasons:
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{k} {v}" for k, v in top[:3])
        if len(top) > 3:
            text += ", …"
        return f"{n} ({text})"
    return str(n)


def _rows(summary: RunSummary) -> list[tuple[str, float | None, list[str]]]:
    return [(name, e.mean, [name, fmt_num(e.mean), fmt_interval(e.ci95, e.n_scored), str(e.n_scored), _unscored(e)])
            for name, e in summary.metrics.items()]


STARTER_NOTE = "starter profile: these scores only show the pipeline runs; do not use them to judge a system"


ESTIMATES_TITLE = "what your experts would say (offline-eval estimate):"
_EST_HEAD = ["metric", "labelled / N", "judge mean", "labels only, 95%", "PPI estimate, 95%", "kappa"]


def _kappa_text(entry: Mapping[str, Any]) -> str:
    kappas = entry.get("kappa") if isinstance(entry.get("kappa"), list) else []
    parts = []
    for k in kappas[:3]:
        if not isinstance(k, Mapping) or not isinstance(k.get("annotators"), list):
            continue
        names = "/".join(printable(str(a)) for a in k["annotators"][:2])
        parts.append(f"{names} {kappa_shown(k)}")
    return ", ".join(parts) + (", …" if len(kappas) > 3 else "") if parts else "-"


def format_estimates(estimates: Any) -> list[str]:
    """The lines of a summary's ``estimates`` (offline_eval.people.estimate): per labelled metric, how many rows
    were labelled of how many scored, the judge-only mean, the labels' share of yes and the
    prediction-powered estimate with their intervals, and the annotators' kappa, then the estimate's
    caveat on a line of its own when it has one. [] when there are none. Every value is read as
    untrusted (a summary.json may have been edited)."""
    if not isinstance(estimates, Mapping) or not estimates:
        return []
    rows = [_EST_HEAD]
    notes: dict[int, str] = {}  # row -> the caveat printed under it
    for name, entry in estimates.items():
        if not isinstance(entry, Mapping):
            continue
        plain = entry.get("labels_only") if isinstance(entry.get("labels_only"), Mapping) else {}
        ppi = entry.get("ppi") if isinstance(entry.get("ppi"), Mapping) else {}
        lower = " (lower is better)" if entry.get("higher_is_better") is False else ""
        counts = f"{entry.get('n_labelled', '-')} / {entry.get('n', '-')}"
        rows.append([printable(str(name)) + lower, printable(counts),
                     fmt_num(entry.get("judge_mean")),
                     f"{fmt_num(plain.get('value'))} {fmt_ci(plain.get('ci95'))}",
                     f"{fmt_num(ppi.get('value'))} {fmt_ci(ppi.get('ci95'))}", _kappa_text(entry)])
        note = estimate_note(entry)
        if note is not None:
            notes[len(rows) - 1] = note
    widths = [max(len(r[i]) for r in rows) for i in range(len(_EST_HEAD))]
    lines = [ESTIMATES_TITLE]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
        if j in notes:
            lines.append(f"  PPI estimate: {printable(notes[j])}")
    lines.append("(the share of yes people would give to each metric's question over all N rows; the labelled "
                 "rows must be a random sample of them)")
    return lines


_CONV_HEAD = ["metric", "conversations", "mean of conversations", "95% CI", "mean worst turn"]


def format_conversations(conversations: Any) -> list[str]:
    """The lines of a summary's ``conversations`` section (offline_eval.conversations): per metric, the
    mean of the conversations' means with its interval and the mean of their worst turns. [] when
    there is none. Every value is read as untrusted (a summary.json may have been edited)."""
    if not isinstance(conversations, Mapping) or not isinstance(conversations.get("metrics"), Mapping):
        return []
    rows = [_CONV_HEAD]
    for name, entry in conversations["metrics"].items():
        if isinstance(entry, Mapping):
            ci = entry.get("ci95")
            rows.append([printable(str(name)), printable(str(entry.get("n_conversations", "-"))),
                         fmt_num(entry.get("mean")),
                         fmt_interval(ci if isinstance(ci, list) else None, entry.get("n_conversations"),
                                      "conversations"),
                         fmt_num(entry.get("worst_turn_mean"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(_CONV_HEAD))]
    title = (f"per conversation ({printable(str(conversations.get('n_conversations', '?')))} conversations, "
             f"{printable(str(conversations.get('n_turns', '?')))} turns; each conversation counts once, "
             "its worst turn beside it):")
    lines = [title]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _estimate_lines(summary: RunSummary) -> list[str]:
    lines = format_estimates(summary.estimates)
    if summary.estimates_error is not None:
        lines.append(f"labels not used: {printable(summary.estimates_error)}")
    return lines


def format_summary(summary: RunSummary | Mapping[str, Any]) -> str:
    """The summary table as plain text (``summary``: summary.json, its "metrics" mapping, or the record)."""
    summary = as_run_summary(summary)
    rows = [_HEAD] + [r for _, _, r in _rows(summary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(c.rjust(widths[i]) if i in _RIGHT else c.ljust(widths[i])
                               for i, c in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += [f"calibration: {note}" for note in calibration_notes(summary.metrics)]
    conversations = format_conversations(summary.conversations)
    if conversations:
        lines += [""] + conversations
    estimates = _estimate_lines(summary)
    if estimates:
        lines += [""] + estimates
    if summary.starter:
        lines.append(f"NOTE: {STARTER_NOTE}")
    return "\n".join(lines) + "\n"


def print_summary(summary: RunSummary | Mapping[str, Any], file: IO[str] | None = None) -> None:
    """Print the per-metric table of ``summary`` (a summary.json dict, its "metrics" mapping, or the
    record)."""
    summary = as_run_summary(summary)
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
        if mean is not None:
            good = scale_of(name, summary.metrics.get(name)).goodness(mean)
            style = "green" if good >= 0.75 else "yellow" if good >= 0.5 else "red"
        unscored = Text(row[4], style="dim" if row[4] == "0" else "yellow")
        table.add_row(Text(row[0], style="bold"), Text(row[1], style=style), row[2], row[3], unscored)
    console.print(table)
    for note in calibration_notes(summary.metrics):
        console.print(Text(f"calibration: {note}", style="dim"))
    conversations = format_conversations(summary.conversations)
    if conversations:
        console.print(Text("\n" + conversations[0], style="bold"))
        for line in conversations[1:]:
            console.print(Text(line))
    estimates = _estimate_lines(summary)
    if estimates:
        console.print(Text("\n" + estimates[0], style="bold"))
        for line in estimates[1:]:
            console.print(Text(line))
    if summary.starter:
        console.print(Text(f"NOTE: {STARTER_NOTE}", style="bold yellow"))
