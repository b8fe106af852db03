"""A budget of the model's own tokens for sampling with tools (`python -m eval.evaluate --tools ... --budgets B ...`):
`ModelTokenCap`, which the sampling trainer of eval/tools/trl_sampling.py consults on every turn of TRL's tool loop,
and `CappedToolSampler`, a ToolSampler with the cap set while it samples."""

from __future__ import annotations

import contextlib

from eval.sampling import Sample, SamplingParams


class ModelTokenCap:
    """A budget of the model's own tokens per completion, across the turns of TRL's tool loop: the tool results
    between the turns do not count (`python -m eval.evaluate --tools ... --budgets B ...`).

    TRL's loop caps a completion as a whole (`max_completion_length`, tool results included) and generates every turn
    through `_generate_single_turn`, which the sampling trainer sends here while `cap` is set. A turn's prompt is the
    row's prompt and its completion so far (TRL concatenates token ids, never re-tokenizes), so the model's tokens
    before the turn are found by the longest earlier turn's output that the prompt starts with; each row's new tokens
    are cut at what is left of `cap`, and a row with nothing left gets an empty turn, which ends it. There is no
    forcing (s1's forced answer continues text outside TRL's loop): a completion cut by the budget ends there.
    Our own: TRL has no per-row budget that leaves the tool's tokens out."""

    def __init__(self) -> None:
        self.cap: int | None = None
        self._in_loop = False
        self._ends: dict[int, dict[tuple, int]] = {}  # length -> {a turn's prompt + output: the model's tokens}

    @contextlib.contextmanager
    def in_loop(self):
        """Around TRL's tool loop: a turn's prompt there extends an earlier turn of its row."""
        self._in_loop = True
        try:
            yield
        finally:
            self._in_loop = False

    def used(self, prompt_ids) -> int:
        """The model's tokens in the completion so far of the row whose turn starts with `prompt_ids`."""
        if not self._in_loop:
            return 0  # a first turn
        for length in sorted((length for length in self._ends if length <= len(prompt_ids)), reverse=True):
            found = self._ends[length].get(tuple(prompt_ids[:length]))
            if found is not None:
                return found
        return self.cap  # not found: TRL cut the row's last turn to its length limit, so no turn is left

    def turn(self, generate, trainer, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        """One turn of TRL's generation (`generate`, the trainer's own) with each row's new tokens capped."""
        if not self._in_loop:
            self._ends.clear()  # a new batch
        used = [self.used(list(ids)) for ids in prompt_ids]
        left = [max(0, self.cap - count) for count in used]
        config, kwargs = trainer.generation_config, trainer.generation_kwargs
        before = config.max_new_tokens, kwargs.get("max_new_tokens")
        most = max(left, default=0)
        if most == 0:
            ids, logprobs = [[] for _ in prompt_ids for _ in range(num_generations)], None
        else:
            config.max_new_tokens = kwargs["max_new_tokens"] = min(most, before[0] or most)
            try:
                ids, logprobs = generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            finally:
                config.max_new_tokens, kwargs["max_new_tokens"] = before
        per_prompt = max(1, len(ids) // max(1, len(prompt_ids)))
        ids = [list(row) for row in ids]
        for index, row in enumerate(ids):
            source = index // per_prompt
            ids[index] = row[: left[source]]
            if logprobs is not None:
                logprobs[index] = list(logprobs[index])[: left[source]]
            end = tuple(prompt_ids[source]) + tuple(ids[index])
            self._ends.setdefault(len(end), {})[end] = used[source] + len(ids[index])
        return ids, logprobs


class CappedToolSampler:
    """A ToolSampler (eval/tools/trl_sampling.py, which imports this module) whose completions each hold at most
    `budget` of the model's tokens (tool results not counted): `generate` as the sampler's, the cap set around it."""

    def __init__(self, sampler, budget: int):
        if budget < 1:
            raise ValueError(f"a model-token budget must be >= 1 token, got {budget}")
        self.sampler, self.budget = sampler, int(budget)
        self.tokenizer, self.backend = sampler.tokenizer, sampler.backend

    def generate(self, prompts: list, params: SamplingParams, keys: list[str] | None = None) -> list[list[Sample]]:
        self.sampler.caps.cap = self.budget
        try:
            return self.sampler.generate(prompts, params, keys)
        finally:
            self.sampler.caps.cap = None
