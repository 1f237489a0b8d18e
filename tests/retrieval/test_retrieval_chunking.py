"""Corpus loading and sentence-aware token chunking of the retriever benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.data.schema import DataError
from offline_eval.retrieval.chunking import (
    chunk_documents,
    chunk_text,
    count_tokens,
    sentence_spans,
    shared_sentence_spans,
)
from offline_eval.retrieval.corpus import Document, html_to_text, load_corpus

EN = ("Acme Ltd. was founded in 2001 in Boston. It makes widgets for the U.S. market. "
      "In March 2021 it bought Beta Corp. for $5 million! Was that wise? Analysts said yes.\n"
      "A new paragraph starts here. It has two sentences.")
ZH = "华夏娱乐成立于2001年。公司主要从事电影制作！它在上海上市了吗？是的。\n第二段从这里开始。"


def test_sentence_spans_english_and_chinese() -> None:
    en = [EN[s:e] for s, e in sentence_spans(EN)]
    assert en == ["Acme Ltd. was founded in 2001 in Boston.", "It makes widgets for the U.S. market.",
                  "In March 2021 it bought Beta Corp. for $5 million!", "Was that wise?",
                  "Analysts said yes.", "A new paragraph starts here.", "It has two sentences."]
    zh = [ZH[s:e] for s, e in sentence_spans(ZH)]
    assert zh == ["华夏娱乐成立于2001年。", "公司主要从事电影制作！", "它在上海上市了吗？", "是的。",
                  "第二段从这里开始。"]


def test_token_count_words_punctuation_and_cjk_characters() -> None:
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("华夏娱乐") == 4
    assert count_tokens("Q3 2021: 华夏") == 5


@pytest.mark.parametrize("splitter", [sentence_spans, shared_sentence_spans])
@pytest.mark.parametrize("size,overlap", [(8, 0), (12, 4), (20, 0), (30, 10), (500, 0)])
def test_chunks_respect_budget_offsets_and_sentences(splitter, size: int, overlap: int) -> None:
    text = EN + "\n" + ZH
    chunks = chunk_text(text, size, overlap, splitter)
    assert chunks
    covered = set()
    for start, end, n in chunks:
        assert 0 < n <= size
        assert count_tokens(text[start:end]) == n
        assert text[start:end] == text[start:end].strip()
        covered.update(range(start, end))
    # every sentence that fits the budget lies whole inside some chunk
    for s, e in sentence_spans(text):
        if count_tokens(text[s:e]) <= size:
            assert any(cs <= s and e <= ce for cs, ce, _ in chunks), text[s:e]
    # nothing but whitespace is left out
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)
    if overlap == 0:
        starts = [c[0] for c in chunks]
        assert starts == sorted(starts)
        assert all(a[1] <= b[0] for a, b in zip(chunks, chunks[1:]))


def test_overlap_repeats_trailing_sentences() -> None:
    chunks = chunk_text(EN, 20, 10, sentence_spans)
    sentence_starts = {s for s, _ in sentence_spans(EN)}
    overlapped = 0
    for (s1, e1, _), (s2, e2, _) in zip(chunks, chunks[1:]):
        assert s2 in sentence_starts and s2 > s1 and e2 > e1
        if s2 < e1:  # the repeated part is whole sentences of at most `overlap` tokens
            overlapped += 1
            assert count_tokens(EN[s2:e1]) <= 10
            assert EN[s2:e1] in EN[s1:e1] and EN[s2:e1] == EN[s2:e2][:e1 - s2]
    assert overlapped >= 1


def test_long_sentence_is_cut_at_token_boundaries() -> None:
    text = " ".join(f"word{i}" for i in range(50)) + "."
    chunks = chunk_text(text, 16, 0, sentence_spans)
    assert [n for _, _, n in chunks] == [16, 16, 16, 3]
    assert text[chunks[0][0]:chunks[0][1]] == " ".join(f"word{i}" for i in range(16))


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        chunk_text(EN, 0)
    with pytest.raises(ValueError):
        chunk_text(EN, 10, 10)


def test_chunk_documents_keeps_doc_ids_and_offsets() -> None:
    docs = [Document("a", EN, {"lang": "en"}), Document("b", ZH)]
    chunks = chunk_documents(docs, 16, 0)
    assert {c.doc_id for c in chunks} == {"a", "b"}
    for c in chunks:
        source = EN if c.doc_id == "a" else ZH
        assert source[c.start:c.end] == c.text
        assert c.id == f"{c.doc_id}#{c.position}"
    assert chunks[0].metadata == {"lang": "en"}


def test_load_corpus_folder_and_jsonl(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Plain text file.", encoding="utf-8")
    (folder / "sub" / "b.md").write_text("# Title\nMarkdown body.", encoding="utf-8")
    (folder / "c.html").write_text(
        "<html><head><title>T</title><style>p{}</style></head><body><p>Hello <b>there</b>.</p>"
        "<script>var x=1;</script><div>Second &amp; last.</div></body></html>", encoding="utf-8")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    docs = load_corpus(folder)
    assert [d.id for d in docs] == ["a.txt", "c.html", "sub/b.md"]
    assert docs[1].text == "T\nHello there.\nSecond & last."

    jsonl = tmp_path / "corpus.jsonl"
    rows = [{"doc_id": 1, "content": "One.", "language": "en", "domain": "Finance"},
            {"_id": "x", "title": "Head", "text": "Two.", "language": "zh", "domain": "Law"}]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    docs = load_corpus(jsonl)
    assert [(d.id, d.text) for d in docs] == [("1", "One."), ("x", "Head\nTwo.")]
    assert docs[0].metadata == {"language": "en", "domain": "Finance"}
    assert [d.id for d in load_corpus(jsonl, filters={"domain": "finance"})] == ["1"]
    with pytest.raises(DataError, match="no documents"):
        load_corpus(jsonl, filters={"domain": "medical"})


def test_html_to_text_drops_scripts() -> None:
    assert html_to_text("<p>a</p><script>b</script><p>c</p>") == "a\nc"


def test_optional_formats_give_install_hint(tmp_path: Path) -> None:
    pdf = tmp_path / "x.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    try:
        import pypdf  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match="pip install pypdf"):
            load_corpus(tmp_path)
    else:  # pragma: no cover - depends on the environment
        pytest.skip("pypdf is installed")


def test_jsonl_errors_name_the_row(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "ok"}\n{"id": 2}\n', encoding="utf-8")
    with pytest.raises(DataError, match="row 2"):
        load_corpus(bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="duplicate"):
        load_corpus(dup)
