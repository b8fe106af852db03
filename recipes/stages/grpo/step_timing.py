"""Where a GRPO/DAPO step's time goes, and how far it is from what its arithmetic says it must cost.

Issue 25 asks why a DAPO step on two cores takes about twice what its FLOPs need. Guessing at padding,
full-vocabulary logits or rambling generations is no way to choose what to fix, so every optimizer step
logs, as verl logs its `timing_s/*`:

* `timing_s/generate` (every generation round, summed: dynamic sampling runs several), `timing_s/update_weights`
  (pushing the policy's weights into vLLM before it generates; 0 without vLLM), `timing_s/rewards`,
  `timing_s/logprobs` (forward passes without gradient: old / reference log-probs, a buffer's sampling
  log-probs), `timing_s/forward_backward` (the loss passes and their backward), `timing_s/optimizer`
  (everything after the last loss pass: clipping, the optimizer and scheduler steps, zero_grad) and
  `timing_s/step` (from the trainer's step begin to its step end). Times are exclusive: a phase running
  inside another (generation inside the loss pass's input preparation) counts once, so the phases sum to
  at most the step; what they leave is bookkeeping (tokenising, padding, advantages, logging);
* `tokens/generated`, `tokens/trained` (non-pad positions of the loss passes, prompt + completion) and
  `tokens/padding_share` (padded positions / all positions of the loss passes);
* `perf/flops` (`step_flops`: what the step's tokens need, not what the code spends on them),
  `perf/flops_per_s` and `perf/share_of_peak` against this machine's own fp32 matrix-multiply peak
  (`matmul_peak_flops`: a microbenchmark of under two seconds, cached per machine).

Counts and times are this process's own (the peak is too, at its thread count); with several processes the
main one's are logged. `StepTimer` holds the clocks, RLVRGRPOTrainer opens its phases, `StepTimingCallback`
closes each step and hands its record to the trainer's metrics (hence to metrics.jsonl through the monitor),
and `StepTimer.summary` is the run card's `timing`.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import platform
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import TrainerCallback

from basics.atomic_files import write_atomic

logger = logging.getLogger(__name__)

PHASES = ("generate", "update_weights", "rewards", "logprobs", "forward_backward", "optimizer")
TIMING_KEYS = (
    *(f"timing_s/{phase}" for phase in PHASES),
    "timing_s/step",
    "tokens/generated",
    "tokens/trained",
    "tokens/padding_share",
    "perf/flops",
    "perf/flops_per_s",
    "perf/share_of_peak",
)
CACHE_FILE = "matmul_peak.json"
PEAK_BUDGET_S = 1.5  # the microbenchmark's time budget, warm-up excluded


# ---------------------------------------------------------------- the FLOP count


def step_flops(
    generated_tokens: float,
    trained_tokens: float,
    params_total: float,
    params_trainable: float,
    recomputation: bool = False,
) -> float:
    """FLOPs a step's tokens need: 2N per generated token plus, per trained token, 4N + 2N_trainable (+2N).

    A token's forward pass is 2N multiply-adds' worth (N parameters). Its backward pass is two matmuls per
    weight: the activation gradient (2N, needed through every layer, frozen or not, to reach the trainable
    ones) and the weight gradient (2 x the trainable parameters). Full fine-tuning is thus 6N per trained
    token; a LoRA adapter on a frozen base about 4N. Activation recomputation runs the forward pass once more
    in the backward pass: +2N, which is x4/3 for full weights (8N) and x3/2 under LoRA (6N). Attention's
    own FLOPs (quadratic in the length) are left out: at these lengths (~100 tokens) they are ~1% of 2N.
    """
    per_trained = 4 * params_total + 2 * params_trainable + (2 * params_total if recomputation else 0)
    return 2 * params_total * generated_tokens + per_trained * trained_tokens


# ---------------------------------------------------------------- the machine's peak


def cache_dir() -> Path:
    """~/.cache/rlvr-recipes (or $XDG_CACHE_HOME/rlvr-recipes): where per-machine measurements are kept."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlvr-recipes"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key(device: str | torch.device = "cpu") -> str:
    """What the peak depends on: the processor, torch's version, its thread count and its CPU kernels.

    The kernels (ATEN_CPU_CAPABILITY: AVX2, AVX-512) change the peak on the same processor, and a process
    with fewer threads has a lower one, so each combination is measured once.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}|torch {torch.__version__}"
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # an old torch
        capability = os.environ.get("ATEN_CPU_CAPABILITY", "default")
    return f"{_cpu_model()}|torch {torch.__version__}|threads {torch.get_num_threads()}|{capability}"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _measure_peak(device: torch.device, budget_s: float = PEAK_BUDGET_S) -> float:
    """The best FLOP/s of a few square fp32 matmuls (2n^3 FLOPs each), sizes large enough to reach the peak."""
    sizes = (4096, 8192) if device.type == "cuda" else (512, 1024)
    generator = torch.Generator(device=device).manual_seed(0)  # the global RNG, hence training's samples, untouched
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=device, generator=generator)
        b = torch.randn(n, n, device=device, generator=generator)
        out = torch.empty(n, n, device=device)
        torch.mm(a, b, out=out)  # warm-up: thread pool, kernels, caches
        _sync(device)
        spent, reps = 0.0, 0
        while reps < 2 or (spent < budget_s / len(sizes) and reps < 20):
            start = time.perf_counter()
            torch.mm(a, b, out=out)
            _sync(device)
            seconds = time.perf_counter() - start
            spent, reps = spent + seconds, reps + 1
            best = max(best, 2 * n**3 / seconds)
    return best


def matmul_peak_flops(
    device: str | torch.device = "cpu", refresh: bool = False, directory: Path | None = None
) -> float:
    """This machine's fp32 matrix-multiply peak in FLOP/s, measured once per `machine_key` and cached.

    The bound a step is compared with must be this machine's, not a datasheet's: two cores of a shared
    cloud VM reach a fraction of their nominal figure. The cache (`CACHE_FILE` under `cache_dir()`) keeps
    the measurement from costing every run its two seconds; `refresh` measures again (a first measurement
    taken while the machine was busy is low).
    """
    device = torch.device(device)
    return measured_once(CACHE_FILE, "flops_per_s", lambda: _measure_peak(device), device, refresh, directory)


def measured_once(
    file_name: str, field: str, measure, device="cpu", refresh: bool = False, directory: Path | None = None
) -> float:
    """`measure()` for this machine (`machine_key`), cached under `field` in `file_name` under `cache_dir()`;
    `refresh` measures again. A positive cached figure is returned as it is."""
    path = (directory or cache_dir()) / file_name
    key = machine_key(device)
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    if not refresh and isinstance(cached.get(key), dict) and cached[key].get(field, 0) > 0:
        return float(cached[key][field])
    value = measure()
    cached[key] = {field: value, "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        write_atomic(path, json.dumps(cached, indent=2))  # two processes measuring at once leave a whole file
    except OSError as error:
        logger.warning("could not cache %s in %s: %s", field, path, error)
    logger.info("%s %.4g (%s), cached in %s", field, value, key, path)
    return value


# ---------------------------------------------------------------- the clocks


class StepTimer:
    """Per-step clocks and token counts; `phase` is opened by the trainer around each phase's method.

    Idle outside a training step (evaluation, saving), so that only steps are measured.
    """

    def __init__(self, device: str | torch.device = "cpu", phases: tuple[str, ...] = PHASES):
        """`phases`: PHASES, and "tools" where the policy calls tools (its time inside generation)."""
        self.device = torch.device(device)
        self.phases = phases
        self.active = False
        self.records: list[dict] = []
        self.peak_flops_per_s: float | None = None
        self.params_total = 0
        self.params_trainable = 0
        self.recomputation = False
        self._totals = defaultdict(float)  # over the run: positions, trained tokens, flops, step seconds
        self._reset()

    def _reset(self) -> None:
        self._seconds = dict.fromkeys(self.phases, 0.0)  # and "prepare": what input preparation adds
        self._counts = defaultdict(int)
        self._stack: list[float] = []  # time spent in phases nested in each open phase
        self._loss_pass_end: float | None = None
        self._step_start = 0.0

    def _now(self) -> float:
        _sync(self.device)
        return time.perf_counter()

    def start_run(self, model, recomputation: bool) -> None:
        """What the FLOP count needs of the model, and the peak (measured here, outside any step)."""
        seen, total, trainable = set(), 0, 0
        for parameter in model.parameters():
            if id(parameter) in seen:  # tied weights count once
                continue
            seen.add(id(parameter))
            total += parameter.numel()
            trainable += parameter.numel() if parameter.requires_grad else 0
        self.params_total, self.params_trainable, self.recomputation = total, trainable, bool(recomputation)
        try:
            self.peak_flops_per_s = matmul_peak_flops(self.device)
        except Exception as error:  # noqa: BLE001 - the run must not fail for a missing figure
            logger.warning("no matmul peak measured (%s): perf/share_of_peak is left out", error)
            self.peak_flops_per_s = None

    def begin_step(self) -> None:
        self._reset()
        self._step_start = self._now()
        self.active = True

    @contextmanager
    def phase(self, name: str):
        """Time the block as `name`, less what phases nested in it take (they count as themselves)."""
        if not self.active:
            yield
            return
        start = self._now()
        self._stack.append(0.0)
        try:
            yield
        finally:
            end = self._now()
            elapsed = end - start
            self._seconds[name] = self._seconds.get(name, 0.0) + elapsed - self._stack.pop()
            if self._stack:
                self._stack[-1] += elapsed
            if name == "forward_backward":
                self._loss_pass_end = end

    def count(self, name: str, value: int) -> None:
        if self.active:
            self._counts[name] += int(value)

    def end_step(self) -> dict:
        """Close the step: its record of TIMING_KEYS (kept for the summary and returned for the log)."""
        end = self._now()
        self.active = False
        if self._loss_pass_end is not None:
            self._seconds["optimizer"] = end - self._loss_pass_end
        step_seconds = end - self._step_start
        positions, trained = self._counts["positions"], self._counts["trained"]
        flops = step_flops(
            self._counts["generated"], trained, self.params_total, self.params_trainable, self.recomputation
        )
        record = {f"timing_s/{phase}": self._seconds[phase] for phase in self.phases}
        record.update(
            {
                "timing_s/step": step_seconds,
                "tokens/generated": self._counts["generated"],
                "tokens/trained": trained,
                "tokens/padding_share": (positions - trained) / positions if positions else 0.0,
                "perf/flops": flops,
                "perf/flops_per_s": flops / step_seconds if step_seconds > 0 else 0.0,
            }
        )
        if self.peak_flops_per_s:
            record["perf/share_of_peak"] = record["perf/flops_per_s"] / self.peak_flops_per_s
        for key, value in (("positions", positions), ("trained", trained), ("flops", flops)):
            self._totals[key] += value
        self._totals["step_seconds"] += step_seconds
        self.records.append(record)
        return record

    def summary(self) -> dict:
        """The run card's `timing`: mean and total seconds per phase (the weight push's among them), tokens per
        step, FLOP/s over the run's steps."""
        if not self.records:
            return {"steps": 0}
        steps = len(self.records)

        def total(key: str) -> float:
            return sum(record[key] for record in self.records)

        def mean(key: str) -> float:
            return total(key) / steps

        seconds = self._totals["step_seconds"]
        flops_per_s = self._totals["flops"] / seconds if seconds > 0 else 0.0
        positions = self._totals["positions"]
        return {
            "steps": steps,
            "seconds_per_step": {phase: mean(f"timing_s/{phase}") for phase in (*self.phases, "step")},
            "seconds_total": {phase: total(f"timing_s/{phase}") for phase in (*self.phases, "step")},
            "tokens_per_step": {"generated": mean("tokens/generated"), "trained": mean("tokens/trained")},
            "padding_share": (positions - self._totals["trained"]) / positions if positions else 0.0,
            "flops_per_step": mean("perf/flops"),
            "flops_per_s": flops_per_s,
            "peak_flops_per_s": self.peak_flops_per_s,
            "share_of_peak": flops_per_s / self.peak_flops_per_s if self.peak_flops_per_s else None,
            "params": {"total": self.params_total, "trainable": self.params_trainable},
            "recomputation": self.recomputation,
            "machine": machine_key(self.device),
        }


class StepTimingCallback(TrainerCallback):
    """Opens and closes each optimizer step's clocks and adds the step's record to the trainer's metrics.

    The Trainer calls `on_step_end` before it logs, so the record is in the step's own metrics.jsonl line;
    TRL averages metrics over a logging window, so with `logging_steps` > 1 a line holds per-step means.
    """

    def __init__(self, timer: StepTimer, metrics: dict):
        self.timer = timer
        self.metrics = metrics  # the trainer's _metrics: {"train": {key: [values]}, ...}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.timer.start_run(model, recomputation=args.gradient_checkpointing)

    def on_step_begin(self, args, state, control, **kwargs):
        self.timer.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        if not self.timer.active:
            return
        for key, value in self.timer.end_step().items():
            self.metrics["train"][key].append(value)
