"""`offline-eval cache check|prune PATH`: inspect and clean a result cache file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from offline_eval.options import HelpFormatter

HELP_ORDER = 40  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("cache", help="check or prune a result cache (SQLite)",
                              description="Every cached answer carries a checksum; runs drop and recompute a "
                                          "damaged one by themselves. These commands look at a whole file.")
    sub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="SQLite integrity and every record's checksum; exits 1 on damage",
                           description="Check SQLite's integrity and every record's checksum. Exits 0 when the "
                                       "file is sound, 1 on damage (damaged records, or a file SQLite cannot "
                                       "read as a database), 2 when PATH is no file.",
                           formatter_class=HelpFormatter)
    check.add_argument("path", type=Path, help="the cache file (e.g. ~/.cache/offline-eval/cache.sqlite)")
    check.set_defaults(func=cmd_check)
    prune = sub.add_parser("prune", help="delete damaged records (and, if asked, old ones or one kind), then "
                                         "compact the file",
                           description="Delete damaged records (and, if asked, old ones or those of a kind), then "
                                       "compact the file. Exits 1 when SQLite cannot read the file as a "
                                       "database (nothing to prune: move it aside), 2 when PATH is no file.")
    prune.add_argument("path", type=Path, help="the cache file")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="also delete records stored before this")
    prune.add_argument("--kind", action="append", default=[], metavar="KIND",
                       help="also delete every record of this request kind (generate, options, classify, "
                            "embed); repeatable")
    prune.set_defaults(func=cmd_prune)
    return p


def _open(path: Path) -> Any:
    from offline_eval.engine.cache import ResultCache

    path = path.expanduser()
    if not path.is_file():
        raise ValueError(f"{path}: no such cache file")
    return ResultCache(path)


def _unreadable(path: Path, exc: Exception) -> int:
    """A file SQLite cannot read as a database is damage (exit 1, as damaged records are) that prune
    cannot mend. The advice is the one that fits these commands; CacheDamaged's own is a run's, and
    would send the user to `cache check`, the command that just ran."""
    reason = exc.__context__ if exc.__context__ is not None else exc  # SQLite's words
    print(f"offline-eval cache: {path}: SQLite cannot read the file ({reason}); move it aside or delete it "
          "(a run then starts a new cache and computes its answers again)", file=sys.stderr)
    return 1


def cmd_check(args: argparse.Namespace) -> int:
    from offline_eval.engine.cache import CacheDamaged

    try:
        cache = _open(args.path)
        try:
            report = cache.check()
        finally:
            cache.close()
    except CacheDamaged as exc:
        return _unreadable(args.path, exc)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.by_kind.items())) or "none"
    print(f"{args.path}: {report.records} records ({kinds}); {report.damaged} damaged; "
          f"SQLite integrity: {report.integrity}")
    if not report.ok:
        print(f"offline-eval cache: run `offline-eval cache prune {args.path}` to drop the damaged records "
              "(runs also drop and recompute them as they meet them)", file=sys.stderr)
        return 1
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from offline_eval.engine.cache import CacheDamaged

    try:
        cache = _open(args.path)
        try:
            removed = cache.prune(older_than_s=args.older_than * 86400 if args.older_than is not None else None,
                                  kinds=args.kind)
            left = len(cache)
        finally:
            cache.close()
    except CacheDamaged as exc:
        return _unreadable(args.path, exc)
    print(f"{args.path}: removed {removed['damaged']} damaged, {removed['old']} old, {removed['kind']} by kind; "
          f"{left} records left")
    return 0
