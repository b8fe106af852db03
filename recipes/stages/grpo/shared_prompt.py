"""The loss pass with each prompt run once for its group, not once per completion.

A GRPO group is G completions of one prompt, and TRL's loss pass runs prompt + completion for every row: the
prompt's tokens go through the model G times with the same result (causal attention: a prompt token never
sees the completion). For the SmolLM2 demo (77 prompt tokens, about 33 completion tokens, G = 4) the prompt
is two thirds of the tokens of the pass. Here the distinct prompts of a micro-batch run once (with gradient),
their keys and values are expanded to the rows by index, and the completions run on top of them; autograd
sums the gradient of each prompt over its group's rows, so log-probabilities, entropies and gradients are
those of the full pass (tests/test_shared_prompt.py checks both against TRL's on the tiny model and a LoRA
model). The first completion token is predicted from the prompt's last position, so the prompt's last token
runs with the completions: the shared prefix is the prompt minus its last token.

`group_micro_batches` is the other half: TRL shuffles the rows of a generation batch before cutting it into
micro-batches, which scatters a group over several of them; this puts each group back in one micro-batch
(groups in a random order), so that a micro-batch of 8 rows holds 2 prompts, not up to 8.
"""

from __future__ import annotations

import torch


def shared_prompt_logps(
    model, input_ids, attention_mask, logits_to_keep: int, compute_entropy: bool, prefix_model=None
):
    """(log-probs, entropies or None) of the last `logits_to_keep` tokens of each row, as TRL's
    `_get_per_token_logps_and_entropies` returns them for a text model whose forward was given TRL's fused LM head
    (`fused_lm_head=True`), or None when no two rows share a prompt (nothing to save) or the model keeps no cache
    (gradient checkpointing while training): the caller then runs its own pass.

    `model` is what the trainer calls (a DDP wrapper, when there is one, sees exactly one forward: the one with
    the completions); `prefix_model` runs the prompts (default `model`; the trainer passes the unwrapped model).
    """
    from transformers import DynamicCache

    from eval.decoding import cache_argument

    runner = prefix_model or model
    checkpointing = getattr(runner, "is_activation_checkpointing", None)  # transformers' name after 5.17
    if checkpointing is None:
        checkpointing = getattr(runner, "is_gradient_checkpointing", False)
    if runner.training and checkpointing:
        return None  # it would keep no cache (below): leave the pass to the caller without running the prompts
    width = input_ids.shape[1]
    prefix_width = width - logits_to_keep - 1  # the prompt without its last token
    if prefix_width < 1:
        return None
    prefix_ids, prefix_mask = input_ids[:, :prefix_width], attention_mask[:, :prefix_width]
    groups = prefix_groups(prefix_ids, prefix_mask)
    if groups is None:
        return None
    owner, first = (torch.tensor(values, device=input_ids.device) for values in groups)
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)

    cache = DynamicCache()
    cache_name = cache_argument(runner)
    runner(
        input_ids=prefix_ids.index_select(0, first),
        attention_mask=prefix_mask.index_select(0, first),
        position_ids=positions[:, :prefix_width].index_select(0, first),
        **{cache_name: cache},
        use_cache=True,
        logits_to_keep=1,
    )
    if cache.get_seq_length() != prefix_width:
        # No cache came back: under gradient checkpointing a model in training mode switches use_cache off, and
        # the completions would then run without their prompts (log-probs off by nats; found by the sampler's
        # mismatch metrics, recipes.stages.grpo.sampler_correction). The caller runs its own full pass.
        return None
    cache.batch_select_indices(owner)  # an index (differentiable): each row reads its group's prompt

    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-logits_to_keep] = -100
    outputs = model(
        input_ids=input_ids[:, prefix_width:],
        attention_mask=attention_mask,
        position_ids=positions[:, prefix_width:],
        **{cache_name: cache},
        labels=labels[:, prefix_width:],
        fused_lm_head=True,
    )
    logps = outputs.log_probs[:, -logits_to_keep:]
    entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
    return logps, entropies


def prefix_groups(prefix_ids, prefix_mask) -> tuple[list[int], list[int]] | None:
    """(each row's group, each group's first row) of the rows' prefixes (left-padded, so equal prefixes are equal
    rows); None when there is nothing to share: no two rows alike, or a row with an empty prefix."""
    if not bool(prefix_mask.any(dim=1).all()):  # a one-token prompt: no prefix to share on that row
        return None
    distinct: dict[tuple, int] = {}
    owner, first = [], []
    for row in range(prefix_ids.shape[0]):
        key = (tuple(prefix_ids[row].tolist()), tuple(prefix_mask[row].tolist()))
        if key not in distinct:
            distinct[key] = len(first)
            first.append(row)
        owner.append(distinct[key])
    return None if len(first) == len(owner) else (owner, first)


def shared_token_counts(prompt_ids, prompt_mask, completion_mask) -> tuple[int, int] | None:
    """(tokens, positions) the shared pass runs for a micro-batch: each distinct prefix once, then every row's
    last prompt token and completion; None where `shared_prompt_logps` would decline (the full pass runs)."""
    prefix_width = prompt_ids.shape[1] - 1
    groups = prefix_groups(prompt_ids[:, :prefix_width], prompt_mask[:, :prefix_width]) if prefix_width >= 1 else None
    if groups is None:
        return None
    firsts = torch.tensor(groups[1])
    rows_part = prompt_mask[:, prefix_width:].sum() + completion_mask.sum()
    tokens = int(prompt_mask[firsts, :prefix_width].sum() + rows_part)
    positions = len(firsts) * prefix_width + prompt_ids.shape[0] * (1 + completion_mask.shape[1])
    return tokens, positions


def group_micro_batches(batches: list[dict]) -> list[dict]:
    """The rows of `batches` (micro-batches of one generation batch) regrouped: the rows of each prompt contiguous,
    the prompts in a random order (torch's global generator), cut again into as many micro-batches of the same
    size. A value that is not per row (a 0-d tensor, None) is kept as it is."""
    from trl.trainer.utils import split_tensor_dict

    if len(batches) < 2:
        return batches
    merged = {}
    for key, value in batches[0].items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            merged[key] = torch.cat([batch[key] for batch in batches])
        elif isinstance(value, list):
            merged[key] = [item for batch in batches for item in batch[key]]
        else:
            merged[key] = value
    prompt_ids, prompt_mask = merged["prompt_ids"], merged["prompt_mask"]
    groups: dict[tuple, list[int]] = {}
    for row in range(prompt_ids.shape[0]):
        groups.setdefault(tuple(prompt_ids[row][prompt_mask[row].bool()].tolist()), []).append(row)
    ordered = list(groups.values())
    order = [row for index in torch.randperm(len(ordered)).tolist() for row in ordered[index]]
    index = torch.tensor(order)
    regrouped = {}
    for key, value in merged.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            regrouped[key] = value.index_select(0, index.to(value.device))
        elif isinstance(value, list):
            regrouped[key] = [value[row] for row in order]
        else:
            regrouped[key] = value
    return split_tensor_dict(regrouped, len(batches))
