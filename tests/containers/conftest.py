"""The container tier (marker `containers`; `make test-containers`): Docker and the images.

Fixtures (session scope unless said otherwise):

- ``docker_daemon`` -> str: the daemon's server version, once `docker info` answers. No
  daemon is a test failure naming `containers/docker-up.sh` (never a skip: `make
  test-containers` provisions one first, and plain `pytest`/`make test` deselect the whole
  tier up front with a line that names it, see `pytest_collection_modifyitems` below).
- ``image`` -> str: the project image tag `make image` built (R2A_IMAGE, set by the
  Makefile; else `components._base.IMAGE`, i.e. r2adapter:<pyproject version>); a missing
  image fails naming `make image`.
- ``pg_image`` -> str: the Postgres image tag (R2A_PG_IMAGE; else
  r2adapter-postgres:<version>), checked the same way.
- ``rendered`` -> dict[str, list[dict]]: `kubectl kustomize k8s/overlays/{dev,prod,cronjob}`
  parsed, with the out-of-band Secret (k8s/secret.example.yaml).
- ``containers`` (function scope) -> Containers: `containers.run(name, *docker_run_args)`
  starts a container (`docker run -d --name <unique name> ...`; returns the unique name) and
  removes every container it started at teardown, with its log printed on failure;
  `containers.logs(name)`, `containers.exit_code(name)`.

Helpers: ``docker(*args, timeout=...)`` (a CompletedProcess, never raises),
``pod_container(obj, name)`` (a container of a rendered workload), ``env_of(container,
objs, overrides)`` (a container's environment as the kubelet composes it from envFrom and
env, $(VAR) references expanded).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

Obj = dict[str, Any]


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        return subprocess.CompletedProcess(["docker", *args], 127, "", "no docker CLI")
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(["docker", *args], 124, "", f"timed out: {e}")


def daemon_reachable() -> bool:
    return shutil.which("docker") is not None and docker("info", timeout=20).returncode == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a Docker daemon, a run that did not ask for the tier (`-m containers`)
    deselects it and says so by name; a run that asked for it keeps it (and fails
    clearly in `docker_daemon`)."""
    tier = [i for i in items if i.get_closest_marker("containers")]
    if not tier or "containers" in (config.getoption("-m") or "") or daemon_reachable():
        return
    keep = [i for i in items if not i.get_closest_marker("containers")]
    config.hook.pytest_deselected(items=tier)
    items[:] = keep
    line = (
        f"container tier skipped: {len(tier)} tests in tests/containers (marker containers)"
        " deselected: no Docker daemon reachable (`docker info` failed); make test-containers"
        " provisions one"
    )
    config.stash[_SKIPPED] = line
    print(f"\n{line}")


_SKIPPED = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if line := config.stash.get(_SKIPPED, None):
        terminalreporter.write_line(line, yellow=True)


@pytest.fixture(scope="session")
def docker_daemon() -> str:
    if shutil.which("docker") is None:
        pytest.fail("no docker CLI: containers/docker-up.sh installs Debian's docker.io")
    r = docker("version", "-f", "{{.Server.Version}}", timeout=20)
    if r.returncode != 0:
        pytest.fail(
            "no Docker daemon reachable (docker info failed): run containers/docker-up.sh"
            f" (make docker-up): {r.stderr.strip().splitlines()[-1:]}"
        )
    return r.stdout.strip()


def _version() -> str:
    from components._base import project_version

    return project_version()


def _require_image(tag: str) -> str:
    if docker("image", "inspect", tag, timeout=30).returncode != 0:
        pytest.fail(f"image {tag} is missing: run make image")
    return tag


@pytest.fixture(scope="session")
def image(docker_daemon: str) -> str:
    from components._base import IMAGE

    return _require_image(os.environ.get("R2A_IMAGE") or IMAGE)


