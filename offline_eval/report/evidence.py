"""The evidence behind one score, as HTML: what a metric's Score metadata holds, drawn from the metric's
declaration of its shape (``Metric.evidence``, :mod:`offline_eval.metrics.evidence`) or, for an entry
no metric declares, from the shape alone. Nothing here knows a metric by name.

The metadata is untrusted (a run folder may have been edited): every text is escaped, every number
checked, and an entry of an unexpected shape falls through to the "other evidence" JSON.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping

from offline_eval.judging.verdicts import REFUSED_NOTES
from offline_eval.metrics.evidence import Checks, Columns, Evidence, Texts
from offline_eval.records import finite, text_of
from offline_eval.report._run import e, str_list
from offline_eval.report.shares import DEFAULT_LINE, column_counts, share_note

__all__ = ["evidence_html", "declared_evidence", "inferred_evidence", "evidence_of"]

_TONE = {True: "ok", False: "no", None: "irr"}


@lru_cache(maxsize=None)
def declared_evidence(metric: str) -> tuple[Evidence, ...]:
    """What the metric class of that name declares of its evidence (none for a name this process does
    not know: a plugin not imported, an aggregate)."""
    from offline_eval.metrics import metric_classes

    cls = metric_classes().get(metric)
    return tuple(getattr(cls, "evidence", ()) or ()) if cls is not None else ()


def inferred_evidence(key: str, value: Any) -> Evidence | None:
    """The declaration the shape of an undeclared entry suggests: a list of mappings is a list of
    checks (its first text field the item, its first true-or-false field the verdict, numbers beside,
    a second text field under it), a list of texts a list; None for any other shape."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, str) for v in value):
        return Texts(key, caption=f"{key}:", good=None)
    if not all(isinstance(v, Mapping) for v in value):
        return None
    kinds: dict[str, type] = {}
    for item in value:
        for field, v in item.items():
            if v is not None and field not in kinds:
                kinds[str(field)] = bool if isinstance(v, bool) else float if finite(v) is not None else type(v)
    texts = [f for f, kind in kinds.items() if kind is str]
    verdict = next((f for f, kind in kinds.items() if kind is bool), None)
    return Checks(key, text=texts[0] if texts else None, verdict=verdict, yes=verdict or "",
                  no=f"not {verdict}" if verdict else "", note=texts[1] if len(texts) > 1 else None,
                  figures=tuple((f, f"{f} {{:.4g}}") for f, kind in kinds.items() if kind is float),
                  caption=f"{key}:")


def evidence_of(metric: str, meta: Mapping[str, Any]) -> list[Evidence]:
    """How to draw ``meta``: the metric's declared entries, then one for each undeclared entry whose
    shape is known."""
    specs = list(declared_evidence(metric))
    used = {key for spec in specs for key in spec.keys}
    for key, value in meta.items():
        spec = inferred_evidence(key, value) if key not in used else None
        if spec is not None:
            specs.append(spec)
            used.add(key)
    return specs


def evidence_html(metric: str, meta: Mapping[str, Any], contexts: list[str], *, value: float | None = None,
                  line: float = DEFAULT_LINE) -> str:
    """The HTML of one score's ``meta``: where ``value`` is an expected share, the sentence that says so
    beside the decisions (:mod:`~offline_eval.report.shares`; ``line``: the P(yes) the run decided at),
    then each drawn entry, then the rest as JSON."""
    specs = evidence_of(metric, meta)
    note = share_note(value, meta, specs, line)
    parts = [f"<div class='small share-note'>{e(note)}</div>" if note else ""]
    parts += [_drawn(spec, meta, contexts, line) for spec in specs]
    used = {key for spec in specs for key in spec.keys}
    rest = {k: v for k, v in meta.items() if k not in used}
    if rest:
        parts.append("<details><summary class='muted small'>other evidence</summary><pre class='json'>"
                     + e(json.dumps(rest, ensure_ascii=False, indent=2, default=str)) + "</pre></details>")
    return "".join(p for p in parts if p)


def _drawn(spec: Evidence, meta: Mapping[str, Any], contexts: list[str], line: float) -> str:
    if isinstance(spec, Checks):
        return _checks_html(spec, meta.get(spec.key), contexts)
    if isinstance(spec, Texts):
        return _texts_html(spec, meta.get(spec.key))
    return _columns_html(spec, meta, line)


