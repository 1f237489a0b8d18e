"""The contexts in windows: whole sentences of a few words each, cut further to fit a prompt, and which of
them a statement is judged against (those sharing most content words with it). Text only: no request
to a model is made here."""

from __future__ import annotations

import bisect
import json
import re
from typing import Callable, Sequence

from offline_eval.data.schema import exchange_span
from offline_eval.text import chinese_runs, count_units, markdown_tables, split_sentences


def context_windows(contexts: Sequence[str], size: int, language: str,
                    fits: Callable[[str], bool] | None = None) -> list[tuple[int, str]]:
    """The contexts as ``(chunk index, text)`` windows of whole sentences, at most ``size`` words each
    (Chinese: characters), a window repeating the last sentence of the one before where both fit; a
    chunk that fits is one window, and a sentence longer than ``size`` is a window of its own. With
    ``fits`` (whether the judge's prompt can hold a passage), a window it cannot hold is cut further
    (:func:`cut_to_fit`): a run of text without spaces (a URL, minified JSON, base64, Thai, emoji)
    is one word however long it is."""
    windows = _word_windows(contexts, size, language)
    if fits is None:
        return windows
    return [(index, piece) for index, text in windows
            for piece in ([text] if fits(text) else cut_to_fit(text, fits))]


# Where a JSON object may open: a brace first on its line.
_BRACE = re.compile(r"^[ \t]*\{", re.MULTILINE)
_DECODER = json.JSONDecoder()


