"""Criteria of your own: yes/no and graded judgements defined in a TOML file, each a metric.

A team's questions that no fixed metric asks (does the answer cite a document for each claim? does it
avoid legal advice? is it in the user's language?) are written as criteria::

    [cites_sources]
    question = "Does the answer name the document it took each fact from?"
    reads = ["answer", "contexts"]

    [tone]
    question = "How professional is the tone of the answer?"
    reads = ["question", "answer"]
    grades = { 1 = "rude or dismissive", 2 = "casual", 3 = "professional and courteous" }

Each table is one criterion, its name the table's (lower case letters, digits, underscores), its metric
``criterion_<name>``. Keys:

* ``question`` (required): what the judge is asked; a table ``{ en = "...", zh = "..." }`` gives it per
  prompt language (English is used where a language has none).
* ``reads`` (required): the sample fields shown to the judge, from ``question``, ``answer``, ``contexts``,
  ``reference`` and ``conversation`` (the turns before the question; it implies ``question``). A sample
  without one of them (the conversation excepted) is unscored, ``missing_field:<name>``.
* ``grades``: a graded criterion, a description for each whole-number grade (at least two); without it the
  criterion is yes/no.
* ``higher_is_better`` (default true): false for a criterion that asks about a fault ("Does the answer give
  legal advice?"): summaries, gates, ``compare`` and the report read it.
* ``examples``: few-shot examples, each a table of the fields the criterion reads and its ``label``
  (``yes`` / ``no``, or a grade), shown to the judge as earlier exchanges.
* ``lean_correction`` (yes/no criteria that read the contexts and the answer; default true for them):
  take the lean the contexts alone give the judge out of the verdict (the contextual calibration
  faithfulness uses): the prompt is also asked with the answer left empty.

A yes/no criterion's value is the judge's P(Yes) (normalised over Yes and No); a graded one's is the
probability-weighted grade, scaled to [0, 1] from the lowest grade to the highest, with the most likely
grade and every grade's probability beside it. With ``--verdicts generate`` the judge writes a reason and
its verdict as JSON instead (the value is then 1 / 0, or the grade scaled). Criteria are batched like
every judge request: the fields come first in the prompt and the criterion last, so the criteria of one
sample that read the same fields share their prompt prefix.

A file with a mistake (an unknown key or field, a grade without a description, a duplicate name, an
example without its label) is one :class:`~offline_eval.data.schema.DataError` line naming the file, the
criterion and the key, raised when the file is read, before any model loads.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generator

from offline_eval.data.schema import DataError, Sample
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import (
    EMPTY_STATEMENT, VERDICT_STAGES, Verdicts, expected_grade, most_likely, option_verdict,
)
from offline_eval.metrics.base import Metric, Score
from offline_eval.prompts.base import Prompt
from offline_eval.prompts.ragas import JSON_ONLY, YES_NO

PREFIX = "criterion_"
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # the whole name (fullmatch: "$" would let "abc\n" through)
# a criterion's field -> the Sample field it shows, in the order the prompt shows them
FIELDS = {"conversation": "conversation", "question": "question", "contexts": "contexts", "answer": "answer",
          "reference": "ground_truth"}
KEYS = {"question", "reads", "grades", "higher_is_better", "examples", "lean_correction"}
LABELS = {
    "en": {"question": "Question", "contexts": "Retrieved contexts", "answer": "Answer",
           "reference": "Reference answer", "yes_no": "Answer Yes or No.",
           "graded": "Grades:\n{grades}\nAnswer with the number of the grade only.",
           "reason": 'Give a one-sentence reason, then your verdict.\nJSON: {"reason": "...", "verdict": EXAMPLE}'},
    "zh": {"question": "问题", "contexts": "检索到的上下文", "answer": "回答", "reference": "参考答案",
           "yes_no": "回答 Yes 或 No。", "graded": "等级：\n{grades}\n只回答等级的数字。",
           "reason": '先给出一句理由，再给出结论。\nJSON：{"reason": "...", "verdict": EXAMPLE}'},
}


@dataclass(frozen=True)
class Criterion:
    """One criterion of a criteria file (see the module docstring)."""

    name: str
    question: Mapping[str, str]  # prompt language -> the question ("en" always present)
    reads: tuple[str, ...]  # criterion fields, in FIELDS order
    grades: tuple[tuple[int, str], ...] = ()  # (grade, description), ascending; () for yes/no
    higher_is_better: bool = True
    examples: tuple[Mapping[str, Any], ...] = ()
    lean_correction: bool = False

    @property
    def metric_name(self) -> str:
        return PREFIX + self.name

    @property
    def item(self) -> str:
        """The field the verdict is on: the answer (the lean correction's probe leaves it empty), else
        the last field it reads."""
        return "answer" if "answer" in self.reads else self.reads[-1]

    @property
    def options(self) -> tuple[str, ...]:
        """What the judge answers: Yes / No, or the grades' numbers."""
        return tuple(str(g) for g, _ in self.grades) if self.grades else ("Yes", "No")

    def to_dict(self) -> dict[str, Any]:
        """The definition (it enters the run's fingerprint and a calibration's signature)."""
        return {"question": dict(self.question), "reads": list(self.reads),
                "grades": {str(g): d for g, d in self.grades}, "higher_is_better": self.higher_is_better,
                "examples": [dict(e) for e in self.examples], "lean_correction": self.lean_correction}


# --- reading ---------------------------------------------------------------------------------------
def read_criteria(path: str | Path) -> list[Criterion]:
    """The criteria of a TOML file, in file order; a one-line DataError for any mistake."""
    path = Path(path)
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("no such criteria file", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the criteria file: {exc}", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:  # a name given twice is one of these
        raise DataError(f"not valid TOML: {exc}", source=str(path)) from None
    return criteria_from_tables(table, str(path))


def criteria_from_tables(tables: Mapping[str, Any], source: str) -> list[Criterion]:
    """Criteria from already-parsed tables (a --config file's ``criteria`` table, the API's dict)."""
    if not tables:
        raise DataError("defines no criterion", source=source)
    return [_criterion(name, entry, source) for name, entry in tables.items()]


def _criterion(name: Any, entry: Any, source: str) -> Criterion:
    def bad(message: str, key: str | None = None) -> DataError:
        return DataError(f"criterion '{name}': {message}", source=source, field=key)

    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise bad("a name is lower-case letters, digits and underscores, starting with a letter")
    if not isinstance(entry, Mapping):
        raise bad("expected a table of keys (question, reads, ...)")
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})", unknown[0])
    question = _question(entry.get("question"), bad)
    reads = _reads(entry.get("reads"), bad)
    grades = _grades(entry.get("grades"), bad)
    higher = entry.get("higher_is_better", True)
    if not isinstance(higher, bool):
        raise bad("expected true or false", "higher_is_better")
    # on by default where it applies: it ranked every shared faithfulness set closer to people's labels
    lean = entry.get("lean_correction", not grades and {"contexts", "answer"} <= set(reads))
    if not isinstance(lean, bool):
        raise bad("expected true or false", "lean_correction")
    if lean and (grades or not {"contexts", "answer"} <= set(reads)):
        raise bad("the lean correction is for yes/no criteria that read the contexts and the answer",
                  "lean_correction")
    criterion = Criterion(name, question, reads, grades, higher, (), lean)
    return Criterion(name, question, reads, grades, higher, _examples(entry.get("examples"), criterion, bad), lean)


