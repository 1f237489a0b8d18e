"""Language detection, sentence splitting and tokenisation for English and Chinese, and the shapes
written into a text that are not sentences of its prose: markdown tables (read row by row) and runs of
Chinese sentences inside English.

Shared by the generation metrics, the RAGEval retrieval metrics and the retriever benchmark, so a
sentence means the same thing everywhere.

The rules follow the RAGEval reference implementation (OpenBMB/RAGEval,
``rageval/evaluation/metrics/rag_metrics/retrieval/utils.py``) exactly, because the RAGEval
retrieval metrics (recall, precision, EIR) are defined in terms of these sentences:

* English: ``pysbd.Segmenter(language="en", clean=False)`` (the reference's default segmenter);
* Chinese: ``re.split(r'(?<=[。！？])\\s*|\\n', text)``, i.e. after 。！？ and at newlines;
* every sentence is whitespace-stripped and empty ones are dropped.

pysbd's time grows with the square of the text's length (see :data:`PYSBD_WHOLE_CHARS`), so an English
text longer than that is segmented in bounded pieces (:func:`_segment_in_pieces`): identical on every
text of the parity fixtures, linear on a context of megabytes.

ROUGE-L tokenisation follows the scorer that produced the reference values: ``rouge_chinese``'s
(whitespace tokens, over jieba tokens for Chinese); see :func:`rouge_sentences`.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")

# The reference's Chinese sentence boundary: after 。！？ (eating following whitespace) or a newline.
_ZH_SPLIT = re.compile(r"(?<=[。！？])\s*|\n")

# rouge_chinese's ``Rouge.cut_sent`` rules, verbatim.
_CUT_SENT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile("([。！？\\?])([^”’])"), "\\1\\n\\2"),
    (re.compile("(\\.{6})([^”’])"), "\\1\\n\\2"),
    (re.compile("(\\…{2})([^”’])"), "\\1\\n\\2"),
    (re.compile("([。！？\\?][”’])([^，。！？\\?])"), "\\1\\n\\2"),
)

# pysbd is quadratic in the length of the text it segments, for two reasons: its numbered-list rule
# (``ListItemReplacer.scan_lists``) rewrites the whole text once per list item found anywhere in it
# (``Doc 1.``, ``2.``...), and its span matching (``Segmenter.sentences_with_char_spans``) searches
# every sentence from the start of the text, so a long context would take hours. Texts up to
# PYSBD_WHOLE_CHARS (more than every text of the parity fixtures: RAGEval's at most 3.8k, DragonBall's
# documents at most 16k) are segmented whole, exactly as the reference does; a longer one
# PYSBD_PIECE_CHARS new characters at a time (see _segment_in_pieces). Within a piece the list rule is
# still quadratic, so smaller pieces win on list-heavy text and lose on prose to pysbd's cost per
# call; the piece size is the fastest of those tried (docs/verification.md, "Where it is verified").
PYSBD_WHOLE_CHARS = 20_000
PYSBD_PIECE_CHARS = 2_000
# A piece is grown (doubled) up to this size while pysbd finds too few sentences in it; a text with
# no boundary in this many characters is cut at the last whitespace before it.
PYSBD_MAX_PIECE_CHARS = 8 * PYSBD_PIECE_CHARS
# Whole sentences read again before the new text of a piece, so that its first boundaries are read
# after text as in the whole text (pysbd reads a ``1.`` at the start of a text otherwise than after
# ``... grew. ``).
_CONTEXT_SENTENCES = 2

_segmenter_lock = threading.RLock()
_segmenter: Any = None
_span_segmenter: Any = None
_jieba_lock = threading.Lock()
_jieba: Any = None


def detect_language(text: str) -> str:
    """'zh' when CJK characters make up a fair share of the letters, else 'en'."""
    cjk = len(_CJK.findall(text or ""))
    latin = len(_LATIN.findall(text or ""))
    if cjk == 0:
        return "en"
    # A Chinese character carries about as much as an English word (~4-5 letters).
    return "zh" if cjk * 4 >= latin else "en"


# A sentence of either script, its end included: up to 。！？ or . ! ? (with any run of them), a line's end
# or the text's.
_ANY_SENTENCE = re.compile(r"[^。！？.!?\n]*(?:[。！？.!?]+|\n|$)")
_ZH_STOP = re.compile(r"[。！？]")


def chinese_runs(text: str) -> list[tuple[int, int]]:
    """The spans of the runs of Chinese sentences written into ``text`` (each sentence read by
    :func:`detect_language`; a piece without letters, such as "0 " of "1.0", joins the run it is in),
    where the text also holds a sentence that is not Chinese. A run holds a sentence that a Chinese full
    stop, 。！？, ends: a menu's "中文 - Chinese" or a name between English sentences is none. Whitespace
    around a run is left out."""
    if not _CJK.search(text):  # the common case, on every chunk of every English row: nothing to read
        return []
    runs: list[list[int]] = []
    other, last = False, None  # whether a non-Chinese sentence was seen; the language of the last sentence
    for m in _ANY_SENTENCE.finditer(text):
        piece = m.group(0)
        if not (_CJK.search(piece) or _LATIN.search(piece)):
            continue
        language = detect_language(piece)
        if language == "zh":
            if last == "zh":
                runs[-1][1] = m.end()
            else:
                runs.append([m.start(), m.end()])
        else:
            other = True
        last = language
    if not other:
        return []
    spans = []
    for start, end in runs:
        run = text[start:end]
        if _ZH_STOP.search(run):
            spans.append((start + len(run) - len(run.lstrip()), end - len(run) + len(run.rstrip())))
    return spans


def counted(n: int, noun: str) -> str:
    """``n`` and its noun, for a message: "1 label", "3 labels"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


