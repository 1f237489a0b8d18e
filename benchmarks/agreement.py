"""Agreement with human labels on every shared labelled set, our default metrics beside one plain prompt.

    python benchmarks/agreement.py                 # writes benchmarks/results/agreement.{json,md}
    python benchmarks/agreement.py --configs plain,default,no_baseline,full_baseline \
        --out benchmarks/results/agreement_variants
    python benchmarks/agreement.py --sets begin --configs plain,default
    python benchmarks/agreement.py --sets mtrag_appropriateness,rgb_context --configs plain,default \
        --out benchmarks/results/agreement_relevance

Sets (../shared/data, SPEC §6), each mapped to the metric it tests:

  begin            BEGIN dev (WoW), every labelled row ("Generic" dropped): question = message,
                   answer = response, contexts = [knowledge]; faithfulness
  qags_sentences   QAGS CNN/DM: one summary sentence against its article, faithful when most of the
                   three MTurk votes say yes; faithfulness
  qags_summaries   the same summaries as one multi-sentence answer, faithful when every sentence has
                   a yes majority (where claim extraction should pay); faithfulness
  evouna_tq        EVOUNA TriviaQA: a system's answer against the golden answer, the human
                   correctness label; answer_correctness
  rgb_en           RGB counterfactual English: each query's passages state a planted wrong answer;
                   the planted answer is faithful to them (1), the true answer is not (0): does the
                   metric check the contexts or its own world knowledge? faithfulness
  mtrag            MT-RAG dev (half of its human-evaluation subset, 10 conversations): each rated answer
                   (the reference, Llama-3.1-405B, GPT-4o) against its turn's passages, faithful when the
                   median of its annotators' 1-4 faithfulness ratings is 4 ("Yes", MT-RAG's own median
                   aggregator), read as `offline-eval run` reads the file: each answer with its
                   conversation; faithfulness
  mtrag_completeness the same answers against the turn's reference answer, complete when the median of
                   the completeness ratings is 4; the RAGEval keypoint completeness (the share of the
                   reference's key points the answer covers: MT-RAG asks whether the response holds all
                   the relevant information, a recall, which answer_correctness' F1 mixes with precision)
Named only (not in the default run):

  mtrag_appropriateness the same answers to their question, relevant when the median of the appropriateness
                   ratings is 4 (every rated answer of a drawn turn, so the answers to one turn can be
                   compared; the limit counts turns); answer_relevancy
  rgb_context      RGB English: each query's passages one at a time, a positive passage (it holds the
                   answer) 1, a negative one (retrieved for the query, without the answer) 0; the limit
                   counts queries; context_relevance
  rageval_context  RAGEval (rageval_example.jsonl): each query's five retrieved chunks one at a time, a
                   chunk that holds one of the query's ground-truth references whole (its words in order,
                   case, spacing and punctuation aside; Chinese character by character) 1, any other 0;
                   queries whose chunks all share one label are dropped; the limit counts queries;
                   context_relevance. (Chunks from the ground-truth documents, dragonball_docs.jsonl's ids,
                   would be a coarser label: most of them hold none of the answer.)
  answer_pairs     answers by construction, as the Ragas paper built its Table 1 (no human label): a
                   complete answer (RAGEval's ground-truth answer, MT-RAG's reference answer rated 4 for
                   appropriateness) 1, the same cut to its first sentence 0, a refusal although the
                   contexts hold the answer 0; answers of three sentences or more; the limit counts
                   questions of each source; answer_relevancy
  context_pairs    contexts by construction: the passages that hold the answer (RAGEval's ground-truth
                   references, an RGB positive passage) 1, the same padded with related passages that do
                   not (the query's other retrieved chunks, two RGB negative passages) 0; the limit counts
                   queries of each source; context_relevance
  compound_pairs   two-part questions by construction: two of RAGEval's factual questions about one
                   document joined as one ("When did A happen, and when was B founded?"), the answer to
                   both (their key points) 1 beside the answer to one part only 0; every consecutive pair
                   of a document's questions; answer_relevancy
  evasive_pairs    evasive answers by construction, as the Ragas paper's Table 3 shows one ("The scheduled
                   launch date and time ... have not been provided. PSLV-C56 is an important Indian space
                   mission."): RAGEval's ground-truth answer to an answerable query 1 beside an answer that
                   says the information is not given and goes on with the two sentences of the chunks
                   retrieved for the query that hold no reference sharing the fewest words with the
                   question (the same company's other events) 0; contexts:
                   the references, which hold the answer; the limit counts questions; answer_relevancy

The relevance sets also report a pairwise view, as the Ragas paper measured: the answers to one
turn with different median ratings, a positive and a negative passage (or chunk) of one query, the items
built for one question; the share of
pairs where the metric scores the better one higher (a tie settled by a seeded coin).

Configurations: ``plain`` is the one-prompt baseline of issue #14 (user turn "Context:\\n{contexts}\\n\\n
Statement:\\n{answer}\\n\\nIs the statement fully supported by the context? Answer Yes or No.", score =
P(Yes) / (P(Yes) + P(No)) at the next token; for answer correctness the context is the golden
answer and the question is given; for completeness, "Does the answer give all the information of the
reference answer?"; for answer relevance, "Question: ...\nAnswer: ...\n\nDoes the answer address the
question?"; for context relevance, "Question: ...\nPassage: ...\n\nDoes the passage hold information that
answers the question?"); ``plain_history`` is the same prompt with the conversation before the answer (its
latest 200 words) and the question; ``default`` is the set's metric with the code's default settings
(which read the question alone, ``--history none``); ``history_tail`` / ``history_rewrite`` /
``history_both`` set ``--history`` (``history_none`` is the default's settings, named). Other named configurations (``CONFIGS``) are the variants measured
while choosing the defaults.

Calibrated balanced accuracy is cross-validated: each row is predicted by the threshold fitted (max
balanced accuracy) on the other four of five stratified folds, as ``offline-eval calibrate`` reports
it. AUC and balanced accuracy at 0.5 use every scored row.
Wall seconds are measured when a configuration's model work is computed (a rerun answers from the
SQLite cache and keeps the first measurement).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shlex
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from _bench_profile import bench_manifest  # noqa: E402
from offline_eval.people.agreement import agreement_pairwise, agreement_pointwise  # noqa: E402
from offline_eval.people.agreement.scoring import build_setup, resolve_metric, score_samples  # noqa: E402
from offline_eval.people.calibration import best_threshold, out_of_fold_predictions  # noqa: E402
from offline_eval.data.readers import read_dataset  # noqa: E402
from offline_eval.data.schema import Sample  # noqa: E402
from offline_eval.engine.cache import ResultCache  # noqa: E402
from offline_eval.engine.requests import ScoreOptions, messages  # noqa: E402
from offline_eval.judging.settings import EvalSettings  # noqa: E402
from offline_eval.judging.windows import topic_terms  # noqa: E402
from offline_eval.metrics.base import Metric, Score, option_names  # noqa: E402
from offline_eval.run.model_choice import ModelChoice  # noqa: E402
from offline_eval.text import split_sentences  # noqa: E402

DATA = REPO.parent / "shared" / "data"
BENCH_DIR = Path(os.environ.get("OFFLINE_EVAL_BENCH", "~/.cache/offline-eval-bench")).expanduser()
JUDGE = BENCH_DIR / "qwen2.5-coder-0.5b-instruct"
RESAMPLES, BOOT_SEED, FOLDS = 2000, 20240531, 5
CRITERIA_FILE = REPO / "benchmarks" / "criteria" / "plain_faithfulness.toml"
CRITERIA_METRICS = ("criterion_supported", "criterion_supported_lean")


# --- the plain-prompt baseline -------------------------------------------------------------------
PLAIN_SYSTEM = "You are a meticulous evaluator. Answer with a single word: Yes or No."


class PlainSupport(Metric):
    """Issue #14's baseline: one Yes/No prompt over all contexts and the whole answer. ``in_conversation``:
    the same with the conversation before the answer and its question (the latest 200 words of it)."""

    name = "plain_support"
    requires = ("answer", "contexts")
    roles = frozenset({"judge"})
    reads_question = False  # the plain prompt reads the history itself, when asked to

    def __init__(self, in_conversation: bool = False) -> None:
        super().__init__()
        self.in_conversation = in_conversation

    def score(self, sample, settings):
        turn = _conversation(sample) if self.in_conversation else ""
        what = "reply" if turn else "statement"
        body = (f"Context:\n{chr(10).join(sample.contexts)}\n\n{turn}{what.capitalize()}:\n{sample.answer}\n\n"
                f"Is the {what} fully supported by the context? Answer Yes or No.")
        probs = yield ScoreOptions(prompt=messages(("system", PLAIN_SYSTEM), ("user", body)), options=("Yes", "No"))
        return Score(float(probs["Yes"]))


class PlainCorrect(Metric):
    """The same baseline for answer correctness: the golden answer is the context, the question is given."""

    name = "plain_correct"
    requires = ("question", "answer", "ground_truth")
    roles = frozenset({"judge"})
    reads_question = False

    def __init__(self, in_conversation: bool = False) -> None:
        super().__init__()
        self.in_conversation = in_conversation

    def score(self, sample, settings):
        turn = _conversation(sample) if self.in_conversation else f"Question: {sample.question}\n"
        body = (f"{turn}Reference answer: {sample.ground_truth}\n\nAnswer:\n{sample.answer}\n\n"
                "Is the answer correct according to the reference answer? Answer Yes or No.")
        probs = yield ScoreOptions(prompt=messages(("system", PLAIN_SYSTEM), ("user", body)), options=("Yes", "No"))
        return Score(float(probs["Yes"]))


class PlainComplete(PlainCorrect):
    """The baseline for completeness: does the answer hold everything the reference answer says?"""

    name = "plain_complete"

    def score(self, sample, settings):
        turn = _conversation(sample) if self.in_conversation else f"Question: {sample.question}\n"
        body = (f"{turn}Reference answer: {sample.ground_truth}\n\nAnswer:\n{sample.answer}\n\n"
                "Does the answer give all the information of the reference answer? Answer Yes or No.")
        probs = yield ScoreOptions(prompt=messages(("system", PLAIN_SYSTEM), ("user", body)), options=("Yes", "No"))
        return Score(float(probs["Yes"]))


class PlainRelevant(PlainCorrect):
    """The baseline for answer relevance: does the answer address the question?"""

    name = "plain_relevant"
    requires = ("question", "answer")

    def score(self, sample, settings):
        turn = _conversation(sample) if self.in_conversation else f"Question: {sample.question}\n"
        body = f"{turn}Answer: {sample.answer}\n\nDoes the answer address the question? Answer Yes or No."
        probs = yield ScoreOptions(prompt=messages(("system", PLAIN_SYSTEM), ("user", body)), options=("Yes", "No"))
        return Score(float(probs["Yes"]))


class PlainContextRelevant(PlainCorrect):
    """The baseline for context relevance: does the passage hold what answers the question?"""

    name = "plain_context_relevant"
    requires = ("question", "contexts")

    def score(self, sample, settings):
        turn = _conversation(sample) if self.in_conversation else f"Question: {sample.question}\n"
        body = (f"{turn}Passage: {chr(10).join(sample.contexts)}\n\n"
                "Does the passage hold information that answers the question? Answer Yes or No.")
        probs = yield ScoreOptions(prompt=messages(("system", PLAIN_SYSTEM), ("user", body)), options=("Yes", "No"))
        return Score(float(probs["Yes"]))


def _conversation(sample) -> str:
    """The latest 200 words of the conversation before the sample's question, then the question."""
    from offline_eval.metrics.conversation import recent_turns
    from offline_eval.prompts.base import history_block

    history = recent_turns(sample.history, 200, "en")
    return (history_block(history, "en") if history else "") + f"Question: {sample.question}\n"


