"""The test-set generation pipeline, as engine tasks.

One task per *slot*: one question of one type about one document (two for multi-document
questions). Every task walks the same stages, so the engine batches each stage across all slots:

1. evidence: the code picks the sentences the question is to be written from, by type
   (:mod:`offline_eval.testset.evidence`); they are spans of the document, hence verbatim;
2. question and answer: the judge turns the numbered evidence sentences into one question of the
   type and its answer, as flat JSON (``{"question": ..., "answer": ...}``), after one worked example;
   an unusable answer (unreadable, empty, in the wrong language, a copied sentence, an answer that
   ignores one of its sentences, a question already written for another slot) is rejected with its
   reason and raw text, and the slot tries again on other evidence (``attempts`` in all);
3. references: the evidence sentences, checked once more to occur verbatim in their document;
4. key points of the answer (the answer itself when the judge's key points are unreadable).

Unanswerable questions keep no reference: their answer is "Unable to answer" and their single key
point too. With ``synthesize_docs`` a first pass writes new documents from a schema summarised from
the documents (configurations with rule-based dates and numbers, free text by the judge) and the
pipeline runs on those.

Why evidence first (RAGEval asks for questions from a configuration, then for references copied by
the judge): a small judge copies sentences unreliably and loses its way in a long document, while
turning two given sentences into a question is within its reach; the references are then the
document's own text by construction. Nothing a small model writes can crash the pipeline: every
rejected answer is counted under a reason and kept, raw, in ``GenerationResult.rejected``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

from offline_eval import reasons
from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.requests import Generate, Sampling
from offline_eval.judging.asking import JsonAnswer, JsonAsk, UnreadableAnswer, ask_json
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.base import Score, as_score
from offline_eval.metrics.keypoints import clean_keypoints
from offline_eval.prompts.rageval import (
    KEYPOINTS, TS_QUESTION, TS_SCHEMA, TS_SYNTH_CONFIG, TS_SYNTH_DOC, UNABLE, UNABLE_ANSWER,
)
from offline_eval.testset import QUESTION_TYPES
from offline_eval.testset.evidence import Sentence, candidates, copies, pick, unused
from offline_eval.testset.verbatim import locate, normalise_space
from offline_eval.text import detect_language, normalize_language

PAIR_TYPES = frozenset({"multi_doc"})  # need two documents
PAIR_PREFERRED = frozenset({"numeric", "temporal"})  # across two documents of the same kind when there are
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_PUNCTUATION = re.compile(r"[^\w\s]|_")
_TITLE_FIELDS = ("title", "name", "company_name", "court_name", "hospital_patient_name", "subject")


@dataclass
class SourceDoc:
    """A document questions are asked about."""

    id: str
    text: str
    language: str
    kind: str = ""  # e.g. the JSONL's domain; tells the schema and synthetic documents what they are
    facts: list[dict[str, str]] | None = None  # known configuration (synthetic documents)
    title: str = ""  # what the document is about (a company, a court ...), shown with its sentences

    @property
    def subject(self) -> str:
        """The title, else the document's first line of prose (cut to 100 characters)."""
        if self.title:
            return self.title
        for line in self.text.splitlines():
            line = line.strip().strip("*#-_ ").strip()
            if len(line) >= 3:
                return line if len(line) <= 100 else line[:100].rsplit(" ", 1)[0] + " ..."
        return self.id


