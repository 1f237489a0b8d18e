"""Evidence sentences of generated questions, chosen by code from the documents.

Each question of a test set is written by the judge *from* a few sentences that the code picks out
of the document(s) for its type: one sentence with a specific fact (factual), two neighbouring
sentences of one paragraph (multi-hop), three of them (summary), one sentence from each of two
documents (multi-document), two sentences with amounts (numeric) or with dates (temporal), from one
document or one each from two, and one sentence for the subject (unanswerable). The sentences are spans of the document, so the
references of a question are verbatim by construction, and the judge's task is small enough for a
0.5B model: turn two or three sentences into one question and its answer.

Choices are deterministic (seeded by the slot), and every attempt of a slot gets different
sentences, so a rejected question is retried on other evidence.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from offline_eval.retrieval.chunking import sentence_spans

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]+|\d+(?:[.,]\d+)*", re.UNICODE)
_DIGIT = re.compile(r"\d")
_AMOUNT = re.compile(
    r"(?:[$€£¥]\s?\d|\d[\d,.]*\s?(?:%|percent|million|billion|thousand|hundred|dollars?|euros?|yuan|rmb|usd|"
    r"元|万|亿|千|百分|股|人|次|年期)|\d{2,}[,.]\d)", re.I)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"(?:\b(?:1[89]|20)\d\d\b|\b(?:{_MONTHS})\.?\s+\d{{1,2}}\b|(?:1[89]|20)\d\d\s*年|\d{{1,2}}\s*月)", re.I)
_MARKUP = re.compile(r"^\s*(?:[#>*_=|-]|\d+\.\s*\*\*)")
_STOP = frozenset(
    "the a an and or of to in on for at by with from as is was were are be been has have had its it this that these "
    "those which who whom whose their his her they he she we our also into over after before during than then "
    "company inc ltd corp year years".split())
_RANKED = 32  # ranked candidate lists keep this many of their best


@dataclass(frozen=True)
class Sentence:
    doc: int  # index of the document in the slot
    index: int  # position among the document's sentences
    line: int  # line (paragraph) of the document it starts on
    text: str  # the document's own span

    @property
    def has_date(self) -> bool:
        return bool(_DATE.search(self.text))

    @property
    def has_amount(self) -> bool:
        return bool(_AMOUNT.search(self.text))

    @property
    def has_fact(self) -> bool:
        """A number, or names: two capitalised words after the first (English), a Latin name (Chinese)."""
        if _DIGIT.search(self.text):
            return True
        if _CJK.search(self.text):
            return bool(re.search(r"[A-Z]", self.text))
        return sum(1 for w in self.text.split()[1:] if w[:1].isupper()) >= 2


def _usable(text: str) -> bool:
    """A whole sentence of prose: long enough to hold a fact, short enough to quote, not markup."""
    if _MARKUP.match(text) or text.rstrip().endswith(":"):
        return False
    cjk = len(_CJK.findall(text))
    if cjk >= len(text) * 0.3:
        return 15 <= len(text) <= 220
    words = len(text.split())
    return 7 <= words <= 70 and text.rstrip()[-1:] in ".!?\"'”’)"


@lru_cache(maxsize=256)
def _split(text: str) -> tuple[tuple[int, int, str], ...]:
    out = []
    for start, end in sentence_spans(text):
        out.append((text.count("\n", 0, start), start, text[start:end]))
    return tuple(out)


def sentences(text: str, doc: int = 0) -> list[Sentence]:
    """The usable sentences of ``text``, in order."""
    out = []
    for position, (line, _, span) in enumerate(_split(text)):
        if _usable(span):
            out.append(Sentence(doc, position, line, span))
    return out


def terms(text: str) -> set[str]:
    """Content terms: numbers, words of 3+ letters that are not stop words, Chinese character bigrams."""
    chars = _CJK.findall(text)
    out = {a + b for a, b in zip(chars, chars[1:])}
    for w in _WORD.findall(text):
        if w[0].isdigit() or (len(w) > 2 and w.lower() not in _STOP and not _CJK.match(w)):
            out.add(w.lower())
    return out


def unused(evidence: Sequence[Sentence], written: str, ignore: str = "") -> int:
    """How many evidence sentences share no content term with ``written`` (a question and its
    answer). Numbers of one or two digits (days, small counts) match by chance and never count.
    Terms of ``ignore`` (the documents' subjects, named everywhere) count only in a sentence that has
    no other terms: a document without a title takes its first line as its subject, and a question
    about that line can only use its words."""
    named = terms(ignore)
    seen = {t for t in terms(written) if not (t.isdigit() and len(t) <= 2)}
    return sum(1 for s in evidence if not (((terms(s.text) - named) or terms(s.text)) & seen))


def copies(evidence: Sequence[Sentence], question: str, share: float = 0.8) -> bool:
    """Whether ``question`` repeats one of the sentences (``share`` of its terms or more)."""
    asked = terms(question)
    for s in evidence:
        own = terms(s.text)
        if len(own) >= 5 and len(own & asked) >= share * len(own):
            return True
    return False


def _overlap(a: Sentence, b: Sentence) -> int:
    return len(terms(a.text) & terms(b.text))


def _runs(items: list[Sentence], size: int) -> list[list[Sentence]]:
    """Runs of ``size`` consecutive sentences on one line (paragraph); across lines when none."""
    runs = [items[i:i + size] for i in range(len(items) - size + 1) if items[i].doc == items[i + size - 1].doc]
    same_line = [r for r in runs if r[0].line == r[-1].line and r[-1].index - r[0].index == size - 1]
    return same_line or [r for r in runs if r[-1].index - r[0].index <= size]


def _two(items: list[Sentence], feature: str) -> list[list[Sentence]]:
    """Pairs of sentences that both have ``feature`` (dates or amounts), with different texts."""
    chosen = [s for s in items if getattr(s, feature)]
    pairs = [[a, b] for i, a in enumerate(chosen) for b in chosen[i + 1:] if a.text != b.text]
    # nearer pairs first: they tend to be about the same topic, which makes a sensible comparison
    pairs.sort(key=lambda p: (p[1].index - p[0].index, p[0].index))
    return pairs[:_RANKED]


def _across(per_doc: list[list[Sentence]], feature: str = "has_fact") -> list[list[Sentence]]:
    """One sentence with ``feature`` from each of two documents, the most related pairs first."""
    a_side = [s for s in per_doc[0] if getattr(s, feature)][:40]
    b_side = [s for s in per_doc[1] if getattr(s, feature)][:40]
    pairs = [[a, b] for a in a_side for b in b_side]
    pairs.sort(key=lambda p: (-_overlap(p[0], p[1]), p[0].index, p[1].index))
    return pairs[:_RANKED]


def candidates(qtype: str, texts: Sequence[str]) -> list[list[Sentence]]:
    """Every evidence set of ``qtype`` the documents offer, best first (not yet shuffled)."""
    per_doc = [sentences(t, i) for i, t in enumerate(texts)]
    if qtype == "multi_doc":
        return _across(per_doc) if len(per_doc) >= 2 else []
    if len(per_doc) >= 2 and qtype in ("numeric", "temporal"):
        return _across(per_doc, "has_amount" if qtype == "numeric" else "has_date")
    items = [s for group in per_doc for s in group]
    if qtype in ("factual", "unanswerable"):
        return [[s] for s in items if s.has_fact] or [[s] for s in items]
    if qtype == "multi_hop":
        runs = _runs(items, 2)
        return [r for r in runs if r[0].has_fact or r[1].has_fact] or runs
    if qtype == "summary":
        return _runs(items, 3)
    if qtype == "numeric":
        return _two(items, "has_amount") or _two(items, "has_date")
    if qtype == "temporal":
        return _two(items, "has_date")
    raise ValueError(f"unknown question type {qtype!r}")


def pick(qtype: str, texts: Sequence[str], slot: int, attempt: int, attempts: int, seed: int = 0,
         salt: str = "") -> list[Sentence] | None:
    """The evidence of attempt ``attempt`` of the ``slot``-th question of ``qtype`` on these documents.

    Candidates are shuffled once per (type, documents, seed); slot s takes candidates s*attempts,
    s*attempts+1, ... so slots and attempts never share evidence until the candidates run out; past
    that, first attempts wrap around and retries get None. None also when the documents offer no
    evidence of this type.
    """
    found = candidates(qtype, texts)
    position = slot * attempts + attempt
    if not found or (attempt and position >= len(found)):
        return None
    order = list(range(len(found)))
    random.Random(f"{seed}:{qtype}:{salt}").shuffle(order)
    return found[order[position % len(order)]]
