"""``offline-eval retrieval``: the retriever benchmark subcommand.

Importing this module is cheap (argparse only); the benchmark and its heavy dependencies are
imported when the command runs. ``register(subparsers)`` is called by the main CLI;
``python -m offline_eval.cli.retrieval ...`` runs the subcommand on its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

from offline_eval.cli.shared import positive_int
from offline_eval.retrieval import DEFAULT_RETRIEVERS, RETRIEVERS

HELP_ORDER = 50  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)

EPILOG = """\
examples:
  offline-eval retrieval --corpus docs/ --queries queries.jsonl --qrels qrels.tsv
  offline-eval retrieval --corpus dragonball_docs.jsonl --filter domain=Finance --filter language=en \\
      --queries rageval_example.jsonl --retrievers bm25,dense,hybrid --top-k 1,3,5,10 \\
      --chunk-size 128,256,512 --output runs/retrieval
  offline-eval retrieval --corpus dragonball_docs.jsonl --queries rageval_example.jsonl \\
      --retrievers bm25,m3-dense,m3-sparse,m3-colbert,m3-hybrid --m3 models/bge-m3 \\
      --rerank models/bge-reranker-v2-m3 --rerank-depth 100

Without --qrels the queries' reference passages (RAGEval layout) are scored with RAGEval retrieval
recall and EIR. Indexes, embeddings and results are kept in --output; a second run reuses them.
"""


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got '{text}'") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got '{text}'")
    return values


def _name_list(text: str) -> list[str]:
    values = [v.strip().lower() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in RETRIEVERS]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"unknown retriever(s) {', '.join(bad) or text!r}; "
                                         f"choose from {', '.join(RETRIEVERS)}")
    return values


def _weights(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.replace(" ", "").split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 0 or not sum(values) > 0:
        raise argparse.ArgumentTypeError(f"expected three numbers >= 0, not all zero (dense,sparse,colbert), "
                                         f"got '{text}'")
    return values  # type: ignore[return-value]


def _filter(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE, got '{text}'")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ``retrieval`` subcommand."""
    parser.add_argument("--corpus", type=Path, required=True,
                        help="folder of .txt/.md/.html/.pdf/.docx files, or a JSONL of {id, text, ...}")
    parser.add_argument("--queries", type=Path, required=True,
                        help="queries (any dataset format; RAGEval layout and BEIR queries.jsonl work)")
    parser.add_argument("--qrels", type=Path, default=None,
                        help="relevance judgements: TREC qrels, BEIR qrels TSV/folder or JSON")
    parser.add_argument("--retrievers", type=_name_list, default=list(DEFAULT_RETRIEVERS),
                        help=f"comma-separated, of {','.join(RETRIEVERS)} (default: bm25,dense,hybrid)")
    parser.add_argument("--top-k", type=_int_list, default=[1, 3, 5, 10],
                        help="cut-offs, comma-separated (default 1,3,5,10)")
    parser.add_argument("--chunk-size", type=_int_list, default=[128, 256, 512],
                        help="chunk sizes in tokens, comma-separated (default 128,256,512)")
    parser.add_argument("--chunk-overlap", type=int, default=0,
                        help="tokens of whole trailing sentences repeated in the next chunk (default 0)")
    parser.add_argument("--embedder", type=Path, default=None,
                        help="sentence-transformers model folder (default: the starter all-MiniLM-L6-v2)")
    parser.add_argument("--device", default="cpu",
                        help="device for the embedder, BGE-M3 and the reranker (default cpu)")
    parser.add_argument("--batch-size", type=positive_int, default=32,
                        help="texts (or reranked pairs) per forward pass (default 32)")
    parser.add_argument("--filter", dest="filters", type=_filter, action="append", default=[],
                        metavar="FIELD=VALUE",
                        help="keep only corpus documents whose FIELD equals VALUE (repeatable)")
    parser.add_argument("--prefix-fields", type=lambda t: [v.strip() for v in t.split(",") if v.strip()],
                        default=[], metavar="FIELD,...",
                        help="document metadata fields put in a '(field: value)' header in front of each "
                             "chunk when indexing (not when scoring), e.g. company_name")
    m3 = parser.add_argument_group("BGE-M3 retrievers (m3-dense, m3-sparse, m3-colbert, m3-hybrid)")
    m3.add_argument("--m3", type=Path, default=None, metavar="PATH",
                    help="BGE-M3 folder: XLM-RoBERTa files with sparse_linear.pt and colbert_linear.pt beside "
                         "them (default: --embedder when that folder holds both)")
    m3.add_argument("--m3-weights", type=_weights, default=(1.0, 0.3, 1.0), metavar="D,S,C",
                    help="m3-hybrid weights of the dense, sparse and multi-vector scores (default 1,0.3,1)")
    m3.add_argument("--m3-max-length", type=positive_int, default=8192,
                    help="BGE-M3 token limit per chunk or query (default 8192, clamped to the model's)")
    m3.add_argument("--m3-candidates", type=int, default=0, metavar="N",
                    help="0 (default): every chunk scored by every retriever; N: m3-colbert scores only each "
                         "query's m3-dense top-N and m3-hybrid the union of the dense and sparse top-N, as "
                         "the M3 paper does (the multi-vector cost then stops growing with the corpus)")
    rr = parser.add_argument_group("reranking")
    rr.add_argument("--rerank", type=Path, default=None, metavar="PATH",
                    help="cross-encoder folder (bge-reranker-v2-m3, ms-marco MiniLM, ...): each retriever's "
                         "top --rerank-depth chunks rescored, reported as '<retriever>+rerank'")
    rr.add_argument("--rerank-depth", type=positive_int, default=100, help="chunks reranked per query (default 100)")
    rr.add_argument("--rerank-retrievers", type=_name_list, default=[], metavar="NAMES",
                    help="first stages to rerank (default: every retriever of --retrievers)")
    rr.add_argument("--rerank-max-length", type=positive_int, default=512,
                    help="token limit of a (query, chunk) pair (default 512)")
    parser.add_argument("--compare-k", type=int, default=None,
                        help="k at which pairwise tests are printed (default 5, or the largest k)")
    parser.add_argument("--answer", action="store_true",
                        help="end-to-end mode: the judge answers each query from each retriever's top-k "
                             "chunks and the answers are scored (--answer-metrics)")
    e2e = parser.add_argument_group("end-to-end mode (--answer)")
    e2e.add_argument("--answer-metrics", default="completeness,hallucination,faithfulness",
                     help="metrics scored on the answers (default completeness,hallucination,faithfulness)")
    e2e.add_argument("--answer-limit", type=positive_int, default=None, help="answer only the first N queries")
    from offline_eval.cli.shared import add_cache_arguments, add_model_arguments
    add_model_arguments(e2e, embedder=False, device=False)
    e2e.add_argument("--max-tokens", type=positive_int, default=256, help="longest judge output (default 256)")
    add_cache_arguments(e2e)
    parser.add_argument("--output", type=Path, default=Path("retrieval-results"),
                        help="output folder: tables, per-query file, plot, indexes, caches")
    parser.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true",
                        help="no progress bars (--no-progress is the old name)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed ``args``; print the table; 0 on success, 2 on bad input."""
    from offline_eval.data.schema import DataError
    from offline_eval.retrieval.bench import BenchConfig, format_table, run_benchmark

    config = BenchConfig(
        corpus=args.corpus, queries=args.queries, output=args.output, qrels=args.qrels,
        retrievers=tuple(args.retrievers), top_k=tuple(args.top_k), chunk_sizes=tuple(args.chunk_size),
        chunk_overlap=args.chunk_overlap, embedder=args.embedder, device=args.device,
        batch_size=args.batch_size, corpus_filter=dict(args.filters), compare_k=args.compare_k,
        prefix_fields=tuple(args.prefix_fields), answer=args.answer, show_progress=not args.quiet,
        m3=args.m3, m3_weights=tuple(args.m3_weights), m3_max_length=args.m3_max_length,
        m3_candidates=args.m3_candidates, rerank=args.rerank, rerank_depth=args.rerank_depth,
        rerank_retrievers=tuple(args.rerank_retrievers), rerank_max_length=args.rerank_max_length)
    try:
        result = run_benchmark(config)
    except (DataError, ValueError) as exc:
        print(f"offline-eval retrieval: error: {exc}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"offline-eval retrieval: {note}", file=sys.stderr)
    print(format_table(result, config.primary_k))
    print()
    from offline_eval.report.html import write_retrieval_report
    print(f"report: {write_retrieval_report(args.output)}")
    for label, path in result.files.items():
        print(f"{label}: {path}")
    if args.answer:
        return _end_to_end(args)
    return 0


def _end_to_end(args: argparse.Namespace) -> int:
    """Answer with the judge from every retriever's chunks and score the answers."""
    from offline_eval.cli.shared import apply_threads, open_cache, run_config_from_args
    from offline_eval.retrieval.answering import format_answer_table, run_end_to_end
    from offline_eval.run.config import build_run

    apply_threads(args)
    names = [n.strip() for n in args.answer_metrics.split(",") if n.strip()]
    config = run_config_from_args(args)
    # --embedder and --batch-size are the retrievers': the answers are scored with the profile's models;
    # the scores are part of this benchmark's output (an earlier one is kept in earlier/)
    run = build_run(dataclasses.replace(config, metrics=names, overwrite=True,
                                        models=dataclasses.replace(config.models, embedder=None, batch_size=None)))
    with open_cache(args) as cache:
        table = run_end_to_end(args.output / "answer", args.output, run, cache=cache, limit=args.answer_limit)
    print()
    print(format_answer_table(table, [n for n in names if n in table[0]]))
    print(f"answer results: {args.output / 'answer_results.csv'}")
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``retrieval`` subcommand to the main CLI's subparsers (``func`` = :func:`run`)."""
    parser = subparsers.add_parser(
        "retrieval", help="benchmark retrievers (BM25, dense, hybrid, BGE-M3, reranking) over chunk sizes and top-k",
        description="Benchmark BM25, dense, hybrid and BGE-M3 (dense, sparse, multi-vector, hybrid) retrieval, "
                    "with an optional cross-encoder reranking stage, on a corpus and a query set.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m offline_eval.cli.retrieval --corpus ...``."""
    parser = argparse.ArgumentParser(prog="offline-eval")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["retrieval", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
