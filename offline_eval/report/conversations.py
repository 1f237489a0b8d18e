"""The report's view of conversations: samples that share a ``conversation_id`` are the turns of one chat.

The run's summary.json holds, when samples name a conversation, a ``conversations`` section
(:mod:`offline_eval.conversations`): per metric the mean of the conversations' means and of their worst
turns, and per conversation its turns (sample ids, in dataset order) with each metric's mean and worst
turn. Here that becomes

* the "Conversations" section: the per-metric table, then one collapsed row per conversation, the worst
  first, that opens into its turns in order (turn number, question, answer, each metric's score for the
  turn, the worst turn marked), each linked to its sample's evidence below; a filter and an order
  chooser keep thousands of conversations readable, and only the first hundred rows are shown until
  asked for more;
* in a sample's evidence, where it sits in its conversation and the turns before its question.

Everything read here is untrusted (a summary may have been edited by hand): values are checked, texts
escaped, and an anchor is made from a position, never from an id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from offline_eval.records import finite, text_of
from offline_eval.report._run import RunData, Scale, e, fmt_interval, scale_of
from offline_eval.report.badges import ci_bar, pill

__all__ = ["Conversation", "conversations_of", "placements", "conversations_section", "history_html",
           "place_html"]

_CLIP = 240  # characters of a question or an answer in a turn's row; the sample's evidence has it whole
_SEARCH_CHARS = 4000
_ROLES = {"user", "assistant", "system", "tool"}


@dataclass(frozen=True)
class Conversation:
    """One conversation of a run: its id, an anchor made from its position (``c-<n>``), its turns as
    positions in the run's results in dataset order, and each metric's entry of the summary (``mean``,
    ``worst``, ``worst_turn``, ``n_scored``; unchecked)."""

    id: str
    anchor: str
    turns: tuple[int, ...]
    metrics: Mapping[str, Any]

    def _entry(self, metric: str) -> Mapping[str, Any]:
        entry = self.metrics.get(metric)
        return entry if isinstance(entry, Mapping) else {}

    def mean(self, metric: str) -> float | None:
        return finite(self._entry(metric).get("mean"))

    def worst(self, metric: str) -> float | None:
        return finite(self._entry(metric).get("worst"))

    def worst_turn(self, metric: str) -> str | None:
        turn = self._entry(metric).get("worst_turn")
        return None if turn is None else text_of(turn)


def conversations_of(data: RunData) -> list[Conversation]:
    """The run's conversations in the summary's order (that of their first turns); [] when it has none.
    A turn whose id is not among the results is left out."""
    section = data.summary.conversations
    by_conversation = section.get("by_conversation") if isinstance(section, Mapping) else None
    if not isinstance(by_conversation, Mapping):
        return []
    positions: dict[str, int] = {}
    for index, row in enumerate(data.results):
        positions.setdefault(row.id, index)
    out = []
    for number, (cid, entry) in enumerate(by_conversation.items()):
        entry = entry if isinstance(entry, Mapping) else {}
        turns = entry.get("turns") if isinstance(entry.get("turns"), list) else []
        metrics = entry.get("metrics") if isinstance(entry.get("metrics"), Mapping) else {}
        found = tuple(positions[text_of(t)] for t in turns if text_of(t) in positions)
        out.append(Conversation(text_of(cid), f"c-{number}", found, metrics))
    return out


def placements(conversations: list[Conversation]) -> dict[int, tuple[Conversation, int]]:
    """Result position -> (its conversation, its turn number from 1)."""
    return {position: (conversation, number) for conversation in conversations
            for number, position in enumerate(conversation.turns, start=1)}


# ----------------------------------------------------------------------------- in a sample's evidence

def history_html(sample: Mapping[str, Any]) -> str:
    """The turns before the sample's question (:attr:`Sample.history`), oldest first, for its evidence;
    "" when it has none."""
    from offline_eval.data.schema import Sample, Turn

    stored = sample.get("conversation")
    if not isinstance(stored, list) or not stored:
        return ""
    turns = [Turn(text_of(t.get("role")) or "?", text_of(t.get("content"))) if isinstance(t, Mapping)
             else Turn("?", text_of(t)) for t in stored]
    history = Sample(id="", question=text_of(sample.get("question")), conversation=turns).history
    if not history:
        return ""
    items = "".join(f"<li class='turn {t.role if t.role in _ROLES else 'other'}'><span class='role'>{e(t.role)}"
                    f"</span><div class='text'>{e(t.content)}</div></li>" for t in history)
    return (f"<details class='field history' open><summary class='label'>conversation before the question "
            f"({len(history)} turn{'s' if len(history) != 1 else ''})</summary>"
            f"<ol class='turns'>{items}</ol></details>")


def place_html(conversation: Conversation, number: int) -> str:
    """Which conversation a sample is a turn of, linked to it in the Conversations section."""
    return (f"<div class='field'><div class='label'>conversation</div><div class='place'>"
            f"<a href='#{conversation.anchor}'>{e(conversation.id)}</a>, turn {number} of "
            f"{len(conversation.turns)}</div></div>")


# ----------------------------------------------------------------------------- the section

def conversations_section(data: RunData, metrics: list[str], anchors: list[str],
                          conversations: list[Conversation]) -> str:
    """The Conversations section; "" when the run has none."""
    if not conversations:
        return ""
    section = data.summary.conversations or {}
    scales = {m: scale_of(m, data.metric_summaries.get(m)) for m in metrics}
    shown = [m for m in metrics if any(m in c.metrics for c in conversations)]
    order = sorted(range(len(conversations)), key=lambda i: _badness(conversations[i], shown[:1], scales, i))
    rows = "".join(_conversation_rows(data, conversations[i], i, shown, scales, anchors) for i in order)
    options = "".join(f"<option value='m{i}'>worst first by {e(m)}: conversation mean</option>"
                      f"<option value='w{i}'>worst first by {e(m)}: worst turn</option>"
                      for i, m in enumerate(shown)) + "<option value='pos'>dataset order</option>"
    heads = "".join(f"<th class='num' data-metric='{e(m)}'>{e(m).replace('_', '_<wbr>')}</th>" for m in shown)
    n = len(conversations)
    controls = ("<div class='controls'>"
                "<input type='search' id='c-text' placeholder='Filter by conversation id or question…' "
                "aria-label='filter conversations'>"
                f"<label>order <select id='c-order'>{options}</select></label>"
                "<button type='button' id='c-more' hidden>show all</button>"
                f"<span class='muted'><span id='c-shown'>{n}</span> of {n} shown</span></div>")
    outside = _count(section.get("n_outside"))
    counts = (f"{n} conversations, {_count(section.get('n_turns'))} turns"
              + (f"; {outside} sample{'s' if outside != 1 else ''} in no conversation" if outside else ""))
    return ("<section id='conversations'><h2>Conversations</h2>"
            f"<p class='muted small'>{e(counts)}. Each conversation counts once: its mean over its scored "
            "turns, and its worst turn (the lowest score, the highest where lower is better).</p>"
            + _overview(section, metrics, scales)
            + "<h3>Each conversation</h3><p class='muted small'>The worst first; click a row for its turns in "
            f"order, a turn's id for its evidence.</p>{controls}<div class='table-wrap'><table id='conversation-list'>"
            "<thead><tr><th></th><th>conversation</th><th class='num'>turns</th>"
            f"{heads}</tr></thead>{rows}</table></div></section>")


def _overview(section: Mapping[str, Any], metrics: list[str], scales: dict[str, Scale]) -> str:
    """Per metric: conversations scored, the mean of their means with its interval, the mean worst turn."""
    entries = section.get("metrics") if isinstance(section.get("metrics"), Mapping) else {}
    rows = []
    for m in [m for m in metrics if isinstance(entries.get(m), Mapping)]:
        entry, scale = entries[m], scales[m]
        ci = entry.get("ci95")
        mean = finite(entry.get("mean"))
        rows.append(f"<tr data-metric='{e(m)}'><td class='metric'>{e(m)}"
                    + (" <span class='muted small'>(lower is better)</span>" if scale.lower_is_better else "")
                    + f"</td><td class='num'>{_count(entry.get('n_conversations'))}</td>"
                    f"<td class='num'>{pill(mean, scale=scale)}</td>"
                    f"<td class='num'>{e(fmt_interval(ci, entry.get('n_conversations'), 'conversations'))}</td>"
                    f"<td>{ci_bar(mean, ci, scale=scale)}</td>"
                    f"<td class='num'>{pill(finite(entry.get('worst_turn_mean')), scale=scale)}</td></tr>")
    return ("<table class='summary' id='conversation-metrics'><thead><tr><th>metric</th>"
            "<th class='num'>conversations</th><th class='num'>mean of conversations</th>"
            "<th class='num'>95% interval</th><th></th><th class='num'>mean worst turn</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table><p class='muted small'>Interval: percentile bootstrap over "
            "conversations.</p>")


def _goodness(value: float | None, scale: Scale) -> str:
    """A sort key where smaller is worse whatever the metric's direction ('' when unscored)."""
    return "" if value is None else repr(-value if scale.lower_is_better else value)