# --- the labelled sets ---------------------------------------------------------------------------
def _begin(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    out = []
    with open(DATA / "begin_dev_wow.tsv", encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f, delimiter="\t"), start=1):
            if row["begin_label"] == "Generic":
                continue
            out.append((Sample(id=f"begin-{i}", question=row["message"], answer=row["response"],
                               contexts=[row["knowledge"]], row=i),
                        1.0 if row["begin_label"] == "Fully attributable" else 0.0))
    return _draw(out, limit, seed)


def _qags(limit: int | None, seed: int, whole: bool) -> list[tuple[Sample, float]]:
    articles = [json.loads(line) for line in open(DATA / "qags_mturk_cnndm.jsonl", encoding="utf-8")]
    order = np.random.default_rng(seed).permutation(len(articles))
    if limit:  # a random subset of articles (the same for sentences and whole summaries)
        order = order[:limit]
    out = []
    for a in sorted(int(i) for i in order):
        art = articles[a]
        votes = [sum(r["response"] == "yes" for r in s["responses"]) * 2 > len(s["responses"])
                 for s in art["summary_sentences"]]
        sentences = [s["sentence"] for s in art["summary_sentences"]]
        if whole:
            out.append((Sample(id=f"qags-{a}", question="", answer=" ".join(sentences), contexts=[art["article"]],
                               row=a + 1), float(all(votes))))
        else:
            out += [(Sample(id=f"qags-{a}-{j}", question="", answer=s, contexts=[art["article"]], row=a + 1),
                     float(v)) for j, (s, v) in enumerate(zip(sentences, votes))]
    return out


