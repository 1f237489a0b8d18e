"""Where a score is an expected share, the words that say so beside the decisions its evidence counts.

With option verdicts and ``--verdict-score probability`` (the default), faithfulness, context_recall,
hallucination_rate, the TP/FP/FN of answer_correctness and the key-point metrics score an *expected*
share: the mean of the judge's probabilities (docs/verification.md, "Expected shares"). Their evidence
lists decisions: a claim supported at P >= the support threshold, a key point's most likely label. The
two differ whenever a probability sits on the other side of the line from its decision (0 of 1
sentences attributable beside a score of 0.484), so the report says which number is which, in the same
words for every metric.

Nothing here knows a metric by name: a score reads as an expected share only where its value is the
mean of the probabilities its own evidence holds, so a share of decisions (``--verdict-score
threshold``, generated verdicts, context_precision's average precision) gets no note.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from offline_eval.metrics.evidence import Checks, Columns, Evidence
from offline_eval.records import finite
from offline_eval.report._run import str_list

__all__ = ["DEFAULT_LINE", "decision_line", "share_note", "column_counts"]

DEFAULT_LINE = 0.5  # EvalSettings.support_threshold's default
# How far a value may sit from the mean of the probabilities it was computed from: they are stored
# rounded to six decimals, which moves a mean by at most 5e-7.
_SAME = 1e-5
PROBABILITY = "probability"  # an item's P(yes), as Verdict.to_dict writes it
PROBABILITIES = "probabilities"  # an item's probability of each word verdict (key points)
COUNTS = "counts"  # the expected counts beside columns of decided items (answer_correctness)


def decision_line(run: Mapping[str, Any]) -> float:
    """The P(yes) at which the run decided a verdict: its recorded support threshold, else the default."""
    settings = run.get("settings")
    line = finite(settings.get("support_threshold")) if isinstance(settings, Mapping) else None
    return line if line is not None and 0.0 <= line <= 1.0 else DEFAULT_LINE


def _num(value: float) -> str:
    return f"{value:.3f}"


def _sentence(decided: str, value: float, what: str) -> str:
    """The one wording: the decisions first, as the evidence counts them, then what the score is."""
    return f"{decided}; the score {_num(value)} is {what}."


def _yes_no_share(spec: Checks, value: float, items: list[Mapping[str, Any]], line: float) -> str:
    flags = [item.get(spec.verdict) for item in items]
    probs = [finite(item.get(PROBABILITY)) for item in items]
    if not items or not all(isinstance(f, bool) for f in flags) or None in probs:
        return ""
    if all(p in (0.0, 1.0) for p in probs):  # decisions written as 0 and 1: nothing is expected
        return ""
    mean = sum(probs) / len(probs)
    if abs(value - mean) <= _SAME:
        word, decided = spec.yes, sum(flags)
    elif abs(value - (1.0 - mean)) <= _SAME:  # the complement: a share of the "no" verdicts
        word, decided = spec.no, len(flags) - sum(flags)
    else:
        return ""
    word = word or "yes"
    return _sentence(f"{decided} of {len(items)} {word} at the {line:g} line", value,
                     f"the expected share, the mean of the judge's probabilities that each is {word}")


def _label_share(spec: Checks, value: float, items: list[Mapping[str, Any]]) -> str:
    tables = [item.get(PROBABILITIES) for item in items]
    if not items or not all(isinstance(t, Mapping) for t in tables):
        return ""
    for label in dict.fromkeys(str(k) for t in tables for k in t):
        probs = [finite(t.get(label)) for t in tables]
        if None in probs or abs(value - sum(probs) / len(probs)) > _SAME:
            continue
        if all(p in (0.0, 1.0) for p in probs):
            return ""
        decided = sum(str(item.get(spec.verdict)) == label for item in items)
        word = label.lower()
        return _sentence(f"{decided} of {len(items)} {word} by each one's most likely label", value,
                         f"the expected share, the mean of the judge's probabilities that each is {word}")
    return ""


def _short(title: str) -> str:
    return title.split(" — ")[0].strip() or title


def column_counts(spec: Columns, meta: Mapping[str, Any]) -> list[tuple[int, float]] | None:
    """Each column's (decided items, expected count) where the metadata's ``counts`` are expected counts
    that differ from the lists they stand beside; None where they are the lists' own lengths or absent."""
    counts = meta.get(COUNTS)
    if not isinstance(counts, list) or len(counts) != len(spec.columns):
        return None
    expected = [finite(c) for c in counts]
    if None in expected:
        return None
    decided = [len(str_list(meta.get(key))) for key, _, _ in spec.columns]
    if all(abs(d - x) <= _SAME for d, x in zip(decided, expected)):
        return None
    return list(zip(decided, expected))


def _columns_share(spec: Columns, value: float, meta: Mapping[str, Any], line: float) -> str:
    pairs = column_counts(spec, meta)
    if pairs is None:
        return ""
    names = [_short(title) for _, title, _ in spec.columns]
    decided = ", ".join(f"{name} {d}" for name, (d, _) in zip(names, pairs))
    expected = ", ".join(f"{name} {x:.2f}" for name, (_, x) in zip(names, pairs))
    return _sentence(f"{decided} at the {line:g} line", value,
                     f"computed from expected counts, the sums of the judge's probabilities ({expected})")


def share_note(value: float | None, meta: Mapping[str, Any], specs: Sequence[Evidence], line: float) -> str:
    """The sentence that says a score is an expected share and counts the decisions beside it, for the
    first of ``specs`` (the score's evidence) whose probabilities the value is the mean of; "" when the
    value is no expected share (unscored, a share of decisions, evidence without probabilities)."""
    if value is None:
        return ""
    for spec in specs:
        note = ""
        if isinstance(spec, Checks) and spec.verdict is not None:
            items = meta.get(spec.key)
            items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
            note = (_yes_no_share(spec, value, items, line) if spec.yes or spec.no
                    else _label_share(spec, value, items))
        elif isinstance(spec, Columns):
            note = _columns_share(spec, value, meta, line)
        if note:
            return note
    return ""
