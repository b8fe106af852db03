"""Every sample scored by a learned reward (`keep_reward_model`), for `keep_by` and `selection: best`."""

from __future__ import annotations


def score_with_reward_model(sampler, rows: list[dict], results, options: dict) -> None:
    """Score every sample of `results` with the `reward_model` reward built from `options` (rewards.learned.reward_models),
    checked against the sampler's tokenizer; each sample dict gets `reward_score` (None where it could not be
    scored). The prompt scored is the row's own (a rationalisation's hint is not part of it)."""
    from rewards import build_rewards

    (reward,), _ = build_rewards([{"name": "reward_model", **options}], "keep_reward_model")
    device = getattr(getattr(sampler, "model", None), "device", None) or "cpu"
    reward.prepare(sampler.tokenizer, device)
    for row, result in zip(rows, results, strict=True):
        texts = [sample["text"] for sample in result.samples]
        scores = reward(
            [[{"role": "assistant", "content": text}] for text in texts], prompts=[row["prompt"]] * len(texts)
        )
        for sample, score in zip(result.samples, scores, strict=True):
            sample["reward_score"] = score
