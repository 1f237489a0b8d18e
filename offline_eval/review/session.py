"""What the review page shows and records, with no HTTP in it (the server is :mod:`.server`).

A review reads a finished run folder: ``run.json`` (the run's fingerprint), ``summary.json`` (proof that
the run finished, so its samples are all there) and ``results.jsonl`` (one row per sample: its id, the
sample and each metric's score). It keeps only each row's byte offset and which metrics scored it, and
reads a row again when its sample is shown, so memory does not grow with the rows' size.

The seeded order (``review.json``) is every sample id of the run, sorted, then shuffled with
``random.Random(seed)``; it is written once, when the folder is first reviewed, and read back after.
A metric's samples, taken in that order, are a uniformly random order of the samples that metric
scored, whichever metrics are reviewed, so labelling them from the start gives a simple random sample.

Labels are re-read from ``labels.jsonl`` at every request: the page then always shows what is on disk,
whether one server takes several annotators or several servers share the folder.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.data.schema import printable
from offline_eval.people.labels import (
    LABELS_FILE, Label, append_label, cohen_kappa, latest, questions_for_people, read_labels, shared_labels,
)
from offline_eval.records import ResultRow, StoredScore
from offline_eval.runlog import (
    RESULTS, REVIEW, RUN_INFO, SUMMARY, RunLogError, is_finished, read_review, read_row, result_lines, run_info,
    summary_dict, write_atomic,
)
from offline_eval.thresholds import too_few_shared_labels

REVIEW_FILE = REVIEW
DEFAULT_SEED = 0
WORDS = {"yes": True, "no": False, "unsure": None}
# Metrics whose metadata lists the answer's own statements, each checked: (metric, where they are).
_ANSWER_STATEMENTS = (("faithfulness", "claims"), ("faithfulness_sentences", "claims"),
                      ("hallucination_rate", "claims"), ("answer_correctness", "tp+fp"))
# Control characters, and lone surrogates (a JSON "\ud800" decodes to one; no file can hold it as UTF-8).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class ReviewError(ValueError):
    """The folder cannot be reviewed as asked, or a request is malformed; the message is one line."""


@dataclass(frozen=True)
class Entry:
    """One sample of the run: its id, its place in the seeded order, where its row starts in
    results.jsonl and the metrics that scored it."""

    id: str
    order: int
    offset: int
    scored: frozenset[str]


def seeded_order(ids: Iterable[str], seed: int) -> list[str]:
    """The ids sorted, then shuffled by ``random.Random(seed)``: the same order from the same ids,
    whatever order results.jsonl holds them in."""
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    return order


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _read_object(read: Any, folder: Path, name: str) -> dict[str, Any]:
    """The folder's JSON file ``name`` as ``read`` (of :mod:`offline_eval.runlog`) gives it; a missing or
    damaged one is a ReviewError naming it."""
    try:
        value = read(folder)
    except RunLogError as exc:
        raise ReviewError(str(exc)) from None
    if value is None:
        raise ReviewError(f"{folder / name}: missing")
    return value


def _text(value: Any) -> str:
    """Display text of an untrusted field (None: "")."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    return [_text(v) for v in value] if isinstance(value, (list, tuple)) else [_text(value)]


def _turns(value: Any) -> list[dict[str, str]]:
    """A conversation history as {"role", "text"} turns: a list of {"role", "content"} objects (or of
    strings), or one string."""
    if value is None or value == []:
        return []
    turns = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict):
            role = item.get("role", item.get("speaker"))
            text = item.get("content", item.get("text"))
            turns.append({"role": _text(role), "text": _text(item if text is None else text)})
        else:
            turns.append({"role": "", "text": _text(item)})
    return turns


def check_annotator(name: Any) -> str:
    """An annotator's name, stripped: 1 to 80 characters, no control character or lone surrogate."""
    if not isinstance(name, str) or not name.strip():
        raise ReviewError("the annotator's name is missing")
    name = name.strip()
    if len(name) > 80 or _CONTROL.search(name):
        raise ReviewError("the annotator's name must be at most 80 characters of text, with no control characters")
    return name


