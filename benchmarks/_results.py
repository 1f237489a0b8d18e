"""Writing a benchmark's results: the same facts as JSON and as a Markdown table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


def write_results(out: Path, title: str, meta: dict[str, Any], notes: Sequence[str], header: Sequence[str],
                  cells: Sequence[Sequence[Any]], rows: Sequence[dict[str, Any]]) -> None:
    """``out``.json (meta + rows) and ``out``.md (title, date/machine/load/command lines, ``notes``, a table)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": list(rows)}, indent=2) + "\n")
    lines = [f"# {title}", "",
             f"- date: {meta['date']}; machine: {meta['machine']}; load average at start "
             f"{meta['load_average_at_start']:.2f}",
             f"- command: `{meta['command']}`", *[f"- {n}" for n in notes], "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in cells]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
