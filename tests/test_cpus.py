"""Issue 41, item 8: the routing lanes come from the pod's CPU limit (its cgroup's CFS
quota), not from the node's cores; fake cgroup v2 and v1 trees stand in for /sys/fs/cgroup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from serving.cpus import cpu_quota, usable_cpus
from serving.service import RouteBatcher

pytestmark = pytest.mark.unit

CORES = len(os.sched_getaffinity(0))


def _v2(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(text)
    return root


def _v1(root: Path, quota: str, period: str, folder: str = "cpu") -> Path:
    (root / folder).mkdir(parents=True)
    (root / folder / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / folder / "cpu.cfs_period_us").write_text(period + "\n")
    return root


def test_cgroup_v2_quota(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path / "a", "200000 100000\n")) == 2.0
    assert cpu_quota(_v2(tmp_path / "b", "150000 100000\n")) == 1.5
    assert cpu_quota(_v2(tmp_path / "c", "50000 100000\n")) == 0.5
    assert cpu_quota(_v2(tmp_path / "d", "max 100000\n")) is None  # no limit


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    assert cpu_quota(_v1(tmp_path / "a", "300000", "100000")) == 3.0
    assert cpu_quota(_v1(tmp_path / "b", "250000", "100000", "cpu,cpuacct")) == 2.5
    assert cpu_quota(_v1(tmp_path / "c", "-1", "100000")) is None  # no limit


def test_nothing_readable_is_no_quota(tmp_path: Path) -> None:
    assert cpu_quota(tmp_path / "absent") is None
    assert cpu_quota(_v2(tmp_path / "junk", "lots\n")) is None
    assert cpu_quota(_v2(tmp_path / "zero", "100000 0\n")) is None
    assert cpu_quota(_v1(tmp_path / "v1junk", "x", "100000")) is None


def test_the_quota_caps_the_cores_and_rounds_up(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path / "absent") == CORES
    assert usable_cpus(_v2(tmp_path / "one", "100000 100000")) == 1
    assert usable_cpus(_v2(tmp_path / "half", "50000 100000")) == 1  # never 0
    assert usable_cpus(_v2(tmp_path / "frac", "150000 100000")) == min(CORES, 2)
    assert usable_cpus(_v2(tmp_path / "big", "6400000 100000")) == CORES  # above the node's
    assert usable_cpus(_v2(tmp_path / "max", "max 100000")) == CORES


def test_the_batcher_opens_one_lane_a_usable_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import serving.service

    monkeypatch.setattr(serving.service, "usable_cpus", lambda: 3)
    b = RouteBatcher(lambda qs: qs)
    assert (b.parallel, b.bulk_lanes) == (3, 2)
    assert RouteBatcher(lambda qs: qs, parallel=5).parallel == 5  # an explicit count wins
