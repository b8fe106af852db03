"""recipes/grpo.py's own options: the rewards, the collapse monitor, the cold start. The trainer's own options
(dynamic sampling, the curriculum, variance_rewards, ...) are its config's: recipes.stages.grpo.config."""

from __future__ import annotations

from dataclasses import dataclass, field

from recipes.common.command_line.try_here import TryOnThisMachineArguments
from recipes.common.model.loading import DemoModelArguments
from tasks.schema import DataArguments


@dataclass
class GRPOScriptArguments(TryOnThisMachineArguments, DemoModelArguments, DataArguments):
    """recipes/grpo.py: the rewards, the collapse monitor, the cold start. The trainer's own options (dynamic
    sampling, the curriculum, variance_rewards, ...) are its config's: recipes.stages.grpo.config.RLVRGRPOConfig."""

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
    held_out: dict | None = field(
        default=None,
        metadata={
            "help": "Held-out problems evaluated every eval_steps (with eval_strategy: steps): data options over the "
            "training data's, e.g. {dataset_seed: 1, dataset_num_rows: 64}; logged as eval_pass@1 with its 95 percent "
            "interval. load_best_model_at_end with metric_for_best_model: pass@1 keeps the best checkpoint. See "
            "recipes/stages/grpo/held_out.py."
        },
    )
    tools: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Tools the policy may call while it samples, through TRL's tool loop: python (the built-in "
            "interpreter, run in the code sandbox as a session per trajectory) or your own as path/to/file.py:function. "
            "max_tool_calling_iterations (TRL's) caps the calls of a completion. The tokenizer gets a chat template that "
            "renders tool calls (eval/tools/chat_template.py); tool results count in no loss, ratio, KL or token count."
        },
    )
    tool_options: dict = field(
        default_factory=dict,
        metadata={
            "help": "The python tool's budgets: {timeout_s: CPU seconds a call, memory_mb, max_output_chars, "
            "max_cells, ...} (eval/tools/python.py)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        from basics.option_values import mapping_option
        from rewards.registry import check_reward_specs

        self.held_out = mapping_option(self.held_out, "held_out")
        if self.held_out is not None:
            from recipes.stages.grpo.held_out import held_out_data_args

            held_out_data_args(self, self.held_out)  # an unknown key: one line naming it

        check_reward_specs(self.rewards, "rewards")  # name, parameters, types, weight: one line naming the entry
        check_reward_specs(self.gold_rewards, "gold_rewards")
        if self.tools:  # a misspelt tool or a tool TRL cannot show the model: one line now, not mid-training
            from eval.tools.registry import trainer_tools

            trainer_tools(self.tools, **self.tool_options)
        if self.stop_on_reward_hacking and not self.gold_rewards:
            raise ValueError(
                "stop_on_reward_hacking needs gold_rewards: the divergence is read from a gold reward beside the "
                "training one, e.g. gold_rewards: [{name: math_accuracy}]"
            )
        if self.monitor_hacking_margin < 0:
            raise ValueError(f"monitor_hacking_margin must be >= 0, got {self.monitor_hacking_margin}")

    def check_with(self, *configs) -> None:
        """The trainer config's `variance_rewards` names rewards of this list (recipes.common.command_line.checks runs this
        once every dataclass of the recipe is parsed, before anything loads)."""
        from recipes.stages.grpo.config import VARIANCE_FROM_SUM

        names = {r if isinstance(r, str) else r["name"] for r in self.rewards}
        for config in configs:
            unknown = sorted(set(getattr(config, "variance_rewards", None) or ()) - names - {VARIANCE_FROM_SUM})
            if unknown:
                raise ValueError(
                    f"variance_rewards names {unknown}, which are not among the rewards; set it to reward names"
                )
            if hasattr(config, "eval_strategy"):
                self._check_held_out(config)

    def _check_held_out(self, config) -> None:
        """held_out and eval_strategy go together: one without the other is a run that evaluates nothing, or
        TRL's evaluation without problems to evaluate."""
        strategy = str(getattr(config.eval_strategy, "value", config.eval_strategy))
        if self.held_out is not None and strategy == "no":
            raise ValueError("held_out is evaluated every eval_steps: set eval_strategy: steps and eval_steps: N")
        if self.held_out is None and strategy != "no":
            raise ValueError(
                f"eval_strategy: {strategy} evaluates the held_out problems: give them, e.g. "
                "held_out: {dataset_seed: 1, dataset_num_rows: 64} (the training data's options with these over them)"
            )
