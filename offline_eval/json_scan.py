"""Where a JSON value sits in a model's text: one string-aware bracket scan for the judge backends, which
stop decoding once the value has closed, and for the reader of their answers (``judging.parsing``), which
cuts candidate values out of prose. It sits below both layers, so neither imports the other for it."""

from __future__ import annotations

from typing import Iterator

__all__ = ["balanced_spans", "json_value_closed"]


def _brackets(text: str, start: int, quotes: str) -> Iterator[tuple[int, str]]:
    """(index, bracket) for each of ``{}[]`` in ``text[start:]`` outside the strings that ``quotes`` open
    (a backslash escapes the next character inside a string)."""
    quote, escape = None, False
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            if escape:
                escape = False
            elif c == "\\":
                escape = True
            elif c == quote:
                quote = None
        elif c in quotes:
            quote = c
        elif c in "{}[]":
            yield i, c


def balanced_spans(text: str) -> Iterator[str]:
    """Each substring of ``text`` from a ``{`` or ``[`` to its matching bracket, in order of its start.

    Single quotes open strings too (a judge may answer in Python's literals); a closing bracket of the
    wrong kind ends the search from that start."""
    for start, ch in enumerate(text):
        if ch not in "{[":
            continue
        expected: list[str] = []
        for end, c in _brackets(text, start, "\"'"):
            if c in "{[":
                expected.append("}" if c == "{" else "]")
                continue
            if not expected or expected.pop() != c:
                break
            if not expected:
                yield text[start:end + 1]
                break


def json_value_closed(text: str) -> bool:
    """True once ``text`` holds a complete top-level JSON object or array: from its first ``{`` or ``[``,
    as many brackets closed as opened outside JSON strings (of either kind: a stop rule, not a check)."""
    start = next((i for i, c in enumerate(text) if c in "{["), None)
    if start is None:
        return False
    depth = 0
    for _, c in _brackets(text, start, '"'):
        depth += 1 if c in "{[" else -1
        if depth == 0:
            return True
    return False
