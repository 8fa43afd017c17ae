"""Submit the retraining pipeline to Kubeflow Pipelines: one run, or a recurring run.

    python -m pipelines.submit --host http://ml-pipeline.kubeflow.svc.cluster.local:8888
    python -m pipelines.submit --host URL --dataset musique --openie precomputed --epochs 3
    python -m pipelines.submit --host URL --recurring "0 3 * * 0"     # Sundays 03:00 UTC
    python -m pipelines.submit --host URL --corpora musique_dev       # "": no corpus at all
    python -m pipelines.submit --host URL --token-path /var/run/secrets/kubeflow/pipelines/token

Runs and recurring runs execute as a Kubernetes service account (`--service-account`,
default r2a-pipeline: k8s/base/pipeline-access.yaml binds it what `deploy` needs). Where a
token path is given (`--token-path`, else the environment's KF_PIPELINES_SA_TOKEN_PATH, as
kfp reads it), the requests carry `Authorization: Bearer <token>` through kfp's
ServiceAccountTokenVolumeCredentials (a projected service-account token with audience
pipelines.kubeflow.org: k8s/components/retrain-cronjob); without one, no credentials.

The parameters are validated before anything is sent (`validate_params`); a bad value, or a
token file that is missing, empty or expired, is one line on stderr and exit status 1, with
no contact to the host. The package sent is the
compiled pipelines/retrain.yaml (`python -m pipelines.retrain`; tests/test_pipeline.py
checks it matches the code).
"""

import argparse
import base64
import binascii
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.retrain import DEFAULTS, PIPELINE_YAML, corpora_arg, validate_params
from r2adapter.errors import R2AError

EXPERIMENT = "r2adapter-retrain"  # k8s/base/recurring-run.yaml
RECURRING_JOB = "r2a-weekly-retrain"
SERVICE_ACCOUNT = "r2a-pipeline"  # k8s/base/pipeline-access.yaml
TOKEN_ENV = "KF_PIPELINES_SA_TOKEN_PATH"  # kfp.client.KF_PIPELINES_SA_TOKEN_ENV


def read_token(path: str, now: float | None = None) -> str:
    """The token in `path`, or an R2AError naming the path: missing, unreadable, empty, or
    (a JWT, as projected service-account tokens are) past its `exp`. The signature is the
    server's to check; the expiry is read here so that a stale file fails before sending."""
    try:
        token = open(path).read().strip()
    except OSError as e:
        raise R2AError(f"token file {path}: {e.strerror or e}") from None
    if not token:
        raise R2AError(f"token file {path} is empty")
    parts = token.split(".")
    if len(parts) == 3:
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, binascii.Error):
            claims = {}
        exp = claims.get("exp") if isinstance(claims, dict) else None
        if isinstance(exp, int | float) and exp <= (time.time() if now is None else now):
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(exp))
            raise R2AError(f"token file {path} holds a token that expired at {when}")
    return token


def credentials(token_path: str | None) -> Any:
    """kfp's ServiceAccountTokenVolumeCredentials over `token_path` (checked first: it
    re-reads the file before each request, as the kubelet rotates it), None without one."""
    if not token_path:
        return None
    read_token(token_path)
    from kfp.client import ServiceAccountTokenVolumeCredentials

    return ServiceAccountTokenVolumeCredentials(path=token_path)


