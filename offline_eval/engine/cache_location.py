"""Where the answer cache lives: the path given, else ``$OFFLINE_EVAL_CACHE``, else :data:`DEFAULT_CACHE`.

Shared by the commands' ``--cache`` flag and the Python API's ``cache=True``. Kept apart from
:mod:`offline_eval.engine.cache` (which imports numpy) so that registering a command's flags stays cheap.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CACHE = Path("~/.cache/offline-eval/cache.sqlite")


def cache_path(path: str | Path | None = None) -> Path:
    """The cache file: ``path``, else $OFFLINE_EVAL_CACHE, else the default."""
    return Path(path or os.environ.get("OFFLINE_EVAL_CACHE", DEFAULT_CACHE)).expanduser()
