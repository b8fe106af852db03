"""How completions are sampled, as a user writes it: one type, one spelling of each option, everywhere.

`SamplingOptions` is what a config or a command line says: `n` samples a problem, `temperature`, `top_p`,
`top_k`, `max_new_tokens` (the one spelling of the maximum completion length; TRL's GRPO trainer calls its own
`max_completion_length`, mapped in recipes.stages.grpo.config), `seed`, the `backend` and its `batch_size`.
The recipes that sample their own data read it from a `sampling:` mapping in their YAML (rejection sampling,
distillation, the reward-model recipe: recipes.common.traces.options), the filters from each sampling step
(data_filters.pipeline), and `python -m eval.evaluate` builds it from its flags (`--n`, `--temperature`,
`--top-p`, `--top-k`, `--max-new-tokens`, `--backend`, `--batch-size`), each flag's help this module's.
`params(seed)` turns it into eval.sampler.SamplingParams, the per-call protocol the samplers take (the backend
and its batch size are the sampler's own, not a call's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from eval.sampler import DEFAULT_MAX_NEW_TOKENS, SamplingParams

BACKENDS = ("auto", "transformers", "vllm")


@dataclass
class SamplingOptions:
    """Sampling options (see the module docstring); every value checked as it is built."""

    n: int = field(default=8, metadata={"help": "samples per problem"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling: the smallest set of this mass"})
    top_k: int | None = field(default=None, metadata={"help": "sample among the k likeliest tokens (None: all)"})
    max_new_tokens: int = field(
        default=DEFAULT_MAX_NEW_TOKENS, metadata={"help": "length limit of a sampled completion, in tokens"}
    )
    seed: int | None = field(default=None, metadata={"help": "the samples' seed (None: the run's seed)"})
    backend: str = field(
        default="auto",
        metadata={
            "help": "'transformers', 'vllm' or 'auto' (vLLM where it is installed, GPU or CPU; else transformers)"
        },
    )
    batch_size: int = field(default=64, metadata={"help": "sequences per generate call (transformers)"})

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        self.params(0)  # SamplingParams checks n, temperature, top_p, top_k and max_new_tokens

    def params(self, seed: int, **changes) -> SamplingParams:
        """The SamplingParams of one call: these options, `seed` unless the options set their own, and `changes`
        (e.g. an evaluation's own `n` and `temperature`)."""
        values = {name: getattr(self, name) for name in PARAM_FIELDS}
        values["seed"] = seed if self.seed is None else self.seed
        return SamplingParams(**{**values, **changes})

    @classmethod
    def from_mapping(cls, value, option: str, defaults: dict | None = None) -> SamplingOptions:
        """The options a config gives under `option`: a mapping (a JSON string on the command line), over
        `defaults`; an unknown key is an error that names it and the nearest known one."""
        from basics.did_you_mean import unknown_names_message
        from basics.option_values import mapping_option

        if isinstance(value, cls):
            return value
        value = mapping_option(value, option) or {}
        unknown = sorted(set(value) - set(OPTION_NAMES))
        glued = [key for key in unknown if isinstance(key, str) and ":" in key]
        if glued:  # YAML's flow mapping reads {n:4} as the key 'n:4': a space must follow the colon
            raise ValueError(f"{option}: {glued[0]!r} is one key; write {{n: 4}}, with a space after each colon")
        if unknown:
            raise ValueError(f"{option}: " + unknown_names_message(unknown, OPTION_NAMES, "sampling option"))
        try:
            return cls(**{**(defaults or {}), **value})
        except ValueError as error:
            raise ValueError(f"{option}: {error}") from None


def add_sampling_flags(parser, skip: tuple[str, ...] = ("seed",), **defaults) -> None:
    """Add a command-line flag for each sampling option (`--top-p` for `top_p`), its help this module's and its
    default the command's own where `defaults` gives one; `options_from_flags` reads them back."""
    for option in dataclasses.fields(SamplingOptions):
        if option.name in skip:
            continue
        kind = {"top_k": int, "seed": int}.get(option.name, type(option.default))
        extra = {"choices": BACKENDS} if option.name == "backend" else {}
        parser.add_argument(
            "--" + option.name.replace("_", "-"),
            type=kind,
            default=defaults.get(option.name, option.default),
            help=option.metadata["help"],
            **extra,
        )


def options_from_flags(args) -> SamplingOptions:
    """The SamplingOptions of a command line built with `add_sampling_flags` (a mistake raises ValueError)."""
    return SamplingOptions(**{name: getattr(args, name) for name in OPTION_NAMES if hasattr(args, name)})


OPTION_NAMES = tuple(option.name for option in dataclasses.fields(SamplingOptions))
PARAM_FIELDS = tuple(option.name for option in dataclasses.fields(SamplingParams) if option.name != "seed")