def cut_torn_line(path: Path) -> None:
    """Cut a labels file back to its last whole line: a write cut short (a power cut during an append)
    leaves a line without its end, and the next append would otherwise be glued onto it."""
    try:
        with open(path, "rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)
                handle.flush()
                os.fsync(handle.fileno())
    except FileNotFoundError:
        return


class Review:
    """A run folder under review: its samples in the seeded order, the metrics asked about, the labels.

    ``metrics`` None: the run's metrics that have a question for people (self.questions) and score at
    least one sample. ``seed`` None: the one review.json records, or DEFAULT_SEED for a new review; a
    seed other than the recorded one is refused (it would change the order half-way).
    """

    def __init__(self, folder: str | Path, metrics: list[str] | None = None, *, seed: int | None = None,
                 annotator: str | None = None) -> None:
        self.folder = Path(folder)
        if not (self.folder / RESULTS).is_file():
            raise ReviewError(f"{self.folder}: no {RESULTS}; is this a folder written by `offline-eval run`?")
        info = _read_object(run_info, self.folder, RUN_INFO)
        self.fingerprint = str(info.get("fingerprint") or "")
        self.questions = questions_for_people(info)  # a criterion of the run's own asks its own question
        if not self.fingerprint:
            raise ReviewError(f"{self.folder / RUN_INFO}: no fingerprint")
        if not is_finished(self.folder):
            raise ReviewError(f"{self.folder}: the run has not finished (no {SUMMARY}); rerun the same "
                              "`offline-eval run` command to finish it, then review it")
        run = _read_object(summary_dict, self.folder, SUMMARY).get("run")
        run_metrics = [str(m) for m in run.get("metrics") or []] if isinstance(run, dict) else []
        self.annotator = check_annotator(annotator) if annotator is not None else None
        self.labels_path = self.folder / LABELS_FILE
        self._lock = threading.Lock()
        rows = self._index()
        self.metrics = self._choose(metrics, run_metrics, [scored for _, scored in rows.values()])
        self.seed, order = self._order(set(rows), seed)  # written once the review is known to be possible
        self.entries = [Entry(key, i, rows[key][0], rows[key][1]) for i, key in enumerate(order)]
        chosen = set(self.metrics)
        self.queue = [e for e in self.entries if e.scored & chosen]  # the samples shown, in the seeded order
        self._by_id = {e.id: e for e in self.entries}
        self.population = {m: sum(m in e.scored for e in self.entries) for m in self.metrics}
        cut_torn_line(self.labels_path)

    # -- reading the run --------------------------------------------------------------------------
    def _index(self) -> dict[str, tuple[int, frozenset[str]]]:
        """id -> (byte offset of its row, the metrics that scored it)."""
        rows: dict[str, tuple[int, frozenset[str]]] = {}
        try:
            for line in result_lines(self.folder):
                rows[line.row.id] = (line.offset, frozenset(m for m, s in line.row.scores.items() if s.scored))
        except RunLogError as exc:
            raise ReviewError(str(exc)) from None
        if not rows:
            raise ReviewError(f"{self.folder / RESULTS}: no samples")
        return rows

    def _order(self, ids: set[str], seed: int | None) -> tuple[int, list[str]]:
        """The seeded order review.json records, or a new one written there (atomically)."""
        path = self.folder / REVIEW_FILE
        if not path.exists():
            seed = DEFAULT_SEED if seed is None else seed
            order = seeded_order(ids, seed)
            write_atomic(path, json.dumps({"seed": seed, "run": self.fingerprint, "created": _now(),
                                           "order": order}, ensure_ascii=False, indent=1))
            return seed, order
        recorded = _read_object(read_review, self.folder, REVIEW)
        aside = f"move {REVIEW_FILE} and {LABELS_FILE} out of {self.folder} to start another review"
        if recorded.get("run") != self.fingerprint:
            raise ReviewError(f"{path}: made for another run (fingerprint {str(recorded.get('run'))[:8]}; "
                              f"this folder now holds {self.fingerprint[:8]}); {aside}")
        order = recorded.get("order")
        if not isinstance(order, list) or not all(isinstance(k, str) for k in order) \
                or len(set(order)) != len(order) or set(order) != ids:
            raise ReviewError(f"{path}: its order does not list this run's samples; {aside}")
        if seed is not None and seed != recorded.get("seed"):
            raise ReviewError(f"{path}: the review's order was drawn with seed {recorded.get('seed')}; "
                              f"another seed would break its random sample; {aside}")
        return int(recorded.get("seed", DEFAULT_SEED)), order

    def _choose(self, metrics: list[str] | None, run_metrics: list[str], scored: list[frozenset[str]]) -> list[str]:
        known = list(dict.fromkeys(run_metrics + sorted({m for s in scored for m in s})))
        if metrics is None:
            chosen = [m for m in known if m in self.questions and any(m in s for s in scored)]
            if not chosen:
                raise ReviewError(f"{self.folder}: no metric of this run ({', '.join(known) or 'none'}) has a "
                                  f"question for people; those that do: {', '.join(self.questions)}")
            return chosen
        for m in metrics:
            if m not in known:  # the name as typed, its control characters escaped (one line, inert)
                raise ReviewError(f"--metrics: {printable(m)} is not a metric of this run ({printable(', '.join(known))})")
            if m not in self.questions:
                raise ReviewError(f"--metrics: {m} has no question for people; those that do: "
                                  f"{', '.join(self.questions)}")
            if not any(m in s for s in scored):
                raise ReviewError(f"--metrics: {m} scored no sample of this run")
        return list(dict.fromkeys(metrics))

    def row(self, entry: Entry) -> dict[str, Any]:
        """The sample's line of results.jsonl, as written."""
        return read_row(self.folder, entry.offset)

    # -- labels -----------------------------------------------------------------------------------
    def labels(self) -> list[Label]:
        """The labels on disk about this run's samples (a label naming another run is left out)."""
        if not self.labels_path.exists():
            return []
        return [l for l in read_labels(self.labels_path)
                if l.id in self._by_id and (l.run is None or l.run == self.fingerprint)]

    def asked(self, entry: Entry) -> list[str]:
        """The reviewed metrics that scored this sample: the questions put about it."""
        return [m for m in self.metrics if m in entry.scored]

    def next_step(self, annotator: str, given: Mapping[tuple[str, str, str | None], Label]) -> dict | None:
        """The first (sample, question) of the queue this annotator has not answered; None when all are."""
        for pos, entry in enumerate(self.queue):
            for m in self.asked(entry):
                if (m, entry.id, annotator) not in given:
                    return {"pos": pos, "metric": m}
        return None

    def record(self, annotator: str, sample_id: Any, answers: Any) -> dict[str, Any]:
        """Append one label per (metric, word) of ``answers`` for a sample, each fsynced before the
        next, and return the state the page shows next."""
        annotator = check_annotator(annotator)
        entry = self._by_id.get(sample_id) if isinstance(sample_id, str) else None
        if entry is None:
            raise ReviewError("no such sample in this run")
        if not isinstance(answers, dict) or not answers:
            raise ReviewError("expected labels as {metric: yes|no|unsure}")
        asked = self.asked(entry)
        for metric, word in answers.items():
            if metric not in asked:
                raise ReviewError(f"{metric} is not asked about this sample")
            if not isinstance(word, str) or word not in WORDS:  # a list or an object cannot be looked up
                raise ReviewError(f"expected yes, no or unsure, got {word!r:.40}")
        with self._lock:
            for metric in asked:  # in the page's order, whatever order the request listed them in
                if metric in answers:
                    append_label(self.labels_path, Label(
                        entry.id, metric, WORDS[answers[metric]], annotator=annotator, time=_now(),
                        question=self.questions[metric], order=entry.order, run=self.fingerprint))
        return self.state(annotator)

    # -- what the page shows ----------------------------------------------------------------------
    def state(self, annotator: str | None) -> dict[str, Any]:
        """Progress, the next unanswered step and the annotators' agreement, for ``annotator``."""
        labels = self.labels()
        given = latest(labels)
        out: dict[str, Any] = {
            "annotator": annotator, "seed": self.seed, "size": len(self.queue), "run": self.fingerprint[:12],
            "metrics": [{"metric": m, "question": self.questions[m]} for m in self.metrics],
            "agreement": self.agreement(labels)}
        if annotator is not None:
            mine = [(metric, label) for (metric, key, who), label in given.items()
                    if who == annotator and metric in self._by_id[key].scored]
            out["progress"] = {m: {"labelled": sum(1 for metric, _ in mine if metric == m),
                                   "unsure": sum(1 for metric, l in mine if metric == m and l.value is None),
                                   "n": self.population[m]} for m in self.metrics}
            out["next"] = self.next_step(annotator, given)
        return out

    def agreement(self, labels: list[Label]) -> list[dict[str, Any]]:
        """Cohen's kappa for every pair of named annotators, per metric, on the samples both labelled
        yes or no; None on fewer than MIN_SHARED_LABELS of them, with ``note`` saying so for the page."""
        given = latest(labels)
        out = []
        for m in self.metrics:
            by: dict[str, dict[str, bool | None]] = {}
            for (metric, key, who), label in given.items():
                if metric == m and who is not None:
                    by.setdefault(who, {})[key] = label.value
            for a, b in combinations(sorted(by), 2):
                n = len(shared_labels(by[a], by[b]))
                if n:
                    out.append({"metric": m, "a": a, "b": b, "n": n, "kappa": cohen_kappa(by[a], by[b]),
                                "note": too_few_shared_labels(n)})
        return out

    def sample(self, pos: Any, annotator: str) -> dict[str, Any]:
        """The sample at ``pos`` of the queue as the page shows it: its texts, the questions put about it,
        this annotator's answers and, for the questions already answered only, the judge's verdicts."""
        if not isinstance(pos, int) or not 0 <= pos < len(self.queue):
            raise ReviewError(f"no sample at position {pos!r:.40}")
        entry = self.queue[pos]
        row = ResultRow.from_dict(self.row(entry))
        sample, scores = row.sample, row.scores
        given = latest(self.labels())
        mine = {m: given[(m, entry.id, annotator)].word for m in self.asked(entry) if (m, entry.id, annotator) in given}
        return {
            "pos": pos, "id": entry.id, "order": entry.order,
            "question": _text(sample.get("question")), "conversation": _turns(sample.get("conversation")),
            "answer": _text(sample.get("answer")), "statements": _statements(scores),
            "contexts": _texts(sample.get("contexts")), "reference": _text(sample.get("ground_truth")),
            "keypoints": _texts(sample.get("keypoints")),
            "asked": [{"metric": m, "question": self.questions[m]} for m in self.asked(entry)],
            "labels": mine, "verdicts": {m: _verdict(scores.get(m)) for m in mine}}


def _statements(scores: Mapping[str, StoredScore]) -> list[str]:
    """The answer's statements a metric checked one by one (its claims, or answer correctness's TP and
    FP), or none when no metric split the answer (it was checked whole)."""
    for metric, where in _ANSWER_STATEMENTS:
        score = scores.get(metric)
        if score is None:
            continue
        meta = score.metadata
        source = meta.get("statements")
        if where == "claims" and isinstance(meta.get("claims"), list) and source != "whole":
            return [_text(c.get("claim")) if isinstance(c, dict) else _text(c) for c in meta["claims"]]
        if where == "tp+fp" and isinstance(meta.get("tp"), list) \
                and not (isinstance(source, dict) and source.get("answer") == "whole"):
            return _texts(meta.get("tp")) + _texts(meta.get("fp"))
    return []


def _verdict(score: StoredScore | None) -> dict[str, Any]:
    """What the judge said about one metric of a sample: its score, its explanation and, item by item,
    each check (a claim supported or not; a statement in the reference or not)."""
    meta = score.metadata if score is not None else {}
    checks = []
    for c in meta.get("claims") if isinstance(meta.get("claims"), list) else []:
        if isinstance(c, dict):
            ok = next((c[k] for k in ("supported", "attributed", "correct") if isinstance(c.get(k), bool)), None)
            checks.append({"text": _text(c.get("claim")), "ok": ok,
                           "note": {True: "supported", False: "not supported", None: "?"}[ok]})
    for key, ok, note in (("tp", True, "in the reference"), ("fp", False, "not in the reference"),
                          ("fn", False, "in the reference, not in the answer")):
        checks.extend({"text": text, "ok": ok, "note": note} for text in _texts(meta.get(key)))
    return {"value": score.value if score is not None else None,
            "explanation": score.explanation if score is not None else "", "checks": checks}