def kfp_cron(expr: str) -> str:
    """KFP's cron has six fields, seconds first: a standard five-field expression gets a
    leading "0" ("0 3 * * 0" → "0 0 3 * * 0"); six fields pass as they are."""
    fields = expr.split()
    if len(fields) == 5:
        return "0 " + " ".join(fields)
    if len(fields) == 6:
        return " ".join(fields)
    raise R2AError(
        f"--recurring needs a cron expression of 5 fields (or KFP's 6, seconds first), not {expr!r}"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pipelines.submit", description="submit the retraining pipeline"
    )
    p.add_argument("--host", required=True, help="KFP API, e.g. $KFP_HOST")
    p.add_argument("--dataset", default=DEFAULTS["dataset"])
    p.add_argument("--openie", default=DEFAULTS["openie"])
    p.add_argument("--epochs", type=int, default=None, help="default: params.yaml")
    p.add_argument("--eval-every-n-steps", type=int, default=None, help="default: params.yaml")
    p.add_argument("--tau-step", type=float, default=None, help="default: params.yaml")
    p.add_argument("--n-label-shards", type=int, default=DEFAULTS["n_label_shards"])
    p.add_argument("--n-index-shards", type=int, default=DEFAULTS["n_index_shards"])
    p.add_argument(
        "--corpora",
        type=corpora_arg,
        default=None,
        metavar="NAMES",
        help="development corpora indexed and labelled for the k-way and ADR union, separated "
        'by commas; "" for none (default: params.yaml pipeline.corpora, less --dataset)',
    )
    p.add_argument("--experiment", default=EXPERIMENT)
    p.add_argument("--run-name", default=None, help="default: r2a-retrain-<dataset>")
    p.add_argument(
        "--recurring",
        metavar="CRON",
        default=None,
        help='create a recurring run instead of one run, e.g. "0 3 * * 0" (UTC)',
    )
    p.add_argument("--job-name", default=RECURRING_JOB, help="name of the recurring run")
    p.add_argument(
        "--no-cache", action="store_true", help="run every step, ignoring cached results"
    )
    p.add_argument("--namespace", default=None, help="KFP profile namespace (multi-user)")
    p.add_argument(
        "--service-account",
        default=SERVICE_ACCOUNT,
        help=f"Kubernetes service account the run's pods use (default {SERVICE_ACCOUNT})",
    )
    p.add_argument(
        "--token-path",
        default=None,
        help=f"file with a bearer token for the KFP API (default ${TOKEN_ENV}; unset: none)",
    )
    p.add_argument("--package", default=str(PIPELINE_YAML), help="compiled pipeline YAML")
    return p


def submit(args: argparse.Namespace, client: Any = None) -> str:
    """Validate, then create the run or recurring run; returns a one-line summary."""
    arguments = validate_params(
        dataset=args.dataset,
        openie=args.openie,
        epochs=args.epochs,
        eval_every_n_steps=args.eval_every_n_steps,
        tau_step=args.tau_step,
        n_label_shards=args.n_label_shards,
        n_index_shards=args.n_index_shards,
        corpora=args.corpora,
    )
    cron = kfp_cron(args.recurring) if args.recurring else None
    if not args.service_account:
        raise R2AError("--service-account must name a Kubernetes service account")
    if client is None:
        import warnings

        import kfp

        creds = credentials(args.token_path or os.environ.get(TOKEN_ENV))
        warnings.filterwarnings("ignore", category=FutureWarning, module="kfp")
        client = kfp.Client(
            host=args.host, namespace=args.namespace or "kubeflow", credentials=creds
        )
    caching = False if args.no_cache else None  # None: each task's own caching option
    if cron is None:
        result = client.create_run_from_pipeline_package(
            args.package,
            arguments=arguments,
            run_name=args.run_name or f"r2a-retrain-{arguments['dataset']}",
            experiment_name=args.experiment,
            namespace=args.namespace,
            enable_caching=caching,
            service_account=args.service_account,
        )
        return (
            f"run {result.run_id} created in experiment {args.experiment}"
            f" as {args.service_account}: {arguments}"
        )
    exp = client.create_experiment(args.experiment, namespace=args.namespace)
    job = client.create_recurring_run(
        experiment_id=exp.experiment_id,
        job_name=args.job_name,
        description=f"Recurring retraining of the R2Adapter router on {arguments['dataset']}.",
        cron_expression=cron,
        max_concurrency=1,
        no_catchup=True,
        params=arguments,
        pipeline_package_path=args.package,
        enable_caching=caching,
        service_account=args.service_account,
    )
    return (
        f"recurring run {job.recurring_run_id} ({cron}) created as {args.service_account}:"
        f" {arguments}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    # params.yaml is read from R2A_HOME; in the image (R2A_HOME unset) that is /app, the
    # checkout this module lives in, the same file the pipeline's tasks read.
    os.environ.setdefault("R2A_HOME", str(Path(__file__).resolve().parents[1]))
    args = build_parser().parse_args(argv)
    try:
        print(submit(args))
    except R2AError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the KFP API: unreachable, refused, unauthorised
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"error: KFP API at {args.host}: {type(e).__name__}: {first}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
