"""What a metric is and what it returns.

A metric describes its work for one sample as a generator: it ``yield``s a request, or a list of
requests, and receives the result (or the list of results) back; it ``return``s a Score. The engine
drives every (sample, metric) generator of the dataset in lockstep, so each yield point is a stage
whose requests are gathered across the whole dataset, deduplicated and executed in batches.

    def score(self, sample, settings):
        claims = yield Generate(...)          # one request -> one result
        probs = yield [Classify(...), ...]    # a list -> a list of results, same order
        return Score(value=..., metadata={...})

A metric that needs no model may return its Score without yielding (see :func:`start`).

A step that cannot give its value (the judge's answer unreadable, nothing to check) raises
:class:`offline_eval.reasons.Unscorable`; the sample is then unscored with the step's reason,
explanation and metadata (:func:`as_score`), so a metric is written as its successful path. Every
reason is named in :mod:`offline_eval.reasons`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator

from offline_eval import reasons
from offline_eval.data.schema import Sample, forged_turn
from offline_eval.engine.executor import TaskFailed
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.evidence import Evidence
from offline_eval.records import score_dict


@dataclass
class Score:
    """A metric's verdict on one sample.

    ``value`` is None exactly when the sample is *unscored*; ``reason`` then says why, one of
    :mod:`offline_eval.reasons` (``missing_field:answer``, ``no_claims``, ...). Never NaN.
    """

    value: float | None
    reason: str | None = None
    explanation: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is not None:
            value = float(self.value)
            if math.isnan(value) or math.isinf(value):
                raise ValueError("a Score value must be finite; use Score.unscored(reason) instead")
            self.value = value
        elif not self.reason:
            raise ValueError("an unscored Score needs a reason")

    @property
    def scored(self) -> bool:
        return self.value is not None

    @classmethod
    def unscored(cls, reason: str, explanation: str = "", **metadata: Any) -> "Score":
        return cls(value=None, reason=reason, explanation=explanation, metadata=metadata)

    def to_dict(self) -> dict[str, Any]:
        return score_dict(self.value, self.reason, self.explanation, self.metadata)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Score":
        return cls(value=data.get("value"), reason=data.get("reason"),
                   explanation=data.get("explanation", ""), metadata=data.get("metadata", {}))


ScoreGenerator = Generator[Any, Any, Score]


# What a metric needs of a sample: a field, or a tuple of fields any one of which will do (the RAGEval
# keypoint metrics read the sample's key points, or generate them from its reference).
Need = str | tuple[str, ...]


def alternatives(need: Need) -> tuple[str, ...]:
    """The fields of which a sample must have one to meet ``need``."""
    return (need,) if isinstance(need, str) else tuple(need)


def need_text(need: Need) -> str:
    """A need as the listing and the unscored explanation show it: ``ground_truth or keypoints``."""
    return " or ".join(alternatives(need))


def missing_fields(sample: Sample, fields: tuple[Need, ...]) -> Score | None:
    """The unscored Score (``missing_field:<first>``, of alternatives the first) when ``sample`` lacks
    any of ``fields`` (every alternative of a need), else None."""
    absent = [need for need in fields if len(sample.missing(alternatives(need))) == len(alternatives(need))]
    if absent:
        return Score.unscored(reasons.missing_field(alternatives(absent[0])[0]),
                              f"the sample has no {', '.join(need_text(n) for n in absent)}")
    return None


def start(metric: "Metric", sample: Sample, settings: EvalSettings) -> ScoreGenerator:
    """What the engine drives for one (sample, metric), always a generator: the unscored Score
    (``missing_field:<first>``) when the sample lacks a field of ``metric.requires`` (checked here,
    once, for every metric), else the metric's own ``score``, given both positionally (a plugin may
    name its parameters as it likes: ``score(self, sample, ctx)`` works too). A metric that needs no
    model may return its Score without yielding; it is called from a task here, on the engine's first
    step, so the engine sees one kind of task and whatever that metric raises (an Unscorable above
    all) reaches it as it would from a generator. A metric that reads the answer reads it without a
    conversation written into it (:func:`_without_forged_turn`)."""
    missing = missing_fields(sample, metric.requires)
    if missing is not None:
        return returns(missing)
    answer, forged = forged_turn(sample.answer) if sample.answer and _reads_answer(metric) else (sample.answer, "")
    if forged:
        return _without_forged_turn(metric, dataclasses.replace(sample, answer=answer), settings, forged)
    return _task(metric, sample, settings)


def _task(metric: "Metric", sample: Sample, settings: EvalSettings) -> ScoreGenerator:
    if metric.reads_question and sample.history and isinstance(settings, EvalSettings):
        return _in_conversation(metric, sample, settings)
    if inspect.isgeneratorfunction(metric.score):
        return metric.score(sample, settings)
    return called(metric.score, sample, settings)


def _reads_answer(metric: "Metric") -> bool:
    return any("answer" in alternatives(need) for need in metric.requires)


def _without_forged_turn(metric: "Metric", sample: Sample, settings: EvalSettings, forged: str) -> ScoreGenerator:
    """The metric on ``sample``, whose answer has had a conversation written into it cut off
    (:func:`~offline_eval.data.schema.forged_turn`); its Score records the text cut off
    (``forged_turn``) and says so. Every metric that reads the answer reads it without."""
    result = yield from _task(metric, sample, settings)
    if not isinstance(result, Score):
        return result  # as_score makes it unscored, with its own reason
    speaker = forged.split("\n", 1)[0][:40]
    note = (f"the answer's text from {speaker!r} on left out, not read: it writes another turn of the "
            "conversation into the answer")
    return dataclasses.replace(result, explanation="; ".join(filter(None, (result.explanation, note))),
                               metadata={**result.metadata, "forged_turn": forged})


def most_window_steps(metrics: list["Metric"], samples: list[Sample], settings: EvalSettings) -> int | None:
    """The most engine stages scoring ``samples`` with ``metrics`` in one window takes: the longest of
    its tasks (the engine drives them in lockstep), a conversation's rewrite of the question included;
    None when a metric does not declare its :attr:`Metric.most_steps`."""
    from offline_eval.metrics.conversation import most_steps as conversation_steps  # it reads the judge's steps

    if any(m.most_steps is None for m in metrics):
        return None
    before = conversation_steps(settings) if any(s.history for s in samples) else 0
    return max((m.most_steps + (before if m.reads_question else 0) for m in metrics), default=0)


def _in_conversation(metric: "Metric", sample: Sample, settings: EvalSettings) -> ScoreGenerator:
    """The metric on ``sample`` with its question read in its conversation (metrics.conversation)."""
    from offline_eval.metrics.conversation import in_conversation  # it reads the judge's steps

    sample = yield from in_conversation(sample, settings, settings.language_for(sample))
    return (yield from called(metric.score, sample, settings))


def returns(value: Any) -> Generator[Any, Any, Any]:
    """A task that asks for nothing and finishes with ``value``."""
    return value
    yield  # pragma: no cover  (makes this a generator)


def called(function: Any, *args: Any) -> Generator[Any, Any, Any]:
    """A task that calls ``function(*args)`` when first advanced and finishes with its result (a
    generator it returns is driven to its end)."""
    produced = function(*args)
    if inspect.isgenerator(produced):
        produced = yield from produced
    return produced


def as_score(result: Any) -> Score:
    """A finished task's result as a Score. The engine's TaskFailed becomes unscored with its reason,
    explanation and metadata: that of an :class:`~offline_eval.reasons.Unscorable` a step raised, or a
    rejected request's, or an exception's with its traceback. Anything else that is not a Score is a
    bug. The one place where a failure becomes an unscored Score."""
    if isinstance(result, Score):
        return result
    if isinstance(result, TaskFailed):
        details = {"traceback": result.traceback} if result.traceback else {}
        return Score.unscored(result.reason, result.message, **{**result.metadata, **details})
    return Score.unscored(reasons.NO_SCORE, f"the metric returned {type(result).__name__}")


def goodness_on(value: float, value_range: tuple[float, float] = (0.0, 1.0), higher_is_better: bool = True) -> float:
    """``value`` on a scale shared by every metric: 0 its worst, 1 its best (``value_range`` read in the
    direction ``higher_is_better`` gives, clipped to it). The aggregate and the reports' colours read it."""
    low, high = value_range
    share = min(max((value - low) / (high - low), 0.0), 1.0)
    return share if higher_is_better else 1.0 - share


