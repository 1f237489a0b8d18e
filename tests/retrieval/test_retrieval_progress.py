"""`offline-eval retrieval` on a terminal and in a log (issue #55): its own lines only, no debug log of
bm25s and no nested bars (their cursor-up escapes), and no carriage return in a log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.retrieval.test_retrieval_bench import _write
from tests.run.test_progress import THIRD_PARTY, _screen


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log"])
def test_retrieval_shows_its_own_progress_only(tiny_profile: Path, tmp_path: Path, terminal: bool) -> None:
    corpus, queries, qrels = _write(tmp_path)
    code, text = _screen(["retrieval", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels),
                          "--retrievers", "bm25,dense,hybrid", "--embedder", str(tiny_profile.parent / "embedder"),
                          "--chunk-size", "40,80", "--top-k", "1,3", "--output", str(tmp_path / "o")],
                         tmp_path, terminal=terminal)
    assert code == 0, text[-3000:]
    assert [t for t in THIRD_PARTY if t in text] == [], text[:3000]
    assert "chunk size 40 (1 of 2)" in text and "chunk size 80 (2 of 2)" in text
    if not terminal:
        assert "\r" not in text
