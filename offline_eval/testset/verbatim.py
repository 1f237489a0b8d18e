"""The verbatim-reference check of generated test sets.

A reference counts only when it occurs in its document character for character, whitespace runs
aside (a model may turn a line break into a space). What is stored is the document's own span, so
the saved reference is always an exact substring of the document.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』", "«": "»"}


def normalise_space(text: str) -> str:
    """Whitespace runs collapsed to one space, ends stripped."""
    return _SPACE.sub(" ", text).strip()


def _normalised_with_offsets(text: str) -> tuple[str, list[int]]:
    """``normalise_space(text)`` and, for each of its characters, the offset it came from."""
    chars: list[str] = []
    offsets: list[int] = []
    pending_space = -1
    for i, ch in enumerate(text):
        if ch.isspace():
            if chars and pending_space < 0:
                pending_space = i
            continue
        if pending_space >= 0:
            chars.append(" ")
            offsets.append(pending_space)
            pending_space = -1
        chars.append(ch)
        offsets.append(i)
    return "".join(chars), offsets


def locate(reference: str, document: str) -> str | None:
    """The span of ``document`` that ``reference`` quotes (whitespace-insensitively), or None.

    A reference wrapped whole in a pair of quotation marks is also tried without them (models like
    to quote their quotes); nothing else about it is forgiven.
    """
    candidates = [normalise_space(reference)]
    inner = candidates[0]
    if len(inner) > 2 and _QUOTES.get(inner[0]) == inner[-1]:
        candidates.append(normalise_space(inner[1:-1]))
    haystack, offsets = _normalised_with_offsets(document)
    for needle in candidates:
        if not needle:
            continue
        pos = haystack.find(needle)
        if pos >= 0:
            return document[offsets[pos]:offsets[pos + len(needle) - 1] + 1]
    return None