# A Chinese sentence that ends a sentence of English text: after the English (no CJK character in it),
# from a CJK character up to 。！？ at the very end.
_CHINESE_TAIL = re.compile(r"(?<=[^\s\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])\s*"
                           r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff][^.!?]*[。！？]+)\s*$")


def chinese_tail(sentence: str) -> tuple[str, str] | None:
    """``sentence`` cut where a Chinese sentence follows English text with no full stop between them (an
    English answer of a few words, "Tampa Bay Buccaneers", with a Chinese sentence written after it): the
    English head and the Chinese sentence; None when it holds none, or its head holds Chinese too. Two
    scripts are two sentences, as English sentences after a Chinese one are (:func:`chinese_runs`)."""
    m = _CHINESE_TAIL.search(sentence)
    if m is None or _CJK.search(sentence[:m.start()]) or not _LATIN.search(sentence[:m.start()]):
        return None
    tail = m.group(1)
    return (sentence[:m.start()].strip(), tail) if detect_language(tail) == "zh" else None


def first_language(*texts: str | None) -> str:
    """The language (:func:`detect_language`) of the first of ``texts`` that holds a letter, Latin or
    Chinese; 'en' when none does."""
    for text in texts:
        if text and (_CJK.search(text) or _LATIN.search(text)):
            return detect_language(text)
    return "en"


# The names a language tag may give each language, after case and spaces are set aside and "_" read
# as "-"; besides these, any tag of a region or script of one (en-US, zh-CN, zh_Hans) is that language.
LANGUAGE_NAMES = {
    "en": ("en", "eng", "english", "英文", "英语"),
    "zh": ("zh", "zho", "chi", "cn", "chinese", "中文", "汉语", "漢語", "简体中文", "繁體中文"),
}
ACCEPTED_LANGUAGES = "en (also english, en-US, en_GB) or zh (also chinese, 中文, zh-CN, zh_cn, zh-Hant)"


def normalize_language(language: str | None, text: str = "") -> str:
    """Map a language tag to 'zh' or 'en'; ``None``/blank detects it from ``text``. The one reading of
    a row's ``language`` field: a row's prompts (``EvalSettings.language_for``) and sentence rules read it
    with it, so no two parts of a run can read one tag as two languages.

    Case, spaces and ``_`` against ``-`` are set aside: ``zh``, ``ZH``, `` zh``, ``zh-CN``, ``zh_cn``,
    ``chinese``, ``中文`` are Chinese, ``en``, ``en-US``, ``English`` English (:func:`language_code`).
    Another tag is read as English, the reference's only other language (a run says so:
    ``other_languages`` in the data reader).
    """
    if not language or not language.strip():
        return detect_language(text)
    return language_code(language) or "en"


