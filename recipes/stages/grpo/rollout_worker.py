"""A rollout worker: a process of its own that samples completions with eval.decoding while the trainer trains.

TRL's asynchronous GRPO (trl.experimental) generates on a vLLM server and pushes weights over NCCL, and has no
dynamic sampling; vLLM on a CPU costs a second engine's memory and a file push a step. What this adds is the
CPU case with nothing but torch: a spawned process holding a plain copy of the policy (the LoRA adapter merged)
in the sampling dtype, fed the weights through shared memory, one copy a push, and asked for completions of
token-id prompts.

Which weights a request samples with is fixed when it is submitted: a request samples with the weights pushed
last before it. `push` waits until the worker has started every request submitted before it (the worker takes
them in order, so the wait is almost always none), so a race between the two processes never decides which
policy sampled a batch, and a run is reproducible from its seed.

A request carries either the trainer's RNG state (the result brings the state after it back, so that sampling
in the worker is, bit for bit, sampling in the trainer: the staleness 0 test) or a seed of its own.
"""

from __future__ import annotations

import logging
import queue
import time
import traceback
from dataclasses import dataclass, field

import torch

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 600.0  # building the model in a fresh process: imports and a from_config


def plain_parameters(model) -> dict[str, torch.Tensor]:
    """The model's parameters under the names a plain transformers model of its architecture has: for a PEFT model
    the base model's, LoRA's own tensors left out and `base_layer` / `modules_to_save.<adapter>` unwrapped (the
    adapter must be merged into the base weights for these to be the policy). Tied weights appear once."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    named = {}
    for name, parameter in inner.named_parameters():
        parts = name.split(".")
        if any(part.startswith("lora_") for part in parts) or "original_module" in parts:
            continue
        if "modules_to_save" in parts:
            at = parts.index("modules_to_save")
            parts = parts[:at] + parts[at + 2 :]
        named[".".join(part for part in parts if part != "base_layer")] = parameter.detach()
    return named


@dataclass
class Request:
    """Completions for `prompt_ids` (one row each; a group's prompt repeated), sampled as the trainer would."""

    number: int
    prompt_ids: list[list[int]]
    limits: dict  # max_new_tokens, stop_ids, pad_id, share_prefixes: compact_generation.sampling_limits
    distribution: tuple[float, float, int | None]  # temperature, top_p, top_k
    rng_state: torch.Tensor | None = None  # the trainer's torch RNG state, or None: `seed`
    seed: int = 0


@dataclass
class Result:
    number: int
    completion_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    version: int = -1  # the weights' version (the trainer's step at its push) the completions were sampled with
    rng_state: torch.Tensor | None = None
    seconds: float = 0.0
    error: str | None = None


def _serve(config, dtype, buffers, version, started, busy, lock, requests, results, threads):  # the worker process
    torch.set_num_threads(threads)
    try:
        from transformers import AutoModelForCausalLM

        from eval.decoding import global_sampler, sample_tokens

        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
        params = dict(model.named_parameters())
        if set(params) != set(buffers):
            raise ValueError(
                f"the worker's model has other parameters than the policy's: only in the worker "
                f"{sorted(set(params) - set(buffers))[:5]}, only in the policy {sorted(set(buffers) - set(params))[:5]}"
            )
    except Exception:  # noqa: BLE001 - reported to the trainer, which samples in its own process instead
        results.put(Result(-1, error=traceback.format_exc()))
        return
    results.put(Result(-1))  # ready
    loaded = None
    while True:
        request = requests.get()
        if request is None:
            return
        start = time.perf_counter()
        result = Result(request.number)
        try:
            with lock:
                started.value = request.number  # first: a push waiting on this request must not wait forever
                if loaded != version.value:
                    loaded = None  # half-copied weights are no version
                    with torch.no_grad():
                        for name, parameter in params.items():
                            parameter.copy_(buffers[name])
                    loaded = version.value
            result.version = loaded
            if request.rng_state is not None:
                torch.set_rng_state(request.rng_state)
            else:
                torch.manual_seed(request.seed)
            result.completion_ids = sample_tokens(
                model,
                request.prompt_ids,
                **request.limits,
                pick=global_sampler(*request.distribution, with_logprobs=True),
                logprobs=result.logprobs,
            )
            result.rng_state = torch.get_rng_state()
        except Exception:  # noqa: BLE001 - the trainer samples this request itself
            result.error = traceback.format_exc()
        result.seconds = time.perf_counter() - start
        with busy.get_lock():
            busy.value += result.seconds
        results.put(result)


class RolloutWorker:
    """The worker process and its side of the trainer: `push` weights, `submit` requests, `result` by number."""

    def __init__(self, model, dtype: torch.dtype = torch.float32, threads: int = 1):
        """`model`: the policy as it samples (a PEFT model's adapter merged), whose config builds the copy."""
        import torch.multiprocessing as mp

        context = mp.get_context("spawn")  # a fork of a process with torch's thread pools running can deadlock
        named = plain_parameters(model)
        self.dtype = dtype
        self.buffers = {name: torch.empty(p.shape, dtype=dtype).share_memory_() for name, p in named.items()}
        self.version = context.Value("q", -1, lock=False)  # written under self.lock
        self.started = context.Value("q", -1, lock=False)  # the number of the last request the worker started
        self.busy = context.Value("d", 0.0)  # the worker's seconds spent on requests, over the run
        self.lock = context.Lock()
        self.requests = context.Queue()
        self.results = context.Queue()
        self.submitted = -1
        self.done: dict[int, Result] = {}
        self.abandoned: set[int] = set()  # requests whose results nobody will take: dropped as they come
        self.wait_s = 0.0  # the trainer's seconds spent waiting for results, over the run
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.process = context.Process(
            target=_serve,
            args=(
                inner.config,
                dtype,
                self.buffers,
                self.version,
                self.started,
                self.busy,
                self.lock,
                self.requests,
                self.results,
                threads,
            ),  # fmt: skip
            daemon=True,
            name="rollout-worker",
        )
        self.process.start()
        ready = self._next_result(START_TIMEOUT_S)
        if ready.error:
            self.close()
            raise RuntimeError(
                f"the rollout worker could not start:\n{ready.error}\nIts process is spawned: a script that trains "
                "must do so under `if __name__ == '__main__':`, as for torch's DataLoader workers. max_staleness: 0 "
                "samples in the trainer."
            )

    def alive(self) -> bool:
        return self.process.is_alive()

    def push(self, model, version: int) -> None:
        """Copy the policy's weights (`model` as it samples) into shared memory as `version`, once every request
        submitted so far has started (see the module docstring)."""
        while self.started.value < self.submitted and self.alive():
            time.sleep(0.001)
        named = plain_parameters(model)
        with self.lock, torch.no_grad():
            for name, buffer in self.buffers.items():
                buffer.copy_(named[name])
            self.version.value = version

    def submit(self, request: Request) -> int:
        request.number = self.submitted = self.submitted + 1
        self.requests.put(request)
        return request.number

    def result(self, number: int) -> Result:
        """The result of request `number`, waiting for it (the wait counted in `wait_s`)."""
        start = time.perf_counter()
        try:
            while number not in self.done:
                result = self._next_result(None)
                if result.number < 0:  # the worker is gone: no result will come
                    return Result(number, error=result.error)
                if result.number in self.abandoned:
                    self.abandoned.discard(result.number)
                else:
                    self.done[result.number] = result
            return self.done.pop(number)
        finally:
            self.wait_s += time.perf_counter() - start

    def abandon(self, number: int) -> None:
        """Nobody will take request `number`'s result: drop it (now, or when it comes)."""
        if self.done.pop(number, None) is None:
            self.abandoned.add(number)

    def _next_result(self, timeout: float | None) -> Result:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self.results.get(timeout=1.0)
            except queue.Empty:
                if not self.alive():
                    return Result(-2, error=f"the rollout worker died (exit code {self.process.exitcode})")
                if deadline is not None and time.monotonic() > deadline:
                    return Result(-2, error=f"the rollout worker did not answer within {timeout:.0f} s")

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self.requests.put(None)
                self.process.join(timeout=10)
            finally:
                if self.process.is_alive():
                    self.process.kill()
                    self.process.join(timeout=10)
