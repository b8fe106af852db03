"""The run card: what a checkpoint was trained with, saved beside it as `run_card.json`.

A number without its protocol misleads; so does a checkpoint. The card holds the resolved
configuration (YAML and flags merged), the dataset's fingerprint and size, the command line, the
package versions and the git commit, so a run can be read and repeated from its output folder alone.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from basics.atomic_files import write_atomic

logger = logging.getLogger(__name__)

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "math-verify", "deepspeed", "vllm")


def package_versions() -> dict[str, str]:
    from basics.versions import package_versions as installed  # a bottom helper, not eval's command line

    return installed(PACKAGES)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


# The instruction sets that decide which float kernels run (and so a run's samples, and what `auto` precision
# resolves to): AVX2 emulates bf16, AVX512-BF16 multiplies it natively, AMX in tiles.
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """The CPU a run ran on: its model name, which ISA_FLAGS it has (/proc/cpuinfo), the kernels torch dispatches
    to, and the environment variables that hold the kernels back. A figure measured in bf16 on one CPU is not the
    figure of another."""
    import platform

    import torch

    flags, model = set(), platform.processor() or platform.machine()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "flags" and not flags:
                flags = set(value.split())
            elif key.strip() == "model name":
                model = value.strip()
    except OSError:  # not Linux: the model name platform gives, no flags
        pass
    return {
        "cpu": model,
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "kernel_env": {name: os.environ[name] for name in KERNEL_ENV if name in os.environ},
    }


def _as_dict(config) -> dict:
    if hasattr(config, "to_dict"):  # TrainingArguments: serialisable, secrets (hub tokens) redacted
        return config.to_dict()
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def write_run_card(output_dir: str | Path, configs: dict, datasets: dict | None = None, extra: dict | None = None):
    """Write `output_dir/run_card.json`. `configs` maps a name to a dataclass; `datasets` a name to a Dataset."""
    card = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "git_commit": git_commit(),
        "versions": package_versions(),
        "machine": machine(),
        "config": {name: _as_dict(config) for name, config in configs.items()},
        "datasets": {
            name: {"rows": len(dataset), "fingerprint": getattr(dataset, "_fingerprint", None)}
            for name, dataset in (datasets or {}).items()
        },
    }
    card.update(extra or {})
    path = write_atomic(Path(output_dir) / "run_card.json", json.dumps(card, indent=2, default=str) + "\n")
    logger.info("run card written to %s", path)
    return path
