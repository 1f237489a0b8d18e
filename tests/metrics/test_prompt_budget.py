"""Context windows cut by the judge's own tokens as well as by words (issue #56): a long run of text
without spaces is one word, so a window of 100 words could hold a 3,000-character URL, kilobytes of
minified JSON or base64, or a whole paragraph of Thai or emoji, and make a prompt the judge refuses
(``request_failed: prompt of ... tokens does not fit max_model_len``). The run's setup resolves what the
judge can read (:class:`~offline_eval.judging.settings.PromptBudget`); a window that would not fit is
cut until it does, and ordinary text is windowed as before."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import pytest

from offline_eval.data.schema import Sample
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings, PromptBudget
from offline_eval.judging.windows import context_windows, cut_to_fit
from offline_eval.metrics.ragas import ContextRecall, Faithfulness
from offline_eval.run.config import RunConfig, build_run
from offline_eval.run.model_choice import ModelChoice
from offline_eval.runtime import chat
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from tests.helpers import score

MAX_MODEL_LEN = 512


class MeasuredJudge:
    """The tiny judge, recording the length in tokens of every prompt it is sent."""

    def __init__(self, judge: Any) -> None:
        self.judge, self.identity, self.batch_size = judge, judge.identity, judge.batch_size
        self.lengths: list[int] = []

    def _measure(self, requests: Sequence[Any]) -> None:
        self.lengths += [len(chat.encode_chat(self.judge.tokenizer, r.prompt)) for r in requests]

    def score_options(self, requests: Sequence[Any]) -> list[dict[str, float]]:
        self._measure(requests)
        return self.judge.score_options(requests)

    def generate(self, requests: Sequence[Any]) -> list[tuple[str, ...]]:
        self._measure(requests)
        return self.judge.generate(requests)


@pytest.fixture(scope="module")
def small_judge_run(tiny_profile: Path, tmp_path_factory) -> Any:
    """A run of faithfulness set up from the tiny profile, its judge limited to MAX_MODEL_LEN tokens and
    verifying claims itself."""
    text = tiny_profile.read_text(encoding="utf-8")
    anchor = '[judge.options]\ndtype = "float32"\n'
    assert anchor in text
    manifest = tmp_path_factory.mktemp("small-judge") / "small.toml"
    manifest.write_text(text.replace(anchor, anchor + f"max_model_len = {MAX_MODEL_LEN}\n"), encoding="utf-8")
    return build_run(RunConfig(metrics=["faithfulness"], models=ModelChoice(profile=str(manifest), verifier="judge")))


def _scored(run: Any, context: str, metric: Any = None) -> tuple[Any, list[int]]:
    """``metric`` (faithfulness) of a sample with ``context`` as its first chunk, and the length of every
    prompt sent (to the judge; context_relevance also embeds the context's sentences)."""
    judge = MeasuredJudge(run.models.get("judge"))
    sample = Sample(id="long-run", question="What is the capital of France?", language="en",
                    answer="The capital of France is Paris.", ground_truth="Paris is the capital of France.",
                    contexts=[context, "Water boils at 100 degrees."])
    models = Models().add_instance("judge", judge).add_instance("embedder", HashingEmbedder())
    return score(metric or Faithfulness(), sample, models, run.settings), judge.lengths


def _pseudo_random(size: int) -> bytes:
    out = b""
    while len(out) < size:
        out += hashlib.sha256(str(len(out)).encode()).digest()
    return out[:size]


URL = "https://example.com/archive?" + "&".join(f"k{i}={_pseudo_random(8 + i % 5).hex()}" for i in range(130))
SHAPES = {
    "url": f"The capital of France is Paris. It has many museums. See {URL[:3000]} for the full list. "
           "The city lies on the Seine.",
    "minified_json": json.dumps([{"id": i, "city": "Paris", "country": "France", "capital": True,
                                  "population": 2_100_000 + i, "tags": ["seine", "louvre", f"t{i}"]}
                                 for i in range(60)], separators=(",", ":")),
    "base64": base64.b64encode(_pseudo_random(4500)).decode("ascii"),
    "thai": "ปารีสเป็นเมืองหลวงของประเทศฝรั่งเศสและเป็นเมืองที่ใหญ่ที่สุดของประเทศ" * 40,
    "emoji": "🇫🇷🗼🥐🍷🎨🚇🌉🏛️" * 200,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_long_run_without_spaces_is_scored_and_every_prompt_fits(small_judge_run: Any, shape: str) -> None:
    """Each shape of the issue, in a context of one chunk: faithfulness is scored (it was unscored,
    request_failed, every prompt about the chunk too long), and no prompt sent is longer than the
    judge's max_model_len less the position its answer needs."""
    context = SHAPES[shape]
    assert " " not in context or shape == "url"
    assert len(context.encode("utf-8")) > 3000
    result, lengths = _scored(small_judge_run, context)
    assert result.reason is None and result.value is not None, result.explanation
    assert lengths and max(lengths) + 1 <= MAX_MODEL_LEN, max(lengths)


def test_context_recall_reads_such_a_context_in_windows_that_fit_too(small_judge_run: Any) -> None:
    """context_recall checks the reference's sentences against the same windows, each read as an
    answer to the question."""
    result, lengths = _scored(small_judge_run, SHAPES["url"], ContextRecall())
    assert result.reason is None and result.value is not None, result.explanation
    assert lengths and max(lengths) + 1 <= MAX_MODEL_LEN, max(lengths)


def test_the_budget_is_resolved_from_the_judge_when_the_run_is_set_up(small_judge_run: Any) -> None:
    """The judge's limit less one position, and its own tokenizer's count; the budget is no recorded
    setting: a run's fingerprint and a calibration's signature are as without it."""
    budget = small_judge_run.settings.prompt_budget
    assert isinstance(budget, PromptBudget) and budget.limit == MAX_MODEL_LEN - 1 and budget.count is not None
    judge = small_judge_run.models.get("judge")
    prompt = (("user", "Context: ปารีส {\"a\":1} 🥐"),)
    assert budget.tokens(prompt) == len(chat.encode_chat(judge.tokenizer, prompt))
    assert pickle.loads(pickle.dumps(budget)).tokens(prompt) == budget.tokens(prompt)  # as a Ray replica gets it
    assert small_judge_run.settings.fingerprint() == EvalSettings(verifier="judge").fingerprint()
    assert small_judge_run.settings.signature() == EvalSettings(verifier="judge").signature()


def test_the_judge_counts_only_windows_longer_than_the_room_in_bytes(small_judge_run: Any) -> None:
    """A sample whose windows fit by their UTF-8 bytes asks the judge's tokenizer nothing (a run of
    ordinary text never loads it); one with a long URL asks it."""
    counted: list[Any] = []
    budget = small_judge_run.settings.prompt_budget

    def spy(prompt: Any) -> int:
        counted.append(prompt)
        return budget.count(prompt)

    run = SimpleNamespace(models=small_judge_run.models, settings=dataclasses.replace(
        small_judge_run.settings, prompt_budget=PromptBudget(budget.limit, spy)))
    result, _ = _scored(run, "The capital of France is Paris. It has many museums and a river, the Seine.")
    assert result.value is not None and counted == []
    result, _ = _scored(run, SHAPES["url"])
    assert result.value is not None and counted


def test_ordinary_text_is_windowed_by_words_as_before() -> None:
    """A budget that holds every window changes none of them."""
    sentences = [f"Sentence {i} tells of the river, the bridge and the {i} boats moored below it." for i in range(60)]
    contexts = [" ".join(sentences), "A short chunk."]
    before = context_windows(contexts, 100, "en")
    assert len(before) > 5
    assert context_windows(contexts, 100, "en", lambda text: len(text.encode("utf-8")) <= 800) == before


def test_cut_to_fit_cuts_after_words_where_it_can_and_inside_a_word_where_it_must() -> None:
    """Every piece fits, each is as long as it can be, and together they are the text but the spaces at
    the cuts."""
    text = "alpha beta gamma " + "x" * 25 + " delta epsilon"

    def fits(piece: str) -> bool:
        return len(piece) <= 12

    pieces = cut_to_fit(text, fits)
    assert pieces == ["alpha beta", "gamma", "x" * 12, "x" * 12, "x delta", "epsilon"]
    assert " ".join(pieces).split() == ["alpha", "beta", "gamma", "x" * 12, "x" * 12, "x", "delta", "epsilon"]
    assert cut_to_fit("", fits) == [] and cut_to_fit("  short  ", fits) == ["short"]
    assert cut_to_fit("abc", lambda piece: False) == ["a", "b", "c"]  # always progress, one character at least


@pytest.mark.parametrize("shape", ["url", "minified_json"])
def test_context_relevance_reads_such_a_context_in_windows_that_fit_too(small_judge_run: Any, shape: str) -> None:
    """context_relevance asks of each window whether it states the answer: the same windows, cut to fit
    the question's prompt (issue #58's metric, added after #56's cut)."""
    from offline_eval.metrics.ragas import ContextRelevance

    result, lengths = _scored(small_judge_run, SHAPES[shape], ContextRelevance())
    assert result.reason is None and result.value is not None, result.explanation
    assert lengths and max(lengths) + 1 <= MAX_MODEL_LEN, max(lengths)
    assert len(result.metadata["windows"]) > 2  # the long chunk in several windows, the short one in its own

