"""Importing the package's own parts by name (its metric modules, its subcommands)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Iterable, Iterator


def present_modules(names: Iterable[str]) -> Iterator[ModuleType]:
    """Each module of ``names``, imported, less one that is not installed (a part of the package left
    out of an install); a module that is there but fails to import raises, as any import does."""
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        yield module
