"""Comparing two runs of the same dataset: paired per-sample deltas, significance, regressions.

Samples are paired by id; a metric's pairs are the samples scored in both runs. The delta is
``mean(b - a)`` with a paired bootstrap 95% interval and two-sided p-value
(:func:`offline_eval.stats.paired_bootstrap`). A metric *regressed* when the change is
significantly in the bad direction: p < alpha and the whole interval below zero (above zero for
metrics where lower is better, such as ``hallucination_rate``). On fewer than
:data:`~offline_eval.thresholds.MIN_PAIRS` pairs a metric has its delta but no interval, p-value or
verdict; above it the p-value is never below ``2 / 2**n``, the least the exact sign-flip test gives on n
pairs (:func:`~offline_eval.stats.paired_bootstrap`).

``by="conversation"`` pairs conversations instead (by ``conversation_id``) and compares each metric's
conversation means, so a chat assistant is judged conversation by conversation, each counting once however
many turns it has; the bootstrap resamples conversations. A conversation's mean in A and in B is over the
turns both runs scored (paired by sample id): a mean over three turns against a mean over one would
compare different questions. Its turns scored in one run only are what the gate counts against
``max_unscored``, as samples are by sample, so a run that scored a third of each conversation's turns
does not pass on that third.

A regression gate must be able to fail: :func:`gate_refusals` says why two runs cannot be gated on (one
has not finished, they share no metric, no sample, no pair), and :func:`gate_failures` fails a metric
whose pairs are too few: of the samples (comparing by conversation: the turns) either run scored, more
than ``max_unscored`` (the ``--fail-under`` limit) left unscored by the other run or missing from the
candidate (B). A sample the
candidate lacks counts as one it left unscored, so a candidate that lost rows (run with ``--limit``, cut
short) does not pass on the rows it kept; a sample only the candidate has is new, and not counted. :func:`gate_too_few` names the metrics that do not fail so but rest on fewer than
``MIN_PAIRS`` pairs, which cannot be gated on. :func:`gate_lines` says on how many pairs each metric rests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Mapping

from offline_eval.report._run import RunData, Scale, e, load_run, partial_notes, scale_of, text_of
from offline_eval.text import counted
from offline_eval.thresholds import DEFAULT_MAX_UNSCORED, MIN_PAIRS

__all__ = ["SampleDelta", "MetricComparison", "Comparison", "compare_runs", "regression_failures",
           "gate_refusals", "gate_failures", "gate_too_few", "gate_lines", "format_comparison", "print_comparison",
           "render_comparison_html", "write_comparison_html", "COMPARE_FILE"]

COMPARE_FILE = "compare.html"
ALPHA = 0.05
UNITS = ("sample", "conversation")


@dataclass
class SampleDelta:
    """One paired sample's (or conversation's, comparing by conversation) change on one metric."""

    id: str
    a: float
    b: float
    question: str = ""
    answer_a: str = ""
    answer_b: str = ""

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass
class MetricComparison:
    """A metric's paired comparison; ``delta``/``ci95``/``p_value`` are None without pairs, and ``ci95`` and
    ``p_value`` on fewer than ``MIN_PAIRS`` of them."""

    name: str
    n_pairs: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    lower_is_better: bool = False
    most_regressed: list[SampleDelta] = field(default_factory=list)
    alpha: float = ALPHA
    # What the gate counts: samples, or comparing by conversation the turns of the conversations A has.
    n_either: int = 0  # scored in either run: those scored in both, those the other left unscored, those B lacks
    missing_in_b: int = 0  # scored in A, and B does not have them
    n_both: int = 0  # scored in both runs: the pairs' samples, or the turns the paired conversations' means are over
    value_range: tuple[float, float] = (0.0, 1.0)  # the values the metric takes, as the runs record it

    @property
    def scale(self) -> Scale:
        """How the report colours the metric's means and scores."""
        return Scale(*self.value_range, self.lower_is_better)

    @property
    def too_few(self) -> bool:
        """Paired on too few units for an interval or a p-value (but on some)."""
        return 0 < self.n_pairs < MIN_PAIRS

    @property
    def unscored_in_other(self) -> int:
        """Samples (turns) both runs have that one of them scored and the other left unscored."""
        return self.n_either - self.n_both - self.missing_in_b

    @property
    def significant(self) -> bool:
        return (self.p_value is not None and self.ci95 is not None and self.p_value < self.alpha
                and (self.ci95[1] < 0 or self.ci95[0] > 0))

    @property
    def regressed(self) -> bool:
        """Significantly worse in b: p < alpha and the interval entirely on the bad side of 0."""
        if not self.significant or self.ci95 is None:
            return False
        return self.ci95[0] > 0 if self.lower_is_better else self.ci95[1] < 0

    @property
    def improved(self) -> bool:
        if not self.significant or self.ci95 is None:
            return False
        return self.ci95[1] < 0 if self.lower_is_better else self.ci95[0] > 0

    @property
    def verdict(self) -> str:
        if self.n_pairs == 0:
            return "no pairs"
        if self.too_few:
            return f"too few pairs for an interval (n={self.n_pairs}, needs at least {MIN_PAIRS})"
        return "regressed" if self.regressed else "improved" if self.improved else "no significant change"