def _badness(conversation: Conversation, metrics: list[str], scales: dict[str, Scale], position: int) -> tuple:
    """The server's order: worst first by the first metric's conversation mean, unscored last."""
    if not metrics:
        return (0, 0.0, position)
    value = conversation.mean(metrics[0])
    if value is None:
        return (1, 0.0, position)
    return (0, -value if scales[metrics[0]].lower_is_better else value, position)


def _conversation_rows(data: RunData, conversation: Conversation, position: int, metrics: list[str],
                       scales: dict[str, Scale], anchors: list[str]) -> str:
    """One conversation's tbody: its summary row, and its turns in a row shown when opened."""
    keys, cells = [], []
    for i, m in enumerate(metrics):
        mean, worst = conversation.mean(m), conversation.worst(m)
        keys.append(f"data-g-m{i}='{_goodness(mean, scales[m])}' data-g-w{i}='{_goodness(worst, scales[m])}'")
        cells.append(f"<td class='num'>{pill(mean, scale=scales[m])}" + (
            f"<div class='muted small'>worst {pill(worst, scale=scales[m])}</div>" if worst is not None else "")
            + "</td>")
    questions = [text_of(data.results[p].sample.get("question")) for p in conversation.turns]
    search = " ".join([conversation.id, *questions]).lower()[:_SEARCH_CHARS]
    return (f"<tbody id='{conversation.anchor}' data-pos='{position}' {' '.join(keys)} data-search='{e(search)}'>"
            "<tr class='crow' aria-expanded='false'><td><span class='caret'>▸</span></td>"
            f"<td>{e(conversation.id)}</td><td class='num'>{len(conversation.turns)}</td>{''.join(cells)}</tr>"
            f"<tr class='detail' hidden><td colspan='{3 + len(metrics)}'>"
            f"{_turns_table(data, conversation, metrics, scales, anchors)}</td></tr></tbody>")


