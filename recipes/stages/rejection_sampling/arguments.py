"""recipes/rejection_sampling.py's own options: the rounds and STaR's rationalisation, on top of how completions
are sampled and kept (recipes.common.traces.TraceArguments) and which rows (DataArguments)."""

from __future__ import annotations

from dataclasses import dataclass, field

from recipes.common.model.loading import DemoModelArguments
from recipes.common.traces import DEFAULT_HINT, TraceArguments
from tasks.schema import DataArguments

TRAIN_FROM = ("base", "previous")  # where each round's SFT starts


@dataclass
class RejectionSamplingArguments(TraceArguments, DemoModelArguments, DataArguments):
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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_from not in TRAIN_FROM:
            raise ValueError(f"train_from must be one of {TRAIN_FROM}, got {self.train_from!r}")
        if self.num_rounds < 1:
            raise ValueError(f"num_rounds must be >= 1, got {self.num_rounds}")
        if "{answer}" not in self.hint_template:
            raise ValueError(f"hint_template must contain '{{answer}}', got {self.hint_template!r}")
