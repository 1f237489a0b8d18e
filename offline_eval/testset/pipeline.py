"""The test-set generation pipeline, as engine tasks.

One task per *slot*: a question type, the document(s) it is asked about and how many questions to
ask. Every task walks the same stages, so the engine batches each stage across all slots:

1. schema of the documents' kind, summarised from a few of them (one request, shared by all tasks);
2. configuration (key facts) of each document of the slot (shared by every slot of that document);
3. questions and draft answers of the slot's type, from the configuration and the document text;
4. references: the judge copies the supporting sentences; each is checked to occur verbatim in a
   document of the slot (whitespace aside) and dropped otherwise; a question left without a
   reference is dropped;
5. the answer refined against its references;
6. key points of the refined answer.

Unanswerable questions skip 4-6: their answer is "Unable to answer" and their single key point too.
With ``synthesize_docs`` a first pass writes new documents from the schema (configurations with
rule-based dates and numbers, free text by the judge) and the pipeline runs on those.

Nothing a small model writes can crash it: every unreadable or unusable answer is dropped and
counted under a reason.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.requests import Generate, Sampling
from offline_eval.metrics.base import Score
from offline_eval.metrics.judging import JsonAsk, ask_json, ask_json_many, parallel
from offline_eval.metrics.keypoints import clean_keypoints
from offline_eval.metrics.settings import EvalSettings
from offline_eval.prompts.rageval import (
    KEYPOINTS, TS_CONFIG, TS_QUESTIONS, TS_REFERENCES, TS_REFINE, TS_SCHEMA, TS_SYNTH_CONFIG, TS_SYNTH_DOC,
    TYPE_INSTRUCTIONS, UNABLE, UNABLE_ANSWER,
)
from offline_eval.testset import QUESTION_TYPES
from offline_eval.testset.verbatim import locate, normalise_space
from offline_eval.text import detect_language, normalize_language

PAIR_TYPES = frozenset({"multi_doc"})  # need two documents
PAIR_PREFERRED = frozenset({"numeric", "temporal"})  # two documents when there are, else within one


@dataclass
class SourceDoc:
    """A document questions are asked about."""

    id: str
    text: str
    language: str
    kind: str = ""  # e.g. the JSONL's domain; tells the schema and synthetic documents what they are
    facts: list[dict[str, str]] | None = None  # known configuration (synthetic documents)


@dataclass
class GenerateOptions:
    n: int = 100
    types: tuple[str, ...] = QUESTION_TYPES
    language: str | None = None  # force the questions' language; else each document's
    synthesize_docs: bool = False
    num_docs: int | None = None  # synthetic documents to write (default: as many as the seeds, >= 2)
    max_doc_chars: int = 4000  # document text shown per prompt (a window of longer documents)
    schema_docs: int = 3
    schema_doc_chars: int = 1500
    questions_per_call: int = 4
    max_tokens: int = 768
    doc_max_tokens: int = 1024
    seed: int = 0
    min_reference_chars: dict[str, int] = field(default_factory=lambda: {"en": 12, "zh": 6})
    context_tokens: int | None = None  # the judge's context length, when known: prompts are cut to fit

    def fit_context(self) -> None:
        """Shrink the document windows so every prompt fits ``context_tokens`` (a too-long prompt
        fails the backend's whole batch). Counts one token per character, which holds for Chinese and
        over-reserves for English; 900 tokens stay free for instructions and facts."""
        if not self.context_tokens:
            return
        budget = max(300, self.context_tokens - self.max_tokens - 900)
        self.max_doc_chars = min(self.max_doc_chars, budget)
        self.schema_doc_chars = min(self.schema_doc_chars, max(100, budget // max(1, self.schema_docs)))


@dataclass
class Slot:
    qtype: str
    docs: list[SourceDoc]
    count: int
    part: int = 0  # which window of the document(s) this call sees
    parts: int = 1

    @property
    def language(self) -> str:
        return self.docs[0].language


@dataclass
class GenerationResult:
    rows: list[dict[str, Any]]
    drops: Counter
    messages: list[str]
    documents: list[SourceDoc]
    stats: dict[str, Any]


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
    slots: list[Slot] = []
    for t_index, qtype in enumerate(types):
        wanted = per_type[qtype]
        if not wanted:
            continue
        groups = [list(p) for p in pairs] if (qtype in PAIR_TYPES or (qtype in PAIR_PREFERRED and pairs)) \
            else [[d] for d in docs]
        # rotate the starting group per type so few questions still spread over the documents
        groups = groups[t_index % len(groups):] + groups[:t_index % len(groups)]
        counts = [wanted // len(groups) + (1 if i < wanted % len(groups) else 0) for i in range(len(groups))]
        for group, count in zip(groups, counts):
            if not count:
                continue
            parts = -(-count // max(1, options.questions_per_call))
            for part in range(parts):
                share = count // parts + (1 if part < count % parts else 0)
                slots.append(Slot(qtype, group, share, part, parts))
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
    got = yield from ask_json(JsonAsk(TS_SCHEMA, language, {"documents": documents}), settings)
    if got.value is None:
        return ""
    lines = []
    for item in got.value["fields"]:
        name = str(item.get("name", "")).strip()
        if name:
            description = str(item.get("description", "") or "").strip()
            lines.append(f"- {name}: {description}" if description else f"- {name}")
    return "\n".join(lines)


def config_step(doc: SourceDoc, schema: str, language: str, options: GenerateOptions,
                settings: EvalSettings) -> Generator[Any, Any, list[dict[str, str]] | None]:
    """The document's configuration (key facts); None when unreadable."""
    if doc.facts is not None:
        return doc.facts
        yield  # pragma: no cover
    got = yield from ask_json(JsonAsk(TS_CONFIG, language, {
        "schema": schema or "-", "document": window(doc.text, 0, 1, options.max_doc_chars)}), settings)
    return None if got.value is None else _clean_facts(got.value)


class SlotTask:
    """The generator of one slot; returns a Score whose metadata holds the rows and the drops."""

    def __init__(self, slot: Slot, seeds: dict[str, list[SourceDoc]], options: GenerateOptions,
                 settings: EvalSettings) -> None:
        self.slot, self.seeds, self.options, self.settings = slot, seeds, options, settings
        self.drops: Counter = Counter()

    def language(self) -> str:
        return self.options.language or self.slot.language

    def run(self) -> Generator[Any, Any, Score]:
        slot, options, settings, lang = self.slot, self.options, self.settings, self.language()
        schemas = yield from parallel(*[schema_step(self.seeds[d.language], d.language, options, settings)
                                        for d in slot.docs])
        configs = yield from parallel(*[config_step(d, s, d.language, options, settings)
                                        for d, s in zip(slot.docs, schemas)])
        config_failed = [d.id for d, c in zip(slot.docs, configs) if c is None]
        share = max(1, options.max_doc_chars // len(slot.docs))
        if len(slot.docs) == 1:
            facts = _facts_text(configs[0])
            shown = window(slot.docs[0].text, slot.part, slot.parts, share)
        else:
            facts = "\n".join(f"[Document {i + 1}]\n{_facts_text(c)}" for i, c in enumerate(configs))
            shown = "\n\n".join(f"[Document {i + 1}]\n{window(d.text, slot.part, slot.parts, share)}"
                                for i, d in enumerate(slot.docs))
        got = yield from ask_json(JsonAsk(TS_QUESTIONS, lang, {
            "count": slot.count, "instruction": TYPE_INSTRUCTIONS[slot.qtype][TS_QUESTIONS.language_of(lang)],
            "facts": facts, "document": shown}), settings)
        if got.value is None:
            self.drops["questions_unparseable"] += slot.count
            return self._done([], config_failed)
        pairs = self._questions(got.value["questions"])
        if not pairs:
            return self._done([], config_failed)
        if slot.qtype == "unanswerable":
            answer = UNABLE_ANSWER.get(lang, UNABLE_ANSWER["en"])
            return self._done([self._row(q, answer, [], [UNABLE], [d.id for d in slot.docs], lang)
                               for q, _ in pairs], config_failed)

        # references, verbatim-checked
        document = "\n\n".join(f"[Document {i + 1}]\n{window(d.text, slot.part, slot.parts, share)}"
                               for i, d in enumerate(slot.docs)) if len(slot.docs) > 1 else shown
        found = yield from ask_json_many([JsonAsk(TS_REFERENCES, lang, {
            "question": q, "answer": a, "document": document}) for q, a in pairs], settings)
        kept: list[tuple[str, str, list[str]]] = []
        for (q, a), refs in zip(pairs, found):
            if refs.value is None:
                self.drops["references_unparseable"] += 1
                continue
            verbatim = self._verbatim(refs.value["references"])
            if not verbatim:
                self.drops["no_verbatim_reference"] += 1
                continue
            kept.append((q, a, verbatim))
        if not kept:
            return self._done([], config_failed)

        refined = yield from ask_json_many([JsonAsk(TS_REFINE, lang, {
            "question": q, "answer": a, "references": "\n".join(f"- {r}" for r in refs)})
            for q, a, refs in kept], settings)
        answers = []
        for (q, a, refs), got in zip(kept, refined):
            text = str(got.value["answer"]).strip() if got.value is not None else ""
            if not text:
                self.drops["refine_unusable_kept_draft"] += 1  # a note, not a drop: the draft stays
                text = a
            answers.append(text)

        points = yield from ask_json_many([JsonAsk(KEYPOINTS, lang, {
            "question": q, "ground_truth": answer, "max_points": settings.keypoint_max})
            for (q, _, _), answer in zip(kept, answers)], settings)
        rows = []
        for (q, _, refs), answer, got in zip(kept, answers, points):
            if got.value is None:
                self.drops["keypoints_unparseable"] += 1
                continue
            keypoints = clean_keypoints(got.value["keypoints"])[: settings.keypoint_max]
            if not keypoints:
                self.drops["no_keypoints"] += 1
                continue
            rows.append(self._row(q, answer, refs, keypoints, [d.id for d in slot.docs], lang))
        return self._done(rows, config_failed)

    # -- helpers -----------------------------------------------------------------------------
    def _questions(self, items: list[dict[str, Any]]) -> list[tuple[str, str]]:
        seen: set[str] = set()
        out = []
        for item in items:
            question, answer = str(item.get("question", "")).strip(), str(item.get("answer", "")).strip()
            if not question or (not answer and self.slot.qtype != "unanswerable"):
                self.drops["question_or_answer_empty"] += 1
                continue
            key = normalise_space(question).lower()
            if key in seen:
                self.drops["duplicate_question"] += 1
                continue
            seen.add(key)
            out.append((question, answer))
        if len(out) > self.slot.count:
            out = out[: self.slot.count]
        elif len(out) < self.slot.count:
            self.drops["fewer_questions_than_asked"] += self.slot.count - len(out)
        return out

    def _verbatim(self, references: list[str]) -> list[str]:
        kept: list[str] = []
        for reference in references:
            if not isinstance(reference, str) or not reference.strip():
                continue
            span = None
            for doc in self.slot.docs:
                span = locate(reference, doc.text)
                if span is not None:
                    minimum = self.options.min_reference_chars.get(doc.language, 8)
                    break
            if span is None:
                self.drops["reference_not_verbatim"] += 1
                continue
            if len(normalise_space(span)) < minimum:
                self.drops["reference_too_short"] += 1
                continue
            if any(span in k for k in kept):
                continue
            kept = [k for k in kept if k not in span] + [span]
        return kept

    def _row(self, question: str, answer: str, references: list[str], keypoints: list[str],
             doc_ids: list[str], language: str) -> dict[str, Any]:
        digest = hashlib.sha1(json.dumps([self.slot.qtype, doc_ids, normalise_space(question)],
                                         ensure_ascii=False).encode()).hexdigest()[:12]
        return {"id": f"{self.slot.qtype}-{digest}", "question": question, "ground_truth": answer,
                "reference_contexts": references, "keypoints": keypoints, "language": language,
                "query_type": self.slot.qtype, "doc_ids": doc_ids}

    def _done(self, rows: list[dict[str, Any]], config_failed: list[str]) -> Score:
        return Score(float(len(rows)), metadata={"rows": rows, "drops": dict(self.drops),
                                                 "config_failed": config_failed})


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
    got = yield from ask_json(JsonAsk(TS_SYNTH_CONFIG, language, {
        "schema": schema or "-", "fixed": _rule_values(index, options.seed, language)}), settings)
    if got.value is None:
        return Score.unscored("synthetic_config_unparseable", got.problem or "")
    facts = _clean_facts(got.value)
    if not facts:
        return Score.unscored("synthetic_config_empty", "the judge wrote no fact")
    outputs = yield Generate(prompt=TS_SYNTH_DOC.render(language, kind=kind or "document",
                                                        facts=_facts_text(facts)),
                             sampling=Sampling(max_tokens=options.doc_max_tokens))
    text = (outputs[0] if outputs else "").strip()
    if len(text) < 200:
        return Score.unscored("synthetic_document_too_short", f"{len(text)} characters")
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
            if task.result.value is None:
                drops[task.result.reason] += 1
                continue
            d = task.result.metadata["doc"]
            synthetic.append(SourceDoc(d["id"], d["text"], d["language"], d["kind"], d["facts"]))
        messages.append(f"synthesised {len(synthetic)} of {count} documents")
        docs = synthetic
    slots, plan_messages = plan_slots(docs, options)
    messages.extend(plan_messages)
    if on_plan:
        on_plan(len(slots))
    seeds = _seeds_by_language(docs, options)
    rows: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    config_failed: set[str] = set()

    def done(task: Task) -> None:
        result = task.result
        if result.value is None:  # only an exception in a stage gets here
            drops[result.reason or "error"] += 1
        else:
            drops.update(result.metadata.get("drops", {}))
            config_failed.update(result.metadata.get("config_failed", []))
            for row in result.metadata.get("rows", []):
                if row["id"] in seen_ids:
                    drops["duplicate_question"] += 1
                    continue
                seen_ids.add(row["id"])
                rows.append(row)
                if on_row:
                    on_row(row)
        if on_task:
            on_task()

    engine.run([Task(key=i, generator=SlotTask(slot, seeds, options, settings).run())
                for i, slot in enumerate(slots)], on_done=done)
    if config_failed:
        messages.append(f"configuration unreadable for {len(config_failed)} document(s); their questions "
                        "were asked from the text alone")
    return GenerationResult(rows, drops, messages, list(docs), engine.stats.to_dict())


def source_docs(documents: Sequence[Any]) -> list[SourceDoc]:
    """SourceDocs from corpus documents (``id``, ``text``, ``metadata``); the language is the row's
    ``language`` field, else detected from the text."""
    out = []
    for d in documents:
        meta = getattr(d, "metadata", {}) or {}
        lang = meta.get("language")
        lang = normalize_language(str(lang)) if lang else detect_language(d.text[:2000])
        kind = str(meta.get("domain") or meta.get("kind") or meta.get("type") or "")
        out.append(SourceDoc(str(d.id), d.text, lang, kind))
    return out
