"""The command line finds its commands: each module of ``offline_eval/cli/`` that defines
``register(subparsers)`` is one, with no list to edit, and ``offline-eval --help`` lists them in the
order their ``HELP_ORDER`` gives."""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from pathlib import Path

import offline_eval.cli as cli
from offline_eval.cli import build_parser, command_modules

PACKAGE = Path(cli.__file__).parent
# Every command there was when the list of command modules was kept by hand, in the order of --help
# (run and metrics, which cli.py added itself, first).
COMMANDS = ["run", "metrics", "models", "cache", "retrieval", "report", "compare", "generate", "agreement",
            "calibrate", "review", "estimate"]


def commands_of(parser: argparse.ArgumentParser) -> list[str]:
    """The command names of ``parser``, in the order ``--help`` lists them."""
    return list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


def test_no_command_has_vanished_and_help_keeps_their_order() -> None:
    listed = commands_of(build_parser())
    assert [name for name in listed if name in COMMANDS] == COMMANDS, listed


def test_every_module_that_defines_register_is_a_command() -> None:
    """Read from the source, not imported: a module of the package with a top-level ``register`` that
    the discovery passed over fails here."""
    defining = sorted(f"offline_eval.cli.{path.stem}" for path in PACKAGE.glob("*.py")
                      if any(isinstance(node, ast.FunctionDef) and node.name == "register"
                             for node in ast.parse(path.read_text(encoding="utf-8")).body))
    assert len(defining) >= 10, defining
    assert sorted(module.__name__ for module in command_modules()) == defining


def test_a_new_module_with_register_is_a_command_without_a_list_to_edit(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "hello.py").write_text(
        "def register(subparsers):\n"
        "    subparsers.add_parser('hello', help='say hello').set_defaults(func=lambda args: 0)\n", encoding="utf-8")
    (tmp_path / "helpers.py").write_text("def shared():\n    return 1\n", encoding="utf-8")
    monkeypatch.setattr(cli, "__path__", [*cli.__path__, str(tmp_path)])
    for name in ("offline_eval.cli.hello", "offline_eval.cli.helpers"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.invalidate_caches()
    try:
        names = [module.__name__ for module in command_modules()]
        assert "offline_eval.cli.hello" in names and "offline_eval.cli.helpers" not in names
        assert commands_of(build_parser())[-1] == "hello"  # no HELP_ORDER: after those that have one
        assert cli.main(["hello"]) == 0
    finally:
        for name in ("hello", "helpers"):  # the import bound each to the package too
            sys.modules.pop(f"offline_eval.cli.{name}", None)
            vars(cli).pop(name, None)
