"""Each recipe's own options: what its YAML may set beyond TRL's training config and ModelConfig.

A recipe parses `(ItsArguments, a TRL config, ModelConfig)` (recipes.common.config.RecipeParser; grpo.py's
TRL config is recipes.trainers.grpo.RLVRGRPOConfig, which holds the trainer's own options); the
dataclasses below are the first of the three, one per recipe, each checking its values as it is built so
that a wrong option is one line and exit code 2 before anything loads. They build on tasks.schema's
DataArguments (which rows, how prompts are written) and, for the recipes that sample their own training
data, on recipes.common.traces.TraceArguments (how completions are sampled and kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from recipes.common.config import mapping_option
from recipes.common.traces import DEFAULT_HINT, TraceArguments
from tasks.schema import DataArguments

TRAIN_FROM = ("base", "previous")  # rejection_sampling.py: where each round's SFT starts
MODES = ("offline", "on_policy", "both")  # distill.py: which stages run


@dataclass
class SFTScriptArguments(DataArguments):
    """recipes/sft.py: the model to start from, how rows become the assistant's turn, thinking modes, LoRA merge."""

    build_tiny_model: bool = field(
        default=False,
        metadata={
            "help": "Build the tiny embedded model if model_name_or_path is missing and is its own default "
            "path, artifacts/tiny-base (any other missing path is an error)."
        },
    )
    merge_lora: bool = field(
        default=False,
        metadata={
            "help": "With use_peft: merge the trained LoRA adapter into the base weights and save a plain model "
            "(what vLLM and the next stage load) instead of the adapter alone."
        },
    )
    assistant_template: str | None = field(
        default=None,
        metadata={
            "help": "Build the assistant's turn from several columns instead of 'solution', e.g. "
            "'<think>\\n{deepseek_thinking_trajectory}\\n</think>\\n{deepseek_attempt}' (s1K-1.1)."
        },
    )
    no_think_fraction: float = field(
        default=0.0,
        metadata={
            "help": "Share of rows (chosen by id) trained in non-thinking mode, as Qwen3's cold start mixed them: "
            "the thinking emptied to '<think>\\n\\n</think>'. A 'thinking_mode' column (think / no_think) wins."
        },
    )
    thinking_switch: bool = field(
        default=False,
        metadata={"help": "End each row's last user turn with '/think' or '/no_think' (Qwen3's soft switch)."},
    )
    model_config_overrides: dict | str | None = field(
        default=None,
        metadata={
            "help": "Model config attributes to change as the model loads, e.g. a longer context: "
            "{max_position_embeddings: 32768, rope_parameters: {rope_type: default, rope_theta: 300000.0}}."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.model_config_overrides = mapping_option(self.model_config_overrides, "model_config_overrides")


@dataclass
class GRPOScriptArguments(DataArguments):
    """recipes/grpo.py: the rewards, the collapse monitor, the cold start. The trainer's own options (dynamic
    sampling, the curriculum, variance_rewards, ...) are its config's: recipes.trainers.grpo.RLVRGRPOConfig."""

    rewards: list[dict] = field(
        default_factory=lambda: [{"name": "math_accuracy", "weight": 1.0}],
        metadata={"help": "Rewards from the registry: a YAML list of {name, weight, **parameters}."},
    )
    merge_lora: bool = field(
        default=False,
        metadata={"help": "With use_peft: save the LoRA adapter merged into the base weights (what vLLM loads)."},
    )
    monitor_std_threshold: float = field(
        default=0.05, metadata={"help": "Warn of entropy collapse when the mean group reward std stays below this."}
    )
    monitor_patience: int = field(default=3, metadata={"help": "... for this many consecutive logs."})
    gold_rewards: list[dict] = field(
        default_factory=list,
        metadata={
            "help": "Rewards computed on the same completions but left out of the loss (e.g. [math_accuracy] beside a "
            "learned reward): logged as gold/<name> beside proxy/<name>, and watched for reward hacking."
        },
    )
    monitor_hacking_margin: float = field(
        default=0.05,
        metadata={
            "help": "Warn 'reward hacking suspected' when, over the last monitor_patience + 1 logs, the training "
            "reward rose while a gold reward fell by at least this much (least-squares fits of both)."
        },
    )
    stop_on_reward_hacking: bool = field(
        default=False,
        metadata={
            "help": "Stop the run when reward hacking is suspected and save the last checkpoint from before the "
            "divergence as the final model (needs gold_rewards and save_strategy: steps)."
        },
    )
    cold_start_if_missing: bool = field(
        default=False,
        metadata={
            "help": "If model_name_or_path is missing and is the demo's own cold-start path (artifacts/demo/sft), "
            "copy the cold start shipped in recipes/assets/ there (any other missing path is an error)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        from rewards.registry import check_reward_specs

        check_reward_specs(self.rewards, "rewards")  # name, parameters, types, weight: one line naming the entry
        check_reward_specs(self.gold_rewards, "gold_rewards")
        if self.stop_on_reward_hacking and not self.gold_rewards:
            raise ValueError(
                "stop_on_reward_hacking needs gold_rewards: the divergence is read from a gold reward beside the "
                "training one, e.g. gold_rewards: [{name: math_accuracy}]"
            )
        if self.monitor_hacking_margin < 0:
            raise ValueError(f"monitor_hacking_margin must be >= 0, got {self.monitor_hacking_margin}")

    def check_with(self, *configs) -> None:
        """The trainer config's `variance_rewards` names rewards of this list (recipes.common.checks runs this
        once every dataclass of the recipe is parsed, before anything loads)."""
        from recipes.trainers.grpo import VARIANCE_FROM_SUM

        names = {r if isinstance(r, str) else r["name"] for r in self.rewards}
        for config in configs:
            unknown = sorted(set(getattr(config, "variance_rewards", None) or ()) - names - {VARIANCE_FROM_SUM})
            if unknown:
                raise ValueError(
                    f"variance_rewards names {unknown}, which are not among the rewards; set it to reward names"
                )


@dataclass
class RejectionSamplingArguments(TraceArguments, DataArguments):
    """recipes/rejection_sampling.py: how many rounds, where each starts, STaR's rationalisation."""

    num_rounds: int = field(default=3, metadata={"help": "Rounds of sample -> keep -> SFT -> evaluate at most."})
    train_from: str = field(
        default="base",
        metadata={
            "help": "'base': every round fine-tunes the starting model on its samples (ReST-EM); 'previous': "
            "each round continues from the last round's model."
        },
    )
    star_rationalization: bool = field(
        default=False,
        metadata={"help": "STaR: sample unsolved problems again with the answer as a hint; keep verified rationales."},
    )
    hint_template: str = field(
        default=DEFAULT_HINT,
        metadata={"help": "Appended to the last user message for rationalisation; '{answer}' is the gold answer."},
    )
    cold_start_if_missing: bool = field(
        default=False,
        metadata={
            "help": "If model_name_or_path is the demo's missing cold-start path, copy the shipped cold start there."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_from not in TRAIN_FROM:
            raise ValueError(f"train_from must be one of {TRAIN_FROM}, got {self.train_from!r}")
        if self.num_rounds < 1:
            raise ValueError(f"num_rounds must be >= 1, got {self.num_rounds}")
        if "{answer}" not in self.hint_template:
            raise ValueError(f"hint_template must contain '{{answer}}', got {self.hint_template!r}")


@dataclass
class DistillScriptArguments(TraceArguments, DataArguments):
    """recipes/distill.py: the teacher, the stages, how the student is made, the on-policy options."""

    mode: str = field(default="offline", metadata={"help": "'offline', 'on_policy', or 'both' (offline first)."})
    teacher_model_name_or_path: str | None = field(
        default=None, metadata={"help": "The teacher: a folder saved with save_pretrained or a Hub model name."}
    )
    teacher_cold_start_if_missing: bool = field(
        default=False,
        metadata={"help": "If the teacher is the demo's missing cold-start path, copy the shipped cold start there."},
    )
    verify_traces: bool = field(
        default=True, metadata={"help": "Keep only traces the row's verifier accepts (R1's distillation data)."}
    )
    student_spec: dict | str | None = field(
        default=None,
        metadata={
            "help": "Build a fresh tiny student with this architecture (recipes.common.tiny_model.TinyModelSpec "
            "fields, e.g. {hidden_size: 64, intermediate_size: 256}) instead of loading model_name_or_path."
        },
    )
    student_seed: int = field(default=0, metadata={"help": "Seed of a fresh student's initial weights."})
    student_prune: dict | str | None = field(
        default=None,
        metadata={
            "help": "Cut the student from the teacher instead (Minitron): {intermediate_size: N} keeps each MLP's N "
            "most active neurons, measured on `prune_calibration_rows` prompts (recipes/common/prune.py)."
        },
    )
    prune_calibration_rows: int = field(default=512, metadata={"help": "Rows whose activations rank the neurons."})
    on_policy: dict | str | None = field(
        default=None,
        metadata={
            "help": "trl.DistillationConfig options of the on-policy stage (beta, max_completion_length, "
            "temperature, max_steps, learning_rate, ...); unset ones come from this YAML's training options."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.student_spec = mapping_option(self.student_spec, "student_spec")
        self.student_prune = mapping_option(self.student_prune, "student_prune")
        if self.student_prune is not None:
            if self.student_spec is not None:
                raise ValueError("student_spec and student_prune both build the student: set one of them")
            if set(self.student_prune) != {"intermediate_size"}:
                raise ValueError(f"student_prune takes {{intermediate_size: N}}, got {self.student_prune}")
        self.on_policy = mapping_option(self.on_policy, "on_policy") or {}
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.teacher_model_name_or_path:
            raise ValueError("teacher_model_name_or_path is required: the model whose reasoning is distilled")
        if self.student_spec is not None:
            from recipes.common.tiny_model import TinyModelSpec

            known = {f.name for f in fields(TinyModelSpec)}
            unknown = sorted(set(self.student_spec) - known)
            if unknown:
                raise ValueError(f"student_spec: unknown option(s) {unknown}; TinyModelSpec has {sorted(known)}")
