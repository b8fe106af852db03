"""Generation that does not wait for training: the next batches sampled by a rollout worker while the trainer
learns from this one (one-step off-policy; `max_staleness` steps at most), for RLVRGRPOTrainer on the
transformers path.

Why our own: TRL's asynchronous GRPO (trl.experimental.async_grpo) samples on a vLLM server over NCCL, which a
CPU has not, and none of TRL's trainers has DAPO's dynamic sampling (trl#3708); verl's one-step-off and fully
asynchronous modes need Ray and GPUs. Here the worker is a second process on the machine's spare core
(recipes.stages.grpo.rollout_worker), and everything else, dynamic sampling included, stays the trainer's.

How a step runs with `max_staleness: s` (s >= 1):
* `get_batch_samples` reads the dataloader s optimizer steps ahead, so the generation batches of the next s
  steps are known (the curriculum's weights for them are therefore up to s steps old, too);
* at a step's generation (`_prepare_requests`, called by the trainer's `_generate_and_score_completions` before
  dynamic sampling's rounds) the trainer pushes its weights to the worker when
  `weight_sync_steps` steps have passed since the last push, then submits every generation batch read ahead
  that has no request yet; the worker samples them in order, each with the weights pushed last before its
  submission, while the trainer scores and trains;
* with dynamic sampling (`batch` mode), once a step's rounds are done the position of the extra-prompt stream is
  known, and the next step's first extra round is requested too (`_request_next_extra_round`);
* `_generate_single_turn` takes a batch the worker sampled (matched by its prompt ids) instead of sampling;
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

import torch
from transformers import TrainerCallback

from recipes.common import trl_private

logger = logging.getLogger(__name__)

SEED_STRIDE = 1_000_003  # a run's requests draw seeds seed * SEED_STRIDE + request number


def ids_key(prompt_ids) -> tuple:
    """A batch's prompt token ids as the key a request is matched by."""
    return tuple(tuple(ids) for ids in prompt_ids)


def worker_conditions(trainer) -> list[str]:
    """What keeps `trainer` from sampling in a rollout worker; [] when nothing does."""
    args = trainer.args
    problems = []
    if not trainer._compact_generation_applies(None, {}):
        problems.append(
            "the worker samples as compact generation does: compact_generation true, no vLLM, temperature > 0, "
            "no min_p, repetition penalty or extra generation kwargs"
        )
    if trainer.environment_factories is not None or trainer.tools or trainer.rollout_func is not None:
        problems.append("tools, environments and rollout_func run in the trainer")
    if args.steps_per_generation * trainer.num_iterations != args.gradient_accumulation_steps:
        problems.append(
            f"one generation batch must be one optimizer step: steps_per_generation x num_iterations "
            f"({args.steps_per_generation} x {trainer.num_iterations}) = gradient_accumulation_steps "
            f"({args.gradient_accumulation_steps})"
        )
    if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
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