@dataclass(frozen=True)
class NoOptions:
    """The options of a metric that has none of its own."""


class Metric:
    """Base class. Subclasses set ``name``, ``requires`` (sample fields, or tuples of alternatives
    (:data:`Need`): the engine leaves a sample that lacks one unscored without calling ``score``, see
    :func:`start`), ``roles`` (models used) and,
    for a metric where a smaller value is the better one, ``higher_is_better = False`` (recorded in
    summary.json; reports, gates and comparisons read it from there), and ``value_range`` for one whose
    values are not in [0, 1] (recorded in summary.json too, for the reports' colours; the aggregate puts
    every metric on one scale with :meth:`goodness`).
    ``evidence`` declares what its Score's metadata holds (:mod:`offline_eval.metrics.evidence`), which
    the report draws from; without it the report draws the metadata from its shape.
    ``question_for_people``: what ``offline-eval review`` asks a person about a sample for this metric.

    ``Options``: a dataclass of the metric's own settings. Each field is a ``run`` flag
    ``--<name>-<field>`` (:func:`option_flag`; its ``metadata``: ``help``, ``metavar``, ``flag`` for
    another name, ``parse`` for a value that is not a number or text), a TOML key and an ``evaluate``
    keyword ``<name>_<field>`` (:func:`option_names`); the values enter the run's fingerprint and the
    signature of a calibration. ``self.options`` holds them: ``Metric(options)`` or ``Metric(field=...)``.
    """

    name: ClassVar[str]
    requires: ClassVar[tuple[Need, ...]] = ()
    roles: ClassVar[frozenset[str]] = frozenset()  # subset of {"judge", "verifier", "embedder"}
    description: ClassVar[str] = ""
    # what a person is asked about a sample, in plain words, to label this metric's verdict (the review
    # page shows it; a label keeps it); None: the metric cannot be reviewed
    question_for_people: ClassVar[str | None] = None
    higher_is_better: ClassVar[bool] = True
    # reads the question in the judge's prompts: a sample with a conversation gives it the question in that
    # conversation (EvalSettings.history); None: when ``requires`` names the question and ``roles`` the judge
    reads_question: ClassVar[bool | None] = None
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    evidence: ClassVar[tuple[Evidence, ...]] = ()
    # the most engine stages ``score`` takes for one sample, along its longest path (every JSON reply
    # repaired, every probe asked; the judging steps' *_STAGES add up to it): the progress line's "step k
    # of at most n" before a window has finished. None: not declared (the line says "of ?"); a metric
    # that uses no model takes none.
    most_steps: ClassVar[int | None] = None
    # raised when a change makes the metric's value mean something else under the same options and
    # models, so that a calibration fitted, or a run begun, with the earlier reading is not taken for one
    # of this reading (both compare config()); 0 adds nothing to config()
    revision: ClassVar[int] = 0
    Options: ClassVar[type] = NoOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.most_steps is None and not cls.roles:
            cls.most_steps = 0
        if cls.__dict__.get("reads_question") is None and "requires" in cls.__dict__:
            cls.reads_question = "question" in cls.requires and "judge" in cls.roles

    def __init__(self, options: Any = None, **values: Any) -> None:
        self.options = options if options is not None else self.Options(**values)
        self.configured()

    def configured(self) -> None:
        """Called whenever the options are set: a metric whose options decide what it uses (its
        ``roles``) says so on the instance here; the class's ``roles`` is what any of its options may use."""

    def score(self, sample: Sample, settings: EvalSettings) -> ScoreGenerator:
        """The metric's value for ``sample`` under the run's judging ``settings`` (see the module's
        docstring for the generator protocol)."""
        raise NotImplementedError
        yield  # pragma: no cover  (makes every override a generator by convention)

    @classmethod
    def goodness(cls, value: float) -> float:
        """``value`` on a scale shared by every metric: 0 its worst, 1 its best (:func:`goodness_on` with
        the metric's ``value_range`` and direction)."""
        return goodness_on(value, cls.value_range, cls.higher_is_better)

    def config(self) -> dict[str, Any]:
        """What changes this metric's value besides the run's settings and models: its options and its
        ``revision`` when it has one (they enter the run fingerprint and a calibration's settings)."""
        options = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.options).items()}
        return {**options, "revision": self.revision} if self.revision else options

    def with_options(self, **values: Any) -> "Metric":
        """A copy whose options take ``values`` (field name -> value; None keeps the current one)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        changed = copy.copy(self)
        changed.options = dataclasses.replace(self.options, **values)
        changed.configured()
        return changed


def option_names(cls: type[Metric]) -> dict[str, dataclasses.Field]:
    """A metric's options by their public name, ``<metric>_<field>``."""
    return {f"{cls.name}_{f.name}": f for f in dataclasses.fields(cls.Options)}


def option_flag(public: str, field: dataclasses.Field) -> str:
    """The ``run`` flag of an option: ``--<metric>-<field>``, unless its ``metadata["flag"]`` names another."""
    return field.metadata.get("flag") or "--" + public.replace("_", "-")
