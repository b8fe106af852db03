"""Generation that does not wait for training: the next batches sampled by a rollout worker while the trainer
learns from this one (one-step off-policy; `max_staleness` steps at most), for RLVRGRPOTrainer on the
transformers path.

Why our own: TRL's asynchronous GRPO (trl.experimental.async_grpo) samples on a vLLM server over NCCL, which a
CPU has not, and none of TRL's trainers has DAPO's dynamic sampling (trl#3708); verl's one-step-off and fully
asynchronous modes need Ray and GPUs. Here the worker is a second process on the machine's spare core
(recipes.stages.grpo.rollout_worker), and everything else, dynamic sampling included, stays the trainer's.

How a step runs with `max_staleness: s` (s >= 1):
* `get_batch_samples` (`AsyncRollouts.batch_samples`) reads the dataloader s optimizer steps ahead, so the generation batches of the next s
  steps are known (the curriculum's weights for them are therefore up to s steps old, too);
* at a step's generation (`prepare`, called by the trainer's `_generate_and_score_completions` before
  dynamic sampling's rounds) the trainer pushes its weights to the worker when
  `weight_sync_steps` steps have passed since the last push, then submits every generation batch read ahead
  that has no request yet; the worker samples them in order, each with the weights pushed last before its
  submission, while the trainer scores and trains;
* with dynamic sampling (`batch` mode), once a step's rounds are done the position of the extra-prompt stream is
  known, and the next step's first extra round is requested too (`request_next_extra_round`);
* `_generate_single_turn` takes a batch the worker sampled (`take`) (matched by its prompt ids) instead of sampling;
  anything else (further extra rounds, held-out evaluation) is sampled in the trainer as before, with the
  current weights, and so is a round the worker sampled more than the staleness bound ago.
A batch trained at step t was sampled with the weights of step t - s at the oldest (t - s - weight_sync_steps +
1 with less frequent pushes); logged as `async/staleness`. The loss corrects for it as for any sampler that is
not the policy: the sampler's log-probs come with the batch, and TRL's importance-sampling options
(`vllm_importance_sampling_*`, recipes.stages.grpo.sampler_correction) weigh each token by pi_theta /
pi_sampler, truncated, the ratio's anchor being the weights that train (AReaL's decoupled PPO). What staleness
costs in accuracy is measured (docs/benchmarks.md): on the tiny demo one step cost pass@1 even corrected, least
with `vllm_importance_sampling_mode: token_truncate`, so 0 stays the default and a run that sets it is warned
(`staleness_warnings`).

`rollout_worker: true` with `max_staleness: 0` samples each batch in the worker with the current weights, the
trainer waiting, and the trainer's RNG state travelling with the request and back: the run is the synchronous
one bit for bit (tests/test_async_rollouts.py), which is what makes the worker's sampling trustworthy.

Logged per step: `async/staleness`, `async/worker_rounds` (the generation rounds the worker served),
`async/trainer_idle_ratio` (the share of the step the trainer waited for the
worker), `async/rollouter_idle_ratio` (the share the worker had nothing to do: verl's `rollouter/idle_ratio`),
and the push as `timing_s/update_weights`.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

SEED_STRIDE = 1_000_003  # a run's requests draw seeds seed * SEED_STRIDE + request number


def ids_key(prompt_ids) -> tuple:
    """A batch's prompt token ids as the key a request is matched by."""
    return tuple(tuple(ids) for ids in prompt_ids)


def worker_conditions(args, compact_applies: bool, tools: bool, num_iterations: int, sharded: bool) -> list[str]:
    """What keeps a run from sampling in a rollout worker; [] when nothing does. `compact_applies`: compact
    generation serves this run; `tools`: tools, environments or a rollout_func are set; `sharded`: DeepSpeed or
    FSDP."""
    problems = []
    if not compact_applies:
        problems.append(
            "the worker samples as compact generation does: compact_generation true, no vLLM, temperature > 0, "
            "no min_p, repetition penalty or extra generation kwargs"
        )
    if tools:
        problems.append("tools, environments and rollout_func run in the trainer")
    if args.steps_per_generation * num_iterations != args.gradient_accumulation_steps:
        problems.append(
            f"one generation batch must be one optimizer step: steps_per_generation x num_iterations "
            f"({args.steps_per_generation} x {num_iterations}) = gradient_accumulation_steps "
            f"({args.gradient_accumulation_steps})"
        )
    if sharded:
        problems.append("DeepSpeed's and FSDP's sharded parameters cannot be copied to the worker")
    return problems


