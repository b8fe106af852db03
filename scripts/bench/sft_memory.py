"""Benchmark: where an SFT step's memory goes on the real model, and what brings its peak down, side by side.

    python scripts/bench/sft_memory.py [--model artifacts/models/smollm2-135m-instruct] [--steps 2]
        [--config recipes/configs/smollm2-135m/sft.yaml] [--variant NAME "--flag value ..."]...

Each variant runs `recipes/sft.py` with the config for `--steps` steps in its own process, and the RSS of its
process tree is sampled every 50 ms: printed per variant are the peak, the training time (the Trainer's
train_runtime) and the training loss (variants that change only how a batch is computed train the same
loss). The default variants: the config as it is (8 sequences of up to 256 tokens at once), the same with
activation recomputation, and the same batch in two micro-batches of 4 (gradient accumulation).
"""

from __future__ import annotations

import argparse
import ast
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VARIANTS = {
    "as configured": "",
    "activation recomputation": "--gradient_checkpointing true",
    "2 micro-batches of 4": "--per_device_train_batch_size 4 --gradient_accumulation_steps 2",
}


def run(model: str, config: str, steps: int, flags: str) -> dict:
    import psutil

    with tempfile.TemporaryDirectory(prefix="rlvr-sft-memory-") as out:
        command = [sys.executable, str(REPO / "recipes" / "sft.py"), "--config", config, "--model_name_or_path", model]
        command += ["--max_steps", str(steps), "--warmup_steps", "0", "--output_dir", out, *shlex.split(flags)]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1"}
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
        )
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
        tree, peak = psutil.Process(process.pid), 0
        while process.poll() is None:
            try:
                peak = max(peak, tree.memory_info().rss + sum(c.memory_info().rss for c in tree.children(True)))
            except psutil.Error:
                pass
            time.sleep(0.05)
        time.sleep(0.2)
    if process.returncode != 0:
        raise RuntimeError(f"{flags or 'as configured'} failed:\n" + "".join(lines[-30:]))
    summary = next(ast.literal_eval(line[line.index("{") :]) for line in lines if "'train_runtime'" in line)
    return {"peak_gib": peak / 2**30, "seconds": float(summary["train_runtime"]), "loss": float(summary["train_loss"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(REPO / "artifacts/models/smollm2-135m-instruct"))
    parser.add_argument("--config", default=str(REPO / "recipes/configs/smollm2-135m/sft.yaml"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "FLAGS"), default=None)
    args = parser.parse_args()
    variants = dict(args.variant) if args.variant else VARIANTS
    results = {name: run(args.model, args.config, args.steps, flags) for name, flags in variants.items()}
    base = next(iter(results.values()))
    print(f"{args.steps} SFT steps of {args.model} ({args.config})\n")
    print("| variant | peak RSS | vs first | train time | vs first | train loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        print(
            f"| {name} | {result['peak_gib']:.2f} GiB | {result['peak_gib'] / base['peak_gib']:.2f}x | "
            f"{result['seconds']:.1f} s | {result['seconds'] / base['seconds']:.2f}x | {result['loss']:.4f} |"
        )


if __name__ == "__main__":
    main()