def language_code(language: str) -> str | None:
    """'en' or 'zh' for a tag that names one (:data:`LANGUAGE_NAMES`, a region or script of one), else
    None: a language the prompts do not speak."""
    tag = "".join(language.split()).lower().replace("_", "-")
    for code, names in LANGUAGE_NAMES.items():
        if tag in names or tag.startswith(code + "-"):
            return code
    return None


def _get_segmenter() -> Any:
    """The shared English pysbd segmenter (built once; pysbd's import and setup are slow)."""
    global _segmenter
    if _segmenter is None:
        with _segmenter_lock:
            if _segmenter is None:
                import pysbd

                _segmenter = pysbd.Segmenter(language="en", clean=False)
    return _segmenter


def _get_span_segmenter() -> Any:
    """The same segmenter returning ``TextSpan``s (``char_span=True``): the same sentences, with
    their offsets in the text, which :func:`_segment_in_pieces` resumes from."""
    global _span_segmenter
    if _span_segmenter is None:
        with _segmenter_lock:
            if _span_segmenter is None:
                import pysbd

                _span_segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return _span_segmenter


def _segment_english(text: str) -> list[str]:
    """pysbd's sentences of ``text``: of the whole text up to :data:`PYSBD_WHOLE_CHARS`, else
    piece by piece."""
    if len(text) > PYSBD_WHOLE_CHARS:
        return _segment_in_pieces(text)
    segmenter = _get_segmenter()
    with _segmenter_lock:  # pysbd keeps per-call state on the segmenter instance
        return segmenter.segment(text)


def _segment_in_pieces(text: str, piece: int = PYSBD_PIECE_CHARS,
                       max_piece: int = PYSBD_MAX_PIECE_CHARS) -> list[str]:
    """pysbd's sentences of a long ``text``, segmented about ``piece`` new characters at a time.

    A boundary is taken from a piece only where whole sentences of the piece lie on both sides of
    it: the piece's last sentence (which its end may have cut) and the one before it (whose end that
    cut may have moved) are handed on to the next piece, which starts ``_CONTEXT_SENTENCES``
    sentences before them, so that they too are read after text as in the whole text. Where the
    next piece finds no boundary where the sentences handed on start, it starts there instead.
    pysbd's rules read a few characters around a boundary, except its list rules, which read the
    whole text they are given (a ``2.`` where a sentence would end is a list number when items 1, 2
    or 2, 3 are found anywhere in it): here "anywhere" is the piece, not a whole megabyte-long
    context. A piece with fewer than three new sentences is doubled, up to ``max_piece``; a run of
    that many characters without a boundary is cut at its last whitespace.
    """
    segmenter = _get_span_segmenter()

    def spans(start: int, end: int) -> list[tuple[str, int]]:
        """(sentence, absolute start) of pysbd's sentences of ``text[start:end]``."""
        with _segmenter_lock:  # per piece, so other threads' short texts are not held up
            return [(span.sent, start + span.start) for span in segmenter.segment(text[start:end])]

    out: list[str] = []
    n = len(text)
    context, keep = 0, 0  # a piece starts at ``context``; its sentences from ``keep`` on are new
    while keep < n:
        size = piece
        while True:
            end = min(keep + size, n)
            found = spans(context, end)
            new = next((i for i, (_, at) in enumerate(found) if at >= keep), len(found))
            if context < keep and (new == len(found) or found[new][1] != keep):
                # no boundary where the last piece handed on: read on from there without context
                context = keep
                continue
            fresh = found[new:]
            if end >= n:
                out.extend(sentence for sentence, _ in fresh)
                return out
            if len(fresh) >= 3 and fresh[-2][1] > keep:
                out.extend(sentence for sentence, _ in fresh[:-2])
                keep = fresh[-2][1]
                context = found[max(0, len(found) - 2 - _CONTEXT_SENTENCES)][1]
                break
            if size >= max_piece:
                cut = max((i for i in (text.rfind(" ", keep, end), text.rfind("\n", keep, end)) if i > keep),
                          default=end)
                out.extend(sentence for sentence, _ in spans(keep, cut))
                context = keep = cut
                break
            size *= 2
    return out


def _split(text: str, language: str) -> tuple[str, ...]:
    pieces = _ZH_SPLIT.split(text) if language == "zh" else _segment_english(text)
    return tuple(s.strip() for s in pieces if s.strip())


