"""Batched sampling that stops paying for a row once it has finished, and prefills a repeated prompt once.

transformers' `generate` keeps every row of a batch in every decoding step until the last row stops: a row
that wrote its answer and EOS in 40 tokens is still pushed through the model, as padding, for as long as
its slowest neighbour rambles (up to `max_new_tokens`). On a CPU a decoding step costs about the same per
row whether the row is live or finished, so a batch whose completions average 40 tokens and reach 128 pays
about three times its work. It also prefills a prompt once per sample, though a GRPO group (or eval's n
samples of one problem) repeats the same prompt several times.

`sample_tokens` is the loop without either waste, on any causal LM of transformers (a PEFT model too):

* the distinct prompts are prefilled once (one left-padded batch) and the KV cache is expanded to the
  rows by index (`DynamicCache.batch_select_indices`), so a group of G samples costs one prefill;
* after every step the rows that emitted a stop token (or reached `max_new_tokens`) leave the batch: the
  cache, the attention mask and the positions are cut to the live rows;
* positions come from the attention mask (left padding), as `generate` computes them, so greedy decoding
  gives `generate`'s tokens (tests/test_decoding.py checks it on the tiny model and a LoRA model).
* the KV cache is written into room reserved once for the prompt plus `max_new_tokens` (`_ReservedLayer`), not
  concatenated a token at a time as transformers' DynamicCache does, which copies every layer's whole cache at
  every step (14% of a SmolLM2 rollout's time in a profile, docs/benchmarks.md).

The next token of the live rows is chosen by a `pick(logits, rows)` callback: `rows` are the live rows'
indices in the original batch, so a sampler with one random stream per row (eval.row_sampling) keeps
drawing from the right stream as rows leave. `global_sampler` draws from torch's global generator, as
`generate(do_sample=True)` does.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Sequence

import torch

Pick = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def global_sampler(
    temperature: float, top_p: float = 1.0, top_k: int | None = None, with_logprobs: bool = False
) -> Pick:
    """Temperature / top-k / top-p sampling from torch's global random stream (greedy at temperature 0), by
    inverse CDF: one uniform a row (eval.row_sampling.inverse_cdf). With `with_logprobs`, the pick returns
    `(tokens, log-probabilities of the tokens under the distribution they were drawn from)` (0 when greedy)."""
    from eval.row_sampling import inverse_cdf

    def pick(logits: torch.Tensor, rows: torch.Tensor):
        if temperature == 0:
            tokens = logits.argmax(dim=-1)
            return (tokens, torch.zeros(tokens.shape, dtype=torch.float32)) if with_logprobs else tokens
        uniforms = torch.rand(logits.shape[0])
        return inverse_cdf(logits, uniforms, temperature, top_p, top_k, with_logprobs=with_logprobs)

    return pick


def cache_argument(model) -> str:
    """The name the model's forward takes its KV cache under: `cache` since transformers renamed it (after 5.17),
    `past_key_values` before; pyproject accepts both sides (transformers >= 5.5), and vLLM's CPU build pins 5.17.
    A model's cache passed under a name the forward does not know would be swallowed by its **kwargs, and every
    step would then see its one new token alone."""
    import inspect

    inner = getattr(model, "module", model)  # a DDP wrapper
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner  # a PEFT model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def _left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, tokens in enumerate(sequences):
        if tokens:
            ids[row, width - len(tokens) :] = torch.tensor(list(tokens), dtype=torch.long)
            mask[row, width - len(tokens) :] = 1
    return ids, mask


# Who hears of each finished sequence (eval.evaluate's progress bar, in samples): a context variable rather than
# a parameter, since the rows pass through the sampler's interface, which every backend shares.
SEQUENCES_DONE: contextvars.ContextVar = contextvars.ContextVar("sequences_done", default=None)


def _done(count: int) -> None:
    listener = SEQUENCES_DONE.get()
    if listener is not None and count:
        listener(count)


@torch.no_grad()
def sample_tokens(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop_ids: set[int] | Sequence[int],
    pad_id: int,
    pick: Pick,
    logprobs: list[list[float]] | None = None,
    share_prefixes: bool = False,
) -> list[list[int]]:
    """The generated token ids of each prompt (one row each), the stop token included when one was emitted.

    `prompts` are token ids (no padding). Rows with the same prompt share one prefill; with `share_prefixes`,
    prompts that start alike share the prefill of what they have in common too (`shared_prefixes`: a tool loop's
    later turns, each its group's prompt and its own turns so far). The model is run in eval mode (dropout off)
    and put back as it was. When `pick` also returns log-probabilities (a `global_sampler(...,
    with_logprobs=True)`), pass a list as `logprobs`: it receives one list a row, the log-probability each
    generated token was sampled with.
    """
    if not prompts:
        return []
    if any(len(ids) == 0 for ids in prompts):
        raise ValueError("sample_tokens: every prompt needs at least one token")
    device = next(model.parameters()).device
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    distinct: dict[tuple[int, ...], int] = {}
    for ids in prompts:
        distinct.setdefault(tuple(ids), len(distinct))
    expand = torch.tensor([distinct[tuple(ids)] for ids in prompts], dtype=torch.long, device=device)

    was_training = model.training
    model.eval()
    try:
        cache_name = cache_argument(model)
        groups = shared_prefixes(list(distinct)) if share_prefixes else None
        if groups is None:
            input_ids, mask = (tensor.to(device) for tensor in _left_pad(list(distinct), pad_id))
            cache = reserved_cache(max_new_tokens)
        else:  # the groups' common prefixes once, then each distinct prompt's rest on top of its group's
            heads, owner, rests = groups
            head_ids, head_mask = (tensor.to(device) for tensor in _left_pad(heads, pad_id))
            rest_ids, rest_mask = (tensor.to(device) for tensor in _left_pad(rests, pad_id))
            cache = reserved_cache(max_new_tokens + rest_ids.shape[1])
            head_positions = (head_mask.cumsum(-1) - 1).clamp(min=0)
            model(input_ids=head_ids, attention_mask=head_mask, position_ids=head_positions,
                  **{cache_name: cache}, use_cache=True, logits_to_keep=1)  # fmt: skip
            owner = torch.tensor(owner, dtype=torch.long, device=device)
            cache.batch_select_indices(owner)
            input_ids, mask = rest_ids, torch.cat([head_mask.index_select(0, owner), rest_mask], dim=-1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions[:, -input_ids.shape[1] :],
            **{cache_name: cache},
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :].index_select(0, expand)
        if len(distinct) < len(prompts):
            cache.batch_select_indices(expand)
        mask = mask.index_select(0, expand)
        next_position = positions[:, -1].index_select(0, expand) + 1

        live = torch.arange(len(prompts), device=device)  # original row of each row still in the batch
        generated: list[list[int]] = [[] for _ in prompts]
        sampled_logprobs: list[list[float]] = [[] for _ in prompts]
        for step in range(max_new_tokens):
            tokens = pick(logits, live)
            if isinstance(tokens, tuple):  # (tokens, the log-probabilities they were sampled with)
                tokens, token_logprobs = tokens
                for row, value in zip(live.tolist(), token_logprobs.tolist(), strict=True):
                    sampled_logprobs[row].append(value)
            for row, token in zip(live.tolist(), tokens.tolist(), strict=True):
                generated[row].append(token)
            if step == max_new_tokens - 1:
                break
            keep = ~torch.isin(tokens, stops)
            if not bool(keep.all()):
                if not bool(keep.any()):
                    break
                kept = keep.nonzero().squeeze(-1)
                _done(len(live) - len(kept))
                live, tokens, mask, next_position = (
                    t.index_select(0, kept) for t in (live, tokens, mask, next_position)
                )
                cache.batch_select_indices(kept)
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
            out = model(
                input_ids=tokens.unsqueeze(-1),
                attention_mask=mask,
                position_ids=next_position.unsqueeze(-1),
                **{cache_name: cache},
                use_cache=True,
            )
            logits = out.logits[:, -1, :]
            next_position = next_position + 1
        _done(len(live))  # the rows that stopped at the last step, or ran to max_new_tokens
        if logprobs is not None:
            logprobs[:] = sampled_logprobs
        return generated
    finally:
        if was_training:
            model.train()


# The fewest tokens two prompts must have in common for shared_prefixes to prefill them once: below it the extra
# forward pass costs more than the tokens it saves.
MIN_SHARED_PREFIX = 32


def shared_prefixes(prompts: list[tuple[int, ...]]) -> tuple[list, list[int], list] | None:
    """Distinct prompts grouped by a common start: (each group's prefix, each prompt's group, each prompt's rest), or
    None when no two prompts share MIN_SHARED_PREFIX tokens. In sorted order, neighbours whose common start is at
    least MIN_SHARED_PREFIX long join one group, whose prefix is what all of its prompts have in common (the least
    of its neighbours' common starts), less one token where a prompt would be left with nothing: a prompt's last
    token is run with the rest, since its logits give the first new token. A prompt alone is a group of its own
    with its whole prompt but its last token as the prefix. Our own: transformers' generate has no shared prefill;
    vLLM's prefix caching does this on the GPU."""

    order = sorted(range(len(prompts)), key=lambda index: prompts[index])
    runs, shared = [[order[0]]], []
    for before, index in zip(order, order[1:], strict=False):
        length = len(os.path.commonprefix([prompts[before], prompts[index]]))
        if length >= MIN_SHARED_PREFIX:
            runs[-1].append(index)
            shared.append(length)
        else:
            runs.append([index])
    if not shared:
        return None
    heads, owner, rests = [], [0] * len(prompts), [None] * len(prompts)
    at = 0
    for run in runs:
        run_shared = shared[at : at + len(run) - 1]
        at += len(run) - 1
        head = min([*run_shared, *(len(prompts[index]) - 1 for index in run)])
        for index in run:
            owner[index], rests[index] = len(heads), prompts[index][head:]
        heads.append(prompts[run[0]][:head])
    if any(not head for head in heads):  # a one-token prompt: nothing to share ahead of it, so no split at all
        return None
    return heads, owner, rests


def reserved_cache(extra_tokens: int):
    """A DynamicCache whose layers reserve room for `extra_tokens` tokens after the first update (the prefill)."""
    from functools import partial

    from transformers import DynamicCache

    cache = DynamicCache()
    cache.layer_class_to_replicate = partial(_reserved_layer_class(), extra_tokens)
    return cache


def _reserved_layer_class():
    """`_ReservedLayer`, defined on first use so that importing this module does not import transformers."""
    global _ReservedLayer
    if _ReservedLayer is not None:
        return _ReservedLayer
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """A DynamicLayer that keeps its keys and values in preallocated tensors with room for `extra_tokens` more
        positions than the first update brought: each later update writes its positions in place, and `keys` /
        `values` are views of the positions written so far (what attention reads, as DynamicLayer's). Runs out of
        room only if updated past that reserve, and then grows by concatenation as DynamicLayer does."""

        def __init__(self, extra_tokens: int, **kwargs):
            super().__init__(**kwargs)
            self.extra_tokens = extra_tokens
            self._room: tuple[torch.Tensor, torch.Tensor] | None = None

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized or self.keys.numel() == 0:
                super().update(key_states, value_states, *args, **kwargs)
                self._reserve()
                return self.keys, self.values
            length, new = self.keys.shape[-2], key_states.shape[-2]
            room = self._room
            if room is None or room[0].data_ptr() != self.keys.data_ptr() or length + new > room[0].shape[-2]:
                return super().update(key_states, value_states, *args, **kwargs)  # views lost or no room: concatenate
            room[0][..., length : length + new, :].copy_(key_states)
            room[1][..., length : length + new, :].copy_(value_states)
            self.keys, self.values = room[0][..., : length + new, :], room[1][..., : length + new, :]
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.get_seq_length() == 0:
                return
            self.keys, self.values = self.keys[indices, ...], self.values[indices, ...]
            self._reserve()

        def _reserve(self) -> None:
            """Copy keys and values into fresh tensors with `extra_tokens` more positions; keep views of them."""
            length = self.keys.shape[-2]
            room = []
            for states in (self.keys, self.values):
                shape = (*states.shape[:-2], length + self.extra_tokens, states.shape[-1])
                tensor = states.new_empty(shape)
                tensor[..., :length, :].copy_(states)
                room.append(tensor)
            self._room = (room[0], room[1])
            self.keys, self.values = room[0][..., :length, :], room[1][..., :length, :]

    _ReservedLayer = ReservedLayer
    return _ReservedLayer


_ReservedLayer = None


def sample_texts(
    model, tokenizer, texts, seeds, params, max_new_tokens: int, stop_ids, batch_size: int
) -> list[list[int]]:
    """eval.sampler's rows through `sample_tokens`, `batch_size` at a time: each text tokenised as it is (the chat
    template already applied), each row sampled from its own seeded stream (eval.row_sampling), greedy at
    temperature 0. The same tokens as `generate` with eval's SeededRowSampling processor, since a row's stream
    does not depend on its neighbours; a row that has stopped costs nothing more."""
    from eval.row_sampling import SeededRowSampling

    generated: list[list[int]] = []
    for start in range(0, len(texts), batch_size):
        prompts = tokenizer(texts[start : start + batch_size], add_special_tokens=False)["input_ids"]
        if params.temperature == 0:
            pick = global_sampler(0)
        else:
            rows = SeededRowSampling(seeds[start : start + batch_size], params.temperature, params.top_p, params.top_k)
            pick = rows.draw
        generated += sample_tokens(
            model, prompts, max_new_tokens=max_new_tokens, stop_ids=stop_ids, pad_id=tokenizer.pad_token_id, pick=pick
        )
    return generated
