"""How a metric's evidence reads: a small declaration of the shape of what its Score's metadata holds.

A metric lists these in ``Metric.evidence``; the report (:mod:`offline_eval.report.evidence`) draws each
declared entry of a sample's metadata from it, and knows no metric by name. An entry a metric does not
declare is drawn from its shape alone (a list of mappings as a list of items, a list of texts as a list),
so a metric of your own shows its evidence with no declaration at all; declaring it chooses the words.

    evidence = (Checks("claims", text="claim", verdict="supported", yes="supported", no="unsupported",
                       note="reason", context="chunk", figures=(("probability", "p={:.2f}"),)),)

Each declaration names metadata keys and item fields; nothing here renders anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Checks", "Texts", "Columns", "Evidence"]


@dataclass(frozen=True)
class Checks:
    """``metadata[key]`` is a list of mappings, each one thing the judge checked: a claim supported or
    not, a context useful or not, a key point covered or contradicted.

    ``text``: the field shown as the item's text (None: the item is the context that ``context`` points
    at, shown as "context #n"). ``verdict``: the field holding the judgement, either true or false,
    shown as ``yes`` or ``no`` (an empty word shows nothing), or a word shown as it is (when neither
    ``yes`` nor ``no`` is given). ``good``/``bad``: the verdicts that are good or bad news (words compared
    in lower case); any other is neither. ``note``: a field shown under the item (the judge's reason).
    ``context``: a field holding the 0-based index of the sample's context the item rests on, which is
    quoted. ``figures``: (field, format) of the numbers shown beside the text. ``caption``: a line above
    the list."""

    key: str
    text: str | None = None
    verdict: str | None = None
    yes: str = ""
    no: str = ""
    good: tuple[Any, ...] = (True,)
    bad: tuple[Any, ...] = (False,)
    note: str | None = None
    context: str | None = None
    figures: tuple[tuple[str, str], ...] = ()
    caption: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,)


@dataclass(frozen=True)
class Texts:
    """``metadata[key]`` is a list of texts (sentences kept, entities found). ``caption``: a line above
    them; ``empty``: the line shown when the list is empty (None: nothing is shown); ``good``: whether
    they are good news (True), bad (False) or neither (None)."""

    key: str
    caption: str = ""
    empty: str | None = None
    good: bool | None = True

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,)


@dataclass(frozen=True)
class Columns:
    """Lists of texts side by side, each under a title with its count (what the answer and the
    reference share, what only one of them says). ``columns``: (key, title, good) for each list;
    ``figures``: (key, format) of numbers of the metadata shown under them."""

    columns: tuple[tuple[str, str, bool | None], ...]
    figures: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _, _ in self.columns) + tuple(key for key, _ in self.figures)


Evidence = Checks | Texts | Columns
