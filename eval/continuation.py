"""Continuing rendered texts: the one primitive that budget forcing (eval/budget.py) needs from a backend.

`sampler.extend(ContinuationRequest(texts, seeds, params, max_new_tokens, stop, suppress))` generates one
continuation per text from the row's own seed and says how it ended:
* "eos": the model ended its answer;
* the `stop` string (e.g. `</think>`): the model ended its thinking; the stop is left out of the text;
* "length": `max_new_tokens` were generated.
With `suppress=True` neither EOS nor `stop` nor any other special token can be generated (s1's "ignore
the end of thinking"), so the continuation runs its full length. A stop that the tokenizer writes as one
token (Qwen3's and the tiny model's `</think>`) is banned through its logits; one spelt over several tokens
cannot be banned token by token, so budget forcing looks for it in the text afterwards (eval/budget.py).

`extend` is a method of each backend; this module holds what they share (the request, the result, the bans,
where generated ids end) and imports neither of them.
* Transformers (`TransformersSampler.extend`, eval/sampler.py): EOS and a one-token stop end decoding like EOS
  does, a longer stop ends HF's `generate` through `stop_strings`, and `SuppressTokens` (a LogitsProcessor,
  placed before the seeded sampling) bans tokens.
* vLLM (`VLLMSampler.extend`, eval/vllm_sampler.py): `SamplingParams(stop=[...], stop_token_ids=[...])` ends at
  the string or its one token, and `min_tokens = max_tokens` bans EOS and `stop_token_ids` for the whole
  continuation. Each round re-tokenizes prompt + text so far, as s1's own vLLM loop does; for a
  character-level or byte-level BPE tokenizer that is the same token sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from eval.sampling import SamplingParams


@dataclass(frozen=True)
class ContinuationRequest:
    """One round of continuations: each text continued once from its seed, for at most `max_new_tokens`, ending
    at EOS or at `stop`, or held open (`suppress`) with neither allowed."""

    texts: list[str]
    seeds: list[int]
    params: SamplingParams
    max_new_tokens: int
    stop: str | None = None
    suppress: bool = False

    def stop_id(self, tokenizer) -> int | None:
        """The stop's token id when the tokenizer writes it as one token, else None."""
        return single_token_id(tokenizer, self.stop) if self.stop else None


@dataclass(frozen=True)
class Continuation:
    """One text's continuation: the new text without its stop, the tokens generated (the stop's included),
    and why it ended: "eos", "length", or the stop string."""

    text: str
    num_tokens: int
    ended: str


class ContinuingSampler(Protocol):
    """What budget forcing needs from a backend (both of eval.sampler's have it; tests script one)."""

    tokenizer: Any

    def render(self, prompts: list) -> list[str]: ...

    def extend(self, request: ContinuationRequest) -> list[Continuation]: ...


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