@dataclass
class Comparison:
    """Run b against run a (b − a)."""

    run_a: Path
    run_b: Path
    label_a: str
    label_b: str
    n_common: int
    only_in_a: list[str]
    only_in_b: list[str]
    metrics: list[MetricComparison]
    metrics_only_in_a: list[str] = field(default_factory=list)
    metrics_only_in_b: list[str] = field(default_factory=list)
    starter: list[str] = field(default_factory=list)  # "A" / "B": runs on the starter profile
    unit: str = "sample"  # what was paired: "sample" (by id) or "conversation" (by conversation id)
    unfinished: list[str] = field(default_factory=list)  # "A" / "B": folders with no summary.json yet
    partial: list[str] = field(default_factory=list)  # "B (path): ...": a run with fewer rows than it counts

    def metric(self, name: str) -> MetricComparison:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def part(self) -> str:
        """What the gate counts: a sample, or comparing by conversation a conversation's turn."""
        return "sample" if self.unit == "sample" else "turn"

    @property
    def regressions(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.regressed]


@dataclass(frozen=True)
class _Unit:
    """What compare pairs, a sample or a conversation: a sample's value per metric (None: unscored), or a
    conversation's turns by sample id with theirs, and the texts shown beside a change (a conversation's:
    its first question)."""

    values: dict[str, float | None]
    turns: dict[str, dict[str, float | None]] | None = None
    question: str = ""
    answer: str = ""

    def parts(self, key: str) -> dict[str, dict[str, float | None]]:
        """The values per metric of what the unit's means are over, by sample id: a sample is its own one
        part (made when asked: a run of many samples then holds no dict more per row)."""
        return self.turns if self.turns is not None else {key: self.values}


def _samples(data: RunData, metrics: list[str]) -> dict[str, _Unit]:
    """Samples by id; a repeated id keeps its first row."""
    out: dict[str, _Unit] = {}
    for rec in data.results:
        if rec.id not in out:
            out[rec.id] = _Unit({m: rec.value(m) for m in metrics}, question=text_of(rec.sample.get("question")),
                                answer=text_of(rec.sample.get("answer")))
    return out


def _conversations(data: RunData, metrics: list[str]) -> dict[str, _Unit]:
    """Conversations by id as the run's summary groups them, each with its turns' values from the run's
    rows; a run without conversations raises ValueError (one line)."""
    section = data.summary.conversations
    found = section.get("by_conversation") if isinstance(section, Mapping) else None
    if not isinstance(found, Mapping) or not found:
        raise ValueError(f"{data.path}: no conversations to compare (no sample of this run names a "
                         "conversation_id); compare it by sample, without --by conversation")
    rows = _samples(data, metrics)
    out = {}
    for cid, entry in found.items():
        entry = entry if isinstance(entry, Mapping) else {}
        turns = [text_of(t) for t in entry.get("turns")] if isinstance(entry.get("turns"), list) else []
        first = rows[turns[0]].question if turns and turns[0] in rows else ""
        out[text_of(cid)] = _Unit({}, {t: rows[t].values for t in turns if t in rows},
                                  question=f"({len(turns)} turns) {first}" if turns else first)
    return out


