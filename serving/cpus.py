"""How many cores this process may use: the routing lanes' count (serving/service.py).

`os.sched_getaffinity` counts the node's cores the process may be scheduled on; a pod's CPU
limit is not among them but a CFS quota on its cgroup, so on a 64-core node a pod limited to
2 CPUs would open 64 lanes and be throttled (issue 41). The quota wins where one is set:
cgroup v2 `cpu.max` ("<quota> <period>", or "max"), cgroup v1 `cpu.cfs_quota_us` over
`cpu.cfs_period_us` (-1: none). A fraction rounds up, as the JVM does (Go's automaxprocs
rounds down): a pod limited to 1.5 CPUs gets two lanes, each with most of a core.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")  # the container's own cgroup under a cgroup namespace


def cpu_quota(root: Path = CGROUP) -> float | None:
    """The cgroup's CPU quota in cores, or None where none is set (or none can be read)."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        for v1 in (root / "cpu", root / "cpu,cpuacct"):
            if (v1 / "cpu.cfs_quota_us").is_file():
                quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
                period_us = int((v1 / "cpu.cfs_period_us").read_text())
                return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return None


def usable_cpus(root: Path = CGROUP) -> int:
    """The cores of this process's affinity, capped by its cgroup's CPU quota (rounded up)."""
    cores = len(os.sched_getaffinity(0))
    quota = cpu_quota(root)
    return max(1, min(cores, math.ceil(quota))) if quota else max(1, cores)
