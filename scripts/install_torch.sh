#!/usr/bin/env bash
# Install torch into a venv before anything that depends on it.
#   usage: scripts/install_torch.sh VENV_PYTHON TORCH_VERSION
# Why: PyPI's Linux torch wheel is the CUDA build (several GB). Installing trl or transformers into an
# empty venv pulls it in even on a laptop without a GPU, so torch is installed first, and on a Linux
# machine without an NVIDIA GPU as the CPU build.
set -euo pipefail
py=$1
version=$2

if installed=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  echo "torch $installed already installed"
  exit 0
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "NVIDIA GPU found: installing the CUDA build of torch $version"
  "$py" -m pip install --quiet "torch==$version"
elif [ "$(uname -s)" = "Linux" ]; then
  echo "no NVIDIA GPU: installing the CPU build of torch $version"
  # A local wheel or mirror that carries the CPU build is used first; PyTorch's CPU index otherwise.
  "$py" -m pip install --quiet "torch==$version+cpu" 2>/dev/null \
    || "$py" -m pip install --quiet "torch==$version" --extra-index-url https://download.pytorch.org/whl/cpu
else
  # macOS and Windows wheels on PyPI are CPU (and MPS) builds already.
  "$py" -m pip install --quiet "torch==$version"
fi
# The version from the package's metadata, not `import torch`: torch imported before numpy is installed (the
# project's install comes next) printed "Failed to initialize NumPy" at every setup.
"$py" -c 'import importlib.metadata as m; print("installed torch", m.version("torch"))'