def _label(data: RunData) -> str:
    return data.path.resolve().name or str(data.path)


def compare_runs(run_a: str | Path | RunData, run_b: str | Path | RunData, *, alpha: float = ALPHA,
                 top: int = 10, by: str = "sample") -> Comparison:
    """Compare run b against run a metric by metric: sample by sample (paired by id), or with
    ``by="conversation"`` conversation by conversation (paired by conversation id, on each
    conversation's mean; ValueError when a run has no conversations)."""
    if by not in UNITS:
        raise ValueError(f"compare by {by!r}: expected one of {', '.join(UNITS)}")
    a = run_a if isinstance(run_a, RunData) else load_run(run_a)
    b = run_b if isinstance(run_b, RunData) else load_run(run_b)
    names_a, names_b = a.metric_names, b.metric_names
    shared = [m for m in names_a if m in names_b]
    units = _samples if by == "sample" else _conversations
    ia, ib = units(a, shared), units(b, shared)
    common = [key for key in ia if key in ib]
    metrics = [_compare_metric(m, ia, ib, common, scale_of(m, b.metric_summaries.get(m) or a.metric_summaries.get(m)),
                               alpha, top) for m in shared]
    return Comparison(
        a.path, b.path, _label(a), _label(b), len(common),
        [key for key in ia if key not in ib], [key for key in ib if key not in ia], metrics,
        [m for m in names_a if m not in names_b], [m for m in names_b if m not in names_a],
        [side for side, data in (("A", a), ("B", b)) if data.starter], by,
        [side for side, data in (("A", a), ("B", b)) if not data.finished],
        [f"{side} ({data.path}): {note}" for side, data in (("A", a), ("B", b)) if data.finished
         for note in partial_notes(data)])


def _compare_metric(m: str, ia: dict[str, _Unit], ib: dict[str, _Unit], common: list[str], scale: Scale,
                    alpha: float, top: int) -> MetricComparison:
    """One metric's paired comparison over the units scored in both runs, each unit's value in either run
    the mean over its parts both scored; ``n_either`` also counts the parts one run scored that the other
    left unscored or lacks, which a gate holds against the run that lacks them."""
    from offline_eval.stats import paired_bootstrap

    lib, span = scale.lower_is_better, (scale.low, scale.high)
    pairs: list[SampleDelta] = []
    either = both = missing_in_b = 0
    for key in common:
        ua, ub = ia[key], ib[key]
        parts_b = ub.parts(key)
        scored: list[tuple[float, float]] = []
        for part, values in ua.parts(key).items():
            va, vb = values[m], parts_b[part][m] if part in parts_b else None
            if part not in parts_b:
                missing_in_b += va is not None
            elif va is not None and vb is not None:
                scored.append((va, vb))
            else:
                either += va is not None or vb is not None
        if scored:
            pairs.append(SampleDelta(key, sum(a for a, _ in scored) / len(scored),
                                     sum(b for _, b in scored) / len(scored), ub.question or ua.question,
                                     ua.answer, ub.answer))
            both += len(scored)
    # a candidate (B) that lacks rows the baseline scored has lost them; rows only B has (a dataset that
    # grew) are new, not a regression, and stay out of the gate's count
    missing_in_b += sum(1 for key, unit in ia.items() if key not in ib for values in unit.parts(key).values()
                        if values[m] is not None)
    either += both + missing_in_b
    if not pairs:
        return MetricComparison(m, 0, None, None, None, None, None, lib, [], alpha, either, missing_in_b, both, span)
    worse = [p for p in pairs if (p.delta > 0 if lib else p.delta < 0)]
    worse.sort(key=lambda p: (-p.delta if lib else p.delta, p.id))
    mean_a, mean_b = sum(p.a for p in pairs) / len(pairs), sum(p.b for p in pairs) / len(pairs)
    if len(pairs) < MIN_PAIRS:  # a delta, but no interval or p-value to act on
        delta = sum(p.delta for p in pairs) / len(pairs)
        return MetricComparison(m, len(pairs), mean_a, mean_b, delta, None, None, lib, worse[:top], alpha, either,
                                missing_in_b, both, span)
    result = paired_bootstrap([p.a for p in pairs], [p.b for p in pairs])
    return MetricComparison(
        m, result.n_pairs, mean_a, mean_b, result.delta, (float(result.ci95[0]), float(result.ci95[1])),
        float(result.p_value), lib, worse[:top], alpha, either, missing_in_b, both, span)


