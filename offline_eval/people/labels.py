"""Expert labels: what people said about a run's samples, one JSON object a line.

A labels file is JSON Lines. Each line is one person's answer about one sample, for one metric:

    {"id": "policy-en-02", "metric": "faithfulness", "label": "yes", "annotator": "alice",
     "time": "2026-12-01T21:07:03Z", "question": "Is everything the answer states supported by the contexts?",
     "order": 17, "run": "3f1c0a9b2e7d4c5a6b8e"}

* ``id`` (the sample's id in the run) and ``metric`` (a metric of the run) are required.
* ``label``: ``"yes"``, ``"no"`` or ``"unsure"``; ``true`` / ``false`` are read as yes / no, so a file of
  ``{"id", "metric", "label": true|false}`` lines made by another tool, or by a script from an existing
  labelled set, is read as it is. An unsure label is kept but counts in no estimate.
* ``annotator``, ``time`` (ISO 8601), ``question`` (the question put to the person), ``order`` (the
  sample's place in the seeded random order it was shown in, :mod:`offline_eval.review`) and ``run``
  (the run's fingerprint) are optional and carried through.

A later line for the same sample, metric and annotator replaces an earlier one (a label corrected
with "back"): files are only ever appended to. :func:`append_label` writes one line and fsyncs it, so
a label is on disk once the call returns.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.data.schema import DataError, described
from offline_eval.metrics import metric_classes
from offline_eval.runlog import LABELS
from offline_eval.thresholds import MIN_SHARED_LABELS

LABELS_FILE = LABELS  # in a run folder (its name: offline_eval.runlog)


def questions_for_people(run_info: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Each metric's question for people, as its class declares it (``Metric.question_for_people``; a
    metric without one is not in the mapping), and for a run's criteria of its own (recorded in its
    run.json, ``metric_options``) the criterion's own question."""
    questions = {name: cls.question_for_people for name, cls in sorted(metric_classes().items())
                 if cls.question_for_people}
    options = (run_info or {}).get("metric_options")
    for metric, config in (options.items() if isinstance(options, Mapping) else ()):
        criterion = config.get("criterion") if isinstance(config, Mapping) else None
        asked = criterion.get("question") if isinstance(criterion, Mapping) else None
        if isinstance(asked, Mapping) and isinstance(asked.get("en"), str):
            questions[str(metric)] = asked["en"]
    return questions


_VALUES = {"yes": True, "no": False, "unsure": None, True: True, False: False}


@dataclass(frozen=True)
class Label:
    id: str
    metric: str
    value: bool | None  # yes / no; None: unsure
    annotator: str | None = None
    time: str | None = None
    question: str | None = None
    order: int | None = None
    run: str | None = None

    @property
    def word(self) -> str:
        return {True: "yes", False: "no", None: "unsure"}[self.value]

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None and k != "value"}
        return {"id": self.id, "metric": self.metric, "label": self.word, **out}


def parse_label(obj: Any, *, source: str = "labels", line: int | None = None) -> Label:
    """One label from a decoded JSON line; a one-line DataError naming the line and field otherwise."""
    def bad(field: str, message: str) -> DataError:
        return DataError(message, source=source, row=line, field=field)

    if not isinstance(obj, Mapping):
        raise bad("label", f"expected a JSON object, got {type(obj).__name__}")
    for field in ("id", "metric"):
        if not isinstance(obj.get(field), (str, int)) or isinstance(obj.get(field), bool) or obj.get(field) == "":
            raise bad(field, "is missing or not text")
    raw = obj.get("label")
    # only text and true/false are looked up: a list or an object is no key of _VALUES (nor hashable),
    # and 1 / 0 would match true / false
    key = raw.strip().lower() if isinstance(raw, str) else raw if isinstance(raw, bool) else None
    if key not in _VALUES:
        raise bad("label", f"expected yes, no, unsure, true or false, got {described(raw)}")
    order = obj.get("order")
    if order is not None and (not isinstance(order, int) or isinstance(order, bool) or order < 0):
        raise bad("order", f"expected a whole number from 0, got {order!r}")
    text = {k: obj.get(k) for k in ("annotator", "time", "question", "run")}
    for field, value in text.items():
        if value is not None and not isinstance(value, str):
            raise bad(field, f"expected text, got {type(value).__name__}")
    return Label(str(obj["id"]), str(obj["metric"]), _VALUES[key], order=order, **text)


def read_labels(path: str | Path) -> list[Label]:
    """Every label of a labels file, in file order (see the module docstring). A line cut short at the
    end of the file (a write interrupted by a power cut) is left out; any other bad line is a
    one-line DataError naming the file, the line and the field."""
    path = Path(path)
    try:  # utf-8-sig: a file saved by an editor that writes a byte-order mark reads the same
        lines = path.read_text(encoding="utf-8-sig").split("\n")
    except FileNotFoundError:
        raise DataError("no such labels file", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte {exc.start})", source=str(path)) from None
    labels = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # the last line, without its newline: an interrupted append
                break
            raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=str(path), row=number) from None
        labels.append(parse_label(obj, source=str(path), line=number))
    return labels


def append_label(path: str | Path, label: Label) -> None:
    """Append one label to a labels file and fsync it (the file and, when it is new, its folder)."""
    path = Path(path)
    new = not path.exists()
    line = json.dumps(label.to_json(), ensure_ascii=False, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    if new:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def latest(labels: Iterable[Label]) -> dict[tuple[str, str, str | None], Label]:
    """(metric, id, annotator) -> the last label given (a later line corrects an earlier one)."""
    out: dict[tuple[str, str, str | None], Label] = {}
    for label in labels:
        out[(label.metric, label.id, label.annotator)] = label
    return out


def shared_labels(a: Mapping[str, bool | None], b: Mapping[str, bool | None]) -> list[str]:
    """The samples two annotators (sample id -> True yes / False no / None unsure) both labelled yes or no."""
    return [key for key, value in a.items() if value is not None and b.get(key) is not None]


def cohen_kappa(a: Mapping[str, bool | None], b: Mapping[str, bool | None],
                least: int = MIN_SHARED_LABELS) -> float | None:
    """Cohen's kappa of two annotators' labels (sample id -> True yes / False no / None unsure) on the
    samples both labelled yes or no (:func:`shared_labels`): ``(p_o - p_e) / (1 - p_e)``, ``p_o`` the
    share of those samples they agree on, ``p_e`` the share two independent annotators with their rates of
    yes would agree on. None when they share fewer than ``least`` such samples (by default
    :data:`~offline_eval.thresholds.MIN_SHARED_LABELS`: :func:`~offline_eval.thresholds.too_few_shared_labels`
    says so), or when ``p_e`` is 1 (both gave the same one answer throughout: agreement by chance alone
    cannot be told from agreement, and kappa is undefined)."""
    rows = shared_labels(a, b)
    n = len(rows)
    if not rows or n < least:
        return None
    p_o = sum(a[key] == b[key] for key in rows) / n
    yes_a, yes_b = sum(bool(a[key]) for key in rows) / n, sum(bool(b[key]) for key in rows) / n
    p_e = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)
