"""What every component shares: the project image, and no pip install at run time.

The image (Dockerfile) installs requirements.lock, which pins kfp, so the lightweight
components run with the image's own kfp and r2adapter: `install_kfp_package=False` and
`packages_to_install=[]` keep the compiled command free of any `pip install`.

A component body is copied into the pipeline spec as source, so it may use only what it
imports inside itself (r2adapter, the standard library), never module-level helpers.
"""

from functools import partial

from kfp import dsl

IMAGE = "r2adapter:0.1.0"

r2a_component = partial(
    dsl.component,
    base_image=IMAGE,
    packages_to_install=[],
    install_kfp_package=False,
)