def _num(v: float | None, digits: int = 3, sign: bool = False) -> str:
    if v is None:
        return "—"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _p_eq(p: float | None) -> str:
    text = _p(p)
    return text if text.startswith("<") else f"={text}"


def regression_failures(comparison: Comparison) -> list[str]:
    """One line per metric that regressed significantly (empty when nothing did)."""
    lines = []
    for m in comparison.regressions:
        direction = " (lower is better)" if m.lower_is_better else ""
        per = " per conversation" if comparison.unit == "conversation" else ""
        lines.append(f"{m.name} regressed{per}{direction}: {_num(m.mean_a)} -> {_num(m.mean_b)}, "
                     f"delta {_num(m.delta, sign=True)} 95% CI {_ci(m.ci95)}, p{_p_eq(m.p_value)}, "
                     f"n={m.n_pairs}")
    return lines


def gate_refusals(comparison: Comparison) -> list[str]:
    """Why a regression gate cannot rest on this comparison at all (one line each, saying what to do);
    empty when it can: a run that has not finished or holds fewer rows than its summary counts, no
    metric, no sample or no pair in common."""
    c, lines = comparison, []
    what = "sample id" if c.unit == "sample" else "conversation id"
    for side in c.unfinished:
        lines.append(f"run {side} ({c.run_a if side == 'A' else c.run_b}) has not finished (no summary.json): rerun "
                     "the same `offline-eval run` command to finish it before gating on it")
    lines += [f"run {note}" for note in c.partial]  # a finished run that lost rows is no whole run either
    if not c.metrics:
        lines.append(f"the runs share no metric (A: {', '.join(c.metrics_only_in_a) or 'none'}; B: "
                     f"{', '.join(c.metrics_only_in_b) or 'none'}): nothing to gate on; score both with the same metrics")
    elif not c.n_common:
        lines.append(f"the runs share no {what} ({len(c.only_in_a)} in A, {len(c.only_in_b)} in B): nothing to "
                     "gate on; compare two runs of the same dataset")
    elif not any(m.n_pairs for m in c.metrics):
        lines.append(f"no metric scored any {c.unit} in both runs: nothing to gate on; see why they went unscored")
    return lines


def _unpaired(m: MetricComparison) -> str:
    """What keeps a metric's units from pairing in the gate's count: "2 missing from B, 1 unscored in the
    other"."""
    parts = [f"{m.missing_in_b} missing from B"] if m.missing_in_b else []
    if m.unscored_in_other or not parts:
        parts.append(f"{m.unscored_in_other} unscored in the other")
    return ", ".join(parts)


def _fails_unscored(m: MetricComparison, max_unscored: float) -> bool:
    return m.n_either - m.n_both > max_unscored * m.n_either


def _pairs(m: MetricComparison, comparison: Comparison) -> str:
    """What a metric's change rests on: "7 pairs", or "8 conversations paired on 8 turns"."""
    if comparison.unit == "sample":
        return counted(m.n_pairs, "pair")
    return f"{counted(m.n_pairs, comparison.unit)} paired on {counted(m.n_both, comparison.part)}"


def _rests_on(m: MetricComparison, comparison: Comparison) -> str:
    """That, of what either run scored: "7 pairs of the 11 samples scored in A or B", "8 conversations
    paired on 8 turns of the 24 scored in A or B"."""
    either = counted(m.n_either, "sample") if comparison.unit == "sample" else str(m.n_either)
    return f"{_pairs(m, comparison)} of the {either} scored in A or B"


