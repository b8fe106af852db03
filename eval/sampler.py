"""Sampling completions from a causal LM: the engine that evaluation, filters and rejection sampling share.

One interface, two backends with the same parameters: `generate(prompts, params, keys=None)` returns
`params.n` Samples per prompt; `keys` (the problems' ids) seed each problem's random streams. Anything
with that method can stand in for a sampler (tests use scripted ones).
* `TransformersSampler` (here): batched decoding on a model object already in memory (a training model, a
  checkpoint), left padding, stop at EOS; runs anywhere, CPU included;
* `VLLMSampler` (eval/vllm_sampler.py): vLLM's `LLM.generate` with `SamplingParams(n=...)`; vLLM itself is
  imported only when that backend is chosen.
`make_sampler(backend="auto", ...)` picks vLLM when it is importable (`resolve_backend`), on a GPU or a CPU.
The protocol that both take and return (`SamplingParams`, `Sample`, `sample_seed`, `render_prompts`,
DEFAULT_MAX_NEW_TOKENS) is defined in eval/sampling.py and importable from here.

Every sample of every problem has a random stream of its own, seeded from (seed, problem key, sample
index), in both backends. So a problem's samples do not depend on which other problems share its batch,
on the batch size, or on how problems are sharded over processes: a 2-process evaluation gives the
same samples as a 1-process one, and a resumed run the same as an uninterrupted one. (The transformers
backend does this with a logits processor that draws each row's token from its own generator; HF's
own sampling draws from one global stream for the whole batch.)

Each sample records its token count and why it ended: "stop" (EOS) or "length" (max_new_tokens).

Both backends also have `extend(request)`, a method of each: continue already rendered texts one sample
each (an eval.continuation.ContinuationRequest), stopping at EOS or at one stop string, or with EOS and that
stop suppressed. eval/budget.py drives it in rounds for budget forcing (s1), the same way on both backends.
"""

from __future__ import annotations

import logging

from eval.continuation import (
    Continuation,
    ContinuationRequest,
    SuppressTokens,
    cut_continuation,
    held_open_bans,
)
from eval.row_sampling import SeededRowSampling
from eval.sampling import (
    DEFAULT_MAX_NEW_TOKENS,
    Sample,
    SamplerBase,
    SamplingParams,
    prompt_key,
    render_prompts,
    sample_seed,
)
from eval.vllm_sampler import VLLMSampler

# The protocol is defined in eval.sampling; callers import it from here, with the backends.
__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "Sample",
    "SamplingParams",
    "TransformersSampler",
    "VLLMSampler",
    "make_sampler",
    "prompt_key",
    "render_prompts",
    "sample_seed",
    "vllm_available",
    "resolve_backend",
]

logger = logging.getLogger(__name__)


