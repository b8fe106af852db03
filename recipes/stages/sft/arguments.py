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
    """recipes/sft.py: the model to start from, how rows become the assistant's turn, thinking modes, LoRA merge."""

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

    def __post_init__(self) -> None:
        super().__post_init__()
        self.model_config_overrides = mapping_option(self.model_config_overrides, "model_config_overrides")
