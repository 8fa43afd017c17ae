"""Offline checks of the Kubernetes manifests under k8s/.

Each overlay is rendered with ``kubectl kustomize`` (no cluster needed), every object
is validated against the Kubernetes OpenAPI schemas shipped with ``kubernetes_validate``
in strict mode (unknown fields fail), and the behaviour the platform relies on
(probes, placeholders-only Secrets, sizing, schedule) is asserted.
"""

from __future__ import annotations

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

from serving.launch import DRAIN_S, EXIT_SLACK_S, PRESTOP_S, REQUEST_TIMEOUT_S  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "k8s"
# dev and prod; cronjob is dev with the optional retraining CronJob component
OVERLAYS = ("dev", "prod", "cronjob")
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
    "R2A_WEBHOOK_SECRET",
    "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
}
# the Secret's keys and placeholders: an example in no kustomization (created out of band)
SECRET_EXAMPLE = K8S / "secret.example.yaml"
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
        "ConfigMap",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
    }
    assert required <= kinds, f"missing kinds: {sorted(required - kinds)}"
    # the Secret is created out of band; the CronJob is an optional component
    assert not {"Secret", "CronJob"} & kinds


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
        "--timeout-graceful-shutdown",
        str(DRAIN_S),
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
def test_serving_stops_within_its_grace_period(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """Issue 44, item 11: a preStop that takes the pod out of rotation before SIGTERM, a
    drain as long as the longest request, and a grace period that covers both."""
    deploy = _one(rendered[overlay], "Deployment", "r2a-serving")
    grace = deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    container = _serving_container(rendered[overlay])
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(PRESTOP_S)]
    command = container["command"]
    drain = int(command[command.index("--timeout-graceful-shutdown") + 1])
    assert drain >= REQUEST_TIMEOUT_S
    assert grace >= PRESTOP_S + drain + EXIT_SLACK_S


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
    # prod (3+ replicas): one pod down at a time; dev (1 replica): keep the one
    want = {"maxUnavailable": 1} if overlay == "prod" else {"minAvailable": 1}
    assert {k: v for k, v in pdb["spec"].items() if k != "selector"} == want
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_overlay_applies_the_secret(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """`kubectl apply -k` must never overwrite the real Secret with placeholders."""
    assert not [o for o in rendered[overlay] if o["kind"] == "Secret"]
    for path in K8S.rglob("kustomization.yaml"):
        k = yaml.safe_load(path.read_text())
        named = [*k.get("resources", []), *(p.get("path", "") for p in k.get("patches", []))]
        assert not [n for n in named if "secret" in n], path


def _secret_example() -> Obj:
    return yaml.safe_load(SECRET_EXAMPLE.read_text())


def test_secret_example_holds_only_placeholders() -> None:
    secret = _secret_example()
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "r2a-secrets")
    assert secret["metadata"]["namespace"] == NAMESPACE
    data = secret["stringData"]
    assert set(data) == SECRET_KEYS
    offending = [k for k, v in data.items() if v != PLACEHOLDER]
    assert not offending, f"non-placeholder secret values: {offending}"
    kubernetes_validate.validate(secret, MIN_K8S_VERSION, strict=True)


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
    objs = [*rendered[overlay], _secret_example()]  # the Secret, created out of band
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
    # serving, mlflow, postgres (and the optional retrain cronjob)
    assert len(seen) >= 3, seen
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
    # promotion pushed to serving: the webhook key from the Secret, an in-cluster target
    assert env["MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "r2a-secrets",
        "key": "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY",
    }
    assert env["MLFLOW_WEBHOOK_ALLOWED_SCHEMES"]["value"] == "http,https"
    assert env["MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS"]["value"] == "true"
    pvcs = {o["metadata"]["name"] for o in objs if o["kind"] == "PersistentVolumeClaim"}
    if overlay == "prod":
        # artifacts in the object store (k8s/components/s3-artifacts): no volume, keys from
        # the Secret, endpoint and bucket from the ConfigMap
        assert args["--artifacts-destination"] == "$(MLFLOW_ARTIFACTS_DESTINATION)"
        config = _one(objs, "ConfigMap", "r2a-config")["data"]
        assert config["MLFLOW_ARTIFACTS_DESTINATION"].startswith("s3://")
        assert config["MLFLOW_S3_ENDPOINT_URL"].startswith("http")
        for key in ("MLFLOW_ARTIFACTS_DESTINATION", "MLFLOW_S3_ENDPOINT_URL"):
            assert env[key]["valueFrom"]["configMapKeyRef"] == {"name": "r2a-config", "key": key}
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env[key]["valueFrom"]["secretKeyRef"] == {"name": "r2a-secrets", "key": key}
        assert "r2a-mlflow-artifacts" not in pvcs
        assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    else:
        # artifacts land on the PVC mounted at --artifacts-destination
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volume = mounts[args["--artifacts-destination"]]
        (vol,) = [v for v in pod["volumes"] if v["name"] == volume]
        assert vol["persistentVolumeClaim"]["claimName"] in pvcs
    svc = _one(objs, "Service", "r2a-mlflow")
    assert [p["port"] for p in svc["spec"]["ports"]] == [5000]


