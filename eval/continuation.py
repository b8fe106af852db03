"""Continuing rendered texts: the one primitive that budget forcing (eval/budget.py) needs from a backend.

`extend(texts, seeds, params, max_new_tokens, stop, suppress)` generates one continuation per text from the
row's own seed and says how it ended:
* "eos": the model ended its answer;
* the `stop` string (e.g. `</think>`): the model ended its thinking; the stop is left out of the text;
* "length": `max_new_tokens` were generated.
With `suppress=True` neither EOS nor `stop` nor any other special token can be generated (s1's "ignore
the end of thinking"), so the continuation runs its full length. A stop that the tokenizer writes as one token (Qwen3's and the tiny
model's `</think>`) is banned through its logits; one spelt over several tokens cannot be banned token by
token, so budget forcing looks for it in the text afterwards (eval/budget.py).

Transformers: EOS and a one-token stop end `generate` like EOS does, a longer stop ends it through HF's
`stop_strings`, and `SuppressTokens` (a LogitsProcessor, placed before the seeded sampling) bans tokens.
vLLM: `SamplingParams(stop=[...], stop_token_ids=[...])` ends at the string or its one token, and
`min_tokens = max_tokens` bans EOS and `stop_token_ids` for the whole continuation. Each round re-tokenizes prompt + text so far, as s1's own
vLLM loop does; for a character-level or byte-level BPE tokenizer that is the same token sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eval.sampler import SamplingParams, TransformersSampler, VLLMSampler


@dataclass(frozen=True)
class Continuation:
    """One text's continuation: the new text without its stop, the tokens generated (the stop's included),
    and why it ended: "eos", "length", or the stop string."""

    text: str
    num_tokens: int
    ended: str


class SuppressTokens:
    """A logits processor that forbids some tokens for every row and step. It runs before the seeded
    sampling processor, so each row's sample is drawn from what remains (greedy takes the best of it)."""

    def __init__(self, token_ids: list[int]):
        self.token_ids = sorted(token_ids)

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.token_ids] = float("-inf")
        return scores


def single_token_id(tokenizer, text: str) -> int | None:
    """The id of `text` when the tokenizer writes it as one token (e.g. `</think>` in Qwen3), else None."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def held_open_bans(tokenizer, stop_id: int | None) -> list[int]:
    """What a suppressed round bans besides EOS: the one-token stop and every special token (pad, end of
    turn, role markers). A chat model that is refused EOS reaches for its other end-of-turn tokens, which
    decode to nothing and would count as thinking that is not in the text."""
    special = set(tokenizer.all_special_ids)  # the named ones (EOS, pad, unk) ...
    special |= {
        i for i, token in getattr(tokenizer, "added_tokens_decoder", {}).items() if token.special
    }  # ... and the rest
    return sorted(special | ({stop_id} if stop_id is not None else set()))


def extend_with_transformers(
    sampler: TransformersSampler,
    texts: list[str],
    seeds: list[int],
    params: SamplingParams,
    max_new_tokens: int,
    stop: str | None = None,
    suppress: bool = False,
) -> list[Continuation]:
    eos_ids = sampler._stop_ids()
    stop_id = single_token_id(sampler.tokenizer, stop) if stop else None
    if suppress:
        banned = sorted(eos_ids | set(held_open_bans(sampler.tokenizer, stop_id)))
        generated = sampler._generate_ids(texts, seeds, params, max_new_tokens, eos_ids, suppress_ids=banned)
        return [cut_continuation(sampler.tokenizer, tokens, eos_ids) for tokens in generated]
    ends = eos_ids | ({stop_id} if stop_id is not None else set())
    stop_strings = [stop] if stop and stop_id is None else None
    generated = sampler._generate_ids(texts, seeds, params, max_new_tokens, ends, stop_strings=stop_strings)
    return [cut_continuation(sampler.tokenizer, tokens, eos_ids, stop_id, stop) for tokens in generated]


def cut_continuation(
    tokenizer, token_ids: list[int], eos_ids: set[int], stop_id: int | None = None, stop: str | None = None
) -> Continuation:
    """Where generated ids ended: at EOS, at the stop (one token, or a string over several tokens), or at
    length. What follows the end is padding and is dropped."""
    end = next((i for i, token in enumerate(token_ids) if token in eos_ids or token == stop_id), None)
    kept = token_ids if end is None else token_ids[:end]
    text = tokenizer.decode(kept, skip_special_tokens=True)
    if stop and stop_id is None and stop in text:  # a stop over several tokens: the fewest tokens that hold it
        count = next(i for i in range(1, len(kept) + 1) if stop in tokenizer.decode(kept[:i]))
        return Continuation(text[: text.index(stop)], count, stop)
    if end is None:
        return Continuation(text, len(token_ids), "length")
    return Continuation(text, end + 1, stop if stop_id is not None and token_ids[end] == stop_id else "eos")


def extend_with_vllm(
    sampler: VLLMSampler,
    texts: list[str],
    seeds: list[int],
    params: SamplingParams,
    max_new_tokens: int,
    stop: str | None = None,
    suppress: bool = False,
) -> list[Continuation]:
    """Untested on a GPU here (none is lent to this project's CI): tests check the requests it builds and how
    it reads the outputs against a stand-in with vLLM's interface."""
    from vllm import SamplingParams as VLLMParams

    stop_id = single_token_id(sampler.tokenizer, stop) if stop else None
    greedy = params.temperature == 0
    requests = [
        VLLMParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k or -1,
            max_tokens=max_new_tokens,
            min_tokens=max_new_tokens if suppress else 0,  # bans EOS and stop_token_ids before min_tokens
            stop=[stop] if stop and not suppress else None,
            # a special-token stop never shows as text, so it ends by id; held open, min_tokens bans these ids
            stop_token_ids=held_open_bans(sampler.tokenizer, stop_id)
            if suppress
            else [stop_id]
            if stop_id is not None
            else None,
            seed=None if greedy else seed,
        )
        for seed in seeds
    ]
    # Token ids, not text: given text, vLLM adds a BOS token in front of a template that already has one.
    prompts = [{"prompt_token_ids": sampler.tokenizer.encode(text, add_special_tokens=False)} for text in texts]
    continuations = []
    for output in sampler.llm.generate(prompts, requests, use_tqdm=False):
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
