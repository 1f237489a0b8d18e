"""``offline-eval generate``: a RAGEval-style test set from your documents, on local models.

Importing this module is cheap (argparse only); the pipeline, the engine and the models are
imported when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from offline_eval.cli.shared import (
    add_cache_arguments, add_model_arguments, apply_threads, model_choice_from_args, open_cache,
)
from offline_eval.testset import QUESTION_TYPES

HELP_ORDER = 70  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)

EPILOG = """\
examples:
  offline-eval generate --docs docs/ --out testset.jsonl --n 50
  offline-eval generate --docs dragonball_docs.jsonl --filter language=en --n 14 --types factual,summary \\
      --profile cpu --out testset.jsonl
  offline-eval run --dataset testset.jsonl --metrics completeness,hallucination,irrelevance ...

Rows: id, question, ground_truth, reference_contexts (sentences of the documents, verbatim), keypoints,
language, query_type, doc_ids. Each question is written by the judge from sentences picked for its type;
a rejected answer is retried on other sentences (--attempts) and kept, raw, in <out>.rejected.jsonl.
Model answers are cached: rerunning the same command resumes.
"""


def _types(text: str) -> list[str]:
    values = [v.strip().lower().replace("-", "_") for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in QUESTION_TYPES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"unknown question type(s) {', '.join(bad) or text!r}; "
                                         f"choose from {', '.join(QUESTION_TYPES)}")
    return list(dict.fromkeys(values))


def _filter(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE, got '{text}'")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return value


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``generate`` subcommand."""
    p = subparsers.add_parser(
        "generate", help="generate a RAGEval-style test set (questions, verbatim references, key points)",
        description="Generate question / reference / answer / key-point rows of seven types from your "
                    "documents with a local judge model: evidence sentences picked per type -> one question "
                    "and answer per judge call -> verbatim references -> key points (with "
                    "--synthesize-docs, new documents from a schema and configurations first).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=Path, required=True,
                   help="folder of .txt/.md files, or a JSONL of {id|doc_id, text|content, language?}")
    p.add_argument("--out", type=Path, required=True, help="test set to write (JSONL)")
    p.add_argument("--n", type=_positive, default=100, help="questions to aim for (default 100)")
    p.add_argument("--types", type=_types, default=list(QUESTION_TYPES),
                   help=f"comma-separated question types (default: all of {','.join(QUESTION_TYPES)})")
    p.add_argument("--language", choices=["en", "zh"], help="write every question in this language "
                                                            "(default: each document's language)")
    p.add_argument("--filter", dest="filters", type=_filter, action="append", default=[], metavar="FIELD=VALUE",
                   help="keep only documents whose FIELD equals VALUE (repeatable), e.g. language=en")
    p.add_argument("--max-docs", type=_positive, help="use only the first N documents")
    p.add_argument("--synthesize-docs", action="store_true",
                   help="write new synthetic documents from the documents' schema and ask about those "
                        "(they are saved next to --out as <name>.docs.jsonl); default: use yours as they are")
    p.add_argument("--num-docs", type=_positive, help="synthetic documents to write (default: as many as given, >= 2)")
    p.add_argument("--attempts", type=_positive, default=3,
                   help="evidence sentences tried per question before it is given up (default 3)")
    p.add_argument("--max-tokens", type=_positive, default=384, help="longest judge output, in tokens (default 384)")
    p.add_argument("--seed", type=int, default=0, help="seed of the rule-based values of synthetic documents")
    models = p.add_argument_group("models (as for `offline-eval run`)")
    add_model_arguments(models, verifier=False, embedder=False)
    out = p.add_argument_group("output")
    add_cache_arguments(out)
    out.add_argument("--rejected", type=Path,
                     help="where to write the judge answers that were rejected, raw, with the reason "
                          "(default: <out name>.rejected.jsonl next to --out; written when there are any)")
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_generate)
    return p


def _context_tokens(profile: Any) -> int | None:
    """The judge's max_model_len from the profile, when it names one (no model is loaded)."""
    try:
        value = profile.role("judge").options.get("max_model_len")
        return int(value) if value else None
    except (KeyError, AttributeError, TypeError, ValueError):
        return None


