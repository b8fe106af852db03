# rlvr-recipes. A new user runs two commands: `make test` and `make demo`. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0

# CPU runs: one OpenMP/MKL thread per process. Several torch processes that each take every core
# (pytest workers, 2-process accelerate runs) were measured here up to 35x slower than with one
# thread each. A single-process run may raise it (scripts/demo.py picks its own, see --threads).
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_DISABLE_TELEMETRY := 1

# pytest workers: one per core, at most 4.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: setup lint format test demo clean

setup: $(VENV)/.installed

# torch goes in FIRST: installing trl into an empty venv would resolve a multi-GB CUDA torch even on a
# machine without a GPU. scripts/install_torch.sh picks the CPU build when no NVIDIA GPU is present.
$(VENV)/.installed: pyproject.toml scripts/install_torch.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	bash scripts/install_torch.sh $(PY) $(TORCH_VERSION)
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Offline on purpose: every test builds its own tiny model and data.
test: setup lint
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) scripts/demo.py $(DEMO_ARGS)

clean:
	rm -rf artifacts .pytest_cache .ruff_cache
