"""recipes/sft.py's own options: what its YAML may set beyond TRL's SFTConfig and ModelConfig, checked as the
dataclass is built (a wrong option is one line and exit code 2 before anything loads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from basics.option_values import mapping_option
from recipes.common.command_line.try_here import TryOnThisMachineArguments
from recipes.common.model.loading import DemoModelArguments
from tasks.schema import DataArguments


@dataclass
class SFTScriptArguments(TryOnThisMachineArguments, DemoModelArguments, DataArguments):
    """recipes/sft.py: the model to start from, how rows become the assistant's turn, thinking modes, LoRA merge,
    tools."""

    DEMO_MODEL: ClassVar[str] = "tiny"  # the SFT demo starts from the untrained tiny model

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

    tools: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Tools the conversations call, as GRPO's tools option names them: python (the built-in "
            "interpreter) or your own as path/to/file.py:function. The tokenizer gets a chat template that renders "
            "tool calls and results (eval/tools/chat_template.py), saved with the model; every conversation is "
            "shown the tools as GRPO shows them, and the loss is on the assistant's turns only (their text, calls "
            "and end of turn), never on a tool's result. Needs assistant_only_loss: true."
        },
    )
    tool_solutions: str | None = field(
        default=None,
        metadata={
            "help": "Train on the arithmetic task's tool-using worked solutions (tasks/tool_solutions.py) instead of "
            "its text solutions: a cold start that teaches the python tool's call format. one_call: the problem's "
            "steps in one call; per_step: one call per step. Needs tools: [python] and arithmetic rows.",
            "choices": ("one_call", "per_step"),
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.model_config_overrides = mapping_option(self.model_config_overrides, "model_config_overrides")
        if self.tools:  # a misspelt tool or one TRL cannot show the model: one line now, not after loading
            from recipes.stages.sft.tools import tool_schemas

            tool_schemas(self.tools)
        if self.tool_solutions is not None:
            if "python" not in self.tools:
                raise ValueError("tool_solutions: the worked solutions call the python tool; add it: tools: [python]")
            if self.assistant_template is not None:
                raise ValueError("tool_solutions builds the assistant's turns itself; leave assistant_template unset")

    def check_with(self, *configs) -> None:
        """With tools, the loss must be masked by the template (recipes.common.command_line.checks runs this once
        every dataclass of the recipe is parsed): a prompt/completion split would keep every turn but the last,
        the calls included, out of the loss."""
        for config in configs:
            if self.tools and getattr(config, "assistant_only_loss", None) is False:
                raise ValueError(
                    "tools: the assistant's calls are trained only with assistant_only_loss: true (the tool template's "
                    "generation markers mask the prompt and every tool result); set assistant_only_loss: true"
                )