def staleness_warnings(args) -> list[str]:
    """What the measurements say about this run's correction for stale samples (docs/benchmarks.md, 3 seeds each,
    pass@1 paired with staleness 0): on the tiny demo, uncorrected, training collapsed (-0.46), TRL's default
    `sequence_mask` cost -0.087 and `token_truncate` -0.048; on SmolLM2's LoRA DAPO, `token_truncate` cost -0.058,
    all that the synchronous runs gained."""
    if args.max_staleness == 0:
        return []
    if not args.vllm_importance_sampling_correction:
        return [
            "max_staleness > 0 without vllm_importance_sampling_correction: stale samples go uncorrected, and on the "
            "tiny demo DAPO collapsed so (pass@1 -0.46 against staleness 0, 3 seeds; docs/benchmarks.md)"
        ]
    if args.vllm_importance_sampling_mode != "token_truncate":
        return [
            f"max_staleness > 0 with vllm_importance_sampling_mode {args.vllm_importance_sampling_mode}: on the tiny "
            "demo token_truncate lost less to one step of staleness (pass@1 -0.048 against -0.087 for "
            "sequence_mask, 3 seeds; docs/benchmarks.md)"
        ]
    return [
        "max_staleness > 0 trades accuracy for time: even with token_truncate, one step of staleness cost DAPO "
        "pass@1 on the tiny demo (-0.048) and on SmolLM2 all it gained (-0.058 against staleness 0, 3 seeds each; "
        "docs/benchmarks.md). Measure it for this model and learning rate"
    ]


def spare_cores(local_processes: int, threads: int) -> bool:
    """Whether this machine has a core for each process's worker beside its trainer's threads."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores >= local_processes * (threads + 1)


@dataclass
class WorkerIO:
    """What the rollout worker's requests need of the trainer at one step: `policy()` the policy as it samples (a
    context manager: compact_generation.policy_as_it_samples), the dtype it samples in, `push_phase()` the timed
    phase a weight push counts under, `key_of(rows)` a batch's prompt ids as a request's key (ids_key of TRL's
    tokenisation), the sampling limits and (temperature, top_p, top_k), and the trainer's global step."""

    policy: Callable
    sampling_dtype: torch.dtype
    push_phase: Callable
    key_of: Callable[[list[dict]], tuple]
    limits: dict
    distribution: tuple
    step: int