def _turns_table(data: RunData, conversation: Conversation, metrics: list[str], scales: dict[str, Scale],
                 anchors: list[str]) -> str:
    """A conversation's turns in order: number, sample, question, answer, each metric's score."""
    rows = []
    for number, position in enumerate(conversation.turns, start=1):
        rec = data.results[position]
        cells = []
        for m in metrics:
            entry = rec.score(m)
            worst = rec.value(m) is not None and conversation.worst_turn(m) == rec.id
            mark = (f" <span class='worst-mark' title='the worst turn on {e(m)}'>worst</span>"
                    if worst else "")
            reason = entry.unscored_reason if entry is not None else None
            cells.append(f"<td class='num{' worst' if worst else ''}' data-metric='{e(m)}'>"
                         f"{pill(rec.value(m), reason, scale=scales[m]) if entry is not None else ''}{mark}</td>")
        rows.append(f"<tr data-turn='{number}'><td class='num'>{number}</td>"
                    f"<td><a href='#{anchors[position]}'>{e(rec.id)}</a></td>"
                    f"<td><div class='text'>{e(_clip(rec.sample.get('question')))}</div></td>"
                    f"<td><div class='text'>{e(_clip(rec.sample.get('answer')))}</div></td>{''.join(cells)}</tr>")
    heads = "".join(f"<th class='num'>{e(m).replace('_', '_<wbr>')}</th>" for m in metrics)
    return ("<table class='turns'><thead><tr><th class='num'>turn</th><th>sample</th><th>question</th>"
            f"<th>answer</th>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _clip(value: Any) -> str:
    text = text_of(value)
    return text if len(text) <= _CLIP else text[:_CLIP - 1] + "…"


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
