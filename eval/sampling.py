"""The sampling protocol that every backend takes and returns: the parameters (with the project's only sampling
defaults), the samples, the seed of each sample's random stream, chat rendering, and the backends' base class.

Callers take these from eval.sampler, which re-exports them beside the backends and `make_sampler`. They live
here, below the backends, so that each backend module (eval/sampler.py's transformers one, eval/vllm_sampler.py)
and eval/continuation.py can share them without importing one another.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

# The one default length limit of a sample, for every caller that does not set its own (eval's command line,
# the data filters' sampling steps, the recipes' traces): long enough for AIME-style reasoning.
DEFAULT_MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class SamplingParams:
    """The sampling protocol, with the project's only sampling defaults. Evaluation reports it beside every
    number it prints; the filters and the recipes' traces take it whole."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 or None: no limit), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class Sample:
    """One completion of one prompt."""

    text: str
    num_tokens: int  # generated tokens, the EOS included when the sample stopped
    finish_reason: str  # "stop" (EOS reached) or "length" (max_new_tokens reached)
    # Budget forcing (eval/budget.py) only: tokens before the end of thinking, whether the answer was forced
    # at the budget, and how many times "Wait" replaced an early end of thinking.
    thinking_tokens: int | None = None
    forced_answer: bool | None = None
    waits: int | None = None
    # Sampling with tools only (eval/tools/trl_sampling.py): the conversation and its tool figures, kept in each
    # sample's record as they are (num_tokens then counts the model's tokens alone, not the tools' results).
    tool_use: dict | None = None


def sample_seed(seed: int, key: str, index: int) -> int:
    """The seed of one sample's random stream: a stable 63-bit hash of (run seed, problem key, sample index)."""
    digest = hashlib.blake2b(f"{seed}\0{key}\0{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def prompt_key(prompt) -> str:
    """A key for a prompt when the caller gives none: its text, hashed."""
    return hashlib.sha1(repr(prompt).encode()).hexdigest()


def render_prompts(
    tokenizer,
    prompts: list,
    chat_template: str | None = None,
    use_chat_template: bool = True,
    template_kwargs: dict | None = None,
):
    """Chat-message prompts through the chat template (with the generation prompt); strings pass as they are.

    `chat_template` overrides the tokenizer's template; `use_chat_template=False` joins the messages'
    contents as plain text, for base models without a template. `template_kwargs` go to the template as
    variables, e.g. {"enable_thinking": False} for Qwen3's non-thinking mode.
    """
    rendered = []
    for prompt in prompts:
        if isinstance(prompt, str):
            rendered.append(prompt)
        elif not use_chat_template:
            rendered.append("\n\n".join(message["content"] for message in prompt))
        else:
            rendered.append(
                tokenizer.apply_chat_template(
                    prompt,
                    tokenize=False,
                    add_generation_prompt=True,
                    chat_template=chat_template,
                    **(template_kwargs or {}),
                )
            )
    return rendered


class SamplerBase:
    """What both backends share: chat rendering and `close`. Each backend has its own `generate` (whole samples)
    and `extend` (continuations, eval/continuation.py)."""

    engine = "model"  # the attribute that holds the loaded model

    def render(self, prompts: list) -> list[str]:
        return render_prompts(
            self.tokenizer, prompts, self.chat_template, self.use_chat_template, self.chat_template_kwargs
        )

    def close(self) -> None:
        """Free the model before the next stage loads another (GPU memory); the sampler cannot sample after."""
        setattr(self, self.engine, None)
        _free_memory()


def _free_memory() -> None:
    import gc

    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