@pytest.fixture(scope="session")
def pg_image(docker_daemon: str) -> str:
    return _require_image(os.environ.get("R2A_PG_IMAGE") or f"r2adapter-postgres:{_version()}")


def render(overlay: str) -> list[Obj]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to render k8s/overlays"
    proc = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def with_secret(objs: list[Obj]) -> list[Obj]:
    """The rendered objects and the Secret r2a-secrets, which no overlay applies (it is
    created out of band: k8s/secret.example.yaml has its keys, all CHANGE_ME; the tests'
    `secret_values` stand in for the real ones)."""
    example = yaml.safe_load((ROOT / "k8s" / "secret.example.yaml").read_text())
    return [*objs, example]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[Obj]]:
    """dev, prod and cronjob (dev with the optional retraining CronJob), each with the
    Secret as the cluster holds it (`with_secret`)."""
    return {o: with_secret(render(o)) for o in ("dev", "prod", "cronjob")}


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def pod_spec(obj: Obj) -> Obj:
    if obj["kind"] == "CronJob":
        spec: Obj = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        spec = obj["spec"]["template"]["spec"]
    return spec


def pod_container(obj: Obj, name: str) -> Obj:
    (c,) = [c for c in pod_spec(obj)["containers"] if c["name"] == name]
    return c


_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: a defined variable is replaced, $$ escapes, an
    undefined reference stays as written."""
    return re.sub(
        r"\$\$|" + _REF.pattern,
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        value,
    )


def env_of(
    container: Obj, objs: list[Obj], secret_values: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment the kubelet gives `container`: envFrom (ConfigMaps, Secrets) in order,
    then env (value, configMapKeyRef, secretKeyRef), each $(VAR) expanded against what came
    before. `secret_values` stands in for the real Secret that replaces the CHANGE_ME
    template out of band (k8s/README.md, "Secrets")."""
    secrets = secret_values or {}

    def data(kind: str, name: str) -> dict[str, str]:
        o = one(objs, kind, name)
        d = {**(o.get("data") or {}), **(o.get("stringData") or {})}
        return {k: secrets.get(k, str(v)) for k, v in d.items()} if kind == "Secret" else d

    env: dict[str, str] = {}
    for src in container.get("envFrom", []):
        if "configMapRef" in src:
            env.update(data("ConfigMap", src["configMapRef"]["name"]))
        if "secretRef" in src:
            env.update(data("Secret", src["secretRef"]["name"]))
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
        else:
            ref = e["valueFrom"].get("configMapKeyRef") or e["valueFrom"]["secretKeyRef"]
            kind = "ConfigMap" if "configMapKeyRef" in e["valueFrom"] else "Secret"
            env[e["name"]] = data(kind, ref["name"])[ref["key"]]
    return env


class Containers:
    def __init__(self) -> None:
        self.names: list[str] = []

    def run(self, name: str, *args: str) -> str:
        unique = f"r2a-test-{name}-{uuid.uuid4().hex[:8]}"
        r = docker("run", "-d", "--name", unique, *args, timeout=120)
        assert r.returncode == 0, f"docker run {name} failed: {r.stderr.strip()}"
        self.names.append(unique)
        return unique

    def logs(self, name: str) -> str:
        r = docker("logs", name, timeout=60)
        return r.stdout + r.stderr

    def exit_code(self, name: str) -> int | None:
        r = docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", name, timeout=30)
        running, code = r.stdout.split()
        return None if running == "true" else int(code)

    def cleanup(self) -> None:
        for n in self.names:
            docker("rm", "-f", n, timeout=60)


@pytest.fixture
def containers(request: pytest.FixtureRequest) -> Iterator[Containers]:
    c = Containers()
    yield c
    if getattr(request.node, "rep_call_failed", False):
        for n in c.names:
            print(f"---- docker logs {n} (tail)\n{c.logs(n)[-4000:]}")
    c.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    if rep.when == "call" and rep.failed:
        item.rep_call_failed = True  # type: ignore[attr-defined]
