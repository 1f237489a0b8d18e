"""Scores per conversation: samples that share a ``conversation_id`` are the turns of one conversation.

A chat assistant is judged by its conversations as much as by its turns: one wrong answer in the
middle of a support conversation spoils it. For each metric the summary gives, over the conversations,

* ``mean``: the mean of each conversation's mean over its scored turns (every conversation counts once,
  however many turns it has), with a bootstrap 95% interval over conversations;
* ``worst_turn_mean``: the mean of each conversation's worst turn (its lowest value, or its highest for
  a metric where lower is better);

and per conversation its turns in dataset order with each metric's mean and worst turn. Samples without
a ``conversation_id`` are in no conversation; a run without any has no ``conversations`` section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from offline_eval.stats import bootstrap_ci

__all__ = ["conversation_summary"]


def conversation_summary(conversation_ids: Sequence[str | None], ids: Sequence[str],
                         values: Mapping[str, Sequence[float | None]],
                         higher_is_better: Mapping[str, bool]) -> dict[str, Any] | None:
    """The ``conversations`` section of summary.json (see the module docstring), or None when no
    sample names a conversation. ``conversation_ids``, ``ids`` and each metric's ``values`` are
    aligned, in dataset order."""
    turns: dict[str, list[int]] = {}
    for position, conversation in enumerate(conversation_ids):
        if conversation is not None:
            turns.setdefault(str(conversation), []).append(position)
    if not turns:
        return None
    by_conversation = {cid: _one_conversation(positions, ids, values, higher_is_better)
                       for cid, positions in turns.items()}
    metrics = {}
    for name in values:
        means = [c["metrics"][name]["mean"] for c in by_conversation.values() if name in c["metrics"]]
        worst = [c["metrics"][name]["worst"] for c in by_conversation.values() if name in c["metrics"]]
        metrics[name] = {"mean": _mean(means), "ci95": _interval(means), "worst_turn_mean": _mean(worst),
                         "n_conversations": len(means), "higher_is_better": higher_is_better.get(name, True)}
    return {"n_conversations": len(turns), "n_turns": sum(map(len, turns.values())),
            "n_outside": sum(c is None for c in conversation_ids), "metrics": metrics,
            "by_conversation": by_conversation}


def _one_conversation(positions: list[int], ids: Sequence[str], values: Mapping[str, Sequence[float | None]],
                      higher_is_better: Mapping[str, bool]) -> dict[str, Any]:
    out: dict[str, Any] = {"turns": [ids[p] for p in positions], "metrics": {}}
    for name, column in values.items():
        scored = [(ids[p], column[p]) for p in positions if column[p] is not None]
        if not scored:
            continue
        pick = min if higher_is_better.get(name, True) else max
        worst_id, worst = pick(scored, key=lambda pair: pair[1])
        out["metrics"][name] = {"mean": _mean([v for _, v in scored]), "worst": worst, "worst_turn": worst_id,
                                "n_scored": len(scored)}
    return out


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _interval(values: list[float]) -> list[float] | None:
    ci = bootstrap_ci(values)
    return list(ci) if ci else None
