"""Language detection, sentence splitting and tokenisation for English and Chinese.

Shared by the generation metrics, the RAGEval retrieval metrics and the retriever benchmark, so a
sentence means the same thing everywhere.

The rules follow the RAGEval reference implementation (OpenBMB/RAGEval,
``rageval/evaluation/metrics/rag_metrics/retrieval/utils.py``) exactly, because the RAGEval
retrieval metrics (recall, precision, EIR) are defined in terms of these sentences:

* English: ``pysbd.Segmenter(language="en", clean=False)`` (the reference's default segmenter);
* Chinese: ``re.split(r'(?<=[。！？])\\s*|\\n', text)``, i.e. after 。！？ and at newlines;
* every sentence is whitespace-stripped and empty ones are dropped.

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

_segmenter_lock = threading.RLock()
_segmenter: Any = None
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


def normalize_language(language: str | None, text: str = "") -> str:
    """Map a language tag to 'zh' or 'en'; ``None``/empty detects it from ``text``.

    Any tag starting with ``zh`` (``zh``, ``zh-CN``, ``zh_Hans``, ``Chinese``...) is Chinese;
    everything else is treated as English, the reference's only other language.
    """
    if not language:
        return detect_language(text)
    tag = language.strip().lower()
    if tag.startswith("zh") or tag in {"chinese", "cn", "中文"}:
        return "zh"
    return "en"


def _get_segmenter() -> Any:
    """The shared English pysbd segmenter (built once; pysbd's import and setup are slow)."""
    global _segmenter
    if _segmenter is None:
        with _segmenter_lock:
            if _segmenter is None:
                import pysbd

                _segmenter = pysbd.Segmenter(language="en", clean=False)
    return _segmenter


@lru_cache(maxsize=65536)
def _split_cached(text: str, language: str) -> tuple[str, ...]:
    if language == "zh":
        pieces = _ZH_SPLIT.split(text)
    else:
        segmenter = _get_segmenter()
        with _segmenter_lock:  # pysbd keeps per-call state on the segmenter instance
            pieces = segmenter.segment(text)
    return tuple(s.strip() for s in pieces if s.strip())


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """Sentences of ``text``: pysbd rules for English; after 。！？ and newlines for Chinese.

    ``language=None`` detects the language. Sentences are whitespace-stripped and never empty;
    empty or whitespace-only input gives ``[]``.
    """
    if not text or not text.strip():
        return []
    return list(_split_cached(text, normalize_language(language, text)))


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


def tokenize_for_rouge(text: str, language: str | None = None) -> list[str]:
    """Flat token list used for ROUGE: jieba words for Chinese, whitespace words for English.

    Empty-string tokens that the reference scorers keep for whitespace-only pieces are dropped
    here; use :func:`rouge_sentences` for the exact reference structure.
    """
    return [tok for sent in rouge_sentences(text, language) for tok in sent if tok]