def test_retrain_cronjob_is_an_optional_component(rendered: dict[str, list[Obj]]) -> None:
    """The CronJob only where its component is added (k8s/overlays/cronjob); it submits as
    r2a-pipeline with a projected token for the KFP audience at kfp's token path, and mounts
    no API-server token."""
    for overlay in ("dev", "prod"):
        assert not [o for o in rendered[overlay] if o["metadata"]["name"] == "r2a-retrain"]
    objs = rendered["cronjob"]
    cron = _one(objs, "CronJob", "r2a-retrain")
    assert cron["apiVersion"] == "batch/v1"
    assert cron["spec"]["schedule"] == "0 3 * * 0"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = _pod_spec(cron)
    assert pod is not None and pod["automountServiceAccountToken"] is False
    account = _one(objs, "ServiceAccount", pod["serviceAccountName"])
    assert account["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["command"] == [
        "python", "-m", "pipelines.submit", "--host", "$(KFP_HOST)",
        "--service-account", "r2a-pipeline",
    ]  # fmt: skip
    assert {"configMapRef": {"name": "r2a-config"}} in container["envFrom"]
    env = {e["name"]: e["value"] for e in container["env"]}
    token_path = env["KF_PIPELINES_SA_TOKEN_PATH"]
    mount = next(m for m in container["volumeMounts"] if token_path.startswith(m["mountPath"]))
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (source,) = volume["projected"]["sources"]
    sa_token = source["serviceAccountToken"]
    assert sa_token["audience"] == "pipelines.kubeflow.org"
    assert f"{mount['mountPath']}/{sa_token['path']}" == token_path
    assert 600 <= sa_token["expirationSeconds"] <= 86400
    for obj in objs:  # the component's objects land in the namespace, labelled like the rest
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "r2adapter"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pipeline_identity_bound_to_what_deploy_needs(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """The runs' service account (pipelines.submit's default) may get and patch the serving
    Deployment, nothing else: what components/deploy.py does."""
    from pipelines.submit import SERVICE_ACCOUNT

    objs = rendered[overlay]
    _one(objs, "ServiceAccount", SERVICE_ACCOUNT)
    bindings = [
        b
        for b in objs
        if b["kind"] == "RoleBinding"
        and {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        in b["subjects"]
    ]
    assert len(bindings) == 1
    role = _one(objs, "Role", bindings[0]["roleRef"]["name"])
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "resourceNames": ["r2a-serving"],
            "verbs": ["get", "patch"],
        }
    ]
    assert not [o for o in objs if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}]


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
    namespaces = {
        p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for p in peers
        if "namespaceSelector" in p
    }
    pods = [p["podSelector"]["matchLabels"] for p in peers if "podSelector" in p]
    assert all(len(p) == 1 for p in peers)  # no peer widened by combining selectors
    # the ingress controller and Prometheus (scrapes /metrics); the deployer and MLflow
    # (its registry webhook, promotion pushed to serving)
    assert namespaces == {"ingress-nginx", "monitoring"}
    assert pods == [{"r2adapter.io/deployer": "true"}, {"app.kubernetes.io/name": "r2a-mlflow"}]
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
        # no API-server token anywhere (the CronJob has a projected KFP-audience one)
        if pod.get("automountServiceAccountToken") is not False:
            problems.append(f"{where}: mounts a service-account token it does not use")
    assert len(seen) >= 3, seen
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
