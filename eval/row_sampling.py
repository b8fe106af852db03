"""Sampling each row of a batch from its own random stream, in transformers' `generate`.

HF's own sampling draws every row's token from one global stream, so a problem's samples would depend on
its batch neighbours. This logits processor gives each row its own generator (seeded per problem and
sample by eval.sampler.sample_seed) and returns a one-hot mask, so greedy decoding emits the drawn token.
"""

from __future__ import annotations


def _filter_logits(scores, temperature: float, top_p: float, top_k: int | None):
    """Temperature, then top-k, then top-p (nucleus) filtering, as HF's warpers do, on float32 logits."""
    import torch

    scores = scores.float() / temperature
    if top_k:
        kth = torch.topk(scores, min(top_k, scores.shape[-1]), dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        remove = cumulative - torch.softmax(sorted_scores, dim=-1) >= top_p  # keep the token that crosses top_p
        scores = scores.scatter(-1, order, sorted_scores.masked_fill(remove, float("-inf")))
    return scores


class SeededRowSampling:
    """A logits processor that samples each row's next token from that row's own random generator and
    returns a one-hot mask, so that greedy decoding emits exactly the sampled token."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float, top_k: int | None):
        import torch

        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k

    def __call__(self, input_ids, scores):
        import torch

        probs = torch.softmax(_filter_logits(scores, self.temperature, self.top_p, self.top_k), dim=-1)
        uniforms = torch.cat([torch.rand(1, generator=generator) for generator in self.generators])
        # Inverse CDF: the first token whose cumulative probability exceeds the row's uniform draw.
        cumulative = probs.cumsum(dim=-1)
        tokens = (cumulative < uniforms.to(cumulative.device).unsqueeze(-1)).sum(dim=-1)
        tokens = torch.minimum(tokens, (probs > 0).long().cumsum(-1).argmax(-1))  # never past the last allowed token
        chosen = torch.full_like(scores, float("-inf"))
        return chosen.scatter(-1, tokens.unsqueeze(-1), 0.0)