def _evouna(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    items = json.load(open(DATA / "evouna_TQ.json", encoding="utf-8"))
    systems = [k.removeprefix("judge_") for k in items[0] if k.startswith("judge_")]
    out = []
    for i, it in enumerate(items, start=1):
        for system in systems:
            label, answer = it.get(f"judge_{system}"), str(it.get(f"answer_{system}") or "").strip()
            if not isinstance(label, bool) or not answer:
                continue  # 15 "nan" labels
            out.append((Sample(id=f"tq-{i}-{system}", question=it["question"], answer=answer,
                               ground_truth=str(it["golden_answer"]), row=i), float(label)))
    return _draw(out, limit, seed, stratified=False)


def _rgb(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    out = []
    for line in open(DATA / "rgb_en_fact.json", encoding="utf-8"):
        q = json.loads(line)
        contexts = [p for p in q["positive_wrong"] if p.strip()]
        true, fake = q["answer"], q["fakeanswer"]
        true = true[0] if isinstance(true, list) else true
        fake = fake[0] if isinstance(fake, list) else fake
        if not contexts:
            continue
        for tag, answer, label in (("fake", fake, 1.0), ("true", true, 0.0)):
            out.append((Sample(id=f"rgb-{q['id']}-{tag}", question=q["query"], answer=str(answer), contexts=contexts,
                               row=int(q["id"]) + 1), label))
    return _groups(out, limit, seed, lambda s: s.row)


def _rgb_context(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """Each RGB English query's passages one by one: a positive passage holds the answer (1), a negative
    one was retrieved for the query and does not (0). ``limit`` counts queries."""
    out = []
    for line in open(DATA / "rgb_en_fact.json", encoding="utf-8"):
        q = json.loads(line)
        for tag, label in (("positive", 1.0), ("negative", 0.0)):
            out += [(Sample(id=f"rgbc-{q['id']}-{tag}-{j}", question=q["query"], answer="", contexts=[p],
                            row=int(q["id"]) + 1), label) for j, p in enumerate(q[tag]) if p.strip()]
    return _groups(out, limit, seed, lambda s: s.row)


# A token of the label rule: a CJK character alone (Chinese has no spaces), else a run of letters and digits;
# punctuation, case and spacing are not compared (a chunk cut before a reference's full stop still holds it).
_CJK = "\u3400-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
# A reference shorter than this (tokens) may recur, word for word, in chunks that do not hold the answer
# ("in January 2021"): its query is dropped rather than labelled by chance. A Chinese character carries
# about half an English word.
_MIN_REFERENCE = {"en": 8, "zh": 16}


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.lower()))


def _holds(chunk: str, references: list[str]) -> bool:
    """Whether ``chunk`` holds one of ``references`` whole: its tokens in order, one after the other."""
    body = " " + " ".join(_tokens(chunk)) + " "
    return any(" " + " ".join(_tokens(r)) + " " in body for r in references)


def _rageval_context(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """Each RAGEval query's retrieved chunks one by one: a chunk that holds a ground-truth reference whole
    (:func:`_holds`) 1, any other 0. Queries whose chunks all share one label (no reference, or every chunk
    holds one) or with a reference too short to tell are dropped. ``limit`` counts queries."""
    out = []
    for i, line in enumerate(open(DATA / "rageval_example.jsonl", encoding="utf-8"), start=1):
        q = json.loads(line)
        language, refs = q.get("language", "en"), q["ground_truth"]["references"]
        if any(len(_tokens(r)) < _MIN_REFERENCE.get(language, 8) for r in refs):
            continue
        chunks = [c for c in q["prediction"]["references"] if c.strip()]
        labels = [float(_holds(c, refs)) for c in chunks]
        if len(set(labels)) < 2:
            continue
        out += [(Sample(id=f"ragc-{q['query']['query_id']}-{j}", question=q["query"]["content"], answer="",
                        contexts=[c], language=language, row=i), y) for j, (c, y) in enumerate(zip(chunks, labels))]
    return _groups(out, limit, seed, lambda s: s.row)


# Issue #58's pairs built as the Ragas paper built its Table 1 (WikiEval): the better item by construction.
# Answers: a complete answer beside the same answer cut to its first sentence (the paper asked ChatGPT to
# "answer the given question in an incomplete way") and beside an answer that declines although the
# contexts hold the answer (the "the date has not been provided"). Contexts: the passages that hold
# the answer beside the same passages padded with related ones that do not (the paper added sentences from
# pages linking to the article: related, not needed).
DECLINES = ("I'm sorry, but the provided documents do not contain that information.",
            "The information has not been provided.",
            "I don't have enough information to answer that question.")
_MIN_SENTENCES = 3  # a complete answer of fewer sentences may say everything in its first one


def _cut_and_declined(key: str, question: str, answer: str, contexts: list[str], row: int) -> list[tuple[Sample, float]]:
    """A group of three answers to one question: ``answer`` (1), its first sentence (0) and a refusal (0);
    none when ``answer`` has fewer than three sentences."""
    sentences = split_sentences(answer, "en")
    if len(sentences) < _MIN_SENTENCES:
        return []
    declined = DECLINES[sum(map(ord, key)) % len(DECLINES)]
    return [(Sample(id=f"{key}-{tag}", question=question, answer=text, contexts=contexts, row=row), label)
            for tag, text, label in (("complete", answer, 1.0), ("first", sentences[0], 0.0),
                                     ("declined", declined, 0.0))]


def _answer_pairs(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """Answers of three kinds to one question (:func:`_cut_and_declined`): RAGEval's answerable queries
    (the ground-truth answer; contexts: its references) and MT-RAG's answerable turns (the reference answer,
    rated 4 for appropriateness by its annotators' median; contexts: the turn's passages, the question
    without its conversation). ``limit`` counts questions of each source."""
    ragas_rows, mtrag_rows = [], []
    for i, line in enumerate(open(DATA / "rageval_example.jsonl", encoding="utf-8"), start=1):
        q = json.loads(line)
        if q.get("language", "en") != "en" or q["query"]["query_type"].startswith("Irrelevant"):
            continue
        ragas_rows += _cut_and_declined(f"ragans-{q['query']['query_id']}", q["query"]["content"],
                                        q["ground_truth"]["content"], list(q["ground_truth"]["references"]), i)
    for s in read_dataset(DATA / "mtrag_dev.json"):
        if (s.extra.get("system") == "reference" and s.extra.get("answerability") == ["ANSWERABLE"]
                and s.extra["human"].get("appropriateness") == 4 and s.contexts):
            mtrag_rows += _cut_and_declined(f"mtans-{s.extra['task_id']}", str(s.question), s.answer,
                                            list(s.contexts), s.row)
    return (_groups(ragas_rows, limit, seed, lambda s: s.id.rsplit("-", 1)[0])
            + _groups(mtrag_rows, limit, seed, lambda s: s.id.rsplit("-", 1)[0]))


def _answer_sentence(keypoints: list[str]) -> str | None:
    """RAGEval key points read as an answer: their sentences without the "1. " numbering; None when one is
    not a sentence of four words or more."""
    texts = [re.sub(r"^\d+\.\s*", "", k).strip() for k in keypoints]
    if not texts or any(len(t.split()) < 4 or not t.endswith(".") for t in texts):
        return None
    return " ".join(texts)


def _compound_pairs(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """Two-part questions by construction: two of RAGEval's factual questions about one document joined as
    one ("When did A happen, and when did B happen?"), the answer to both (1) beside the answer to one part
    only (0), the first part's and the second's in turn; contexts: both questions' references. ``limit``
    counts questions."""
    by_doc: dict[Any, list[dict]] = {}
    for line in open(DATA / "rageval_example.jsonl", encoding="utf-8"):
        q = json.loads(line)
        if q.get("language", "en") == "en" and q["query"]["query_type"] == "Factual Question":
            if _answer_sentence(q["ground_truth"]["keypoints"]) is not None:
                by_doc.setdefault(tuple(q["ground_truth"]["doc_ids"]), []).append(q)
    rows = []
    for qs in by_doc.values():
        for n, (a, b) in enumerate(zip(qs, qs[1:])):
            first, second = a["query"]["content"].strip(), b["query"]["content"].strip()
            question = f"{first.rstrip('?').rstrip()}, and {second[0].lower()}{second[1:]}"
            answers = [_answer_sentence(x["ground_truth"]["keypoints"]) for x in (a, b)]
            contexts = [*a["ground_truth"]["references"], *b["ground_truth"]["references"]]
            key = f"compound-{a['query']['query_id']}-{b['query']['query_id']}"
            partial = answers[n % 2]
            rows += [(Sample(id=f"{key}-{tag}", question=question, answer=text, contexts=contexts, row=len(rows)),
                      label) for tag, text, label in (("complete", " ".join(answers), 1.0), ("partial", partial, 0.0))]
    return _groups(rows, limit, seed, lambda s: s.id.rsplit("-", 1)[0])


def _unreferenced(query: dict, references: list[str]) -> list[str]:
    """The chunks retrieved for a RAGEval ``query`` that hold none of its ``references`` (:func:`_holds`):
    passages on the query's company that do not answer it."""
    return [c for c in query["prediction"]["references"] if c.strip() and not _holds(c, references)]


_HEADER = re.compile(r"^\s*\([^)]*\)")  # a RAGEval chunk's "(Company Type: ... Name: ...)" before its text


def _evasive_pairs(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """An answer that evades (0) beside the complete one (1): RAGEval's answerable English queries, the
    ground-truth answer beside one of :data:`DECLINES` followed by two sentences of the chunks retrieved
    for the query that hold none of its references, those sharing the fewest words with the question (about
    the same company, answering none of it). Contexts: the references, which hold the answer, so the
    evasion is not honest. ``limit`` counts questions."""
    rows = []
    for i, line in enumerate(open(DATA / "rageval_example.jsonl", encoding="utf-8"), start=1):
        q = json.loads(line)
        refs = [r for r in q["ground_truth"]["references"] if r.strip()]
        if q.get("language", "en") != "en" or q["query"]["query_type"].startswith("Irrelevant") or not refs:
            continue
        related = [t for c in _unreferenced(q, refs) for t in split_sentences(_HEADER.sub("", c), "en")]
        asked = topic_terms(q["query"]["content"], "en")
        background = sorted(related, key=lambda t: len(topic_terms(t, "en") & asked))[:2]
        if len(background) < 2:
            continue
        key = f"evasive-{q['query']['query_id']}"
        evasion = " ".join([DECLINES[sum(map(ord, key)) % len(DECLINES)], *background])
        rows += [(Sample(id=f"{key}-{tag}", question=q["query"]["content"], answer=text, contexts=refs, row=i), label)
                 for tag, text, label in (("complete", q["ground_truth"]["content"], 1.0), ("evasive", evasion, 0.0))]
    return _groups(rows, limit, seed, lambda s: s.id.rsplit("-", 1)[0])


def _context_pairs(limit: int | None, seed: int) -> list[tuple[Sample, float]]:
    """Focused contexts (1) beside the same padded with related passages (0): RAGEval's ground-truth
    references beside the references and the query's retrieved chunks that hold none of them (the same
    company's other events); an RGB English query's first positive passage beside it and two of the
    query's negative passages (retrieved for it, without the answer). ``limit`` counts queries of each."""
    rag, rgb = [], []
    for i, line in enumerate(open(DATA / "rageval_example.jsonl", encoding="utf-8"), start=1):
        q = json.loads(line)
        refs = [r for r in q["ground_truth"]["references"] if r.strip()]
        if q.get("language", "en") != "en" or not refs:
            continue
        related = _unreferenced(q, refs)[:2]
        if related:
            key, question = f"ragctx-{q['query']['query_id']}", q["query"]["content"]
            rag += [(Sample(id=f"{key}-focused", question=question, answer="", contexts=refs, row=i), 1.0),
                    (Sample(id=f"{key}-padded", question=question, answer="", contexts=[*refs, *related], row=i), 0.0)]
    for line in open(DATA / "rgb_en_fact.json", encoding="utf-8"):
        q = json.loads(line)
        positive = [p for p in q["positive"] if p.strip()][:1]
        negative = [p for p in q["negative"] if p.strip()][:2]
        if positive and len(negative) == 2:
            key, row = f"rgbctx-{q['id']}", int(q["id"]) + 1
            rgb += [(Sample(id=f"{key}-focused", question=q["query"], answer="", contexts=positive, row=row), 1.0),
                    (Sample(id=f"{key}-padded", question=q["query"], answer="", contexts=[*positive, *negative],
                            row=row), 0.0)]
    return (_groups(rag, limit, seed, lambda s: s.id.rsplit("-", 1)[0])
            + _groups(rgb, limit, seed, lambda s: s.id.rsplit("-", 1)[0]))


def _mtrag_turns(limit: int | None, seed: int, dimension: str = "appropriateness") -> list[tuple[Sample, float]]:
    """MT-RAG's rated answers as :func:`_mtrag` reads them, ``limit`` counting conversation turns (every
    rated answer of a kept turn is kept, so the answers to one turn can be compared)."""
    return _groups(_mtrag(None, seed, dimension), limit, seed, lambda s: s.extra["task_id"])


def _groups(rows: list[tuple[Sample, float]], limit: int | None, seed: int, key: Callable[[Sample], Any]):
    """The rows of ``limit`` groups (``key``) drawn at random; every row when ``limit`` is None."""
    if not limit:
        return rows
    keep = set(np.random.default_rng(seed).permutation(sorted({key(s) for s, _ in rows}))[:limit].tolist())
    return [(s, y) for s, y in rows if key(s) in keep]


def _mtrag(limit: int | None, seed: int, dimension: str = "faithfulness") -> list[tuple[Sample, float]]:
    """MT-RAG's rated answers, read as `offline-eval run` reads the file (each with its conversation);
    positive when the median of the annotators' ratings of ``dimension`` is 4 of 4 ("Yes")."""
    out = [(s, float(s.extra["human"][dimension] == 4)) for s in read_dataset(DATA / "mtrag_dev.json")
           if dimension in s.extra["human"]]
    return _draw(out, limit, seed)


def _draw(rows: list[tuple[Sample, float]], limit: int | None, seed: int, stratified: bool = True):
    if not limit or limit >= len(rows):
        return rows
    rng = np.random.default_rng(seed)
    if not stratified:
        return [rows[i] for i in sorted(rng.choice(len(rows), size=limit, replace=False))]
    pos = [i for i, (_, y) in enumerate(rows) if y == 1]
    neg = [i for i, (_, y) in enumerate(rows) if y == 0]
    k = round(limit * len(pos) / len(rows))
    idx = list(rng.choice(pos, size=k, replace=False)) + list(rng.choice(neg, size=limit - k, replace=False))
    return [rows[i] for i in sorted(idx)]


# name -> (loader, metric of `default`, baseline metric, default row limit, what it tests)
SETS: dict[str, tuple[Callable[..., list], str, type[Metric], int | None, str]] = {
    "begin": (_begin, "faithfulness", PlainSupport, None, "BEGIN dev (WoW), dialogue responses vs short knowledge"),
    "qags_sentences": (lambda n, s: _qags(n, s, False), "faithfulness", PlainSupport, 120,
                       "QAGS CNN/DM, summary sentences vs the article"),
    "qags_summaries": (lambda n, s: _qags(n, s, True), "faithfulness", PlainSupport, 120,
                       "QAGS CNN/DM, whole summaries (faithful = every sentence yes)"),
    "evouna_tq": (_evouna, "answer_correctness", PlainCorrect, 300, "EVOUNA TriviaQA, answer correctness"),
    "rgb_en": (_rgb, "faithfulness", PlainSupport, 100, "RGB counterfactual: planted answer (1) vs true answer (0)"),
    "mtrag": (_mtrag, "faithfulness", PlainSupport, None,
              "MT-RAG dev, rated answers vs their passages (faithful = median faithfulness rating 4)"),
    "mtrag_completeness": (lambda n, s: _mtrag(n, s, "completeness"), "completeness", PlainComplete, None,
                           "MT-RAG dev, rated answers vs the reference answer (complete = median completeness "
                           "rating 4)"),
}

# Issue #58's relevance sets: run when named (--sets), so the default run and the scripts built on SETS
# (estimate.py) keep measuring what they measured.
RELEVANCE_SETS: dict[str, tuple[Callable[..., list], str, type[Metric], int | None, str]] = {
    "mtrag_appropriateness": (_mtrag_turns, "answer_relevancy", PlainRelevant, None,
                              "MT-RAG dev, rated answers to their question (relevant = median appropriateness "
                              "rating 4; limit counts turns)"),
    "rgb_context": (_rgb_context, "context_relevance", PlainContextRelevant, 12,
                    "RGB English, each query's passages one at a time (positive holds the answer = 1, "
                    "negative = 0; limit counts queries)"),
    "rageval_context": (_rageval_context, "context_relevance", PlainContextRelevant, 40,
                        "RAGEval, each query's retrieved chunks one at a time (holds a ground-truth reference "
                        "= 1, else 0; limit counts queries)"),
    "answer_pairs": (_answer_pairs, "answer_relevancy", PlainRelevant, 40,
                     "RAGEval and MT-RAG answers by construction (Table 1's way): complete = 1, cut to its first "
                     "sentence or declined = 0; limit counts questions of each source"),
    "compound_pairs": (_compound_pairs, "answer_relevancy", PlainRelevant, None,
                       "RAGEval two-part questions by construction: both parts answered (1) vs one (0)"),
    "evasive_pairs": (_evasive_pairs, "answer_relevancy", PlainRelevant, None,
                      "RAGEval answers by construction (Table 3's way): complete (1) vs one that says the "
                      "information is not given and goes on with related background (0)"),
    "context_pairs": (_context_pairs, "context_relevance", PlainContextRelevant, 40,
                      "RAGEval references and RGB positive passages by construction (Table 1's way): focused = 1, "
                      "padded with related passages = 0; limit counts queries of each source"),
}

# The pairwise view (as the Ragas paper measured): name -> (the group whose items are compared, the grade,
# human or by construction, that orders them). Pairs are two items of one group with different grades.
PAIRS: dict[str, tuple[Callable[[Sample], Any], Callable[[Sample, float], float]]] = {
    "mtrag_appropriateness": (lambda s: s.extra["task_id"], lambda s, y: float(s.extra["human"]["appropriateness"])),
    "rgb_context": (lambda s: s.row, lambda s, y: y),
    "rageval_context": (lambda s: s.row, lambda s, y: y),
    "answer_pairs": (lambda s: s.id.rsplit("-", 1)[0], lambda s, y: y),
    "context_pairs": (lambda s: s.id.rsplit("-", 1)[0], lambda s, y: y),
    "compound_pairs": (lambda s: s.id.rsplit("-", 1)[0], lambda s, y: y),
    "evasive_pairs": (lambda s: s.id.rsplit("-", 1)[0], lambda s, y: y),
}
# Sets built by construction: what each worse item is (its id's last part: "first", "declined", "padded",
# "partial", "evasive").
KINDS: dict[str, Callable[[Sample], str]] = {name: (lambda s: s.id.rsplit("-", 1)[1])
                                             for name in ("answer_pairs", "context_pairs", "compound_pairs",
                                                          "evasive_pairs")}

# Configurations: name -> (metric or None for the set's default, settings overrides, metadata value key)
CONFIGS: dict[str, tuple[str | None, dict[str, Any], str | None]] = {
    "plain": ("plain", {}, None),
    "default": (None, {}, None),
    # a conversation's history (sets whose samples carry one: MT-RAG); the default reads the question alone
    "plain_history": ("plain_history", {}, None),
    "history_none": (None, {"history": "none"}, None),
    "history_tail": (None, {"history": "tail"}, None),
    "history_rewrite": (None, {"history": "rewrite"}, None),
    "history_both": (None, {"history": "both"}, None),
    "history_short": (None, {"history": "tail", "history_words": 50}, None),
    # the plain faithfulness question written as a criterion of one's own (benchmarks/criteria), without
    # and with the lean correction; sets scored by faithfulness only
    "criterion": ("criterion_supported", {}, None),
    "criterion_lean": ("criterion_supported_lean", {}, None),
    # variants measured while choosing the defaults (settings the current code understands)
    "share": (None, {"verdict_score": "threshold"}, None),
    "sentences": ("faithfulness_sentences", {}, None),
    "llm_claims": (None, {"claims": "llm"}, None),
    "joined": (None, {"context_window": 0}, None),
    "no_question": (None, {"fragment_words": 0}, None),
    "question": (None, {"fragment_words": 10**6}, None),
    "no_baseline": (None, {"baseline_weight": 0.0}, None),
    "full_baseline": (None, {"baseline_weight": 1.0}, None),
    # windows per statement (the default is 2; 4 was the default before issue #31); the verdicts of
    # fewer windows are a subset of more windows': a cached rerun is cheap
    "windows_1": (None, {"windows_per_claim": 1}, None),
    "windows_2": (None, {"windows_per_claim": 2}, None),
    "windows_3": (None, {"windows_per_claim": 3}, None),
    "windows_4": (None, {"windows_per_claim": 4}, None),
    # a statement's leading window alone when it shares R times the words of the next (the default is
    # 1.5; 0, always two windows, was the default before); the verdicts are a subset of lead_0's
    "lead_0": (None, {"window_lead": 0.0}, None),
    "lead_1": (None, {"window_lead": 1.0}, None),
    "lead_2": (None, {"window_lead": 2.0}, None),
    "lead_3": (None, {"window_lead": 3.0}, None),
    # issue #58: the relevance metrics' own options (``mode``: the set's metric's option of that name) and
    # the figures their verdict mode records beside its value, read as the value
    "ragas_mode": (None, {"mode": "ragas"}, None),
    "addresses": (None, {}, "addresses"),  # answer_relevancy without the reading of a declining answer
    "addresses_judge": (None, {}, "addresses_judge"),  # ... and without the lean correction
    "window_max": (None, {}, "max_probability"),  # context_relevance: the best window alone
    # context_relevance: the judge's reading alone, its windows' mean P (the default before the
    # embedder's share of sentences on the question joined it)
    "judge_windows": (None, {}, "mean_probability"),
}


def metric_overrides(metric: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with a key that names an option of ``metric`` (a metric's name) by its field given
    by its public name (``mode`` -> ``answer_relevancy_mode``)."""
    if not isinstance(metric, str):
        return overrides
    public = option_names(type(resolve_metric(metric)))
    return {(f"{metric}_{k}" if f"{metric}_{k}" in public else k): v for k, v in overrides.items()}


# --- measuring -----------------------------------------------------------------------------------
def measure(rows, scores) -> dict[str, Any]:
    scored = [(s.id, y, scores[s.id]["value"]) for s, y in rows if scores.get(s.id, {}).get("value") is not None]
    unscored = Counter(scores.get(s.id, {}).get("reason", "not_run") for s, _ in rows
                       if scores.get(s.id, {}).get("value") is None)
    out: dict[str, Any] = {"n": len(rows), "n_scored": len(scored), "unscored": dict(unscored)}
    if not scored:
        return out
    v = np.array([x for _, _, x in scored])
    y = np.array([lab for _, lab, _ in scored])
    allp = agreement_pointwise(v, y, threshold=0.5, resamples=RESAMPLES, seed=BOOT_SEED).to_dict()
    out.update(auc=allp["roc_auc"], bacc_05=allp["balanced_accuracy"], spearman=allp["spearman"],
               n_positive=allp["n_positive"], n_negative=allp["n_negative"],
               mean_positive=float(v[y == 1].mean()) if (y == 1).any() else None,
               mean_negative=float(v[y == 0].mean()) if (y == 0).any() else None,
               distinct_values=int(len(np.unique(np.round(v, 6)))),
               calibrated_threshold=best_threshold(v, y))
    # Calibrated balanced accuracy, honestly: each row is predicted by a threshold fitted on the other
    # folds (offline_eval.people.calibration, as `offline-eval calibrate` reports it), then bootstrapped.
    predicted = out_of_fold_predictions(v, y, FOLDS, seed=0)
    if predicted is not None:
        out["bacc_calibrated"] = agreement_pointwise(predicted.astype(float), y, threshold=0.5, resamples=RESAMPLES,
                                                     seed=BOOT_SEED).to_dict()["balanced_accuracy"]
    return out


def pairwise(rows, scores, group: Callable[[Sample], Any], grade: Callable[[Sample, float], float],
             kind: Callable[[Sample], str] | None = None) -> dict[str, Any]:
    """Of the pairs of items of one group (``group``) with different human grades (``grade``), the share where
    the metric scores the higher-graded item higher; a tie in the metric's scores is settled by a seeded coin
    (:func:`agreement_pairwise`). A pair with an unscored item is counted apart, not compared. With ``kind``
    (what the lower-graded item is, in a set built by construction), ``by_kind`` gives each kind's share, a
    tie counted as half."""
    by_group: dict[Any, list[tuple[float, float | None, Sample]]] = defaultdict(list)
    for s, y in rows:
        by_group[group(s)].append((grade(s, y), scores.get(s.id, {}).get("value"), s))
    pairs, unscored = [], 0
    kinds: dict[str, list[float]] = defaultdict(list)
    for items in by_group.values():
        for (grade_a, a, sa), (grade_b, b, sb) in combinations(items, 2):
            if grade_a == grade_b:
                continue
            if a is None or b is None:
                unscored += 1
                continue
            (better, worse, lower) = (a, b, sb) if grade_a > grade_b else (b, a, sa)
            pairs.append((better, worse))
            if kind is not None:
                kinds[kind(lower)].append(1.0 if better > worse else 0.5 if better == worse else 0.0)
    out = {**agreement_pairwise(pairs, resamples=RESAMPLES, seed=BOOT_SEED).to_dict(), "n_unscored_pairs": unscored}
    if kind is not None:
        out["by_kind"] = {k: {"n": len(v), "accuracy": round(sum(v) / len(v), 4)} for k, v in sorted(kinds.items())}
    return out


def _wall(run_dir: Path, wall: float) -> float:
    """Seconds of the first computation of this run folder (a cached rerun keeps that figure)."""
    path = run_dir / "timing.json"
    try:
        fingerprint = json.loads((run_dir / "run.json").read_text())["fingerprint"]
    except (OSError, ValueError, KeyError):
        fingerprint = None
    try:
        recorded = json.loads(path.read_text())
        if recorded.get("fingerprint") == fingerprint and float(recorded["wall_s"]) >= wall:
            return float(recorded["wall_s"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    path.write_text(json.dumps({"wall_s": round(wall, 1), "fingerprint": fingerprint}))
    return wall


def _fmt(stat: dict[str, Any] | None) -> str:
    if not stat or stat.get("value") is None:
        return "-"
    lo, hi = stat["ci95"]
    return f"{stat['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def requests_per_row(run_dir: Path, rows: int) -> float | None:
    """The judge's requests a row in a run folder's finished run (its engine's count of distinct
    requests, stage by stage, whether computed or served by the cache): what the configuration asks."""
    try:
        engine = json.loads((run_dir / "summary.json").read_text())["run"]["engine"]
    except (OSError, ValueError, KeyError):
        return None
    asked = sum(engine.get("unique_requests", {}).get(kind, 0) for kind in ("options", "generate"))
    return round(asked / rows, 1) if rows else None


def _fmt_requests(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _fmt_pairs(pairs: dict[str, Any] | None) -> str:
    if not pairs:
        return "-"
    unscored = f", {pairs['n_unscored_pairs']} unscored" if pairs.get("n_unscored_pairs") else ""
    return f"{_fmt(pairs['accuracy'])} ({pairs['n_pairs']} pairs, {pairs['n_ties']} ties{unscored})"


def write_outputs(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    meta = payload["meta"]
    lines = [
        "# Agreement with human labels: every shared labelled set, bench judge",
        "",
        f"- date: {meta['date']}; code: {meta['code']}",
        f"- machine: {meta['machine']}",
        f"- command: `{meta['command']}`",
        f"- judge: {meta['judge']} (bf16, option verdicts; torch threads {meta['threads']}, batch size "
        f"{meta['batch_size']}, max tokens {meta['max_tokens']})",
        "- plain: one Yes/No prompt over all contexts and the whole answer (the one-prompt judge baseline); "
        "default: the set's metric with the code's defaults",
        "- AUC and balanced accuracy at 0.5: every scored row. Calibrated: 5-fold cross-validation (stratified, "
        "seed 0): each row is predicted by the threshold that maximises balanced accuracy on the other four "
        "folds, as `offline-eval calibrate` reports it; the threshold column is the one fitted on all rows. "
        f"95% bootstrap intervals ({RESAMPLES} stratified resamples, seed {BOOT_SEED})",
        "- pairwise (sets with one): two items of one group (the answers to one MT-RAG turn, the passages of one "
        "RGB query, the chunks of one RAGEval query) with different human grades; the share where the metric "
        "scores the higher-graded one higher, a tie settled by a seeded coin; bootstrap over pairs",
        "",
        "| set | configuration | metric | scored / n (+/−) | ROC AUC | bal. acc. @0.5 | threshold "
        "| bal. acc. calibrated (5-fold) | pairwise accuracy | mean + / − | distinct scores | judge requests / row "
        "| wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        m = r["measure"]
        means = (f"{m['mean_positive']:.3f} / {m['mean_negative']:.3f}"
                 if m.get("mean_positive") is not None and m.get("mean_negative") is not None else "-")
        t = m.get("calibrated_threshold")
        unsc = f"; unscored {m['unscored']}" if m.get("unscored") else ""
        lines.append(f"| {r['set']} | {r['config']} | {r['metric']} | {m['n_scored']} / {m['n']} "
                     f"({m.get('n_positive', '-')}/{m.get('n_negative', '-')}){unsc} | {_fmt(m.get('auc'))} | "
                     f"{_fmt(m.get('bacc_05'))} | {'-' if t is None else f'{t:.3f}'} | "
                     f"{_fmt(m.get('bacc_calibrated'))} | {_fmt_pairs(m.get('pairwise'))} | {means} | "
                     f"{m.get('distinct_values', '-')} | "
                     f"{_fmt_requests(r.get('requests_per_row'))} | {r['wall_s']:.0f} |")
    by_kind = [f"{r['set']} / {r['config']}: " + ", ".join(f"{k} {v['accuracy']:.3f} ({v['n']})" for k, v in
                                                           r["measure"]["pairwise"]["by_kind"].items())
               for r in payload["results"] if r["measure"].get("pairwise", {}).get("by_kind")]
    if by_kind:
        lines += ["", "Pairwise accuracy by what the worse item is (sets built by construction; a tie counts "
                      "half): " + "; ".join(by_kind) + "."]
    lines += ["", "Sets: " + "; ".join(f"`{k}` {v}" for k, v in meta["sets"].items()), ""]
    if payload.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in payload["notes"]] + [""]
    out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")


def use_shared_data(prog: str, data: Path | None, judge: Path | None = None) -> bool:
    """Point the loaders at ``data`` (default: ../shared/data); False, after a line naming what is missing,
    when that folder is not there or ``judge`` (when given) holds no model."""
    global DATA
    DATA = data or DATA
    if not DATA.exists():
        print(f"{prog}: {DATA} not found (the shared labelled sets)", file=sys.stderr)
        return False
    if judge is not None and not (judge / "config.json").exists():
        print(f"{prog}: no judge at {judge} (run ../shared/scripts/bench-judge)", file=sys.stderr)
        return False
    return True


def code_version() -> str:
    """The checkout's commit, and whether the package has uncommitted changes."""
    import subprocess

    try:
        code = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "offline_eval"],
                               capture_output=True, text=True).stdout.strip()
        return code + (" + uncommitted changes" if dirty else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default=",".join(SETS),
                   help="comma-separated: " + ", ".join(SETS) + "; by name only: " + ", ".join(RELEVANCE_SETS))
    p.add_argument("--configs", default="plain,default", help="comma-separated: " + ", ".join(CONFIGS))
    p.add_argument("--limit", action="append", default=[], metavar="SET=N",
                   help="rows (qags: articles; rgb: queries) per set; 0 = all")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--judge", type=Path, default=JUDGE)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "agreement")
    p.add_argument("--runs-dir", type=Path, default=BENCH_DIR / "agreement-runs")
    p.add_argument("--cache", type=Path, default=BENCH_DIR / "agreement-cache.sqlite")
    p.add_argument("--tag", default="", help="suffix of the run folders (to keep runs of other code apart)")
    p.add_argument("--note", action="append", default=[], help="a line for the notes of the results file")
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    args = p.parse_args(argv)
    if not use_shared_data("agreement", args.data, args.judge):
        return 2
    limits = {k: int(v) for k, _, v in (x.partition("=") for x in args.limit)}

    import torch
    torch.set_num_threads(args.threads)
    code = code_version()
    raw_argv = argv if argv is not None else sys.argv[1:]
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": code,
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
                       f"python {platform.python_version()}, load average at start "
                       f"{os.getloadavg()[0]:.2f}",
            "command": "python benchmarks/agreement.py" + (" " + shlex.join(raw_argv) if raw_argv else ""),
            "judge": args.judge.name, "threads": args.threads, "batch_size": args.batch_size,
            "max_tokens": args.max_tokens, "seed": args.seed, "sets": {}}
    payload: dict[str, Any] = {"meta": meta, "results": [], "notes": [
        "judge requests / row: the judge's distinct requests a row (option verdicts and probes, generations), "
        "computed or served by the cache: what the configuration asks, comparable between cached reruns. "
        "wall s: seconds of the configuration's first computation (a cached rerun keeps that figure). "
        "qags_summaries reuses the verdicts qags_sentences computed for the same sentences and windows "
        "when both run with one cache, so its default's wall s is then the extra cost only.",
        *args.note]}
    cache = ResultCache(args.cache)
    models: dict[frozenset[str], Any] = {}
    manifest = bench_manifest(args.judge)
    started = time.monotonic()
    try:
        for set_name in [s for s in args.sets.split(",") if s]:
            loader, metric_name, baseline, default_limit, what = {**SETS, **RELEVANCE_SETS}[set_name]
            limit = limits.get(set_name, default_limit) or None
            rows = loader(limit, args.seed)
            meta["sets"][set_name] = f"{what}: {len(rows)} rows" + (f" (limit {limit}, seed {args.seed})" if limit else "")
            for config in [c for c in args.configs.split(",") if c]:
                which, overrides, value_key = CONFIGS[config]
                metric: Any = (baseline() if which == "plain" else baseline(in_conversation=True)
                               if which == "plain_history" else (which or metric_name))
                if which in ("faithfulness_sentences", *CRITERIA_METRICS) and metric_name != "faithfulness":
                    continue
                if which in CRITERIA_METRICS:
                    from offline_eval.metrics.criteria import load_criteria

                    load_criteria([CRITERIA_FILE])
                roles = frozenset(resolve_metric(metric).roles if isinstance(metric, str) else metric.roles)
                overrides = metric_overrides(metric, overrides)
                unknown = [k for k in overrides if k not in EvalSettings.option_names()
                           and not (isinstance(metric, str) and k in option_names(type(resolve_metric(metric))))]
                if unknown:
                    print(f"[{set_name} {config}] skipped: this code has no setting {unknown}", file=sys.stderr)
                    continue
                setup = build_setup(metric, ModelChoice(profile=str(manifest), batch_size=args.batch_size),
                                    models=models.get(roles), verdicts="options", max_tokens=args.max_tokens,
                                    criteria=[CRITERIA_FILE] if which in CRITERIA_METRICS else [], **overrides)
                models[roles] = setup.models  # loaded once per set of roles
                run_dir = args.runs_dir / f"{set_name}-{config}{args.tag}"
                print(f"[{time.monotonic() - started:6.0f}s] {set_name} / {config}: {len(rows)} rows",
                      file=sys.stderr, flush=True)
                t0 = time.monotonic()
                scores = score_samples([s for s, _ in rows], setup, run_dir, cache=cache, overwrite=True)
                wall = _wall(run_dir, time.monotonic() - t0)
                if value_key:
                    scores = {k: {**v, "value": v.get("metadata", {}).get(value_key)} if v.get("value") is not None
                              else v for k, v in scores.items()}
                m = measure(rows, scores)
                if set_name in PAIRS:
                    m["pairwise"] = pairwise(rows, scores, *PAIRS[set_name], kind=KINDS.get(set_name))
                payload["results"].append({"set": set_name, "config": config, "metric": setup.metrics[0].name,
                                           "settings": overrides, "wall_s": round(wall, 1),
                                           "requests_per_row": requests_per_row(run_dir, len(rows)), "measure": m})
                print(f"[{time.monotonic() - started:6.0f}s] {set_name} / {config}: AUC {_fmt(m.get('auc'))}, "
                      f"bacc@0.5 {_fmt(m.get('bacc_05'))}, calibrated {_fmt(m.get('bacc_calibrated'))}, "
                      f"pairwise {_fmt_pairs(m.get('pairwise'))}, "
                      f"{wall:.0f} s", file=sys.stderr, flush=True)
                meta["elapsed_s"] = round(time.monotonic() - started, 1)
                write_outputs(args.out, payload)
    finally:
        cache.close()
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    write_outputs(args.out, payload)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
