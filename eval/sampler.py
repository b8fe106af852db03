"""Sampling completions from a causal LM: the engine that evaluation, filters and rejection sampling share.

One interface, two backends with the same parameters: `generate(prompts, params, keys=None)` returns
`params.n` Samples per prompt; `keys` (the problems' ids) seed each problem's random streams. Anything
with that method can stand in for a sampler (tests use scripted ones).
* `TransformersSampler`: batched `generate` on a model object already in memory (a training model, a
  checkpoint), left padding, stop at EOS; runs anywhere, CPU included;
* `VLLMSampler`: vLLM's `LLM.generate` with `SamplingParams(n=...)`; imported only when chosen.
`make_sampler(backend="auto", ...)` picks vLLM when it is importable and a GPU is present.

Every sample of every problem has a random stream of its own, seeded from (seed, problem key, sample
index), in both backends. So a problem's samples do not depend on which other problems share its batch,
on the batch size, or on how problems are sharded over processes: a 2-process evaluation gives the
same samples as a 1-process one, and a resumed run the same as an uninterrupted one. (The transformers
backend does this with a logits processor that draws each row's token from its own generator; HF's
own sampling draws from one global stream for the whole batch.)

Each sample records its token count and why it ended: "stop" (EOS) or "length" (max_new_tokens).

Both backends also offer `extend(texts, seeds, params, max_new_tokens, stop, suppress)`: continue already
rendered texts one sample each, stopping at EOS or at one stop string, or with EOS and that stop suppressed.
eval/budget.py drives it in rounds for budget forcing (s1), the same way on both backends.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from eval.row_sampling import SeededRowSampling

logger = logging.getLogger(__name__)


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


class _Sampler:
    """What both backends share: chat rendering, `extend` through eval/continuation.py, and `close`."""

    engine = "model"  # the attribute that holds the loaded model
    extend_with = ""  # eval.continuation's function for this backend

    def render(self, prompts: list) -> list[str]:
        return render_prompts(
            self.tokenizer, prompts, self.chat_template, self.use_chat_template, self.chat_template_kwargs
        )

    def extend(
        self,
        texts: list[str],
        seeds: list[int],
        params: SamplingParams,
        max_new_tokens: int,
        stop: str | None = None,
        suppress: bool = False,
    ):
        """One continuation of each rendered text (eval/continuation.py says how it ends)."""
        from eval import continuation

        extend = getattr(continuation, self.extend_with)
        return extend(self, texts, seeds, params, max_new_tokens, stop, suppress)

    def close(self) -> None:
        """Free the model before the next stage loads another (GPU memory); the sampler cannot sample after."""
        setattr(self, self.engine, None)
        _free_memory()


class TransformersSampler(_Sampler):
    """Batched sampling with `model.generate` on a model already loaded. `batch_size` counts sequences."""

    backend = "transformers"
    extend_with = "extend_with_transformers"

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
        samples = [self._to_sample(tokens, stop_ids) for tokens in generated]
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
                        from eval.continuation import SuppressTokens

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

    def _to_sample(self, token_ids: list[int], stop_ids: set[int]) -> Sample:
        for position, token in enumerate(token_ids):
            if token in stop_ids:
                return Sample(
                    self.tokenizer.decode(token_ids[:position], skip_special_tokens=True), position + 1, "stop"
                )
        return Sample(self.tokenizer.decode(token_ids, skip_special_tokens=True), len(token_ids), "length")


class VLLMSampler(_Sampler):
    """vLLM's offline engine, one `SamplingParams` per problem so that each problem has its own seed."""

    backend = "vllm"
    engine = "llm"
    extend_with = "extend_with_vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        dtype: str = "auto",
        max_model_len: int | None = None,
        chat_template: str | None = None,
        use_chat_template: bool = True,
        seed: int = 0,
        chat_template_kwargs: dict | None = None,
    ):
        try:
            from vllm import LLM
        except ImportError as error:
            raise ImportError(
                "the vLLM backend needs vLLM (GPU only): pip install -e '.[vllm]', or use --backend transformers"
            ) from error
        self.llm = LLM(
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.chat_template = chat_template
        self.use_chat_template = use_chat_template
        self.chat_template_kwargs = chat_template_kwargs

    def generate(self, prompts: list, params: SamplingParams, keys: list[str] | None = None) -> list[list[Sample]]:
        from vllm import SamplingParams as VLLMParams

        keys = keys or [prompt_key(prompt) for prompt in prompts]
        texts = self.render(prompts)
        greedy = params.temperature == 0
        requests = [
            VLLMParams(
                n=1 if greedy else params.n,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k or -1,
                max_tokens=params.max_new_tokens,
                seed=None if greedy else sample_seed(params.seed, key, 0),
            )
            for key in keys
        ]
        outputs = self.llm.generate(texts, requests, use_tqdm=False)
        results = []
        for output in outputs:
            samples = [
                Sample(
                    completion.text,
                    len(completion.token_ids),
                    "length" if completion.finish_reason == "length" else "stop",
                )
                for completion in output.outputs
            ]
            results.append(samples * params.n if greedy else samples)
        return results


def _free_memory() -> None:
    import gc

    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def vllm_available() -> bool:
    """True when vLLM can be imported and a CUDA GPU is present."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def make_sampler(backend: str, model_path: str, batch_size: int = 64, **options):
    """A sampler for `model_path`: "transformers", "vllm", or "auto" (vLLM when available)."""
    if backend == "auto":
        backend = "vllm" if vllm_available() else "transformers"
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