@dataclass
class GenerateOptions:
    n: int = 100
    types: tuple[str, ...] = QUESTION_TYPES
    language: str | None = None  # force the questions' language; else each document's
    synthesize_docs: bool = False
    num_docs: int | None = None  # synthetic documents to write (default: as many as the seeds, >= 2)
    attempts: int = 3  # evidence sets tried per question before giving it up
    schema_docs: int = 3
    schema_doc_chars: int = 1500
    max_tokens: int = 384
    doc_max_tokens: int = 1024
    seed: int = 0
    min_reference_chars: dict[str, int] = field(default_factory=lambda: {"en": 12, "zh": 6})
    context_tokens: int | None = None  # the judge's context length, when known: prompts are cut to fit

    def fit_context(self) -> None:
        """Shrink the document excerpts of the schema prompt so it fits ``context_tokens`` (a too-long
        prompt fails the backend's whole batch). Counts one token per character, which holds for
        Chinese and over-reserves for English; 900 tokens stay free for the instructions."""
        if not self.context_tokens:
            return
        budget = max(300, self.context_tokens - self.max_tokens - 900)
        self.schema_doc_chars = min(self.schema_doc_chars, max(100, budget // max(1, self.schema_docs)))


@dataclass
class Slot:
    qtype: str
    docs: list[SourceDoc]
    number: int = 0  # the number-th question of this type on these documents: picks its evidence

    @property
    def language(self) -> str:
        return self.docs[0].language


@dataclass
class GenerationResult:
    rows: list[dict[str, Any]]
    drops: Counter  # rejected judge answers and given-up questions, by reason
    messages: list[str]
    documents: list[SourceDoc]
    stats: dict[str, Any]
    rejected: list[dict[str, Any]] = field(default_factory=list)  # each rejected answer, raw text included


# --------------------------------------------------------------------------------- planning
def plan_slots(docs: Sequence[SourceDoc], options: GenerateOptions) -> tuple[list[Slot], list[str]]:
    """Spread ``n`` questions over the types and documents; messages say what had to be skipped."""
    messages: list[str] = []
    types = [t for t in options.types if t in QUESTION_TYPES]
    if len(docs) < 2 and any(t in PAIR_TYPES for t in types):
        skipped = [t for t in types if t in PAIR_TYPES]
        messages.append(f"skipping {', '.join(skipped)}: multi-document questions need at least 2 documents "
                        f"(got {len(docs)})")
        types = [t for t in types if t not in PAIR_TYPES]
    if not types or not docs or options.n < 1:
        return [], messages
    per_type = {t: options.n // len(types) + (1 if i < options.n % len(types) else 0) for i, t in enumerate(types)}
    pairs = _pairs(docs)
    same_kind = [p for p in pairs if p[0].kind == p[1].kind]
    slots: list[Slot] = []
    for t_index, qtype in enumerate(types):
        wanted = per_type[qtype]
        if not wanted:
            continue
        if qtype in PAIR_TYPES:
            groups = [list(p) for p in pairs]
        elif qtype in PAIR_PREFERRED and same_kind:
            groups = [list(p) for p in same_kind]
        else:
            groups = [[d] for d in docs]
        groups = [g for g in groups if candidates(qtype, [d.text for d in g])]
        if not groups:
            messages.append(f"skipping {qtype}: no document has sentences for it")
            continue
        # rotate the starting group per type so few questions still spread over the documents
        groups = groups[t_index % len(groups):] + groups[:t_index % len(groups)]
        for i in range(wanted):
            slots.append(Slot(qtype, groups[i % len(groups)], i // len(groups)))
    return slots, messages


def _pairs(docs: Sequence[SourceDoc]) -> list[tuple[SourceDoc, SourceDoc]]:
    """Consecutive pairs of documents of the same language (across languages when none exists)."""
    by_language: dict[str, list[SourceDoc]] = {}
    for doc in docs:
        by_language.setdefault(doc.language, []).append(doc)
    pairs = []
    for group in by_language.values():
        if len(group) >= 2:
            pairs.extend((group[i], group[(i + 1) % len(group)]) for i in range(len(group) if len(group) > 2 else 1))
    if not pairs and len(docs) >= 2:
        pairs = [(docs[i], docs[i + 1]) for i in range(len(docs) - 1)]
    return pairs


def window(text: str, part: int, parts: int, max_chars: int) -> str:
    """The ``part``-th of ``parts`` windows of ``text``, each at most ``max_chars`` long.

    Windows start at a line or sentence boundary when one is near, so they show whole sentences.
    """
    if len(text) <= max_chars and parts <= 1:
        return text
    size = min(max_chars, len(text) if parts <= 1 else max(1, int(len(text) * 0.6)))
    start = 0 if parts <= 1 else round(part * (len(text) - size) / (parts - 1))
    if start:
        cut = min((i for i in (text.find(sep, start, start + 300) for sep in ("\n", "。", ". ")) if i >= 0),
                  default=-1)
        if cut >= 0:
            start = cut + 1
    return text[start:start + size].strip()


# --------------------------------------------------------------------------------- stages
def _facts_text(facts: list[dict[str, Any]] | None) -> str:
    if not facts:
        return "-"
    return "\n".join(f"- {f.get('field', '')}: {f.get('value', '')}" for f in facts)


def _clean_facts(value: Any) -> list[dict[str, str]]:
    out = []
    for item in value.get("facts", []) if isinstance(value, dict) else []:
        name, val = str(item.get("field", "")).strip(), str(item.get("value", "")).strip()
        if name and val:
            out.append({"field": name, "value": val})
    return out


def schema_step(seeds: Sequence[SourceDoc], language: str, options: GenerateOptions,
                settings: EvalSettings) -> Generator[Any, Any, str]:
    """The schema text ("- name: description" lines), or "" when the judge gave none."""
    documents = "\n\n".join(f"[{i + 1}] {window(d.text, 0, 1, options.schema_doc_chars)}"
                            for i, d in enumerate(seeds[: options.schema_docs]))
    try:
        got = yield from ask_json(JsonAsk(TS_SCHEMA, language, {"documents": documents}), settings)
    except UnreadableAnswer:
        return ""
    lines = []
    for item in got.value["fields"]:
        name = str(item.get("name", "")).strip()
        if name:
            description = str(item.get("description", "") or "").strip()
            lines.append(f"- {name}: {description}" if description else f"- {name}")
    return "\n".join(lines)


def show_evidence(evidence: Sequence[Sentence], docs: Sequence[SourceDoc]) -> tuple[str, str]:
    """(subject, numbered sentences) as the question prompt shows them; sentences of two documents
    are labelled with their document's subject."""
    used = sorted({s.doc for s in evidence})
    if len(used) == 1:
        subject = docs[used[0]].subject
        lines = [f"[{i + 1}] {normalise_space(s.text)}" for i, s in enumerate(evidence)]
    else:
        subject = "; ".join(docs[d].subject for d in used)
        lines = [f"[{i + 1}] ({docs[s.doc].subject}) {normalise_space(s.text)}" for i, s in enumerate(evidence)]
    return subject, "\n".join(lines)


def asked(question: str) -> str:
    """What makes two questions the same: their words, whatever their case, spacing and punctuation."""
    return normalise_space(_PUNCTUATION.sub(" ", question)).casefold()


class SlotTask:
    """The generator of one slot; returns a Score whose metadata holds its row, drops and rejections.

    ``written`` (shared by the slots of one run) holds the :func:`asked` form of every question
    accepted so far: a judge that writes the same question from other sentences gives a test set that
    asks one thing several times, so a repeat is rejected and the slot tries other evidence."""

    def __init__(self, slot: Slot, options: GenerateOptions, settings: EvalSettings,
                 written: set[str] | None = None) -> None:
        self.slot, self.options, self.settings = slot, options, settings
        self.written = set() if written is None else written
        self.drops: Counter = Counter()
        self.rejected: list[dict[str, Any]] = []

    def language(self) -> str:
        return self.options.language or self.slot.language

    def run(self) -> Generator[Any, Any, Score]:
        slot, options, lang = self.slot, self.options, self.language()
        texts = [d.text for d in slot.docs]
        salt = "|".join(d.id for d in slot.docs)
        attempts = max(1, options.attempts)
        for attempt in range(attempts):
            evidence = pick(slot.qtype, texts, slot.number, attempt, attempts, options.seed, salt)
            if evidence is None:  # the documents have no (more) sentences for this type
                self.drops["question_given_up" if attempt else "no_evidence"] += 1
                return self._done(None)
            subject, shown = show_evidence(evidence, slot.docs)
            try:
                got = yield from ask_json(JsonAsk(TS_QUESTION[slot.qtype], lang,
                                                  {"subject": subject, "sentences": shown}), self.settings)
            except UnreadableAnswer as failure:
                self.drops["question_unparseable"] += 1
                self._reject("question", "question_unparseable", failure.explanation, failure.raws, attempt, evidence)
                continue
            question, answer, reason = self._read(got, evidence)
            if reason is None:
                break
            self.drops[reason] += 1
            self._reject("question", reason, None, got.raws, attempt, evidence)
        else:
            self.drops["question_given_up"] += 1
            return self._done(None)
        # claimed before the next stage, so a slot of the same stage cannot write it again
        self.written.add(asked(question))

        doc_ids = [slot.docs[d].id for d in sorted({s.doc for s in evidence})] if slot.qtype != "unanswerable" \
            else [d.id for d in slot.docs]
        if slot.qtype == "unanswerable":
            return self._done(self._row(question, UNABLE_ANSWER.get(lang, UNABLE_ANSWER["en"]), [], [UNABLE],
                                        doc_ids, lang))
        references = self._verbatim(evidence)
        if not references:
            self.drops["no_verbatim_reference"] += 1
            self.written.discard(asked(question))
            return self._done(None)

        keypoints = yield from self._keypoints(question, answer, evidence)
        return self._done(self._row(question, answer, references, keypoints, doc_ids, lang))

    # -- helpers -----------------------------------------------------------------------------
    def _keypoints(self, question: str, answer: str, evidence: Sequence[Sentence]) -> Generator[Any, Any, list[str]]:
        """The judge's key points of the answer, or the answer itself when it gave none it could read."""
        lang = self.language()
        try:
            got = yield from ask_json(JsonAsk(KEYPOINTS, lang, {
                "question": question, "ground_truth": answer, "max_points": self.settings.keypoint_max}),
                self.settings)
        except UnreadableAnswer as failure:
            reason, problem, raws, keypoints = "keypoints_unparseable", failure.explanation, failure.raws, []
        else:
            reason, problem, raws = "no_keypoints", None, got.raws
            keypoints = clean_keypoints(got.value["keypoints"])[: self.settings.keypoint_max]
        if not keypoints:
            self.drops[f"{reason}_answer_kept_as_keypoint"] += 1
            self._reject("keypoints", reason, problem, raws, 0, evidence)
            keypoints = [answer]
        return keypoints

    def _read(self, got: JsonAnswer, evidence: Sequence[Sentence]) -> tuple[str, str, str | None]:
        """(question, answer, None), or a rejection reason in the last place."""
        question = normalise_space(str(got.value.get("question") or ""))
        answer = normalise_space(str(got.value.get("answer") or ""))
        if not question:
            return "", "", "question_empty"
        if not answer and self.slot.qtype != "unanswerable":
            return "", "", "answer_empty"
        zh = self.language() == "zh"
        cjk = len(_CJK.findall(question))
        if (zh and not cjk) or (not zh and cjk > len(question) * 0.3):
            return "", "", "wrong_language"
        if len(question) > (150 if zh else 350):
            return "", "", "question_too_long"
        if copies(evidence, question) or \
                any(len(question) >= 20 and question in normalise_space(d.text) for d in self.slot.docs):
            return "", "", "question_copies_document"
        if self.slot.qtype != "unanswerable":
            # an answer about other matters than its sentences is not supported by its references: all
            # of one or two sentences must be used, two of three or four (an unanswerable question is
            # meant to be left unanswered by its sentence)
            allowed = 0 if len(evidence) <= 2 else len(evidence) - 2
            subjects = " ".join(d.subject for d in self.slot.docs)
            if unused(evidence, f"{question} {answer}", subjects) > allowed:
                return "", "", "evidence_unused"
        if asked(question) in self.written:
            return "", "", "duplicate_question"
        return question, answer, None

    def _reject(self, stage: str, reason: str, problem: str | None, raws: Sequence[str], attempt: int,
                evidence: Sequence[Sentence]) -> None:
        """Keep a rejected answer: why, the parse problem when it could not be read, every output."""
        self.rejected.append({"query_type": self.slot.qtype, "doc_ids": [d.id for d in self.slot.docs],
                              "stage": stage, "attempt": attempt + 1, "reason": reason,
                              "problem": problem, "raw": list(raws), "evidence": [s.text for s in evidence]})

    def _verbatim(self, evidence: Sequence[Sentence]) -> list[str]:
        kept: list[str] = []
        for sentence in evidence:
            doc = self.slot.docs[sentence.doc]
            span = locate(sentence.text, doc.text)
            if span is None:
                self.drops["reference_not_verbatim"] += 1
                continue
            if len(normalise_space(span)) < self.options.min_reference_chars.get(doc.language, 8):
                self.drops["reference_too_short"] += 1
                continue
            if span not in kept:
                kept.append(span)
        return kept

    def _row(self, question: str, answer: str, references: list[str], keypoints: list[str],
             doc_ids: list[str], language: str) -> dict[str, Any]:
        digest = hashlib.sha1(json.dumps([self.slot.qtype, doc_ids, normalise_space(question)],
                                         ensure_ascii=False).encode()).hexdigest()[:12]
        return {"id": f"{self.slot.qtype}-{digest}", "question": question, "ground_truth": answer,
                "reference_contexts": references, "keypoints": keypoints, "language": language,
                "query_type": self.slot.qtype, "doc_ids": doc_ids}

    def _done(self, row: dict[str, Any] | None) -> Score:
        return Score(1.0 if row else 0.0, metadata={"rows": [row] if row else [], "drops": dict(self.drops),
                                                    "rejected": self.rejected})


# --------------------------------------------------------------------------------- synthesis
def _rule_values(index: int, seed: int, language: str) -> str:
    """Rule-based configuration values (RAGEval: dates and categories by program, not by the LLM)."""
    rng = random.Random(f"{seed}:{index}")
    year = rng.randint(2015, 2023)
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    later = rng.randint(2, 10)
    amount = rng.randint(12, 980)
    if language == "zh":
        return (f"主要日期 {year}年{month}月{day}日；后续事件在其后 {later} 个月；"
                f"一个关键金额 {amount} 万元；文档编号 {index + 1}")
    return (f"main date {year}-{month:02d}-{day:02d}; a follow-up event {later} months later; "
            f"a key amount of {amount} thousand; document number {index + 1}")


def synth_step(index: int, seeds: list[SourceDoc], language: str, kind: str, options: GenerateOptions,
               settings: EvalSettings) -> Generator[Any, Any, Score]:
    """A new document from the seeds' schema: configuration first, then the text."""
    schema = yield from schema_step(seeds, language, options, settings)
    try:
        got = yield from ask_json(JsonAsk(TS_SYNTH_CONFIG, language, {
            "schema": schema or "-", "fixed": _rule_values(index, options.seed, language)}), settings)
    except UnreadableAnswer as failure:
        return Score.unscored(reasons.SYNTHETIC_CONFIG_UNPARSEABLE, failure.explanation)
    facts = _clean_facts(got.value)
    if not facts:
        return Score.unscored(reasons.SYNTHETIC_CONFIG_EMPTY, "the judge wrote no fact")
    outputs = yield Generate(prompt=TS_SYNTH_DOC.render(language, kind=kind or "document",
                                                        facts=_facts_text(facts)),
                             sampling=Sampling(max_tokens=options.doc_max_tokens))
    text = (outputs[0] if outputs else "").strip()
    if len(text) < 200:
        return Score.unscored(reasons.SYNTHETIC_DOCUMENT_TOO_SHORT, f"{len(text)} characters")
    return Score(1.0, metadata={"doc": {"id": f"synthetic-{index + 1}", "text": text, "language": language,
                                        "kind": kind, "facts": facts}})


# --------------------------------------------------------------------------------- driver
def _seeds_by_language(docs: Sequence[SourceDoc], options: GenerateOptions) -> dict[str, list[SourceDoc]]:
    out: dict[str, list[SourceDoc]] = {}
    for doc in docs:
        out.setdefault(doc.language, []).append(doc)
    return {lang: group[: options.schema_docs] for lang, group in out.items()}


def generate_testset(docs: Sequence[SourceDoc], engine: Engine, options: GenerateOptions, *,
                     on_row: Callable[[dict[str, Any]], None] | None = None,
                     on_task: Callable[[], None] | None = None,
                     on_plan: Callable[[int], None] | None = None) -> GenerationResult:
    """Run the pipeline; ``on_row`` receives each row as soon as its slot finishes."""
    options.fit_context()
    settings = EvalSettings(verdicts="generate", max_tokens=options.max_tokens)
    drops: Counter = Counter()
    messages: list[str] = []
    docs = [d for d in docs if d.text.strip()]
    if options.synthesize_docs:
        seeds = _seeds_by_language(docs, options)
        count = options.num_docs or max(2, len(docs))
        languages = [options.language] if options.language else sorted(seeds)
        tasks = []
        for i in range(count):
            lang = languages[i % len(languages)]
            group = seeds.get(lang) or next(iter(seeds.values()))
            kind = group[0].kind
            tasks.append(Task(key=("doc", i), generator=synth_step(i, group, lang, kind, options, settings)))
        synthetic = []
        for task in engine.run(tasks):
            result = as_score(task.result)
            if result.value is None:
                drops[result.reason] += 1
                continue
            d = result.metadata["doc"]
            synthetic.append(SourceDoc(d["id"], d["text"], d["language"], d["kind"], d["facts"]))
        messages.append(f"synthesised {len(synthetic)} of {count} documents")
        docs = synthetic
    slots, plan_messages = plan_slots(docs, options)
    messages.extend(plan_messages)
    if on_plan:
        on_plan(len(slots))
    rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    written: set[str] = set()

    def done(task: Task) -> None:
        result = as_score(task.result)
        if result.value is None:  # only an exception in a stage gets here
            drops[result.reason or "error"] += 1
        else:
            drops.update(result.metadata.get("drops", {}))
            rejected.extend(result.metadata.get("rejected", []))
            for row in result.metadata.get("rows", []):
                rows.append(row)
                if on_row:
                    on_row(row)
        if on_task:
            on_task()

    engine.run([Task(key=i, generator=SlotTask(slot, options, settings, written).run())
                for i, slot in enumerate(slots)], on_done=done)
    return GenerationResult(rows, drops, messages, list(docs), engine.stats.to_dict(), rejected)


def source_docs(documents: Sequence[Any]) -> list[SourceDoc]:
    """SourceDocs from corpus documents (``id``, ``text``, ``metadata``); the language is the row's
    ``language`` field, else detected from the text; the title its first of ``title``, ``name``,
    ``company_name``, ``court_name``, ``hospital_patient_name``, ``subject``."""
    out = []
    for d in documents:
        meta = getattr(d, "metadata", {}) or {}
        lang = meta.get("language")
        lang = normalize_language(str(lang)) if lang else detect_language(d.text[:2000])
        kind = str(meta.get("domain") or meta.get("kind") or meta.get("type") or "")
        title = next((str(meta[k]).strip() for k in _TITLE_FIELDS if str(meta.get(k) or "").strip()), "")
        out.append(SourceDoc(str(d.id), d.text, lang, kind, title=title))
    return out