def gate_failures(comparison: Comparison, max_unscored: float = DEFAULT_MAX_UNSCORED) -> list[str]:
    """One line per metric whose pairs are too few to gate on: of the samples (turns) either run scored,
    more than ``max_unscored`` left unscored by the other run or missing from the candidate (a run that
    stops scoring a metric, or lost rows, must not pass because its change is measured on what is left)."""
    lines, part = [], comparison.part
    for m in comparison.metrics:
        if _fails_unscored(m, max_unscored):
            missing = m.n_either - m.n_both
            lines.append(f"{m.name}: {missing} of the {counted(m.n_either, part)} scored in A or B are not "
                         f"paired ({_unpaired(m)}; {100 * missing / m.n_either:.0f}%), more than "
                         f"the {max_unscored * 100:g}% --max-unscored allows: its change rests on "
                         f"{_pairs(m, comparison)}; "
                         f"score the same {part}s in both runs and see why any went unscored, or pass a higher "
                         "--max-unscored")
    return lines


def gate_too_few(comparison: Comparison, max_unscored: float = DEFAULT_MAX_UNSCORED) -> list[str]:
    """One line per metric a gate cannot rest on because it has fewer than ``MIN_PAIRS`` pairs (and does
    not already fail :func:`gate_failures`): neither passing nor failing it would mean anything."""
    return [f"{m.name}: {_rests_on(m, comparison)}, too few for an interval "
            f"(needs at least {MIN_PAIRS}: on fewer, not even every pair moving the same way reaches p < 0.05): "
            f"nothing to gate on; score more {comparison.unit}s in both runs"
            for m in comparison.metrics if m.too_few and not _fails_unscored(m, max_unscored)]


def gate_lines(comparison: Comparison, max_unscored: float = DEFAULT_MAX_UNSCORED) -> list[str]:
    """One line per metric: its change and the pairs it rests on; a metric neither run scored on any
    unit either has is not gated, and says so."""
    lines = []
    for m in comparison.metrics:
        if not m.n_either:
            lines.append(f"{m.name}: scored in neither run on the {counted(comparison.n_common, comparison.unit)} both have: "
                         "not gated")
            continue
        missing = m.n_either - m.n_both
        lines.append(f"{m.name}: delta {_num(m.delta, sign=True)} over {_rests_on(m, comparison)} ({_unpaired(m)}, "
                     f"{100 * missing / m.n_either:.0f}%; at most {max_unscored * 100:g}% allowed, --max-unscored)")
    return lines


def _rows(comparison: Comparison) -> list[list[str]]:
    return [[m.name, _num(m.mean_a), _num(m.mean_b), _num(m.delta, sign=True), _ci(m.ci95), _p(m.p_value),
             str(m.n_pairs), m.verdict] for m in comparison.metrics]


_HEAD = ["metric", "A", "B", "delta (B−A)", "95% CI", "p", "pairs", "verdict"]


def _notes(comparison: Comparison) -> list[str]:
    units = f"{comparison.unit}s"
    notes = [f"A: {comparison.run_a}", f"B: {comparison.run_b}",
             f"{counted(comparison.n_common, 'sample')} paired by id" if comparison.unit == "sample" else
             f"{comparison.n_common} conversations paired by conversation id, each metric on the conversations' "
             "means over the turns both runs scored"]
    if comparison.starter:
        notes.append(f"starter profile ({' and '.join(comparison.starter)}): these scores only show that the "
                     "pipeline runs; do not use them to judge a system")
    for side in comparison.unfinished:
        notes.append(f"{side} has not finished (no summary.json): reading a partial run, only the rows written so "
                     "far are compared")
    notes += comparison.partial
    if comparison.only_in_a:
        notes.append(f"{len(comparison.only_in_a)} {units} only in A (no pair: not in the deltas; "
                     "--fail-on-regression counts them as missing from B)")
    if comparison.only_in_b:
        notes.append(f"{len(comparison.only_in_b)} {units} only in B (no pair: not in the deltas)")
    if comparison.metrics_only_in_a:
        notes.append("metrics only in A: " + ", ".join(comparison.metrics_only_in_a))
    if comparison.metrics_only_in_b:
        notes.append("metrics only in B: " + ", ".join(comparison.metrics_only_in_b))
    return notes


