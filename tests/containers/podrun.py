"""A rendered pod's container run with `docker run` as the kubelet would start it, and its
probes polled the way the kubelet polls them.

`docker_run_args` maps the container as written: image; `command` → --entrypoint plus its
rest, `args` after it, both with $(VAR) expanded; the environment from envFrom and env
(tests/containers/conftest.py `env_of`); user and group from the pod's and the container's
securityContext; readOnlyRootFilesystem → --read-only; every emptyDir mount → a --tmpfs
owned by the pod's user; capabilities.drop ALL → --cap-drop ALL;
allowPrivilegeEscalation false → --security-opt no-new-privileges; seccompProfile
RuntimeDefault is docker's default profile (nothing to add); limits → --cpus/--memory;
the pod's terminationGracePeriodSeconds → --stop-timeout. The network is the host's
(--network host: there is no bridge here), so containerPort is a port on the host. Other
volumes (a PVC, a ConfigMap) are bind mounts the caller provides.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.containers.conftest import docker, env_of, expand, pod_spec

Obj = dict[str, Any]


def _quantity_bytes(q: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, mult in units.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * mult)
    return int(q)


def _cpus(q: str | int | float) -> str:
    text = str(q)
    return str(float(text[:-1]) / 1000 if text.endswith("m") else float(text))


@dataclass
class PodRun:
    args: list[str]  # docker run arguments after `docker run -d --name N`
    env: dict[str, str]
    user: str
    grace_s: int
    probes: dict[str, Obj] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)


def docker_run_args(
    obj: Obj,
    container: Obj,
    objs: list[Obj],
    *,
    secret_values: dict[str, str] | None = None,
    env_overrides: dict[str, str] | None = None,
    mounts: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> PodRun:
    """`mounts`: volume name → host path for the non-emptyDir volumes (mounted read-only
    where the volumeMount says readOnly). `env_overrides`: values replacing what the
    ConfigMap says (a cluster address → the test's server on localhost)."""
    pod = pod_spec(obj)
    psc, sc = pod.get("securityContext", {}), container.get("securityContext", {})
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    gid = sc.get("runAsGroup", psc.get("runAsGroup"))
    assert uid is not None, "the manifest names no user"
    env = env_of(container, objs, secret_values)
    env.update(env_overrides or {})
    args = ["--network", "host", "--user", f"{uid}:{gid}" if gid is not None else str(uid)]
    if sc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if "ALL" in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", "ALL"]
    for cap in sc.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    seccomp = sc.get("seccompProfile") or psc.get("seccompProfile") or {}
    assert seccomp.get("type", "RuntimeDefault") == "RuntimeDefault", seccomp
    limits = container.get("resources", {}).get("limits", {})
    if "cpu" in limits:
        args += ["--cpus", _cpus(limits["cpu"])]
    if "memory" in limits:
        args += ["--memory", str(_quantity_bytes(str(limits["memory"])))]
    grace = int(pod.get("terminationGracePeriodSeconds", 30))
    args += ["--stop-timeout", str(grace)]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    fs_group = psc.get("fsGroup", gid)
    for m in container.get("volumeMounts", []):
        vol = volumes.get(m["name"], {})
        if "emptyDir" in vol:
            opts = f"rw,nosuid,nodev,uid={uid},gid={fs_group},mode=0770"
            if size := vol["emptyDir"].get("sizeLimit"):
                opts += f",size={_quantity_bytes(str(size))}"
            args += ["--tmpfs", f"{m['mountPath']}:{opts}"]
        else:
            assert mounts and m["name"] in mounts, f"no host path given for volume {m['name']}"
            ro = ",ro" if m.get("readOnly") else ""
            args += ["--mount", f"type=bind,src={mounts[m['name']]},dst={m['mountPath']}{ro}"]
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    command = [expand(c, env) for c in container.get("command", [])]
    cargs = [expand(a, env) for a in container.get("args", [])]
    if command:
        args += ["--entrypoint", command[0]]
    args += list(extra_args or [])
    args.append(container["image"])
    args += command[1:] + cargs
    ports = {
        p.get("name", str(p["containerPort"])): p["containerPort"]
        for p in container.get("ports", [])
    }
    probes: dict[str, Obj] = {
        k: container[k]
        for k in ("startupProbe", "readinessProbe", "livenessProbe")
        if k in container
    }
    return PodRun(args, env, f"{uid}:{gid}", grace, probes, ports)


def probe_once(name: str, run: PodRun, probe: Obj) -> bool:
    timeout = float(probe.get("timeoutSeconds", 1))
    if "httpGet" in probe:
        get = probe["httpGet"]
        port = get["port"] if isinstance(get["port"], int) else run.ports[get["port"]]
        try:
            r = httpx.get(f"http://127.0.0.1:{port}{get.get('path', '/')}", timeout=timeout)
        except httpx.HTTPError:
            return False
        return 200 <= r.status_code < 400
    if "exec" in probe:
        done = docker("exec", name, *probe["exec"]["command"], timeout=timeout + 5)
        return done.returncode == 0
    if "tcpSocket" in probe:  # pragma: no cover - none of ours
        raise NotImplementedError
    raise AssertionError(f"unknown probe {probe}")


def wait_probe(name: str, run: PodRun, kind: str, started: float, exited: Any) -> float:
    """Poll `kind` as the kubelet does (initialDelaySeconds, then every periodSeconds, up to
    failureThreshold failures in a row, successThreshold successes): the seconds from
    `started` until it succeeded. Fails when the threshold is reached or the container
    exits (`exited()` returns its code)."""
    probe = run.probes[kind]
    period = float(probe.get("periodSeconds", 10))
    need = int(probe.get("successThreshold", 1))
    allowed = int(probe.get("failureThreshold", 3))
    delay = float(probe.get("initialDelaySeconds", 0))
    time.sleep(max(0.0, started + delay - time.monotonic()))
    failures = successes = 0
    while True:
        t = time.monotonic()
        code = exited()
        assert code is None, f"{name} exited with {code} before its {kind} passed"
        if probe_once(name, run, probe):
            successes += 1
            if successes >= need:
                return time.monotonic() - started
        else:
            failures, successes = failures + 1, 0
            assert failures < allowed, (
                f"{kind} failed {failures} times in a row ({period:.0f} s apart): the kubelet "
                "would restart the container (liveness/startup) or keep it unready"
            )
        time.sleep(max(0.0, t + period - time.monotonic()))
