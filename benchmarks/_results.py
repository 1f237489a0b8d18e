"""Writing a benchmark's results: the same facts as JSON and as a Markdown table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence


def run_child(cmd: Sequence[str], repo: Path) -> dict[str, Any]:
    """Run a benchmark's child process (a fresh one, so its ``ru_maxrss`` is its own), the repository
    first on its path, and return the JSON object on the last line of its output; when it fails, the
    end of its stderr is printed and the benchmark exits with its status."""
    done = subprocess.run(list(cmd), capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        sys.exit(done.returncode)
    return json.loads(done.stdout.strip().splitlines()[-1])


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
