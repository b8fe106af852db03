"""The GRPO trainer's config: `RLVRGRPOConfig` is trl.GRPOConfig plus the options of what
recipes.stages.grpo.trainer.RLVRGRPOTrainer adds to TRL's GRPOTrainer (that module's docstring says what each
one does), checked as the config is built; TRL keeps its trainers' configs the same way, a module beside each
trainer."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from trl import GRPOConfig

from recipes.stages.grpo.dynamic_sampling import MODES
from recipes.stages.grpo.sampling_dtype import CHOICES as SAMPLING_DTYPES
from rewards import accuracy_reward_names

SAMPLERS = ("random", "pass_rate_weighted")  # how prompts are drawn
VARIANCE_FROM_SUM = "sum"  # variance_rewards: [sum] reads a group's variance from the weighted sum of all rewards


@dataclass
class RLVRGRPOConfig(GRPOConfig):
    """trl.GRPOConfig plus RLVRGRPOTrainer's own options (the module docstring says what each one adds)."""

    use_vllm: bool | None = field(
        default=None,
        metadata={
            "help": "Generate with vLLM (TRL's path; vllm_mode colocate or server). Unset: vLLM where it is "
            "installed, on a GPU or a CPU (its CPU build samples 2.2x faster than the compact sampler in fp32 on "
            "SmolLM2, docs/benchmarks.md), else the compact sampler; but not when max_staleness > 0 or "
            "rollout_worker asks for the rollout worker, which samples as the compact sampler does (with it and "
            "bf16 a SmolLM2 step took 0.36x the synchronous one, against 0.63x for vLLM). The run card records "
            "which ran."
        },
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={"help": "DAPO's dynamic sampling: replace zero-variance groups with groups of further prompts."},
    )
    dynamic_sampling_max_rounds: int = field(
        default=4, metadata={"help": "Extra generation rounds per step before zero-variance groups are let through."}
    )
    dynamic_sampling_mode: str = field(
        default="batch",
        metadata={
            "help": "How much an extra round generates: 'batch' (a whole batch, surplus discarded), 'reference' "
            "(verl's DAPO: 3x batches, accumulated, truncated) or 'adaptive' (missing / (1 - zero-variance share) "
            "groups, surplus kept for the next step). See recipes/stages/grpo/dynamic_sampling.py."
        },
    )
    sampler: str = field(
        default="random",
        metadata={
            "help": "'random' (TRL's shuffle) or 'pass_rate_weighted' (Kimi's curriculum, weight 1 - pass rate)."
        },
    )
    curriculum: dict = field(
        default_factory=dict,
        metadata={
            "help": "Options of data_filters.curriculum.CurriculumSampler: floor, estimator (ema or mean), ema_alpha, "
            "unknown_pass_rate, prior_weight, num_samples."
        },
    )
    accuracy_reward: str | None = field(
        default=None,
        metadata={
            "help": "The reward whose outcomes update the curriculum's pass rates. Default: the first accuracy reward "
            "among the reward functions (registered with accuracy=True), else math_accuracy; when it is not among "
            "them, a completion whose summed reward is positive counts as solved."
        },
    )
    variance_rewards: list[str] | None = field(
        default=None,
        metadata={
            "help": "Rewards whose within-group spread is a group's variance, for dynamic sampling and the monitor. "
            "Default: the accuracy rewards among the rewards (those registered with accuracy=True: math_accuracy, "
            "code_pass_rate, code_binary), as DAPO filters on accuracy; with none of them, the weighted sum of all "
            "rewards. `sum` alone: the weighted sum of all rewards even when there is an accuracy reward (the "
            "filter DAPO's paper does not use, for the ablation)."
        },
    )
    log_reference_kl: bool = field(
        default=False,
        metadata={
            "help": "Log `kl`, the KL of the policy to the starting model, every step with beta 0 too (TRL logs it only "
            "with a KL term): one forward pass of the reference per generation batch, a frozen copy of the starting "
            "weights in memory for full fine-tuning (LoRA disables its adapter). With beta != 0 TRL's own is logged."
        },
    )
    compact_generation: bool = field(
        default=True,
        metadata={
            "help": "Generate with eval.decoding (finished rows leave the batch, a group's prompt is prefilled once) "
            "instead of transformers' generate, on the transformers path with temperature/top-p/top-k sampling; "
            "false: TRL's own generate. vLLM and continuous batching are TRL's either way."
        },
    )
    share_prompts: bool = field(
        default=True,
        metadata={
            "help": "Run each prompt of the loss pass once for its group, not once per completion "
            "(recipes/stages/grpo/shared_prompt.py; the same log-probs and gradients), with each group kept in one "
            "micro-batch; false: TRL's pass, every row whole."
        },
    )
    trim_padding: bool = field(
        default=True,
        metadata={
            "help": "Cut each micro-batch's prompt and completion tensors to its own longest row before the loss "
            "pass (TRL pads them to the longest in the whole generation batch)."
        },
    )
    sampling_dtype: str = field(
        default="float32",
        metadata={
            "help": "The dtype compact generation samples in: float32, bfloat16 (the weights that train stay fp32; "
            "the mismatch is logged and corrected), or auto (bf16 where it measures 1.25x faster at decoding "
            "shapes on this machine). See recipes/stages/grpo/sampling_dtype.py."
        },
    )
    loss_dtype: str | None = field(
        default=None,
        metadata={
            "help": "The loss pass's precision: float32, bfloat16 (torch.autocast, what bf16: true runs; the weights "
            "and the optimizer stay fp32), or auto (bf16 on a CPU where a matrix product measures 1.25x faster in "
            "bf16, as sampling_dtype's auto does; an explicit bf16 wins). Unset: bf16 / fp16 as given. SmolLM2's LoRA loss pass took 0.33x "
            "the fp32 time in bf16 on an AVX512-BF16 CPU (scripts/bench/loss_autocast.py)."
        },
    )
    max_staleness: int = field(
        default=0,
        metadata={
            "help": "Asynchronous generation: a rollout worker process samples the next batches (up to this many "
            "optimizer steps ahead) while the trainer trains; a batch is trained at most this many steps after the "
            "weights that sampled it, its sampler log-probs correcting the loss. 0: generation and training take "
            "turns. See recipes/stages/grpo/async_rollouts.py."
        },
    )
    weight_sync_steps: int = field(
        default=1,
        metadata={"help": "With max_staleness > 0, push the weights to the rollout worker every this many steps."},
    )
    rollout_worker: bool | None = field(
        default=None,
        metadata={
            "help": "Sample in the rollout worker process (default: when max_staleness > 0). With max_staleness 0 "
            "the worker samples each batch with the current weights and the trainer's random state: the "
            "synchronous run bit for bit."
        },
    )
    partial_rollout_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Partial rollouts (Kimi k1.5): each completion samples at most this many tokens a step; one not "
            "finished is kept with its tokens and sampler log-probs and continued the next step, its group trained "
            "once every member has finished. Needs dynamic_sampling and compact generation. Unset: completions run "
            "to the end within their step. See recipes/stages/grpo/partial_rollouts.py."
        },
    )
    merge_adapter_for_generation: bool = field(
        default=True,
        metadata={
            "help": "With compact_generation and a LoRA policy, sample from the adapter merged into the base weights "
            "(the base weights restored bit for bit afterwards); false: sample through the unmerged adapter."
        },
    )
    skip_zero_advantage: bool = field(
        default=True,
        metadata={
            "help": "Leave rows whose advantage is exactly zero out of the loss pass where that cannot change the "
            "update: one process, loss_type dapo, cispo or vespo (normalised by the generation batch's tokens), "
            "beta 0, no entropy bonus or entropy mask, no router aux loss. See recipes/stages/grpo/compact_generation.py."
        },
    )

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.sampling_dtype not in SAMPLING_DTYPES:
            raise ValueError(f"sampling_dtype must be one of {SAMPLING_DTYPES}, got {self.sampling_dtype!r}")
        if self.max_staleness < 0 or self.weight_sync_steps < 1:
            raise ValueError(
                f"max_staleness must be >= 0 and weight_sync_steps >= 1, got {self.max_staleness} and "
                f"{self.weight_sync_steps}"
            )
        self._resolve_loss_dtype()
        if self.partial_rollout_tokens is not None and self.partial_rollout_tokens < 1:
            raise ValueError(f"partial_rollout_tokens must be >= 1 (or unset), got {self.partial_rollout_tokens}")
        if self.dynamic_sampling_mode not in MODES:
            raise ValueError(f"dynamic_sampling_mode must be one of {MODES}, got {self.dynamic_sampling_mode!r}")
        if not isinstance(self.curriculum, dict):
            raise ValueError(f"curriculum must be a mapping of CurriculumSampler options, got {self.curriculum!r}")
        if isinstance(self.variance_rewards, str):
            self.variance_rewards = [self.variance_rewards]
        if VARIANCE_FROM_SUM in (self.variance_rewards or ()) and len(self.variance_rewards) > 1:
            raise ValueError(
                f"variance_rewards {self.variance_rewards}: `{VARIANCE_FROM_SUM}` (the weighted sum of all rewards) "
                "stands alone; give either it or reward names"
            )
        if self.use_vllm is None:  # the rollout worker and partial rollouts are compact generation's
            from eval.sampler import vllm_available

            self.use_vllm = (
                vllm_available()
                and self.max_staleness == 0
                and not self.rollout_worker
                and not self.partial_rollout_tokens
            )
        super().__post_init__()

    def _resolve_loss_dtype(self) -> None:
        """`loss_dtype` into TRL's `bf16`: what the Trainer hands accelerate as its mixed precision."""
        if self.loss_dtype is None:
            return
        if self.loss_dtype not in SAMPLING_DTYPES:
            raise ValueError(f"loss_dtype must be one of {SAMPLING_DTYPES}, got {self.loss_dtype!r}")
        if self.fp16 or (self.bf16 and self.loss_dtype == "float32"):
            raise ValueError(
                f"loss_dtype {self.loss_dtype} with {'fp16' if self.fp16 else 'bf16'}: true: give one of them"
            )
        if self.loss_dtype != "auto":
            self.bf16 = self.loss_dtype == "bfloat16"  # TRL would read an unset bf16 as true
        elif self.bf16 is None:
            if self.use_cpu or not torch.cuda.is_available():  # on a GPU, TRL's default: bf16
                from recipes.stages.grpo import sampling_dtype

                self.bf16 = sampling_dtype.bf16_speedup() >= sampling_dtype.MIN_SPEEDUP
        if self.bf16:
            # transformers takes bf16 on a CPU only when told it is one (use_cpu); where no GPU exists it is
            self.use_cpu = self.use_cpu or not torch.cuda.is_available()


def variance_reward_names(variance_rewards: list[str] | None, reward_names: list[str]) -> list[str] | None:
    """The rewards whose spread is a group's variance, as the trainer reads them (None: the weighted sum of all):
    `variance_rewards` as given, by default the accuracy rewards among `reward_names`; `[sum]`: the sum."""
    if variance_rewards == [VARIANCE_FROM_SUM]:
        return None
    return list(variance_rewards) if variance_rewards else accuracy_reward_names(reward_names) or None
