"""A labels file as an editor may save it (issue #56): with a byte-order mark it reads as without one; a
file that is not UTF-8 is one line naming it."""

from __future__ import annotations

import pytest

from offline_eval.data.schema import DataError
from offline_eval.people.labels import read_labels

LINES = ['{"id": "q01", "metric": "faithfulness", "label": "yes"}', '{"id": "q02", "metric": "faithfulness", "label": "no"}']


@pytest.mark.parametrize("text", ["\n".join(LINES) + "\n", LINES[0]])  # the one line without its newline too
def test_a_labels_file_with_a_byte_order_mark_reads_as_without(tmp_path, text):
    plain, marked = tmp_path / "plain.jsonl", tmp_path / "marked.jsonl"
    plain.write_text(text, encoding="utf-8")
    marked.write_text(text, encoding="utf-8-sig")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    assert read_labels(marked) == read_labels(plain) and len(read_labels(marked)) == text.count("{")


def test_a_labels_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(LINES[0].replace("q01", "caf\xe9").encode("latin-1") + b"\n")
    with pytest.raises(DataError, match=r"latin1\.jsonl: not UTF-8 text \(byte 11\)"):
        read_labels(path)
