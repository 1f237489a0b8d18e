"""BM25 retriever on :mod:`bm25s`, with English stemming/stop words and jieba for Chinese.

Text is tokenised the same way for chunks and queries, whatever the language: runs of CJK characters
are cut by jieba (precise mode) and Chinese stop words dropped; everything else is lower-cased, split
into ``\\w\\w+`` words (the bm25s default pattern), English stop words dropped and the rest stemmed
with the Snowball English stemmer (PyStemmer). Mixed zh/en text therefore needs no language flag.

The index persists with ``bm25s``' own ``save``/``load`` plus a ``meta.json`` that records the
chunk fingerprint and tokenizer settings; :meth:`BM25Retriever.load` refuses an index built for
other chunks.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Sequence

import numpy as np

TOKENIZER_VERSION = "bm25-en-snowball+zh-jieba/1"
_CJK_RUN = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)")
_WORD = re.compile(r"(?u)\b\w\w+\b")


class Tokenizer:
    """Language-agnostic BM25 tokenizer: jieba for CJK runs, stemmed words without stop words else."""

    def __init__(self, *, stem: bool = True, stopwords: bool = True) -> None:
        from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN

        self.stem = stem
        self._en_stop = frozenset(STOPWORDS_EN) if stopwords else frozenset()
        self._zh_stop = frozenset(STOPWORDS_CHINESE) if stopwords else frozenset()
        self._stemmer = None
        if stem:
            import Stemmer

            self._stemmer = Stemmer.Stemmer("english")
        self._jieba = None
        self._stem_cache: dict[str, str] = {}

    def _cut_chinese(self, run: str) -> list[str]:
        if self._jieba is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            self._jieba = jieba
        return [w for w in self._jieba.lcut(run) if w.strip() and w not in self._zh_stop]

    def _english(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if w not in self._en_stop]
        if self._stemmer is None:
            return words
        cache = self._stem_cache
        missing = [w for w in set(words) if w not in cache]
        if missing:
            cache.update(zip(missing, self._stemmer.stemWords(missing)))
        return [cache[w] for w in words]

    def __call__(self, text: str) -> list[str]:
        if not _CJK_RUN.search(text):
            return self._english(text)
        tokens: list[str] = []
        for i, part in enumerate(_CJK_RUN.split(text)):
            if not part:
                continue
            tokens.extend(self._cut_chinese(part) if i % 2 else self._english(part))
        return tokens

    def settings(self) -> dict:
        return {"version": TOKENIZER_VERSION, "stem": self.stem, "stopwords": bool(self._en_stop)}


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; ties broken by the lower index."""
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]


class BM25Retriever:
    """BM25 (Lucene variant, k1=1.5, b=0.75) over chunk texts."""

    name = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, tokenizer: Tokenizer | None = None) -> None:
        self.k1, self.b = k1, b
        self.tokenizer = tokenizer or Tokenizer()
        self._bm25 = None
        self.fingerprint: str | None = None
        self.n_chunks = 0

    def build(self, texts: Sequence[str], fingerprint: str = "", *, show_progress: bool = False) -> None:
        """Tokenise and index ``texts`` (one per chunk, in chunk order). bm25s's own bars are never
        drawn (``show_progress`` is the benchmark's): four in a row under the benchmark's line, they
        left stale fragments on a terminal and carriage returns in a log, for an index built in seconds."""
        import bm25s

        tokens = [self.tokenizer(t) for t in texts]
        model = bm25s.BM25(k1=self.k1, b=self.b)
        model.index(tokens, show_progress=False)
        self._bm25 = model
        self.fingerprint = fingerprint
        self.n_chunks = len(texts)

    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` (created if needed)."""
        if self._bm25 is None:
            raise RuntimeError("build the index before saving it")
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self._bm25.save(str(out), show_progress=False)
        meta = {"fingerprint": self.fingerprint, "n_chunks": self.n_chunks, "k1": self.k1, "b": self.b,
                "tokenizer": self.tokenizer.settings()}
        (out / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path, fingerprint: str | None = None) -> "BM25Retriever | None":
        """The index saved in ``folder``, or None when absent or built for other chunks/settings."""
        import bm25s

        src = Path(folder)
        try:
            meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if fingerprint is not None and meta.get("fingerprint") != fingerprint:
            return None
        if meta.get("tokenizer", {}).get("version") != TOKENIZER_VERSION:
            return None
        tok = meta["tokenizer"]
        retriever = cls(k1=meta["k1"], b=meta["b"],
                        tokenizer=Tokenizer(stem=tok["stem"], stopwords=tok["stopwords"]))
        retriever._bm25 = bm25s.BM25.load(str(src), show_progress=False)
        retriever.fingerprint = meta.get("fingerprint")
        retriever.n_chunks = int(meta["n_chunks"])
        return retriever

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query`` (zeros when no query term is in the vocabulary)."""
        if self._bm25 is None:
            raise RuntimeError("the BM25 index is not built")
        ids = self._bm25.get_tokens_ids(self.tokenizer(query))
        if not ids:
            return np.zeros(self.n_chunks, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def search(self, queries: Sequence[str], depth: int) -> list[list[tuple[int, float]]]:
        """For each query, the ``depth`` best (chunk index, score) pairs, best first."""
        out = []
        for query in queries:
            s = self.scores(query)
            out.append([(int(i), float(s[i])) for i in top_k_indices(s, depth)])
        return out
