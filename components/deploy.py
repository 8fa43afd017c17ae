"""deploy: roll the BentoML service onto the new champion.

In a cluster (KUBERNETES_SERVICE_HOST set) it does what `kubectl rollout restart` does:
patches the Deployment's pod-template annotation `kubectl.kubernetes.io/restartedAt`, so
the pods are replaced and load `models:/<router>@champion` at start-up. The task's service
account needs `get` and `patch` on deployments in that namespace.

Outside a cluster (a local run) it rolls out nothing and says so: a running service
(serving/state.py) re-reads the champion alias every R2A_CHAMPION_POLL_S seconds (or on
POST /reload) and swaps the router without a restart.
"""

from kfp.dsl import Metrics, Output

from components._base import r2a_component


@r2a_component
def deploy(
    model_name: str, version: str, namespace: str, deployment: str, metrics: Output[Metrics]
) -> str:
    """Returns what was done, in one line. Refuses when `champion` no longer points to
    `version` (a newer promotion happened since): restarting would not deploy it."""
    import datetime
    import os

    from r2adapter.registry.tracking import MODEL_NAMES, mlflow_setup

    mlflow_setup()
    from mlflow import MlflowClient

    champ = MlflowClient().get_model_version_by_alias(model_name, "champion")
    if str(champ.version) != version:
        raise RuntimeError(f"champion of {model_name} is v{champ.version}, not v{version}")
    uri = f"models:/{model_name}@champion"

    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        outcome = (
            f"local run, not in a cluster: nothing rolled out; {uri} is v{version}, and a"
            " running service picks it up by polling the alias (R2A_CHAMPION_POLL_S) or on"
            " POST /reload"
        )
        metrics.log_metric("restarted", 0)
        print(outcome)
        return outcome

    from kubernetes import client, config

    config.load_incluster_config()
    apps = client.AppsV1Api()
    dep = apps.read_namespaced_deployment(deployment, namespace)
    served = "r2a"  # serving/state.py: R2A_ROUTER, default r2a
    for container in dep.spec.template.spec.containers:
        for env in container.env or []:
            if env.name == "R2A_ROUTER" and env.value:
                served = env.value
    if MODEL_NAMES.get(served) != model_name:
        outcome = (
            f"{namespace}/{deployment} serves {MODEL_NAMES.get(served, served)}, not"
            f" {model_name}: not restarted"
        )
        metrics.log_metric("restarted", 0)
        print(outcome)
        return outcome
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    patch = {
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {
                        "kubectl.kubernetes.io/restartedAt": now,
                        "r2adapter/champion": f"{model_name}/{version}",
                    }
                }
            }
        }
    }
    apps.patch_namespaced_deployment(deployment, namespace, patch)
    outcome = f"{namespace}/{deployment}: rollout restarted at {now} to load {uri} (v{version})"
    metrics.log_metric("restarted", 1)
    print(outcome)
    return outcome