class TransformersSampler(SamplerBase):
    """Batched sampling with `model.generate` on a model already loaded. `batch_size` counts sequences."""

    backend = "transformers"

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int = 64,
        chat_template: str | None = None,
        use_chat_template: bool = True,
        chat_template_kwargs: dict | None = None,
    ):
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token (often to the EOS token) first")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.use_chat_template = use_chat_template
        self.chat_template_kwargs = chat_template_kwargs

    def _stop_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return set(ids) if isinstance(ids, (list, tuple)) else {ids}

    def generate(self, prompts: list, params: SamplingParams, keys: list[str] | None = None) -> list[list[Sample]]:
        """`params.n` samples for each prompt, in prompt order. `keys` (problem ids) seed each problem's
        samples; without them the prompt text does."""
        keys = keys or [prompt_key(prompt) for prompt in prompts]
        texts = self.render(prompts)
        greedy = params.temperature == 0
        rows = [(index, sample) for index in range(len(texts)) for sample in range(1 if greedy else params.n)]
        stop_ids = self._stop_ids()
        generated = self._generate_ids(
            [texts[index] for index, _ in rows],
            [sample_seed(params.seed, keys[index], sample) for index, sample in rows],
            params,
            params.max_new_tokens,
            stop_ids,
        )
        samples = [self.to_sample(tokens, stop_ids) for tokens in generated]
        if greedy:  # one greedy sample stands for all n
            return [[samples[index]] * params.n for index in range(len(texts))]
        return [samples[index * params.n : (index + 1) * params.n] for index in range(len(texts))]

    def _generate_ids(
        self,
        texts: list[str],
        seeds: list[int],
        params: SamplingParams,
        max_new_tokens: int,
        stop_ids: set[int],
        suppress_ids: list[int] | None = None,
        stop_strings: list[str] | None = None,
    ) -> list[list[int]]:
        """The generated token ids of each text (one sample each, from its seed), in batches of `batch_size`."""
        import torch
        from transformers import LogitsProcessorList

        greedy = params.temperature == 0
        was_training = self.model.training
        padding_side = self.tokenizer.padding_side
        self.model.eval()
        self.tokenizer.padding_side = "left"
        generated: list[list[int]] = []
        extra = {"stop_strings": stop_strings, "tokenizer": self.tokenizer} if stop_strings else {}
        if not (suppress_ids or stop_strings):  # eval.decoding: finished rows leave the batch
            from eval.decoding import sample_texts

            return sample_texts(
                self.model, self.tokenizer, texts, seeds, params, max_new_tokens, stop_ids, self.batch_size
            )
        try:
            with torch.no_grad():
                for start in range(0, len(texts), self.batch_size):
                    encoded = self.tokenizer(
                        texts[start : start + self.batch_size],
                        return_tensors="pt",
                        padding=True,
                        add_special_tokens=False,
                    ).to(self.model.device)
                    processors = LogitsProcessorList()
                    if suppress_ids:
                        processors.append(SuppressTokens(suppress_ids))
                    if not greedy:
                        batch_seeds = seeds[start : start + self.batch_size]
                        processors.append(
                            SeededRowSampling(batch_seeds, params.temperature, params.top_p, params.top_k)
                        )
                    output = self.model.generate(
                        **encoded,
                        max_new_tokens=max_new_tokens,
                        do_sample=False,
                        temperature=None,
                        top_p=None,
                        top_k=None,
                        logits_processor=processors,
                        use_cache=True,  # a model saved by a trainer may say use_cache=False: 10x slower here
                        pad_token_id=self.tokenizer.pad_token_id,
                        eos_token_id=sorted(stop_ids),
                        **extra,
                    )
                    generated += output[:, encoded["input_ids"].shape[1] :].tolist()
        finally:
            self.tokenizer.padding_side = padding_side
            if was_training:
                self.model.train()
        return generated

    def extend(self, request: ContinuationRequest) -> list[Continuation]:
        """One continuation of each rendered text (eval/continuation.py says how it ends): EOS and a one-token
        stop end decoding as EOS does, a longer stop ends HF's `generate` through `stop_strings`, and a held-open
        round bans EOS, the stop and the other special tokens (`SuppressTokens`)."""
        rows = (request.texts, request.seeds, request.params, request.max_new_tokens)
        eos_ids = self._stop_ids()
        stop, stop_id = request.stop, request.stop_id(self.tokenizer)
        if request.suppress:
            banned = sorted(eos_ids | set(held_open_bans(self.tokenizer, stop_id)))
            generated = self._generate_ids(*rows, eos_ids, suppress_ids=banned)
            return [cut_continuation(self.tokenizer, tokens, eos_ids) for tokens in generated]
        ends = eos_ids | ({stop_id} if stop_id is not None else set())
        stop_strings = [stop] if stop and stop_id is None else None
        generated = self._generate_ids(*rows, ends, stop_strings=stop_strings)
        return [cut_continuation(self.tokenizer, tokens, eos_ids, stop_id, stop) for tokens in generated]

    def to_sample(self, token_ids: list[int], stop_ids: set[int]) -> Sample:
        """The sample that generated ids make: cut at the first stop id (counted), else at length."""
        for position, token in enumerate(token_ids):
            if token in stop_ids:
                return Sample(
                    self.tokenizer.decode(token_ids[:position], skip_special_tokens=True), position + 1, "stop"
                )
        return Sample(self.tokenizer.decode(token_ids, skip_special_tokens=True), len(token_ids), "length")


def vllm_available() -> bool:
    """True when vLLM can be imported (a GPU build, or the CPU build `make setup-vllm` installs)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class VLLMUnavailableError(ValueError):
    """vLLM was asked for by name (`use_vllm: true`, `backend: vllm`) where it cannot be imported."""


def require_vllm(asked_by: str, instead: str) -> None:
    """Refuse, in one line that says what to do, a run that names vLLM where it is not installed.

    Why: without it the run got as far as TRL's vLLM module and ended in `AttributeError: module
    'trl.generation.vllm_generation' has no attribute 'LLM'` (and the evaluator in an ImportError traceback)."""
    if vllm_available():
        return
    import sys

    raise VLLMUnavailableError(
        f"{asked_by} asks for vLLM, which is not installed for {sys.executable}: install its CPU build with "
        "`make setup-vllm` (then run with .venv-vllm/bin/python) or a GPU build (`pip install vllm`), or sample "
        f"without it: {instead}"
    )


def resolve_backend(backend: str) -> str:
    """ "auto" made concrete: vLLM where it is installed, else transformers; any other name as it is. vLLM is the
    faster sampler on a GPU and on a CPU too (its CPU build: 2.2x eval.decoding's tokens/s in fp32, 3.4x in bf16,
    on SmolLM2: docs/benchmarks.md)."""
    if backend != "auto":
        return backend
    return "vllm" if vllm_available() else "transformers"


def make_sampler(backend: str, model_path: str, batch_size: int = 64, **options):
    """A sampler for `model_path`: "transformers", "vllm", or "auto" (vLLM when available)."""
    if backend == "auto":
        backend = resolve_backend(backend)
        logger.info("sampling backend: %s", backend)
    if backend == "vllm":
        return VLLMSampler(model_path, **options)
    if backend != "transformers":
        raise ValueError(f"unknown backend {backend!r}; use auto, transformers or vllm")
    import torch
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = PartialState().device
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
    template_keys = ("chat_template", "use_chat_template", "chat_template_kwargs")
    template_options = {key: options[key] for key in template_keys if key in options}
    return TransformersSampler(model, tokenizer, batch_size=batch_size, **template_options)
