"""How a recipe that makes its own SFT data samples completions, which it keeps, and how it evaluates the result:
`TraceArguments`, the options rejection sampling and distillation share (recipes.common.traces says the rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

from eval.sampling_options import SamplingOptions
from recipes.common.traces.keep import SELECTIONS

KEEP_BY = ("verifier", "reward_model", "both")


@dataclass
class TraceArguments:
    """How completions are sampled, which are kept, and how the result is evaluated."""

    sampling: dict | str | None = field(
        default=None,
        metadata={
            "help": "How the traces are sampled (eval.sampling_options.SamplingOptions): {n, temperature, top_p, top_k, "
            "max_new_tokens, seed, backend, batch_size}; unset ones keep their defaults (n: 8, temperature: 1.0, "
            "backend: transformers)."
        },
    )
    max_per_problem: int = field(default=4, metadata={"help": "Kept completions per problem at most (m)."})
    selection: str = field(
        default="random",
        metadata={"help": "Which of a problem's correct, distinct completions to keep: 'random' or 'shortest'."},
    )
    require_stop: bool = field(
        default=True, metadata={"help": "Keep only completions that ended with EOS (not cut at the length limit)."}
    )
    keep_reward_model: dict | None = field(
        default=None,
        metadata={
            "help": "A learned reward that scores every sample: the options of the `reward_model` reward, e.g. "
            "{path: artifacts/demo/reward_model, squash: sigmoid}; keep_by, keep_min_score and selection: best read it."
        },
    )
    keep_by: str = field(
        default="verifier",
        metadata={
            "help": "What keeps a sample: 'verifier' (verified correct), 'reward_model' (a keep_reward_model score of at "
            "least keep_min_score: tasks without a verifier) or 'both'."
        },
    )
    keep_min_score: float | None = field(
        default=None, metadata={"help": "The lowest keep_reward_model score a kept sample may have (None: no floor)."}
    )
    tools: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Tools the model may call while it samples, through TRL's tool loop as GRPO trains with it "
            "(eval/tools/trl_sampling.py): python, or your own as path/to/file.py:function. A kept sample is its whole "
            "conversation, tool calls and tool results included, in the row's messages (and the tools' schemas in "
            "its tools column), for SFT to train on; the held-out evaluation samples with the tools too."
        },
    )
    tool_options: dict = field(
        default_factory=dict,
        metadata={
            "help": "The python tool's budgets: {timeout_s, memory_mb, max_output_chars, ...} (eval/tools/python.py)."
        },
    )
    max_tool_calling_iterations: int = field(
        default=4, metadata={"help": "With tools: a completion's tool calls at most (TRL's option of the same name)."}
    )
    eval_dataset_name: str | None = field(
        default=None,
        metadata={"help": "Held-out problems to report pass@1 on; default: the training source's eval_split."},
    )
    eval_split: str = field(default="test", metadata={"help": "Split of the held-out problems."})
    eval_num_rows: int | None = field(
        default=None, metadata={"help": "Held-out rows (synthetic: per level; else the first N). None: all."}
    )
    eval_samples_per_problem: int = field(
        default=4, metadata={"help": "Samples per held-out problem for pass@1; 0 turns evaluation off."}
    )
    eval_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the evaluation."})

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:  # DataArguments' checks, when a recipe's arguments combine the two
            parent()
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        if self.keep_by not in KEEP_BY:
            raise ValueError(f"keep_by must be one of {KEEP_BY}, got {self.keep_by!r}")
        needs_scores = [name for name, on in (("keep_by", self.keep_by != "verifier"), ("selection: best",
                        self.selection == "best"), ("keep_min_score", self.keep_min_score is not None)) if on]  # fmt: skip
        if needs_scores and not self.keep_reward_model:
            raise ValueError(
                f"{needs_scores[0]} reads a reward model's scores: set keep_reward_model, e.g. "
                "{path: artifacts/demo/reward_model}"
            )
        if self.keep_reward_model is not None:
            from rewards.registry import check_reward_specs

            if not isinstance(self.keep_reward_model, dict):
                raise ValueError(
                    f"keep_reward_model must be a mapping of reward_model options, got {self.keep_reward_model!r}"
                )
            check_reward_specs([{"name": "reward_model", **self.keep_reward_model}], "keep_reward_model")
        self.sampling = SamplingOptions.from_mapping(self.sampling, "sampling")
        if self.tools:  # a misspelt tool or one TRL cannot show the model: one line now, not after loading
            from basics.option_values import mapping_option
            from eval.tools.registry import trainer_tools

            self.tool_options = mapping_option(self.tool_options, "tool_options") or {}
            trainer_tools(self.tools, **self.tool_options)
            if self.max_tool_calling_iterations < 0:
                raise ValueError(f"max_tool_calling_iterations must be >= 0, got {self.max_tool_calling_iterations}")
        if self.max_per_problem < 1:
            raise ValueError(f"max_per_problem must be >= 1, got {self.max_per_problem}")
        if self.eval_samples_per_problem < 0:
            raise ValueError(f"eval_samples_per_problem must be >= 0, got {self.eval_samples_per_problem}")