def _question(value: Any, bad: Any) -> dict[str, str]:
    if isinstance(value, str):
        value = {"en": value}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) and v.strip() for v in value.values()):
        raise bad("expected the question as text, or a table of texts by language (en, zh)", "question")
    if "en" not in value:
        raise bad("the question needs its English text (en)", "question")
    unknown = sorted(set(value) - set(LABELS))
    if unknown:
        raise bad(f"no prompt language {unknown[0]!r} (known: {', '.join(LABELS)})", "question")
    return {k: v.strip() for k, v in value.items()}


def _reads(value: Any, bad: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise bad(f"expected a list of the fields it reads, from {', '.join(FIELDS)}", "reads")
    unknown = [v for v in value if v not in FIELDS]
    if unknown:
        raise bad(f"unknown field {unknown[0]!r} in reads (known: {', '.join(FIELDS)})", "reads")
    if len(set(value)) != len(value):
        raise bad("a field is named twice in reads", "reads")
    wanted = set(value) | ({"question"} if "conversation" in value else set())
    return tuple(f for f in FIELDS if f in wanted)


def _grades(value: Any, bad: Any) -> tuple[tuple[int, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or len(value) < 2:
        raise bad("expected a table of at least two grades, { 1 = \"...\", 2 = \"...\" }", "grades")
    grades = []
    for key, description in value.items():
        try:
            grade = int(key)
        except (TypeError, ValueError):
            raise bad(f"grade {key!r} is not a whole number", "grades") from None
        if not isinstance(description, str) or not description.strip():
            raise bad(f"grade {grade} has no description", "grades")
        grades.append((grade, description.strip()))
    return tuple(sorted(grades))


def _examples(value: Any, criterion: Criterion, bad: Any) -> tuple[dict[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise bad("expected a list of example tables ([[name.examples]])", "examples")
    out = []
    for i, example in enumerate(value, start=1):
        missing = [f for f in criterion.reads if f != "conversation" and f not in example]
        if missing:
            raise bad(f"example {i} has no {missing[0]} (it reads {', '.join(criterion.reads)})", "examples")
        label = str(example.get("label", "")).strip()
        label = label.capitalize() if label.lower() in ("yes", "no") else label
        if label not in criterion.options:
            raise bad(f"example {i}'s label {example.get('label')!r} is not one of {', '.join(criterion.options)}",
                      "examples")
        out.append({**{f: example[f] for f in criterion.reads if f in example}, "label": label})
    return tuple(out)


# --- the metric ------------------------------------------------------------------------------------
class CriterionMetric(Metric):
    """A criterion as a metric; :func:`criterion_metric` makes one subclass per criterion."""

    criterion: ClassVar[Criterion]
    roles = frozenset({"judge"})
    most_steps = VERDICT_STAGES

    def config(self) -> dict[str, Any]:
        return {"criterion": self.criterion.to_dict()}

    def score(self, sample: Sample, settings: EvalSettings) -> Generator[Any, Any, Score]:
        """The criterion's :class:`~offline_eval.judging.verdicts.Verdicts` on the sample: option
        probabilities, with the same prompt asked with the answer left empty (the contexts' own lean)
        for the lean correction, or a reason and a verdict as JSON."""
        c, language = self.criterion, settings.language_for(sample)
        values = _values(c, sample, language)
        item = values.pop(c.item)
        verdicts = Verdicts(criterion_prompt(c, language), c.options, criterion_prompt(c, language, True), c.item,
                            lambda probs, leans: self._from_probabilities(probs, leans, settings),
                            self._from_verdict, probes=(EMPTY_STATEMENT,) if c.lean_correction else ())
        [score] = yield from verdicts.judge([item], values, language, settings)
        return score

    def _from_probabilities(self, probs: Mapping[str, float], leans: tuple[Mapping[str, float], ...],
                            settings: EvalSettings) -> Score:
        c = self.criterion
        if not c.grades:
            verdict = option_verdict(probs, leans, settings)
            p = verdict.probability
            extra = {"judge_probability": round(verdict.judge, 6), "baseline": round(verdict.baseline, 6)} \
                if verdict.baseline is not None else {}
            return Score(p, explanation=f"P(Yes) {p:.2f}", metadata={"probability": round(p, 6), **extra})
        expected = expected_grade(probs, c.options)
        likely = int(most_likely(probs, c.options))
        return Score(_scaled(expected, c), explanation=f"expected grade {expected:.2f}; most likely {likely}",
                     metadata={"expected_grade": round(expected, 6), "most_likely_grade": likely,
                               "grade_description": dict(c.grades)[likely],
                               "probabilities": {str(g): round(probs[str(g)], 6) for g, _ in c.grades}})

    def _from_verdict(self, reply: Mapping[str, Any]) -> Score:
        c, verdict = self.criterion, str(reply["verdict"])
        reason = str(reply.get("reason", ""))
        if not c.grades:
            return Score(1.0 if verdict == "Yes" else 0.0, explanation=reason, metadata={"verdict": verdict})
        return Score(_scaled(int(verdict), c), explanation=reason, metadata={"grade": int(verdict)})


def _scaled(grade: float, c: Criterion) -> float:
    low, high = c.grades[0][0], c.grades[-1][0]
    return min(max((grade - low) / (high - low), 0.0), 1.0)


def criterion_metric(criterion: Criterion) -> type[CriterionMetric]:
    """The metric class of ``criterion``: named ``criterion_<name>``, requiring the fields it reads."""
    question = criterion.question["en"]
    return type(f"Criterion_{criterion.name}", (CriterionMetric,), {
        "name": criterion.metric_name, "criterion": criterion,
        "requires": tuple(FIELDS[f] for f in criterion.reads if f != "conversation"),
        "reads_question": "question" in criterion.reads,
        "description": question if len(question) <= 120 else question[:119] + "…", "question_for_people": question,
        "higher_is_better": criterion.higher_is_better, "__module__": __name__,
    })


# --- the prompt ------------------------------------------------------------------------------------
def criterion_prompt(criterion: Criterion, language: str, generate: bool = False) -> Prompt:
    """The criterion's prompt in ``language`` (English when the criterion has no question in it): the
    fields it reads first (the question's line shows the conversation before it, Prompt.render), then
    the criterion, then how to answer."""
    labels = LABELS[language if language in LABELS else "en"]
    text = criterion.question.get(language) or criterion.question["en"]
    lines = []
    for field in criterion.reads:
        if field == "question":
            lines.append(f"{labels['question']}: {{question}}")
        elif field != "conversation":
            lines.append(f"{labels[field]}:\n{{{field}}}")
    ask = text + "\n"
    if criterion.grades:
        ask += labels["graded"].replace("{grades}", "\n".join(f"{g}: {d}" for g, d in criterion.grades))
    else:
        ask += labels["yes_no"]
    if generate:  # the last line, how to answer, becomes: a reason, then the verdict, as JSON
        ask = ask.rsplit("\n", 1)[0] + "\n" + labels["reason"].replace("EXAMPLE", "2" if criterion.grades else '"Yes"')
    template = "\n\n".join(lines) + "\n\n" + _braces(ask)
    shots = [({k: _shown(k, v) for k, v in e.items() if k != "label"}, e["label"]) for e in criterion.examples]
    lang = language if language in LABELS else "en"
    return Prompt(name=criterion.metric_name, system=JSON_ONLY if generate else YES_NO,
                  template={lang: template, "en": template} if lang != "en" else {"en": template},
                  schema=_schema(criterion) if generate else None,
                  examples={lang: [] if generate else shots}, examples_as_turns=True)


def _schema(criterion: Criterion) -> dict[str, Any]:
    verdict = {"type": "integer", "enum": [g for g, _ in criterion.grades]} if criterion.grades else \
        {"type": "string", "enum": ["Yes", "No"]}
    return {"type": "object", "required": ["reason", "verdict"],
            "properties": {"reason": {"type": "string"}, "verdict": verdict}}


def _values(criterion: Criterion, sample: Sample, language: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in criterion.reads:
        if field != "conversation":
            values[field] = _shown(field, getattr(sample, FIELDS[field]))
    return values


def _shown(field: str, value: Any) -> Any:
    """A field as the prompt shows it: contexts numbered one per paragraph, the rest as they are."""
    if field == "contexts":
        chunks = value if isinstance(value, list) else [value]
        return "\n\n".join(f"[{i}] {c}" for i, c in enumerate(chunks, start=1))
    return value if isinstance(value, str) else str(value)


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


# --- registration ----------------------------------------------------------------------------------
def load_criteria(sources: list[Any]) -> list[str]:
    """Register the metric of every criterion in ``sources`` (criteria files, or tables of criteria as
    the API and a --config file give them); their metric names, in order. A name given twice, in one
    source or across them, is a one-line DataError, as any mistake in a file is."""
    from offline_eval.metrics import register_metric

    criteria: list[Criterion] = []
    for source in sources:
        criteria += (criteria_from_tables(source, "criteria") if isinstance(source, Mapping)
                     else read_criteria(source))
    seen: dict[str, int] = {}
    for c in criteria:
        seen[c.name] = seen.get(c.name, 0) + 1
        if seen[c.name] > 1:
            raise DataError(f"criterion '{c.name}' is defined twice", source=", ".join(map(str, sources)))
    for c in criteria:
        register_metric(criterion_metric(c))
    return [c.metric_name for c in criteria]