class AsyncRollouts:
    """The rollout worker's side of a run (module docstring): the dataloader read ahead, the requests, the pushes.
    The trainer calls `batch_samples` for each optimizer step's batches, `prepare` before a step's generation,
    `request_next_extra_round` after dynamic sampling, `take` where it would sample, and `close` at the end."""

    def __init__(self, max_staleness: int, weight_sync_steps: int, accumulation_steps: int, seed: int):
        self.max_staleness, self.weight_sync_steps = max_staleness, weight_sync_steps
        self.accumulation_steps, self.seed = accumulation_steps, seed
        self.worker = None
        self.ahead: deque = deque()  # dataloader items read ahead of the step that trains on them
        self.ahead_iterator = None
        self.requests: dict[tuple, tuple[int, bool]] = {}  # prompt ids -> (request number, RNG state sent)
        self.pushed_step: int | None = None
        self.next_extra_round: tuple | None = None  # the prompt ids of the extra round requested ahead
        self.rounds_from_worker = 0  # generation rounds the worker served in this step (logged, then reset)

    # ------------------------------------------------------------ reading ahead

    def batch_samples(self, epoch_iterator, num_batches: int) -> list:
        """The next optimizer step's `num_batches` dataloader items, the dataloader read `max_staleness` steps
        ahead so that the worker can sample those steps' batches now."""
        if epoch_iterator is not self.ahead_iterator:  # a new epoch: what was read ahead was trained
            self.ahead_iterator, self.ahead = epoch_iterator, deque()
        samples = []
        while len(samples) < num_batches and (self.ahead or self._read_one(epoch_iterator)):
            samples.append(self.ahead.popleft())
        while len(self.ahead) < self.max_staleness * self.accumulation_steps:
            if not self._read_one(epoch_iterator):
                break
        return samples

    def _read_one(self, iterator) -> bool:
        try:
            self.ahead.append(next(iterator))
        except StopIteration:
            return False
        return True

    # ------------------------------------------------------------ requests

    def prepare(self, inputs: list[dict], io: WorkerIO, owner) -> None:
        """Start the worker (closed when `owner`, the trainer, goes, if training ends without closing it), push
        the weights if due, and submit this step's batch and those read ahead."""
        if self.worker is None:
            from recipes.stages.grpo.rollout_worker import RolloutWorker

            with io.policy() as policy:
                self.worker = RolloutWorker(policy, io.sampling_dtype, torch.get_num_threads())
            weakref.finalize(owner, self.worker.close)  # a daemon besides: it goes when this process exits
        if not self.worker.alive():
            return  # reported when its result was missed; the trainer samples
        every = 1 if self.max_staleness == 0 else self.weight_sync_steps
        if self.pushed_step is None or io.step - self.pushed_step >= every:
            with io.push_phase(), io.policy() as policy:
                self.worker.push(policy, io.step)
            self.pushed_step = io.step
        for batch in [inputs, *list(self.ahead)[:: self.accumulation_steps]]:
            key = io.key_of(batch)
            if key not in self.requests:
                self._submit(key, io)

    def request_next_extra_round(self, next_rows: Callable[[], list[dict]], io: WorkerIO) -> None:
        """After a step's dynamic sampling in `batch` mode: ask the worker for the first extra round the next step
        would draw (`next_rows()`: the extra-prompt stream peeked, its position now known), so that it too is
        sampled while the trainer trains. A round the next step does not draw is not lost: the stream stays at that
        position, and the step after may use it if it is not too stale. Not at staleness 0, where every sample is
        the trainer's own (nor, the trainer's choice, where extra rounds are sized per step or mixed into the
        first round)."""
        if self.max_staleness == 0 or self.worker is None or not self.worker.alive():
            return
        key = io.key_of(next_rows())
        if key == self.next_extra_round:
            return  # requested already, and not drawn since
        if self.next_extra_round in self.requests:  # the stream moved on (a curriculum's new weights): unwanted
            self.worker.abandon(self.requests.pop(self.next_extra_round)[0])
        self.next_extra_round = key
        if key not in self.requests:
            self._submit(key, io)

    def _submit(self, key: tuple, io: WorkerIO) -> None:
        from recipes.stages.grpo.rollout_worker import Request

        same_rng = self.max_staleness == 0  # sampled now, as the trainer would: its RNG travels there and back
        request = Request(
            number=-1,
            prompt_ids=[list(ids) for ids in key],
            limits=io.limits,
            distribution=io.distribution,
            rng_state=torch.get_rng_state() if same_rng else None,
            seed=self.seed * SEED_STRIDE + self.worker.submitted + 1,
        )
        self.requests[key] = (self.worker.submit(request), same_rng)

    def take(self, prompt_ids, step: int, metrics) -> tuple | None:
        """The worker's completions and log-probs for this batch, where it sampled them in time; None where the
        trainer samples it itself (not requested, the worker failed, or too stale: each logged)."""
        request = self.requests.pop(ids_key(prompt_ids), None)
        if request is None:
            return None
        number, same_rng = request
        result = self.worker.result(number)
        staleness = step - result.version
        if result.error is not None:
            logger.warning("the rollout worker failed this batch; the trainer samples it:\n%s", result.error)
        elif staleness > self.max_staleness + self.weight_sync_steps - 1:  # an extra round kept too long
            metrics["async/stale_rounds_dropped"].append(1.0)
        else:
            if same_rng:
                torch.set_rng_state(result.rng_state)
            metrics["async/staleness"].append(float(staleness))
            self.rounds_from_worker += 1
            return result.completion_ids, result.logprobs
        return None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker, self.requests, self.pushed_step, self.next_extra_round = None, {}, None, None


class AsyncRolloutCallback(TrainerCallback):
    """Each step's idle shares (trainer waiting on the worker, worker waiting for requests) into the step's metrics
    (`metrics`: the trainer's metric lists by mode); the worker closed when training ends."""

    def __init__(self, rollouts: AsyncRollouts, metrics: dict):
        self.rollouts, self.metrics = rollouts, metrics
        self.mark: tuple[float, float, float] | None = None  # (clock, trainer's wait, worker's busy) at the last step

    def _now(self) -> tuple[float, float, float]:
        worker = self.rollouts.worker
        if worker is None:
            return time.perf_counter(), 0.0, 0.0
        return time.perf_counter(), worker.wait_s, worker.busy.value

    def on_step_begin(self, args, state, control, **kwargs):
        if self.mark is None:
            self.mark = self._now()

    def on_step_end(self, args, state, control, **kwargs):
        now = self._now()
        if self.mark is not None and self.rollouts.worker is not None:
            wall = now[0] - self.mark[0]
            if wall > 0:
                metrics = self.metrics["train"]
                metrics["async/trainer_idle_ratio"].append(min(1.0, max(0.0, (now[1] - self.mark[1]) / wall)))
                metrics["async/rollouter_idle_ratio"].append(min(1.0, max(0.0, 1 - (now[2] - self.mark[2]) / wall)))
                metrics["async/worker_rounds"].append(float(self.rollouts.rounds_from_worker))
        self.rollouts.rounds_from_worker = 0
        self.mark = now

    def on_train_end(self, args, state, control, **kwargs):
        self.rollouts.close()
        self.mark = None