def format_comparison(comparison: Comparison) -> str:
    """The comparison as a plain-text table (no colour codes)."""
    rows = [_HEAD] + _rows(comparison)
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    right = {1, 2, 3, 5, 6}
    out = []
    for j, r in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(_notes(comparison) + [""] + out) + "\n"


def print_comparison(comparison: Comparison, file: IO[str] | None = None) -> None:
    """Print the comparison table; coloured (via rich) when ``file`` is a terminal."""
    file = file if file is not None else sys.stdout
    isatty = getattr(file, "isatty", None)
    if not (callable(isatty) and isatty()):
        file.write(format_comparison(comparison))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, highlight=False, force_terminal=True)
    for note in _notes(comparison):
        console.print(note, style="dim", markup=False)
    table = Table(show_edge=False, header_style="bold")
    for i, h in enumerate(_HEAD):
        table.add_column(h, justify="right" if i in {1, 2, 3, 5, 6} else "left")
    for m, row in zip(comparison.metrics, _rows(comparison)):
        style = "bold red" if m.regressed else "bold green" if m.improved else ""
        table.add_row(*row[:-1], f"[{style}]{row[-1]}[/]" if style else row[-1])
    console.print(table)


# ----------------------------------------------------------------------------- HTML

def _span(metrics: list[MetricComparison]) -> float:
    """The half-width shared by every metric's forest plot, so their intervals compare by eye: in shares of
    each metric's range, so that rubrics_score's 1-5 does not squeeze the others' [0, 1] to a point."""
    ends = [abs(x) / _extent(m) for m in metrics if m.ci95 is not None and m.delta is not None
            for x in (m.ci95[0], m.ci95[1], m.delta)]
    return max(ends + [0.05]) * 1.15


def _extent(m: MetricComparison) -> float:
    return m.value_range[1] - m.value_range[0]


def _forest(m: MetricComparison, span: float, width: int = 220) -> str:
    """A small inline SVG: the delta and its interval around a zero line, on [-span, span] (:func:`_span`)."""
    if m.delta is None or m.ci95 is None:
        return ""

    def sx(v: float) -> float:
        return width / 2 + v / _extent(m) / span * (width / 2 - 6)

    colour = "#c62828" if m.regressed else "#1a7f37" if m.improved else "#5b6573"
    return (f"<svg class='ci-bar' width='{width}' height='18' viewBox='0 0 {width} 18' aria-hidden='true'>"
            f"<line x1='{width / 2}' y1='1' x2='{width / 2}' y2='17' stroke='#9aa4b1' stroke-dasharray='2,2'/>"
            f"<line x1='{sx(m.ci95[0]):.1f}' y1='9' x2='{sx(m.ci95[1]):.1f}' y2='9' stroke='{colour}' "
            f"stroke-width='4' stroke-linecap='round' opacity='0.5'/>"
            f"<circle cx='{sx(m.delta):.1f}' cy='9' r='4.5' fill='{colour}'/></svg>")


