"""`offline-eval cache check|prune PATH`: inspect and clean a result cache file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from offline_eval.cli_models import HelpFormatter


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("cache", help="check or prune a result cache (SQLite)",
                              description="Every cached answer carries a checksum; runs drop and recompute a "
                                          "damaged one by themselves. These commands look at a whole file.")
    sub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="SQLite integrity and every record's checksum; exits 1 on damage",
                           formatter_class=HelpFormatter)
    check.add_argument("path", type=Path, help="the cache file (e.g. ~/.cache/offline-eval/cache.sqlite)")
    check.set_defaults(func=cmd_check)
    prune = sub.add_parser("prune", help="delete damaged records (and, if asked, old ones or one kind), then "
                                         "compact the file")
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


def cmd_check(args: argparse.Namespace) -> int:
    cache = _open(args.path)
    try:
        report = cache.check()
    finally:
        cache.close()
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.by_kind.items())) or "none"
    print(f"{args.path}: {report.records} records ({kinds}); {report.damaged} damaged; "
          f"SQLite integrity: {report.integrity}")
    if not report.ok:
        print(f"offline-eval cache: run `offline-eval cache prune {args.path}` to drop the damaged records "
              "(runs also drop and recompute them as they meet them)", file=sys.stderr)
        return 1
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    cache = _open(args.path)
    try:
        removed = cache.prune(older_than_s=args.older_than * 86400 if args.older_than is not None else None,
                              kinds=args.kind)
        left = len(cache)
    finally:
        cache.close()
    print(f"{args.path}: removed {removed['damaged']} damaged, {removed['old']} old, {removed['kind']} by kind; "
          f"{left} records left")
    return 0
