"""One source of truth for the image tags: pyproject's version. The Makefile (`make
print-image`, what `make image` builds), components/_base.py (every component's
base_image), the compiled pipelines/retrain.yaml and every container of the rendered k8s
overlays name exactly r2adapter:<version> (r2adapter-postgres:<version> for the
database). No Docker needed: this module is in the unit tier."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest
import yaml

from tests.conftest import ROOT
from tests.containers.conftest import pod_spec, render

pytestmark = pytest.mark.unit

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE, PG_IMAGE = f"r2adapter:{VERSION}", f"r2adapter-postgres:{VERSION}"
CUDA_IMAGE = f"r2adapter-cuda:{VERSION}"  # make image-cuda: the GPU trainer's image


def test_makefile_builds_the_version_tags() -> None:
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "print-image"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert out == [IMAGE, PG_IMAGE, CUDA_IMAGE]


def test_components_and_compiled_pipeline_name_the_image() -> None:
    from components._base import CUDA_IMAGE as COMPONENT_CUDA_IMAGE
    from components._base import IMAGE as COMPONENT_IMAGE

    assert (COMPONENT_IMAGE, COMPONENT_CUDA_IMAGE) == (IMAGE, CUDA_IMAGE)
    # the pipeline spec, then kfp-kubernetes' platform spec: the CUDA image exactly where an
    # accelerator is requested (a GPU task in the CPU image would train on the CPU)
    spec = next(yaml.safe_load_all((ROOT / "pipelines" / "retrain.yaml").read_text()))
    executors = spec["deploymentSpec"]["executors"].values()
    images = {ex["container"]["image"] for ex in executors}
    assert images == {IMAGE, CUDA_IMAGE}
    for ex in executors:
        gpu = "accelerator" in ex["container"].get("resources", {})
        assert (ex["container"]["image"] == CUDA_IMAGE) == gpu, ex["container"]["image"]
    # no component writes its own tag
    for path in (ROOT / "components").glob("*.py"):
        assert not re.search(r"base_image\s*=\s*[\"']", path.read_text()), path.name


@pytest.mark.parametrize("overlay", ["dev", "prod", "cronjob"])
def test_rendered_overlays_name_the_images(overlay: str) -> None:
    named = {}
    for obj in render(overlay):
        if obj["kind"] in {"Deployment", "StatefulSet", "CronJob"}:
            for c in pod_spec(obj)["containers"] + pod_spec(obj).get("initContainers", []):
                named[f"{obj['kind']}/{obj['metadata']['name']}/{c['name']}"] = c["image"]
    want = {
        "Deployment/r2a-serving/serving": IMAGE,
        "Deployment/r2a-mlflow/mlflow": IMAGE,
        "StatefulSet/r2a-postgres/postgres": PG_IMAGE,
    }
    if overlay == "cronjob":  # the optional component (k8s/components/retrain-cronjob)
        want["CronJob/r2a-retrain/submit"] = IMAGE
    assert named == want