def _figure(value: Any, form: str) -> str:
    number = finite(value)
    return "" if number is None else f" <span class='muted small'>{e(form.format(number))}</span>"


def _context_index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _quoted(contexts: list[str], index: int | None) -> str:
    """The context an item rests on, quoted with its number."""
    if index is None:
        return ""
    if 0 <= index < len(contexts):
        return (f"<blockquote class='support'><span class='muted small'>context #{index + 1}:</span> "
                f"{e(contexts[index])}</blockquote>")
    return f"<div class='muted small'>context #{index + 1} (not in this sample's contexts)</div>"


def _verdict(spec: Checks, item: Mapping[str, Any]) -> tuple[str, str]:
    """(the item's tone, the verdict's HTML)."""
    if spec.verdict is None:
        return "irr", ""
    if spec.yes or spec.no:
        flag = bool(item.get(spec.verdict))
        word = spec.yes if flag else spec.no
    else:
        word = text_of(item.get(spec.verdict))
        flag = word.lower()
        word = word or "?"
    tone = "ok" if flag in spec.good else "no" if flag in spec.bad else "irr"
    return tone, f"<span class='verdict'>{e(word)}</span>" if word else ""


def _checks_html(spec: Checks, value: Any, contexts: list[str]) -> str:
    items = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, Mapping):
            continue
        tone, verdict = _verdict(spec, item)
        index = _context_index(item.get(spec.context)) if spec.context else None
        if spec.text is not None:
            text = e(item.get(spec.text))
            quote = _quoted(contexts, index) if spec.context in item else ""
        elif spec.context is not None:  # the item is a context: named, and quoted when there is one
            text = e(f"context #{index + 1}" if index is not None else "context")
            quote = (f"<blockquote class='support'>{e(contexts[index])}</blockquote>"
                     if index is not None and 0 <= index < len(contexts) else "")
        else:
            text, quote = "", ""
        note = text_of(item.get(spec.note)) if spec.note else ""
        refused = REFUSED_NOTES.get(text_of(item.get("refused")), "")  # a verdict a probe overruled
        items.append(f"<li class='{tone}'>{verdict}{text}"
                     + "".join(_figure(item.get(field), form) for field, form in spec.figures)
                     + "".join(f"<div class='muted small'>{e(n)}</div>" for n in (refused, note) if n)
                     + quote + "</li>")
    if not items:
        return ""
    caption = f"<div class='muted small'>{e(spec.caption)}</div>" if spec.caption else ""
    return f"{caption}<ul class='items'>{''.join(items)}</ul>"


def _texts_html(spec: Texts, value: Any) -> str:
    if not isinstance(value, list):
        return ""
    texts = str_list(value)
    if not texts:
        return f"<div class='muted small'>{e(spec.empty)}</div>" if spec.empty else ""
    caption = f"<div class='muted small'>{e(spec.caption)}</div>" if spec.caption else ""
    return (caption + "<ul class='items'>"
            + "".join(f"<li class='{_TONE[spec.good]}'>{e(t)}</li>" for t in texts) + "</ul>")


def _columns_html(spec: Columns, meta: Mapping[str, Any], line: float) -> str:
    if not any(key in meta for key, _, _ in spec.columns):
        return ""
    expected = column_counts(spec, meta)  # expected counts beside the decided lists: each head names both
    cols = []
    for n, (key, title, good) in enumerate(spec.columns):
        texts = str_list(meta.get(key))
        items = "".join(f"<li class='{_TONE[good]}'>{e(t)}</li>" for t in texts) or "<li class='irr'>none</li>"
        count = f"{len(texts)} at the {line:g} line; expected {expected[n][1]:.2f}" if expected else len(texts)
        cols.append(f"<div><h4>{e(title)} ({e(count)})</h4><ul class='items' data-kind='{e(key)}'>{items}</ul></div>")
    figures = [form.format(finite(meta.get(key))) for key, form in spec.figures if finite(meta.get(key)) is not None]
    tail = f"<div class='muted small'>{e(' · '.join(figures))}</div>" if figures else ""
    return f"<div class='tfp'>{''.join(cols)}</div>{tail}"
