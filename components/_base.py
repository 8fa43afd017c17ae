"""What every component shares: the project image, and no pip install at run time.

The image tag comes from pyproject's version (`IMAGE`), as in the Makefile and k8s/overlays.

The image (Dockerfile) installs requirements.lock, which pins kfp, so the lightweight
components run with the image's own kfp and r2adapter: `install_kfp_package=False` and
`packages_to_install=[]` keep the compiled command free of any `pip install`.

A component body is copied into the pipeline spec as source, so it may use only what it
imports inside itself (r2adapter, the standard library), never module-level helpers.
"""

import tomllib
from functools import partial
from importlib.metadata import version
from pathlib import Path

from kfp import dsl


def project_version() -> str:
    """pyproject's version, the one source of the image tags (the Makefile's IMAGE reads the
    same line); the installed package's metadata where there is no pyproject beside us."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    return version("r2adapter")


# what `make image` builds (Dockerfile target app); tests/containers/test_tags.py checks that
# the compiled pipeline and the rendered k8s overlays name exactly this
IMAGE = f"r2adapter:{project_version()}"
# what `make image-cuda` builds: the same image with the CUDA torch; the pipeline's GPU
# trainer runs it (pipelines/retrain.py, set_container_image), no other task does
CUDA_IMAGE = f"r2adapter-cuda:{project_version()}"

r2a_component = partial(
    dsl.component,
    base_image=IMAGE,
    packages_to_install=[],
    install_kfp_package=False,
)
