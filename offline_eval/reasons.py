"""Why a sample is unscored: every reason the package writes, named once, and the one exception a step
raises to say so.

A reason is the ``reason`` of an unscored Score. results.jsonl records it beside each sample and
summary.json counts samples by it, so each string here is part of the output format: a name may be
changed, its string may not. This module imports nothing of the package, so that the engine, the
metrics and the run may all name reasons with it.

A step that finds it cannot produce its value (a judge's answer that cannot be read, a text with no
claim to check) raises :class:`Unscorable`; the engine ends that task with the failure, and
``metrics.base.as_score`` makes it the unscored Score. A metric's body therefore reads as the
successful path only.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

# -- a judge's answer ---------------------------------------------------------------------------
JUDGE_UNPARSEABLE = "judge_unparseable"  # not readable as the JSON asked for, even after one repair

# -- nothing to score ---------------------------------------------------------------------------
NO_CLAIMS = "no_claims"  # the answer (and the reference, where both count) makes no claim
NO_QUESTIONS = "no_questions"  # the judge regenerated no question from the answer
NO_ENTITIES = "no_entities"  # the judge found no entity in the reference
NO_KEYPOINTS = "no_keypoints"  # the sample's key points are empty, or the judge found none
EMPTY_CONTEXTS = "empty_contexts"  # the contexts hold no sentence
EMPTY_REFERENCE = "empty_reference"  # the reference answer holds no sentence
EMPTY_RETRIEVED_TEXT = "empty_retrieved_text"  # no retrieved text once metadata prefixes are removed
NO_SCORED_METRIC = "no_scored_metric"  # the aggregate has no scored part of positive weight

# -- test-set generation: a synthetic document that could not be written ------------------------
SYNTHETIC_CONFIG_UNPARSEABLE = "synthetic_config_unparseable"
SYNTHETIC_CONFIG_EMPTY = "synthetic_config_empty"
SYNTHETIC_DOCUMENT_TOO_SHORT = "synthetic_document_too_short"

# -- the engine: a task that could not finish ----------------------------------------------------
REQUEST_FAILED = "request_failed"  # a backend rejected one of the task's requests
NO_RESULT = "error:no_result"  # the task returned nothing
NO_SCORE = "error:no_score"  # a metric returned something that is not a Score

# -- reading a run folder: what a row read back does not say ------------------------------------
NOT_RUN = "not_run"  # the row holds no score for the metric
UNSCORED = "unscored"  # the row's score has no value and names no reason (a hand-edited file)


def missing_field(name: str) -> str:
    """The sample lacks ``name``, a field the metric requires: ``missing_field:<name>``."""
    return f"missing_field:{name}"


def no_tokens(name: str) -> str:
    """The sample's field ``name`` has no token to compare: ``no_tokens:<name>``."""
    return f"no_tokens:{name}"


def raised(exc: BaseException) -> str:
    """A task raised an exception that is not an :class:`Unscorable` (a bug, a bad row):
    ``error:<exception type>``."""
    return f"error:{type(exc).__name__}"


class Unscorable(Exception):
    """A step cannot produce its value for this sample: the sample is unscored with ``reason`` (one of
    this module's), ``explanation`` (one line for a person) and ``metadata`` (what helps to see why:
    the judge's raw output, the claims being checked), exactly as the unscored Score records them."""

    def __init__(self, reason: str, explanation: str = "", **metadata: Any) -> None:
        super().__init__(f"{reason}: {explanation}" if explanation else reason)
        self.reason = reason
        self.explanation = explanation
        self.metadata = metadata


@contextmanager
def failing_with(**metadata: Any) -> Iterator[None]:
    """An :class:`Unscorable` raised inside carries ``metadata`` too, where it has no value of its own
    under the same key: what the caller knows and the failing step does not, such as the claims whose
    verdicts could not be read."""
    try:
        yield
    except Unscorable as failure:
        for key, value in metadata.items():
            failure.metadata.setdefault(key, value)
        raise