def _stage_bar(description: str, total: int) -> Any:
    from tqdm import tqdm
    return tqdm(total=total, desc=description, unit="req", leave=False, file=sys.stderr, dynamic_ncols=True)


def cmd_generate(args: argparse.Namespace) -> int:
    from offline_eval.engine.executor import Engine
    from offline_eval.retrieval.corpus import load_corpus
    from offline_eval.run.config import configure_models
    from offline_eval.testset.pipeline import GenerateOptions, generate_testset, source_docs

    apply_threads(args)
    documents = load_corpus(args.docs, filters=dict(args.filters) or None)
    if args.max_docs:
        documents = documents[: args.max_docs]
    docs = source_docs(documents)
    if not docs:
        print("offline-eval generate: no documents to generate from", file=sys.stderr)
        return 2

    models = configure_models(model_choice_from_args(args), {"judge"})
    profile = models.profile
    cache = open_cache(args)
    if profile.starter:
        print("offline-eval: starter profile: the test set only shows that the pipeline runs; use the cpu "
              "or gpu profile for a real one", file=sys.stderr)

    options = GenerateOptions(n=args.n, types=tuple(args.types), language=args.language,
                              synthesize_docs=args.synthesize_docs, num_docs=args.num_docs,
                              attempts=args.attempts, max_tokens=args.max_tokens, seed=args.seed,
                              context_tokens=_context_tokens(profile))
    engine = Engine(models, cache, progress=None if args.quiet else _stage_bar)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    bar: list[Any] = []

    def on_plan(total: int) -> None:
        if not args.quiet:
            from tqdm import tqdm
            bar.append(tqdm(total=total, desc="question sets", unit="set", file=sys.stderr, dynamic_ncols=True))

    with open(args.out, "w", encoding="utf-8") as sink:
        def on_row(row: dict[str, Any]) -> None:
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            sink.flush()

        try:
            result = generate_testset(docs, engine, options, on_row=on_row, on_plan=on_plan,
                                      on_task=lambda: bar[0].update(1) if bar else None)
        finally:
            if bar:
                bar[0].close()
            cache.close()

    for message in result.messages:
        print(f"offline-eval generate: {message}", file=sys.stderr)
    if options.synthesize_docs:
        docs_path = args.out.with_name(args.out.stem + ".docs.jsonl")
        with open(docs_path, "w", encoding="utf-8") as handle:
            for d in result.documents:
                handle.write(json.dumps({"id": d.id, "text": d.text, "language": d.language, "domain": d.kind},
                                        ensure_ascii=False) + "\n")
        print(f"synthetic documents: {docs_path}", file=sys.stderr)
    rejected_path = args.rejected or args.out.with_name(args.out.stem + ".rejected.jsonl")
    if result.rejected:
        rejected_path.parent.mkdir(parents=True, exist_ok=True)
        with open(rejected_path, "w", encoding="utf-8") as handle:
            for item in result.rejected:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    elif rejected_path.exists():
        rejected_path.unlink()  # a stale file of an earlier run would mislead
    _print_report(result, options, args.out, rejected_path if result.rejected else None)
    return 0 if result.rows else 1


def _print_report(result: Any, options: Any, out: Path, rejected_path: Path | None) -> None:
    from collections import Counter

    by_type = Counter(row["query_type"] for row in result.rows)
    print(f"wrote {len(result.rows)} of {options.n} requested rows to {out}")
    for qtype in options.types:
        print(f"  {qtype:<14} {by_type.get(qtype, 0)}")
    not_verbatim = result.drops.get("reference_not_verbatim", 0)
    print(f"references dropped as not verbatim in their document: {not_verbatim}")
    others = {k: v for k, v in sorted(result.drops.items()) if k != "reference_not_verbatim"}
    if others:
        print("rejected or given up: " + ", ".join(f"{k}={v}" for k, v in others.items()))
    if rejected_path:
        print(f"rejected judge answers, raw, with their reasons: {rejected_path}")


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    parsed = parser.parse_args()
    sys.exit(parsed.func(parsed))
