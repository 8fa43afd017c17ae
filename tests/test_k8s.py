"""Offline checks of the Kubernetes manifests under k8s/.

Each overlay is rendered with ``kubectl kustomize`` (no cluster needed), every object
is validated against the Kubernetes OpenAPI schemas shipped with ``kubernetes_validate``
in strict mode (unknown fields fail), and the behaviour the platform relies on
(probes, placeholders-only Secrets, sizing, schedule) is asserted.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit  # no Postgres, no server

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:
    pytest.skip("kubectl is not installed", allow_module_level=True)

import kubernetes_validate  # noqa: E402
from kubernetes_validate import utils as kv_utils  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "k8s"
OVERLAYS = ("dev", "prod")
NAMESPACE = "r2adapter"
PLACEHOLDER = "CHANGE_ME"

# Oldest Kubernetes minor the manifests target (also the kubectl client used here),
# plus the newest schema set the installed kubernetes_validate ships.
MIN_K8S_VERSION = "1.32.0"
K8S_VERSIONS = sorted({MIN_K8S_VERSION, kv_utils.latest_version()})

SECRET_KEYS = {
    "POSTGRES_PASSWORD",
    "R2A_DATABASE_URL",
    "MLFLOW_BACKEND_STORE_URI",
    "R2A_LLM_API_KEY",
    "R2A_API_KEY",
}
CLUSTER_SCOPED = {"Namespace"}
# the one source of the image tags (Makefile IMAGE / PG_IMAGE, components/_base.py IMAGE)
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IMAGE, PG_IMAGE = f"r2adapter:{VERSION}", f"r2adapter-postgres:{VERSION}"

Obj = dict[str, Any]


def _render(path: Path) -> list[Obj]:
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Obj]]:
    return {name: _render(K8S / "overlays" / name) for name in OVERLAYS}


def _one(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind}/{name}, found {len(found)}"
    return found[0]


def _pod_spec(obj: Obj) -> Obj | None:
    kind = obj["kind"]
    if kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        return obj["spec"]["template"]["spec"]
    if kind == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if kind == "Pod":
        return obj["spec"]
    return None


def _containers(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for obj in objs:
        spec = _pod_spec(obj)
        if spec is None:
            continue
        for container in spec.get("initContainers", []) + spec["containers"]:
            yield obj, container


def _serving_container(objs: list[Obj]) -> Obj:
    dep = _one(objs, "Deployment", "r2a-serving")
    (container,) = [
        c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "serving"
    ]
    return container


# --------------------------------------------------------------------------- schema


def test_pinned_schema_version_is_shipped() -> None:
    assert MIN_K8S_VERSION in kv_utils.all_versions()


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly(
    rendered: dict[str, list[Obj]], overlay: str, version: str
) -> None:
    objs = rendered[overlay]
    assert objs, f"overlay {overlay} rendered no objects"
    errors = []
    for obj in objs:
        ident = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{ident}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            # Every object here is a built-in kind; a missing schema means a typo'd
            # kind/apiVersion, so it is an error rather than a skip.
            errors.append(f"{ident}: {exc.message}")
    assert not errors, f"{overlay} @ k8s {version}:\n" + "\n".join(errors)


def test_strict_validation_rejects_unknown_fields() -> None:
    bogus = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
        "data": {"a": "b"},
        "unexpected": True,
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bogus, MIN_K8S_VERSION, strict=True)


# --------------------------------------------------------------------------- contents


def test_prod_has_required_kinds(rendered: dict[str, list[Obj]]) -> None:
    kinds = {o["kind"] for o in rendered["prod"]}
    required = {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "StatefulSet",
        "CronJob",
        "ConfigMap",
        "Secret",
    }
    assert required <= kinds, f"missing kinds: {sorted(required - kinds)}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_all_namespaced_objects_in_namespace(rendered: dict[str, list[Obj]], overlay: str) -> None:
    wrong = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in rendered[overlay]
        if o["kind"] not in CLUSTER_SCOPED and o["metadata"].get("namespace") != NAMESPACE
    ]
    assert not wrong, f"objects outside namespace {NAMESPACE}: {wrong}"
    _one(rendered[overlay], "Namespace", NAMESPACE)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_serving_probes_and_command(rendered: dict[str, list[Obj]], overlay: str) -> None:
    container = _serving_container(rendered[overlay])
    assert container["command"] == [
        "bentoml",
        "serve",
        "serving.service:R2AService",
        "--port",
        "3000",
    ]
    assert {"containerPort": 3000, "name": "http"} in container["ports"]
    readiness = container["readinessProbe"]["httpGet"]
    liveness = container["livenessProbe"]["httpGet"]
    assert (readiness["path"], readiness["port"]) == ("/readyz", 3000)
    assert (liveness["path"], liveness["port"]) == ("/healthz", 3000)
    env_from = container["envFrom"]
    assert {"configMapRef": {"name": "r2a-config"}} in env_from
    assert {"secretRef": {"name": "r2a-secrets"}} in env_from


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_serving_service_hpa_pdb(rendered: dict[str, list[Obj]], overlay: str) -> None:
    objs = rendered[overlay]
    svc = _one(objs, "Service", "r2a-serving")
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(80, 3000)]
    dep = _one(objs, "Deployment", "r2a-serving")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()

    hpa = _one(objs, "HorizontalPodAutoscaler", "r2a-serving")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "r2a-serving",
    }
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Resource"
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"

    pdb = _one(objs, "PodDisruptionBudget", "r2a-serving")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_hold_only_placeholders(rendered: dict[str, list[Obj]], overlay: str) -> None:
    secrets = [o for o in rendered[overlay] if o["kind"] == "Secret"]
    assert secrets, "expected the r2a-secrets template"
    offending = []
    for secret in secrets:
        name = secret["metadata"]["name"]
        for key, value in (secret.get("stringData") or {}).items():
            if value != PLACEHOLDER:
                offending.append(f"{name}.stringData.{key}")
        for key, value in (secret.get("data") or {}).items():
            if base64.b64decode(value).decode() != PLACEHOLDER:
                offending.append(f"{name}.data.{key}")
    assert not offending, f"non-placeholder secret values: {offending}"
    template = _one(rendered[overlay], "Secret", "r2a-secrets")
    keys = set(template.get("stringData") or {}) | set(template.get("data") or {})
    assert keys == SECRET_KEYS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_configmap_contents(rendered: dict[str, list[Obj]], overlay: str) -> None:
    data = _one(rendered[overlay], "ConfigMap", "r2a-config")["data"]
    assert data["MLFLOW_TRACKING_URI"] == "http://r2a-mlflow:5000"
    assert data["R2A_ROUTER_MODEL_URI"] == "models:/r2a-router@champion"
    for key in ("R2A_LLM_BASE_URL", "R2A_LLM_MODEL", "KFP_HOST"):
        assert data.get(key), f"{key} missing or empty"
    # Credentials belong in the Secret, never in the ConfigMap.
    assert not SECRET_KEYS & set(data)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_env_references_resolve(rendered: dict[str, list[Obj]], overlay: str) -> None:
    objs = rendered[overlay]
    available = {}
    for o in objs:
        if o["kind"] in {"ConfigMap", "Secret"}:
            keys = set(o.get("data") or {}) | set(o.get("stringData") or {})
            available[(o["kind"], o["metadata"]["name"])] = keys
    dangling = []
    for obj, container in _containers(objs):
        where = f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}"
        for src in container.get("envFrom", []):
            for ref_field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if ref_field in src and (kind, src[ref_field]["name"]) not in available:
                    dangling.append(f"{where}: {kind} {src[ref_field]['name']}")
        for env in container.get("env", []):
            value_from = env.get("valueFrom", {})
            for ref_field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                if ref_field in value_from:
                    ref = value_from[ref_field]
                    if ref["key"] not in available.get((kind, ref["name"]), set()):
                        dangling.append(f"{where}: {kind} {ref['name']}/{ref['key']}")
    assert not dangling, f"unresolved env references: {dangling}"


def test_prod_replicas_exceed_dev(rendered: dict[str, list[Obj]]) -> None:
    dev = _one(rendered["dev"], "Deployment", "r2a-serving")["spec"]["replicas"]
    prod = _one(rendered["prod"], "Deployment", "r2a-serving")["spec"]["replicas"]
    assert (dev, prod) == (1, 3)
    assert prod > dev


@pytest.mark.parametrize(("overlay", "bounds"), [("dev", (1, 2)), ("prod", (3, 10))])
def test_hpa_bounds(rendered: dict[str, list[Obj]], overlay: str, bounds: tuple[int, int]) -> None:
    spec = _one(rendered[overlay], "HorizontalPodAutoscaler", "r2a-serving")["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == bounds


def _cpu_millis(quantity: str | int | float) -> float:
    text = str(quantity)
    return float(text[:-1]) if text.endswith("m") else float(text) * 1000


def test_prod_serving_is_larger_and_pinned(rendered: dict[str, list[Obj]]) -> None:
    dev = _serving_container(rendered["dev"])["resources"]["requests"]
    prod = _serving_container(rendered["prod"])["resources"]["requests"]
    assert _cpu_millis(prod["cpu"]) > _cpu_millis(dev["cpu"])

    pod = _one(rendered["prod"], "Deployment", "r2a-serving")["spec"]["template"]["spec"]
    assert pod.get("nodeSelector")
    assert pod.get("tolerations")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_project_image_tag(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """Every container names exactly what `make image` builds: r2adapter:<pyproject version>,
    and r2adapter-postgres:<version> for the database."""
    images = {f"{o['kind']}/{c['name']}": c["image"] for o, c in _containers(rendered[overlay])}
    want = {k: PG_IMAGE if k == "StatefulSet/postgres" else IMAGE for k in images}
    assert images == want


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_resource_requests(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    seen, missing = [], []
    for obj, container in _containers(rendered[overlay]):
        where = f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}"
        seen.append(where)
        requests = container.get("resources", {}).get("requests", {})
        limits = container.get("resources", {}).get("limits", {})
        if not {"cpu", "memory"} <= requests.keys() or not {"cpu", "memory"} <= limits.keys():
            missing.append(where)
    # serving, mlflow, postgres, retrain cronjob
    assert len(seen) >= 4, seen
    assert not missing, f"containers without cpu/memory requests and limits: {missing}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_postgres_statefulset(rendered: dict[str, list[Obj]], overlay: str) -> None:
    objs = rendered[overlay]
    sts = _one(objs, "StatefulSet", "r2a-postgres")
    headless = _one(objs, "Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    (pvc,) = sts["spec"]["volumeClaimTemplates"]
    assert pvc["spec"]["resources"]["requests"]["storage"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == PG_IMAGE
    assert any(m["name"] == pvc["metadata"]["name"] for m in container["volumeMounts"])
    assert "pg_isready" in " ".join(container["readinessProbe"]["exec"]["command"])
    password = {e["name"]: e for e in container["env"]}["POSTGRES_PASSWORD"]
    assert password["valueFrom"]["secretKeyRef"] == {
        "name": "r2a-secrets",
        "key": "POSTGRES_PASSWORD",
    }
    init = _one(objs, "ConfigMap", "r2a-postgres-init")["data"]
    script = "\n".join(init.values())
    assert "CREATE DATABASE mlflow" in script
    assert "CREATE EXTENSION IF NOT EXISTS vector" in script


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_mlflow_server(rendered: dict[str, list[Obj]], overlay: str) -> None:
    objs = rendered[overlay]
    dep = _one(objs, "Deployment", "r2a-mlflow")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    cmd = container["command"]
    assert cmd[:2] == ["mlflow", "server"]
    args = dict(zip(cmd[2::2], cmd[3::2], strict=False))
    assert args["--backend-store-uri"] == "$(MLFLOW_BACKEND_STORE_URI)"
    assert (args["--host"], args["--port"]) == ("0.0.0.0", "5000")
    env = {e["name"]: e for e in container["env"]}
    assert env["MLFLOW_BACKEND_STORE_URI"]["valueFrom"]["secretKeyRef"]["name"] == "r2a-secrets"
    # artifacts land on the PVC mounted at --artifacts-destination
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = mounts[args["--artifacts-destination"]]
    (vol,) = [v for v in pod["volumes"] if v["name"] == volume]
    _one(objs, "PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"])
    svc = _one(objs, "Service", "r2a-mlflow")
    assert [p["port"] for p in svc["spec"]["ports"]] == [5000]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_retrain_cronjob(rendered: dict[str, list[Obj]], overlay: str) -> None:
    cron = _one(rendered[overlay], "CronJob", "r2a-retrain")
    assert cron["apiVersion"] == "batch/v1"
    assert cron["spec"]["schedule"] == "0 3 * * 0"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = _pod_spec(cron)["containers"]
    assert container["command"] == ["python", "-m", "pipelines.submit", "--host", "$(KFP_HOST)"]
    assert {"configMapRef": {"name": "r2a-config"}} in container["envFrom"]


# --------------------------------------------------------------------------- KFP recurring run


def test_recurring_run_spec() -> None:
    path = K8S / "base" / "recurring-run.yaml"
    spec = yaml.safe_load(path.read_text())
    # Not a Kubernetes object, and not applied by kustomize.
    assert "kind" not in spec and "apiVersion" not in spec
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    assert "recurring-run.yaml" not in kustomization["resources"]

    assert spec["pipeline_package_path"] == "pipelines/retrain.yaml"
    assert spec["schedule"] == "0 3 * * 0"
    # KFP (robfig/cron) wants six fields, seconds first: same instant as `schedule`.
    assert spec["cron_expression"].split() == ["0", *spec["schedule"].split()]
    assert spec["max_concurrency"] == 1
    assert spec["parameters"] == {"dataset": "2wikimultihopqa"}
    assert spec["job_name"] and spec["experiment_name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_serving_admits_only_the_ingress_and_the_deployer(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    policy = _one(rendered[overlay], "NetworkPolicy", "r2a-serving-ingress")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "r2a-serving"}
    assert spec["policyTypes"] == ["Ingress"] and len(spec["ingress"]) == 1
    peers = spec["ingress"][0]["from"]
    assert [sorted(p) for p in peers] == [["namespaceSelector"], ["podSelector"]]
    serving = _one(rendered[overlay], "Deployment", "r2a-serving")
    env = serving["spec"]["template"]["spec"]["containers"][0]["env"]
    key = next(e for e in env if e["name"] == "R2A_API_KEY")
    assert key["valueFrom"]["secretKeyRef"] == {"name": "r2a-secrets", "key": "R2A_API_KEY"}


# --------------------------------------------------------------------------- restricted


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_namespace_enforces_restricted(rendered: dict[str, list[Obj]], overlay: str) -> None:
    labels = _one(rendered[overlay], "Namespace", NAMESPACE)["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_meets_restricted(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """Pod Security `restricted` (and more): non-root, no privilege escalation, every
    capability dropped, the RuntimeDefault seccomp profile, a read-only root file system
    whose writable places are volumes; each pod's service-account token only where used."""
    problems, seen = [], []
    for obj, c in _containers(rendered[overlay]):
        where = f"{obj['kind']}/{obj['metadata']['name']}/{c['name']}"
        seen.append(where)
        pod = _pod_spec(obj)
        assert pod is not None
        psc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
        if not (psc.get("runAsNonRoot") and sc.get("runAsNonRoot")):
            problems.append(f"{where}: runAsNonRoot")
        if sc.get("runAsUser", psc.get("runAsUser")) != 10001:
            problems.append(f"{where}: runAsUser is not 10001 (the images' user)")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation")
        if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc["capabilities"].get("add"):
            problems.append(f"{where}: capabilities")
        if {"type": "RuntimeDefault"} not in (psc.get("seccompProfile"), sc.get("seccompProfile")):
            problems.append(f"{where}: seccompProfile")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{where}: readOnlyRootFilesystem")
        mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
        if "/tmp" not in mounts:
            problems.append(f"{where}: no writable /tmp under a read-only root")
        token = pod.get("automountServiceAccountToken")
        if obj["kind"] == "CronJob":
            if pod.get("serviceAccountName") != "r2a-retrain" or token is not True:
                problems.append(f"{where}: submits with its own account's token")
        elif token is not False:
            problems.append(f"{where}: mounts a service-account token it does not use")
    assert len(seen) >= 4, seen
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_guard_mlflow_and_postgres(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    objs = rendered[overlay]
    for policy, app, port in (
        ("r2a-mlflow-ingress", "r2a-mlflow", 5000),
        ("r2a-postgres-ingress", "r2a-postgres", 5432),
    ):
        spec = _one(objs, "NetworkPolicy", policy)["spec"]
        assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": app}
        assert spec["policyTypes"] == ["Ingress"]
        (rule,) = spec["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": port}]
        peers = [p.get("podSelector", {}).get("matchLabels", {}) for p in rule["from"]]
        assert {"app.kubernetes.io/name": "r2a-serving"} in peers
    postgres_peers = _one(objs, "NetworkPolicy", "r2a-postgres-ingress")["spec"]["ingress"][0]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "r2a-mlflow"}}} in (
        postgres_peers["from"]
    )
    # every workload's pods are selected by some policy
    selected = [
        o["spec"]["podSelector"]["matchLabels"] for o in objs if o["kind"] == "NetworkPolicy"
    ]
    for obj, _ in _containers(objs):
        pod_spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
        labels = pod_spec["template"]["metadata"]["labels"]
        assert any(sel.items() <= labels.items() for sel in selected), obj["metadata"]["name"]


def test_policy_scan_skips_say_why() -> None:
    """k8s/checkov.yaml (make lint's policy scan): every skipped check has a comment."""
    lines = (K8S / "checkov.yaml").read_text().splitlines()
    cfg = yaml.safe_load("\n".join(lines))
    assert cfg["skip-download"] is True and cfg["framework"] == ["kubernetes"]
    for check in cfg["skip-check"]:
        i = next(n for n, line in enumerate(lines) if line.strip() == f"- {check}")
        assert lines[i - 1].strip().startswith("#"), f"{check} is skipped without a reason"
    assert len(cfg["skip-check"]) <= 4