def render_comparison_html(comparison: Comparison) -> str:
    """The comparison as a self-contained HTML page."""
    from offline_eval.report import assets
    from offline_eval.report.badges import pill
    from offline_eval.report.html import page

    c = comparison
    span = _span(c.metrics)
    rows = []
    for m in c.metrics:
        flag = "regressed" if m.regressed else "improved" if m.improved else "same"
        d_cls = ""
        if m.delta is not None and m.delta != 0:
            good = (m.delta < 0) if m.lower_is_better else (m.delta > 0)
            d_cls = "delta-pos" if good else "delta-neg"
        rows.append(
            f"<tr data-metric='{e(m.name)}' data-verdict='{e(flag)}'><td><b>{e(m.name)}</b>"
            + (" <span class='muted small'>(lower is better)</span>" if m.lower_is_better else "") + "</td>"
            f"<td class='num'>{pill(m.mean_a, scale=m.scale)}</td>"
            f"<td class='num'>{pill(m.mean_b, scale=m.scale)}</td>"
            f"<td class='num {d_cls}' data-v='{'' if m.delta is None else repr(m.delta)}'>{_num(m.delta, sign=True)}</td>"
            f"<td class='num'>{e(_ci(m.ci95))}</td><td>{_forest(m, span)}</td>"
            f"<td class='num' data-v='{'' if m.p_value is None else repr(m.p_value)}'>{e(_p(m.p_value))}</td>"
            f"<td class='num'>{m.n_pairs}</td><td><span class='flag {flag}'>{e(m.verdict)}</span></td></tr>")
    notes = "".join(f"<span>{e(n)}</span>" for n in _notes(c)[2:])
    body = [f"<header class='top'><h1>Comparison — {e(c.label_b)} vs {e(c.label_a)}</h1>"
            f"<div class='meta'><span>A: <b>{e(c.run_a)}</b></span><span>B: <b>{e(c.run_b)}</b></span>{notes}</div></header><main>"]
    regressions = regression_failures(c)
    if regressions:
        body.append("<div class='banner error' id='regressions'><b>Significant regressions:</b><ul>"
                    + "".join(f"<li>{e(r)}</li>" for r in regressions) + "</ul></div>")
    body.append("<section id='deltas'><h2>Per-metric change (B − A)</h2>"
                "<table class='sortable-table' id='compare-table'><thead><tr><th>metric</th><th class='num'>A</th>"
                "<th class='num'>B</th><th class='num'>delta</th><th class='num'>95% CI</th><th>interval</th>"
                "<th class='num'>p</th><th class='num'>pairs</th><th>verdict</th></tr></thead><tbody>"
                + "".join(rows) + f"</tbody></table><p class='muted small'>Paired bootstrap over {c.unit}s "
                "scored in both runs; two-sided p-value. A change is called a regression/improvement when "
                f"p &lt; {ALPHA} and the whole 95% interval lies on one side of zero. On fewer than {MIN_PAIRS} "
                "pairs no interval or p-value is given: not even every pair moving the same way could reach "
                f"p &lt; {ALPHA}.</p></section>")
    body += [_most_regressed_html(m, c.unit) for m in c.metrics if m.most_regressed]
    body.append("</main><footer>Generated offline by offline-eval. This file loads nothing from the network.</footer>")
    return page(f"offline-eval comparison — {c.label_b} vs {c.label_a}", "".join(body),
                scripts=[assets.SIMPLE_SORT_JS])


def _most_regressed_html(m: MetricComparison, unit: str) -> str:
    """The samples (or conversations) of one metric that got worse most, with their questions and answers."""
    from offline_eval.report.badges import pill

    items = []
    for s in m.most_regressed:
        answers = ("<details><summary class='muted small'>answers</summary><div class='cols'>"
                   f"<div><div class='label muted small'>A</div><div class='text'>{e(s.answer_a)}</div></div>"
                   f"<div><div class='label muted small'>B</div><div class='text'>{e(s.answer_b)}</div></div>"
                   "</div></details>") if s.answer_a or s.answer_b else ""
        items.append(
            f"<tr><td>{e(s.id)}</td><td class='num'>{pill(s.a, scale=m.scale)}</td>"
            f"<td class='num'>{pill(s.b, scale=m.scale)}</td>"
            f"<td class='num delta-neg'>{s.delta:+.3f}</td><td><div class='text'>{e(s.question[:300])}</div>"
            f"{answers}</td></tr>")
    first = "question" if unit == "sample" else "turns, first question"
    return (f"<section class='regressed-samples' data-metric='{e(m.name)}'><h2>{e(m.name)}: {unit}s that got "
            f"worse most</h2><table><thead><tr><th>{'id' if unit == 'sample' else 'conversation'}</th>"
            "<th class='num'>A</th><th class='num'>B</th>"
            f"<th class='num'>change</th><th>{first}</th></tr></thead><tbody>{''.join(items)}</tbody></table>"
            "</section>")


def write_comparison_html(comparison: Comparison, output_dir: str | Path | None = None) -> Path:
    """Write ``compare.html`` into ``output_dir`` (default: beside run b) and return its path."""
    out = Path(output_dir) if output_dir is not None else comparison.run_b
    out.mkdir(parents=True, exist_ok=True)
    path = out / COMPARE_FILE
    path.write_text(render_comparison_html(comparison), encoding="utf-8")
    return path
