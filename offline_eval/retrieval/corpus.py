"""Documents for the retriever benchmark: a folder of files or a JSONL of ``{id, text, ...}`` rows.

Folder: every ``.txt``, ``.md``, ``.markdown``, ``.html``, ``.htm``, ``.pdf`` and ``.docx`` file below
it (recursively, in sorted order); the document id is the path relative to the folder. HTML is reduced
to its visible text with the standard library's :mod:`html.parser`; PDF needs ``pypdf`` and DOCX needs
``python-docx``, both optional and imported only when such a file is met.

JSONL: one object per line (a BEIR dataset folder is read from its ``corpus.jsonl``). The id is read from ``id``, ``doc_id``, ``_id`` or ``docid``; the text from
``text``, ``content``, ``contents``, ``body`` or ``passage``; a BEIR ``title`` is put in front of the
text. Every other field is kept in :attr:`Document.metadata` (and can be used to filter the corpus,
e.g. ``language=en``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.data.schema import DataError

ID_FIELDS = ("id", "doc_id", "_id", "docid", "doc-id", "corpus-id")
TEXT_FIELDS = ("text", "content", "contents", "body", "passage")
FOLDER_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx")


@dataclass
class Document:
    """One corpus document; ``text`` is what gets chunked, offsets of chunks point into it."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def load_corpus(path: str | Path, *, filters: Mapping[str, str] | None = None) -> list[Document]:
    """Documents of a folder or a JSONL file, optionally keeping only rows whose metadata match.

    ``filters`` maps a field name to the wanted value (compared as case-insensitive strings), e.g.
    ``{"domain": "finance", "language": "en"}``. Raises :class:`DataError` for an unreadable input,
    a row without id or text, or duplicate ids.
    """
    source = Path(path)
    if not source.exists():
        raise DataError("corpus not found", source=str(source))
    if source.is_dir() and (source / "corpus.jsonl").is_file():  # a BEIR dataset folder
        docs = list(_iter_jsonl(source / "corpus.jsonl"))
    elif source.is_dir():
        docs = list(_iter_folder(source))
    elif source.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        docs = list(_iter_jsonl(source))
    elif source.suffix.lower() in FOLDER_SUFFIXES:
        docs = [Document(source.name, read_document_file(source), {"path": str(source)})]
    else:
        raise DataError("corpus must be a folder, a .jsonl file or a single document file",
                        source=str(source))
    if filters:
        wanted = {k: str(v).casefold() for k, v in filters.items()}
        docs = [d for d in docs
                if all(str(d.metadata.get(k, "")).casefold() == v for k, v in wanted.items())]
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise DataError(f"duplicate document id '{doc.id}'", source=str(source))
        seen.add(doc.id)
    if not docs:
        raise DataError("no documents in the corpus" + (" after filtering" if filters else ""),
                        source=str(source))
    return docs




def _first(row: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    for name in names:
        if name in row and row[name] is not None:
            return name, row[name]
    return None, None


def _iter_jsonl(path: Path) -> Iterable[Document]:
    with path.open(encoding="utf-8") as handle:
        text = handle.read()
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" and stripped.startswith("["):
        rows = json.loads(stripped)
        lines: Iterable[tuple[int, Any]] = enumerate(rows, start=1)
    else:
        lines = ((n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip())
    for n, raw in lines:
        if isinstance(raw, str):
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON ({exc.msg})", source=str(path), row=n) from None
        else:
            row = raw
        if not isinstance(row, dict):
            raise DataError("each row must be a JSON object", source=str(path), row=n)
        id_name, doc_id = _first(row, ID_FIELDS)
        text_name, body = _first(row, TEXT_FIELDS)
        if id_name is None:
            raise DataError("row has no document id (id, doc_id or _id)", source=str(path), row=n)
        if text_name is None or not isinstance(body, str):
            raise DataError("row has no text (text or content)", source=str(path), row=n,
                            field="text")
        title = row.get("title")
        if isinstance(title, str) and title.strip():
            body = f"{title.strip()}\n{body}"
        metadata = {k: v for k, v in row.items() if k not in (id_name, text_name)}
        yield Document(str(doc_id), body, metadata)


def _iter_folder(root: Path) -> Iterable[Document]:
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        if file.suffix.lower() not in FOLDER_SUFFIXES or file.name.startswith("."):
            continue
        rel = file.relative_to(root).as_posix()
        yield Document(rel, read_document_file(file), {"path": rel, "format": file.suffix.lower()[1:]})


def read_document_file(path: Path) -> str:
    """Plain text of one .txt/.md/.html/.pdf/.docx file."""
    suffix = path.suffix.lower()
    if suffix in (".txt", ".md", ".markdown"):
        return path.read_text(encoding="utf-8", errors="replace")
    if suffix in (".html", ".htm"):
        return html_to_text(path.read_text(encoding="utf-8", errors="replace"))
    if suffix == ".pdf":
        return _pdf_text(path)
    if suffix == ".docx":
        return _docx_text(path)
    raise DataError(f"unsupported document type '{suffix}'", source=str(path))


class _TextExtractor(HTMLParser):
    """Visible text of an HTML page; block elements become line breaks."""

    BLOCKS = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table",
              "section", "article", "header", "footer", "blockquote", "pre", "hr", "dd", "dt", "title"}
    HIDDEN = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self.HIDDEN:
            self._hidden += 1
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self.HIDDEN and self._hidden:
            self._hidden -= 1
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title or not self._hidden:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """Visible text of an HTML document (scripts and styles dropped), one block per line."""
    parser = _TextExtractor()
    parser.feed(markup)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader  # type: ignore[import-not-found]
    except ImportError:
        raise DataError("reading PDF files needs pypdf: pip install pypdf", source=str(path)) from None
    reader = PdfReader(str(path))
    return "\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()


def _docx_text(path: Path) -> str:
    try:
        import docx  # type: ignore[import-not-found]
    except ImportError:
        raise DataError("reading DOCX files needs python-docx: pip install python-docx",
                        source=str(path)) from None
    document = docx.Document(str(path))
    return "\n".join(p.text for p in document.paragraphs if p.text.strip())
