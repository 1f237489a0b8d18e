"""The Ragas half of the vs-Ragas benchmark; runs inside benchmarks/vs_ragas/.venv (never the product's).

Route: Ragas 0.4's ``evaluate()`` with its four classic metrics and a local model through LangChain,
as Ragas documents for bring-your-own LLMs: ``LangchainLLMWrapper(ChatHuggingFace(llm=
HuggingFacePipeline(pipeline=...)))`` and ``langchain_huggingface.HuggingFaceEmbeddings`` (wrapped by
``evaluate`` in ``LangchainEmbeddingsWrapper``). Ragas' newer ``llm_factory`` only takes API clients
(OpenAI, Anthropic, Google, LiteLLM, ...), so a local transformers model has no other in-process route.

Reads the sample rows as JSON (written by run.py from offline-eval's reader, so both tools see the
same text), writes one JSON: timing, per-row scores (NaN -> null), and versions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", required=True, help="JSON list of samples")
    p.add_argument("--judge", required=True)
    p.add_argument("--embedder", required=True)
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--max-workers", type=int, default=16, help="Ragas RunConfig.max_workers (its default: 16)")
    p.add_argument("--timeout", type=int, default=7200, help="Ragas RunConfig.timeout per call (default 180 "
                                                             "in Ragas; raised so a slow shared CPU is no NaN)")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    import importlib.metadata as md

    import torch

    torch.set_num_threads(args.threads)
    from langchain_huggingface import ChatHuggingFace, HuggingFaceEmbeddings, HuggingFacePipeline
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    from ragas import EvaluationDataset, RunConfig, SingleTurnSample, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import answer_relevancy, context_precision, context_recall, faithfulness

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(args.judge, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(args.judge, local_files_only=True,
                                                 dtype=getattr(torch, args.dtype)).eval()
    pipe = pipeline("text-generation", model=model, tokenizer=tok, max_new_tokens=args.max_tokens,
                    do_sample=False, return_full_text=False, device="cpu")
    class AsyncChatHuggingFace(ChatHuggingFace):
        """ChatHuggingFace raises NotImplementedError("async generation is not supported with
        HuggingFacePipeline") from _agenerate, and Ragas' evaluate() only calls the async path; this
        runs the synchronous _generate in a worker thread, as LangChain's BaseChatModel does by default."""

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            from langchain_core.runnables.config import run_in_executor

            return await run_in_executor(None, self._generate, messages, stop, None, **kwargs)

    chat = AsyncChatHuggingFace(llm=HuggingFacePipeline(pipeline=pipe, model_id=args.judge), tokenizer=tok,
                                model_id=args.judge)
    llm = LangchainLLMWrapper(chat)
    emb = HuggingFaceEmbeddings(model_name=args.embedder, model_kwargs={"device": "cpu"},
                                encode_kwargs={"normalize_embeddings": True})
    load_s = time.perf_counter() - t0

    rows = json.load(open(args.rows, encoding="utf-8"))
    dataset = EvaluationDataset(samples=[SingleTurnSample(
        user_input=r["question"], response=r["answer"], retrieved_contexts=r["contexts"],
        reference=r["ground_truth"]) for r in rows])
    metrics = [faithfulness, answer_relevancy, context_precision, context_recall]
    config = RunConfig(timeout=args.timeout, max_workers=args.max_workers)
    calls = {"n": 0}
    original = pipe.__class__.__call__

    progress = args.out + ".progress"  # a line per 25 judge calls, to follow a run of hours

    def counting(self, *a, **k):  # count judge generations (one per prompt)
        calls["n"] += 1
        if calls["n"] % 25 == 0:
            with open(progress, "a", encoding="utf-8") as f:
                f.write(f"{calls['n']} calls started at {time.perf_counter() - t0:.0f} s\n")
        return original(self, *a, **k)

    pipe.__class__.__call__ = counting
    t0, c0 = time.perf_counter(), time.process_time()
    result = evaluate(dataset, metrics=metrics, llm=llm, embeddings=emb, run_config=config,
                      show_progress=False, raise_exceptions=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    frame = result.to_pandas()
    names = [m.name for m in metrics]
    per_row = []
    for _, row in frame.iterrows():
        per_row.append({n: (None if row[n] is None or (isinstance(row[n], float) and math.isnan(row[n]))
                            else float(row[n])) for n in names})
    out = {"tool": "ragas", "n": len(rows), "seconds": round(seconds, 2), "load_seconds": round(load_s, 2),
           "samples_per_s": round(len(rows) / seconds, 5), "cpu_seconds": round(cpu, 2),
           "samples_per_cpu_s": round(len(rows) / cpu, 5), "pipeline_calls": calls["n"],
           "run_config": {"timeout": args.timeout, "max_workers": args.max_workers},
           "torch_threads": torch.get_num_threads(), "dtype": args.dtype, "max_tokens": args.max_tokens,
           "versions": {p: md.version(p) for p in ("ragas", "langchain-core", "langchain-huggingface",
                                                   "langchain-community", "torch", "transformers",
                                                   "sentence-transformers")},
           "metrics": names, "rows": per_row}
    json.dump(out, open(args.out, "w"), indent=2)
    print(json.dumps({k: out[k] for k in ("n", "seconds", "samples_per_s", "pipeline_calls")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