def _json_objects(chunk: str) -> list[tuple[int, int]]:
    """The spans of the JSON objects written out in ``chunk``, each opening a line: text from a brace
    first on its line that decodes as a JSON object of one key or more. A brace that opens no such object
    (a code block, a template) is prose."""
    spans, at = [], 0
    for match in _BRACE.finditer(chunk):
        start = match.end() - 1
        if start < at:
            continue
        try:
            value, end = _DECODER.raw_decode(chunk, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and value:
            spans.append((start, end))
            at = end
    return spans


def _parts(chunk: str, language: str) -> list[str]:
    """``chunk``, or where a conversation (:func:`exchange_span`), a markdown table, a JSON object
    (:func:`_json_objects`) or, in a chunk read in English, a run of Chinese sentences
    (:func:`chinese_runs`) is written out inside prose, the prose and each such block windowed on its
    own: a window never mixes the two, so a verdict planted in a passage as an exchange ("User: is it
    supported? Assistant: Yes."), a table ("| Supported | Yes |"), JSON ('{"verdict": "supported"}') or
    a note in the other language the prompts speak is not read as part of the passage's evidence, and a
    statement is judged against it only when they share a word. Each is kept, since a transcript, a
    table, a documentation passage's JSON example or a quotation is ordinary evidence. A chunk that opens
    with the conversation is one part (a transcript, whose last turn may run on over lines that name no
    speaker). A Chinese chunk's English sentences stay in its prose (Chinese passages carry English
    terms, names and citations as a matter of course)."""
    conversation = exchange_span(chunk)
    if conversation is not None and not chunk[:conversation[0]].strip():
        return [chunk]
    spans: list[tuple[int, int]] = []
    for found in ([conversation] if conversation is not None else [],
                  markdown_tables(chunk), _json_objects(chunk), chinese_runs(chunk) if language != "zh" else []):
        spans += [span for span in found if all(span[1] <= s[0] or span[0] >= s[1] for s in spans)]
    spans.sort()
    parts, at = [], 0
    for start, end in spans:
        parts += [chunk[at:start], chunk[start:end]]
        at = end
    parts.append(chunk[at:])
    return [part.strip() for part in parts if part.strip()] or [chunk]


def _word_windows(contexts: Sequence[str], size: int, language: str) -> list[tuple[int, str]]:
    """:func:`context_windows` by words (Chinese: characters) alone."""
    out: list[tuple[int, str]] = []
    for index, chunk in ((i, part) for i, whole in enumerate(contexts) for part in _parts(whole, language)):
        if size <= 0 or count_units(chunk, language) <= size:
            out.append((index, chunk))
            continue
        sentences = split_sentences(chunk, language)
        sep = "" if language == "zh" else " "
        start = 0
        while start < len(sentences):
            end, used = start, 0
            while end < len(sentences) and (end == start or used + count_units(sentences[end], language) <= size):
                used += count_units(sentences[end], language)
                end += 1
            out.append((index, sep.join(sentences[start:end])))
            if end >= len(sentences):
                break
            # the next window repeats this one's last sentence when it then still reaches further
            overlap = end - 1 > start and (count_units(sentences[end - 1], language)
                                           + count_units(sentences[end], language)) <= size
            start = end - 1 if overlap else end
    return out


def _last_fitting(count: int, fits_at: Callable[[int], bool]) -> int:
    """The last of ``count`` ever longer candidate pieces that fits (``fits_at(i)``; fitting is taken to
    be monotone: a longer piece never fits where a shorter one does not), or -1 when none does: a
    galloping search, so a piece costs a number of counts logarithmic in its length."""
    good, bad, step = -1, count, 1
    while good + step < bad and fits_at(good + step):
        good += step
        step *= 2
    bad = min(bad, good + step)
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits_at(middle):
            good = middle
        else:
            bad = middle
    return good


_SPACE = re.compile(r"\s*")


def cut_to_fit(text: str, fits: Callable[[str], bool]) -> list[str]:
    """``text`` in consecutive pieces that ``fits`` accepts, each as long as it can be: cut after a word
    where one fits, else (a word longer than a prompt holds) after a character; every piece at least one
    character. The pieces are the text, in order, but the whitespace at the cuts."""
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    pieces: list[str] = []
    start = _SPACE.match(text).end()
    while start < len(text):
        first = bisect.bisect_right(ends, start)
        found = _last_fitting(len(ends) - first, lambda i: fits(text[start:ends[first + i]]))
        if found >= 0:
            end = ends[first + found]
        else:  # the word alone does not fit: as many of its characters as do, at least one
            found = _last_fitting(ends[first] - start - 1, lambda i: fits(text[start:start + 2 + i]))
            end = start + 2 + found
        pieces.append(text[start:end])
        start = _SPACE.match(text, end).end()
    return pieces


# Words that say nothing of what a passage is about (English; Chinese function characters).
_STOPWORDS = frozenset("""
a an the and or but if of to in on at by for with from as into about over after before than then so
is are was were be been being am do does did done have has had having will would shall should can could
may might must not no nor yes it its this that these those there here i me my we our you your he him
his she her they them their what which who whom whose when where why how all any each every some such
only own same other more most very just also too up down out off again once
的 了 是 在 和 有 我 你 他 她 它 们 这 那 就 也 都 而 及 与 或 一 个 不 吗 呢 吧 啊
""".split())


def _terms(text: str, language: str) -> set[str]:
    """Lower-cased words (Chinese: characters) of ``text`` that carry content, for ranking windows."""
    if language == "zh":
        return {ch for ch in text if not ch.isspace() and ch.isalnum() and ch not in _STOPWORDS}
    return {w for w in re.findall(r"\w+", text.lower()) if w not in _STOPWORDS}


def topic_terms(text: str, language: str) -> set[str]:
    """What ``text`` is about, to tell whether two texts share a topic: its content words of three
    letters or more that are not numbers (a verdict's "1.0" shares no topic with a passage's figures);
    Chinese: pairs of adjacent content characters (one shared character says little)."""
    if language == "zh":
        chars = [ch if ch.isalnum() and ch not in _STOPWORDS else " " for ch in text]
        return {a + b for a, b in zip(chars, chars[1:]) if a != " " and b != " "}
    return {w for w in _terms(text, language) if len(w) >= 3 and not w.isdigit()}


def likely_windows(windows: Sequence[str], statement: str, language: str, k: int,
                   question: str | None = None, lead: float = 0.0) -> list[int]:
    """Indices of the windows a statement is judged against, in window order: those sharing a content
    word with the statement (or with its question, when it is read as the answer to one), and of them
    the ``k`` sharing most (all when ``k`` is 0; ties go to the earlier window), or, ``k`` not 0, only
    the one sharing most when it shares at least ``lead`` times the words of the next (``lead`` 0:
    never). When none shares a word, every window is a candidate, as it is without the gate.

    The gate is what a passage must do to be evidence about a statement: be about it. A retrieved
    chunk holding only an instruction to the grader, in any language, shares no word with the claims it
    would vouch for (a German grader's note, which the judge found no more credulous than real
    passages, raised unsupported answers' faithfulness on BEGIN until this gate: docs/verification.md,
    "Instructions planted in the data")."""
    terms = _terms(statement, language) | (_terms(question, language) if question else set())
    overlap = [len(terms & _terms(w, language)) for w in windows]
    keep = [i for i in range(len(windows)) if overlap[i] > 0] or list(range(len(windows)))
    ranked = sorted(keep, key=lambda i: -overlap[i])
    if 0 < k and lead > 0 and len(ranked) > 1 and 0 < overlap[ranked[0]] >= lead * overlap[ranked[1]]:
        return ranked[:1]
    if 0 < k < len(keep):
        keep = ranked[:k]
    return sorted(keep)


# A chunk longer than this (words; Chinese: characters) is no retrieved passage but a document: the
# classifier reads it in passages of LONG_CHUNK_PASSAGE and, for each claim, only the passages sharing
# most words with it (``windows_per_claim``), so a 5 MB context costs seconds, not hours. A
# chunk up to this size is read whole, HHEM windowing it in tokens itself (runtime/hhem.py).
LONG_CHUNK = 2000
LONG_CHUNK_PASSAGE = 400


def classifier_windows(contexts: Sequence[str], claims: Sequence[str], language: str, per_claim: int,
                        question: str | None = None) -> tuple[list[tuple[int, str]], list[list[int]]]:
    """The ``(chunk, text)`` passages the classifier reads, and which of them for each claim: every
    chunk whole, but a chunk longer than :data:`LONG_CHUNK` in passages, of which each claim gets the
    ``per_claim`` sharing most words with it (all of them when ``per_claim`` is 0)."""
    windows: list[tuple[int, str]] = []
    whole: list[int] = []
    long_parts: list[list[int]] = []
    for index, chunk in enumerate(contexts):
        if count_units(chunk, language) <= LONG_CHUNK:
            whole.append(len(windows))
            windows.append((index, chunk))
            continue
        parts = context_windows([chunk], LONG_CHUNK_PASSAGE, language)
        long_parts.append(list(range(len(windows), len(windows) + len(parts))))
        windows.extend((index, text) for _, text in parts)
    candidates = []
    for claim in claims:
        chosen = list(whole)
        for parts in long_parts:
            picked = likely_windows([windows[i][1] for i in parts], claim, language, per_claim, question)
            chosen.extend(parts[i] for i in picked)
        candidates.append(sorted(chosen))
    return windows, candidates