# A text is split once however many metrics read it. Long texts have a cache of their own, a few
# entries deep, so that a dataset of megabyte-long contexts does not keep each of them (and its
# sentences) for the rest of the run.
_split_cached = lru_cache(maxsize=65536)(_split)
_split_long_cached = lru_cache(maxsize=4)(_split)


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """Sentences of ``text``: pysbd rules for English; after 。！？ and newlines for Chinese.

    ``language=None`` detects the language. Sentences are whitespace-stripped and never empty;
    empty or whitespace-only input gives ``[]``. Time is linear in the length of ``text`` (an English
    text over :data:`PYSBD_WHOLE_CHARS` characters is segmented in pieces: :func:`_segment_in_pieces`).
    """
    if not text or not text.strip():
        return []
    split = _split_long_cached if len(text) > PYSBD_WHOLE_CHARS else _split_cached
    return list(split(text, normalize_language(language, text)))


# A markdown table: a line of cells, its rule ("|---|:---:|") and the rows after it.
_TABLE = re.compile(r"^[ \t]*\|.*\|[ \t]*\n[ \t]*\|?[ \t]*:?-{3,}[ \t:|-]*\n(?:[ \t]*\|.*(?:\n|$))*", re.MULTILINE)


def markdown_tables(text: str) -> list[tuple[int, int]]:
    """The spans of the markdown tables written out in ``text``: a line of cells, its rule line and the
    rows after it."""
    return [m.span() for m in _TABLE.finditer(text)]


def _cells(line: str) -> list[str]:
    line = line.strip()
    return [cell.strip() for cell in line[line.startswith("|"):len(line) - line.endswith("|")].split("|")]


def table_rows(table: str, language: str) -> list[str]:
    """Each row of a markdown ``table`` as a sentence of its own, its cells named by the header's
    ("Name: Ada; Born: 1815"): a row read without its header is a fragment ("| Ada | 1815 |"), and the
    header and the rule line state nothing. Empty cells are dropped; a row with none left is none."""
    lines = [line for line in table.strip().splitlines() if line.strip()]
    header = _cells(lines[0]) if lines else []
    named, joined = ("：", "；") if language == "zh" else (": ", "; ")
    rows = []
    for line in lines[2:]:
        cells = _cells(line)
        pairs = [f"{header[i]}{named}{cell}" if i < len(header) and header[i] else cell
                 for i, cell in enumerate(cells) if cell]
        if pairs:
            rows.append(joined.join(pairs))
    return rows


def count_units(text: str, language: str | None = None) -> int:
    """Length of ``text`` as the RAGEval EIR counts it.

    Chinese: every character of the string (``len(text)``, punctuation and spaces included, as the
    reference does). English: whitespace-separated words (``len(text.split())``).
    """
    if not text:
        return 0
    if normalize_language(language, text) == "zh":
        return len(text)
    return len(text.split())


def _get_jieba() -> Any:
    """jieba, imported lazily and quietly (its dictionary load takes about a second)."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import logging

                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def jieba_tokens(text: str) -> list[str]:
    """jieba's default (accurate mode, HMM on) segmentation of ``text``."""
    if not text:
        return []
    return list(_get_jieba().cut(text))


def _cut_sent(para: str) -> list[str]:
    """rouge_chinese's sentence cut: newline after 。！？? / ...... / …… (not before a quote)."""
    for pattern, repl in _CUT_SENT_RULES:
        para = pattern.sub(repl, para)
    return para.rstrip().split("\n")


def rouge_sentences(text: str, language: str | None = None) -> list[list[str]]:
    """The sentences-of-tokens that the reference ROUGE-L scorer compares.

    This is ``rouge_chinese``'s preprocessing, which is what produced the RAGEval reference values
    for both languages: for Chinese the text is first cut into jieba tokens joined by spaces (as
    RAGEval does before scoring), for English the raw text is used. Then sentences are cut with
    ``cut_sent`` (after 。！？?, ``......``, ``……``), zero-length pieces are dropped, whitespace is
    collapsed and each piece is split on single spaces. Like the original, a whitespace-only piece
    yields a sentence holding the single token ``""``; English tokens keep their punctuation
    (``"2021."`` differs from ``"2021"``).
    """
    if not text:
        return []
    if normalize_language(language, text) == "zh":
        text = " ".join(jieba_tokens(text))
    return [" ".join(p.split()).split(" ") for p in _cut_sent(text) if len(p) > 0]