class AsyncRolloutMixin:
    """Mixed into RLVRGRPOTrainer ahead of CompactGenerationMixin (see the module docstring)."""

    use_rollout_worker = False  # resolved from args by _init_async_rollouts

    def _init_async_rollouts(self) -> None:
        args = self.args
        self.max_staleness = args.max_staleness
        self.use_rollout_worker = args.max_staleness > 0 if args.rollout_worker is None else args.rollout_worker
        if not self.use_rollout_worker:
            if args.max_staleness > 0:
                raise ValueError(f"max_staleness {args.max_staleness} needs the rollout worker: rollout_worker: true")
            return
        problems = worker_conditions(self)
        if problems:
            raise ValueError(
                "the rollout worker (max_staleness > 0 or rollout_worker: true) cannot serve this run: "
                + "; ".join(problems)
                + ". Set max_staleness: 0 to sample in the trainer."
            )
        for problem in staleness_warnings(args):
            logger.warning(problem)
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", self.accelerator.num_processes))
        if not spare_cores(local_processes, torch.get_num_threads()):
            logger.warning(
                "the rollout worker shares the cores of %d trainer process(es) with %d thread(s) each: generation "
                "and training will slow each other down",
                local_processes,
                torch.get_num_threads(),
            )
        self._worker = None
        self._ahead: deque = deque()  # dataloader items read ahead of the step that trains on them
        self._ahead_iterator = None
        self._requests: dict[tuple, tuple[int, bool]] = {}  # prompt ids -> (request number, RNG state sent)
        self._pushed_step: int | None = None
        self._next_extra_round: tuple | None = None  # the prompt ids of the extra round requested ahead
        self.rounds_from_worker = 0  # generation rounds the worker served in this step (logged, then reset)
        self.add_callback(AsyncRolloutCallback(self))

    # ------------------------------------------------------------ reading ahead

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        if not self.use_rollout_worker:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        if epoch_iterator is not self._ahead_iterator:  # a new epoch: what was read ahead was trained
            self._ahead_iterator, self._ahead = epoch_iterator, deque()
        samples = []
        while len(samples) < num_batches and (self._ahead or self._read_one(epoch_iterator)):
            samples.append(self._ahead.popleft())
        while len(self._ahead) < self.max_staleness * self.args.gradient_accumulation_steps:
            if not self._read_one(epoch_iterator):
                break
        return samples, trl_private.num_items_in_batch(self, samples, device)

    def _read_one(self, iterator) -> bool:
        try:
            self._ahead.append(next(iterator))
        except StopIteration:
            return False
        return True

    # ------------------------------------------------------------ requests

    def _prepare_requests(self, inputs) -> None:
        """Start the worker, push the weights if due, and submit this step's batch and those read ahead."""
        if self._worker is None:
            from recipes.stages.grpo.rollout_worker import RolloutWorker

            with self._policy_as_it_samples() as policy:
                self._worker = RolloutWorker(policy, self.sampling_dtype, torch.get_num_threads())
            # closed at the end of training (AsyncRolloutCallback); if training raises, when the trainer goes
            # (or, a daemon, when this process exits)
            weakref.finalize(self, self._worker.close)
        step = self.state.global_step
        if not self._worker.alive():
            return  # reported when its result was missed; the trainer samples
        due = self._pushed_step is None or step - self._pushed_step >= (
            1 if self.max_staleness == 0 else self.args.weight_sync_steps
        )
        if due:
            with self.step_timing.phase("update_weights"), self._policy_as_it_samples() as policy:
                self._worker.push(policy, step)
            self._pushed_step = step
        every = self.args.gradient_accumulation_steps
        for batch in [inputs, *list(self._ahead)[::every]]:
            key = self._prompt_key(batch)
            if key not in self._requests:
                self._submit(key)

    def _request_next_extra_round(self) -> None:
        """After a step's dynamic sampling: ask the worker for the first extra round the next step would draw
        (`batch` mode: a whole batch of further prompts from the extra-prompt stream, whose position is now known),
        so that it too is sampled while the trainer trains. A round the next step does not draw is not lost: the
        stream stays at that position, and the step after may use it if it is not too stale. Not at staleness 0,
        where every sample is the trainer's own, nor where extra rounds are sized per step (`adaptive`) or mixed
        into the first round (`reference`)."""
        if (
            self.max_staleness == 0
            or self.dynamic_sampling_mode != "batch"
            or self.dynamic_sampling_max_rounds < 1
            or self._worker is None
            or not self._worker.alive()
        ):
            return
        groups = self.args.per_device_train_batch_size * self.args.steps_per_generation // self.num_generations
        key = self._prompt_key(self._extra_prompts(groups, peek=True))
        if key == self._next_extra_round:
            return  # requested already, and not drawn since
        if self._next_extra_round in self._requests:  # the stream moved on (a curriculum's new weights): unwanted
            self._worker.abandon(self._requests.pop(self._next_extra_round)[0])
        self._next_extra_round = key
        if key not in self._requests:
            self._submit(key)

    def _prompt_key(self, batch) -> tuple:
        prompt_ids, _, _ = trl_private.tokenize_prompts(self, [row["prompt"] for row in batch])
        return ids_key(prompt_ids)

    def _submit(self, key: tuple) -> None:
        from recipes.stages.grpo.rollout_worker import Request

        same_rng = self.max_staleness == 0  # sampled now, as the trainer would: its RNG travels there and back
        request = Request(
            number=-1,
            prompt_ids=[list(ids) for ids in key],
            limits=self._sampling_limits(),
            distribution=self._sampling_distribution(),
            rng_state=torch.get_rng_state() if same_rng else None,
            seed=self.args.seed * SEED_STRIDE + self._worker.submitted + 1,
        )
        self._requests[key] = (self._worker.submit(request), same_rng)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        request = self._requests.pop(ids_key(prompt_ids), None) if self.use_rollout_worker else None
        if request is not None:
            number, same_rng = request
            result = self._worker.result(number)
            staleness = self.state.global_step - result.version
            if result.error is not None:
                logger.warning("the rollout worker failed this batch; the trainer samples it:\n%s", result.error)
            elif staleness > self.max_staleness + self.args.weight_sync_steps - 1:  # an extra round kept too long
                trl_private.metrics(self)["async/stale_rounds_dropped"].append(1.0)
            else:
                if same_rng:
                    torch.set_rng_state(result.rng_state)
                trl_private.metrics(self)["async/staleness"].append(float(staleness))
                self.rounds_from_worker += 1
                return result.completion_ids, result.logprobs
        return super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
        )

    def _close_rollout_worker(self) -> None:
        worker = getattr(self, "_worker", None)
        if worker is not None:
            worker.close()
            self._worker, self._requests, self._pushed_step, self._next_extra_round = None, {}, None, None


class AsyncRolloutCallback(TrainerCallback):
    """Each step's idle shares (trainer waiting on the worker, worker waiting for requests) into the step's metrics;
    the worker closed when training ends."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.mark: tuple[float, float, float] | None = None  # (clock, trainer's wait, worker's busy) at the last step

    def _now(self) -> tuple[float, float, float]:
        worker = self.trainer._worker
        if worker is None:
            return time.perf_counter(), 0.0, 0.0
        return time.perf_counter(), worker.wait_s, worker.busy.value

    def on_step_begin(self, args, state, control, **kwargs):
        if self.mark is None:
            self.mark = self._now()

    def on_step_end(self, args, state, control, **kwargs):
        now = self._now()
        if self.mark is not None and self.trainer._worker is not None:
            wall = now[0] - self.mark[0]
            if wall > 0:
                metrics = trl_private.metrics(self.trainer)
                metrics["async/trainer_idle_ratio"].append(min(1.0, max(0.0, (now[1] - self.mark[1]) / wall)))
                metrics["async/rollouter_idle_ratio"].append(min(1.0, max(0.0, 1 - (now[2] - self.mark[2]) / wall)))
                metrics["async/worker_rounds"].append(float(self.trainer.rounds_from_worker))
        self.trainer.rounds_from_worker = 0
        self.mark = now

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer._close_rollout_worker()
        self.mark = None
