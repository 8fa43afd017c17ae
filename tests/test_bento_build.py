"""Issue 41, item 8: `bentoml build -f serving/bentofile.yaml .` as docs/containers.md says
to run it, in the project venv, with no `uv` on PATH and pip unable to reach an index: it
builds, installs nothing into the venv (BentoML 1.4.40's v2 image step calls
`get_uv_command()` whatever `lock_packages` says, which would `pip install uv` here and fail
with PIP_NO_INDEX), and the Bento's requirements are the lock's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # imports the service: about half a minute

BENTOML = Path(sys.executable).with_name("bentoml")
BUILD_ENV = {"BENTOML_ENABLE_FEATURES": "no_image"}  # docs/containers.md: the v1 Bento


def _installed() -> set[str]:
    r = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return set(r.stdout.split())


def test_bentoml_build_installs_nothing_and_packs_the_lock(tmp_path: Path) -> None:
    before = _installed()
    assert not [p for p in before if p.lower().startswith("uv==")]
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "uv").exists()
    )
    env = {
        **os.environ,
        **BUILD_ENV,
        "PATH": f"{BENTOML.parent}{os.pathsep}{path}",
        "BENTOML_HOME": str(tmp_path / "bentoml"),
        "PIP_NO_INDEX": "1",  # an attempted `pip install uv` fails instead of installing
        "BENTOML_DO_NOT_TRACK": "True",
    }
    r = subprocess.run(
        [str(BENTOML), "build", "-f", "serving/bentofile.yaml", "--output", "tag", "."],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert _installed() == before  # nothing went into the venv
    bentos = list((tmp_path / "bentoml" / "bentos" / "r2adapter").glob("*/bento.yaml"))
    assert len(bentos) == 1, r.stdout[-2000:]
    reqs = (bentos[0].parent / "env" / "python" / "requirements.txt").read_text().split("\n")
    lock = [x for x in (ROOT / "requirements.lock").read_text().split("\n") if x.strip()]
    assert [x for x in reqs if x.strip() and not x.startswith("#")][: len(lock)] == lock
    assert (bentos[0].parent / "src" / "serving" / "cpus.py").is_file()
