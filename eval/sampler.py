"""Sampling completions from a causal LM: the engine that evaluation, filters and rejection sampling share.

This module holds the transformers backend: batched `generate` on a model object already in memory,
left padding, `num_return_sequences` for n samples per prompt, stop at EOS. Each sample records its
token count and why it ended ("stop" at EOS, "length" at `max_new_tokens`), which evaluation needs to
report truncation and which length shaping needs to score it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingParams:
    """The sampling protocol. Evaluation reports it beside every number it prints."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class Sample:
    """One completion of one prompt."""

    text: str
    num_tokens: int  # generated tokens, the EOS included when the sample stopped
    finish_reason: str  # "stop" (EOS reached) or "length" (max_new_tokens reached)


def render_prompts(tokenizer, prompts: list) -> list[str]:
    """Chat-message prompts go through the tokenizer's chat template with the generation prompt; strings pass as they are."""
    rendered = []
    for prompt in prompts:
        if isinstance(prompt, str):
            rendered.append(prompt)
        else:
            rendered.append(tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True))
    return rendered


class TransformersSampler:
    """Batched sampling with `model.generate` on a model already loaded (a training model, a checkpoint).

    `batch_size` counts sequences (prompts x n) per `generate` call.
    """

    def __init__(self, model, tokenizer, batch_size: int = 64):
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token (often to the EOS token) first")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size

    def _stop_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return set(ids) if isinstance(ids, (list, tuple)) else {ids}

    def generate(self, prompts: list, params: SamplingParams) -> list[list[Sample]]:
        """`params.n` samples for each prompt, in prompt order."""
        import torch

        texts = render_prompts(self.tokenizer, prompts)
        stop_ids = self._stop_ids()
        prompts_per_batch = max(1, self.batch_size // params.n)
        do_sample = params.temperature > 0
        sampling = (
            {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k or 0}
            if do_sample
            else {"do_sample": False}
        )
        was_training = self.model.training
        self.model.eval()
        results: list[list[Sample]] = []
        padding_side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(params.seed)
                for start in range(0, len(texts), prompts_per_batch):
                    batch = texts[start : start + prompts_per_batch]
                    encoded = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
                    encoded = {key: value.to(self.model.device) for key, value in encoded.items()}
                    output = self.model.generate(
                        **encoded,
                        max_new_tokens=params.max_new_tokens,
                        num_return_sequences=params.n if do_sample else 1,
                        pad_token_id=self.tokenizer.pad_token_id,
                        eos_token_id=sorted(stop_ids),
                        **sampling,
                    )
                    generated = output[:, encoded["input_ids"].shape[1] :].tolist()
                    if not do_sample and params.n > 1:  # greedy: n identical samples
                        generated = [row for row in generated for _ in range(params.n)]
                    for index in range(len(batch)):
                        rows = generated[index * params.n : (index + 1) * params.n]
                        results.append([self._to_sample(row, stop_ids) for row in rows])
        finally:
            self.tokenizer.padding_side = padding_side
            if was_training:
                self.model.train()
        return results

    def _to_sample(self, token_ids: list[int], stop_ids: set[int]) -> Sample:
        for position, token in enumerate(token_ids):
            if token in stop_ids:
                kept = token_ids[:position]
                return Sample(self.tokenizer.decode(kept, skip_special_tokens=True), position + 1, "stop")
        return Sample(self.tokenizer.decode(token_ids, skip_special_tokens=True), len(token_ids), "length")
