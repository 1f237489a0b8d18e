"""Token-budget chunking with sentence-aware boundaries, for English and Chinese.

A *token* here is what :func:`token_spans` finds: a run of letters/digits (a word), one CJK character,
or one punctuation mark. That is close to what subword tokenizers produce for English (about 1.2
tokens a word) and exactly one per Chinese character, with no model and no download.

Chunks are packed greedily from whole sentences until the next one would pass ``chunk_size`` tokens;
a sentence longer than the budget is cut at token boundaries. With ``overlap`` > 0 a new chunk starts
with the trailing whole sentences of the previous one that fit in ``overlap`` tokens. A chunk's text is
exactly ``document.text[start:end]``, so offsets are exact and reference sentences copied from a
document occur verbatim in the chunk that holds them.

Sentences come from the project's shared splitter (pysbd rules for English, 。！？ and line breaks for
Chinese — the one the RAGEval recall/EIR metrics use, so a chunk boundary never cuts a sentence the
metric looks for), with a fast regex splitter (:func:`sentence_spans`) as fallback and for scale tests.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from offline_eval.retrieval.corpus import Document

_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK_CLASS}]|[^\W{_CJK_CLASS}]+|[^\w\s]")

# English: a terminator (optionally followed by closing quotes/brackets), then whitespace.
_EN_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)")
# Chinese: full-width terminators end a sentence wherever they are (closing quotes stay with it).
_ZH_END = re.compile(r"[。！？!?；;…]+[\u201d\u2019\"'）)」』]*")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st no vs etc inc ltd co corp jan feb mar apr jun jul aug sep sept oct "
    "nov dec e.g i.e u.s u.k fig al approx dept est govt mt rev gen col".split()
)


@dataclass
class Chunk:
    """A piece of one document: ``text == document.text[start:end]``."""

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    n_tokens: int
    position: int  # 0-based index of this chunk within its document
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "doc_id": self.doc_id, "start": self.start, "end": self.end,
                "n_tokens": self.n_tokens, "position": self.position, "text": self.text}


def token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every token: words, single CJK characters, single punctuation marks."""
    return [m.span() for m in _TOKEN.finditer(text)]


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` as :func:`token_spans` counts them."""
    return sum(1 for _ in _TOKEN.finditer(text))


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the '.' at ``dot`` ends a known abbreviation or a single initial ("J. Smith")."""
    word_start = dot
    while word_start > 0 and (text[word_start - 1].isalpha() or text[word_start - 1] == "."):
        word_start -= 1
    word = text[word_start:dot].lower().rstrip(".")
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, without surrounding whitespace.

    Boundaries: line breaks; 。！？；… (and their closing quotes) anywhere; ``.!?`` followed by
    whitespace in English, unless the dot ends a known abbreviation or an initial, or the next word
    starts in lower case.
    """
    cuts: set[int] = set()
    for m in _ZH_END.finditer(text):
        cuts.add(m.end())
    for m in _EN_END.finditer(text):
        end = m.end()
        if text[m.start()] == "." and m.group().count(".") == 1 and _is_abbreviation(text, m.start()):
            continue
        nxt = end
        while nxt < len(text) and text[nxt].isspace():
            nxt += 1
        if nxt < len(text) and text[nxt].islower():
            continue
        cuts.add(end)
    for m in re.finditer(r"\n", text):
        cuts.add(m.start())
        cuts.add(m.end())
    spans: list[tuple[int, int]] = []
    prev = 0
    for cut in sorted(cuts) + [len(text)]:
        if cut <= prev:
            continue
        start, end = prev, cut
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
        prev = cut
    return spans


SentenceSplitter = Callable[[str], list[tuple[int, int]]]


def _split_lines(text: str, span: tuple[int, int]) -> list[tuple[int, int]]:
    out = []
    pos = span[0]
    for line in text[span[0]:span[1]].split("\n"):
        start, end = pos, pos + len(line)
        pos = end + 1
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def shared_sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans from the project's splitter (:func:`offline_eval.text.split_sentences`, the
    one the RAGEval metrics use), located in ``text`` and cut at line breaks as well.

    Falls back to :func:`sentence_spans` when the shared splitter is unavailable or returns
    sentences that cannot be found verbatim in order.
    """
    try:
        from offline_eval.text import split_sentences

        sentences = split_sentences(text)
    except (ImportError, NotImplementedError):
        return sentence_spans(text)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in sentences:
        found = text.find(sentence, cursor)
        if found < 0:
            return sentence_spans(text)
        spans.extend(_split_lines(text, (found, found + len(sentence))))
        cursor = found + len(sentence)
    return spans


def _split_long(text: str, span: tuple[int, int], size: int) -> list[tuple[int, int, int]]:
    """Cut one over-long sentence into pieces of at most ``size`` tokens: (start, end, n_tokens)."""
    start, end = span
    toks = [(s + start, e + start) for s, e in token_spans(text[start:end])]
    if not toks:
        return [(start, end, 0)]
    pieces = []
    for i in range(0, len(toks), size):
        group = toks[i:i + size]
        pieces.append((group[0][0], group[-1][1], len(group)))
    return pieces


def chunk_text(text: str, chunk_size: int, overlap: int = 0,
               splitter: SentenceSplitter = shared_sentence_spans) -> list[tuple[int, int, int]]:
    """(start, end, n_tokens) of each chunk of ``text``; see the module docstring for the rules."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if overlap < 0 or overlap >= chunk_size:
        raise ValueError("chunk overlap must be >= 0 and smaller than the chunk size")
    units: list[tuple[int, int, int]] = []
    for span in splitter(text):
        n = count_tokens(text[span[0]:span[1]])
        if n > chunk_size:
            units.extend(_split_long(text, span, chunk_size))
        elif n > 0:
            units.append((span[0], span[1], n))
    chunks: list[tuple[int, int, int]] = []
    current: list[tuple[int, int, int]] = []
    total = 0
    fresh = 0  # units in ``current`` that are not overlap carried from the previous chunk
    for unit in units:
        if current and total + unit[2] > chunk_size:
            if fresh:
                chunks.append((current[0][0], current[-1][1], total))
            carried: list[tuple[int, int, int]] = []
            carried_tokens = 0
            if overlap:
                for prev in reversed(current):
                    if carried_tokens + prev[2] > overlap:
                        break
                    carried.insert(0, prev)
                    carried_tokens += prev[2]
            while carried and carried_tokens + unit[2] > chunk_size:
                carried_tokens -= carried.pop(0)[2]
            current, total, fresh = carried, carried_tokens, 0
        current.append(unit)
        total += unit[2]
        fresh += 1
    if current and fresh:
        chunks.append((current[0][0], current[-1][1], total))
    return chunks


def chunk_documents(docs: Sequence[Document], chunk_size: int, overlap: int = 0, *,
                    splitter: SentenceSplitter = shared_sentence_spans) -> list[Chunk]:
    """Chunks of every document, in corpus order; ids are ``"{doc_id}#{position}"``."""
    out: list[Chunk] = []
    for doc in docs:
        for pos, (start, end, n) in enumerate(chunk_text(doc.text, chunk_size, overlap, splitter)):
            out.append(Chunk(f"{doc.id}#{pos}", doc.id, doc.text[start:end], start, end, n, pos,
                             doc.metadata))
    return out


def chunks_fingerprint(chunks: Iterable[Chunk], extra: str = "") -> str:
    """SHA-256 over chunk ids and texts (plus ``extra``, e.g. the indexing template)."""
    digest = hashlib.sha256(extra.encode("utf-8"))
    for chunk in chunks:
        digest.update(chunk.id.encode("utf-8"))
        digest.update(b"\x00")
        digest.update(chunk.text.encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()
