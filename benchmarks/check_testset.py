"""Check a test set written by `offline-eval generate` against its documents, independently of the
pipeline: rows per question type, and every reference an exact substring of a document the row names.

    python benchmarks/check_testset.py --testset testset.jsonl --docs docs.jsonl

Exit 0 when every row passes, 1 otherwise. Reads the documents with the product's corpus reader
(JSONL rows or a folder), so document ids match the rows' ``doc_ids``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from offline_eval.retrieval.corpus import load_corpus
from offline_eval.testset import QUESTION_TYPES


def check(testset: Path, docs: Path) -> dict:
    texts = {d.id: d.text for d in load_corpus(docs)}
    rows = [json.loads(line) for line in testset.read_text(encoding="utf-8").splitlines() if line.strip()]
    failures = []
    for row in rows:
        sources = [texts.get(str(d), "") for d in row.get("doc_ids", [])]
        for ref in row.get("reference_contexts", []):
            if not any(ref in text for text in sources):
                failures.append({"id": row["id"], "reference": ref})
        if row.get("query_type") != "unanswerable" and not row.get("reference_contexts"):
            failures.append({"id": row["id"], "reference": None})
    by_type = Counter(row.get("query_type") for row in rows)
    return {"rows": len(rows), "by_type": {t: by_type.get(t, 0) for t in QUESTION_TYPES},
            "types_present": sum(1 for t in QUESTION_TYPES if by_type.get(t)),
            "references": sum(len(r.get("reference_contexts", [])) for r in rows),
            "verbatim_failures": failures}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--testset", type=Path, required=True)
    p.add_argument("--docs", type=Path, required=True)
    args = p.parse_args()
    result = check(args.testset, args.docs)
    print(json.dumps(result, ensure_ascii=False, indent=1))
    return 0 if not result["verbatim_failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
